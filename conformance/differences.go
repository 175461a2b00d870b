package conformance

import "slices"

// Difference is an accepted difference between our stack and Linux on one
// case: the outcome each has, the RFC section the difference is about, and
// why we accept it. A difference not in Accepted fails TestDifferences and
// the report ("a silent disagreement"); an entry whose outcomes no longer
// occur fails it too, so that the table stays true.
type Difference struct {
	Case        string
	Ours, Linux Outcome
	RFC         string
	Reason      string
}

// Accepted returns the differences between our stack and Linux that we
// accept (a copy: the table is the package's).
func Accepted() []Difference { return slices.Clone(accepted) }

// accepted are the differences between our stack and Linux that we accept.
var accepted = []Difference{
	{
		Case: "pad-arp-reply-60", Ours: Pass, Linux: Fail,
		RFC: "RFC 894 / IEEE 802.3 §4.2.3.3",
		Reason: "Linux leaves padding to the device, and veth has none to do it: its 42-byte ARP reply stays 42 bytes " +
			"(a physical NIC pads on the wire). Our frames go to AF_XDP or DPDK, which do not pad, so the stack pads (stack.Endpoint, pad/).",
	},
	{
		Case: "pad-tcp-rst-60", Ours: Pass, Linux: Fail,
		RFC:    "RFC 894 / IEEE 802.3 §4.2.3.3",
		Reason: "as pad-arp-reply-60: Linux's 54-byte RST stays 54 bytes on veth, which has no hardware to pad it.",
	},
	{
		Case: "udp-closed-port-unreachable", Ours: Fail, Linux: Pass,
		RFC: "RFC 1122 §3.2.2.1",
		Reason: "our stack has no UDP (stack.New registers TCP and ICMP; dgramio's datagram kinds run udp/ on raw paths, " +
			"with no socket layer to answer), so netstack answers Protocol Unreachable (code 2), which §3.2.2.1 prescribes " +
			"for a transport protocol the host does not support; Linux has UDP and answers Port Unreachable (code 3).",
	},
	{
		Case: "icmp6-port-unreachable", Ours: Fail, Linux: Pass,
		RFC: "RFC 4443 §3.1, §3.4 / RFC 8200 §4",
		Reason: "as udp-closed-port-unreachable, over IPv6: our stack has no UDP (stack.New registers TCP and ICMPv6), so netstack " +
			"takes a UDP datagram for one of a protocol it does not know and answers Parameter Problem, unrecognized Next Header " +
			"(code 1), which RFC 8200 §4 prescribes for that; Linux has UDP and answers Destination Unreachable, port unreachable (code 4). " +
			"It shows where stack.New serves IPv6 (with the IPv6 netstack of internal/stack).",
	},
	{
		Case: "icmp6-error-rate-limited", Ours: Fail, Linux: Pass,
		RFC: "RFC 4443 §2.4(f)",
		Reason: "the case counts port unreachables, which our stack, without UDP, never sends over IPv6 (it answers Parameter " +
			"Problem, see icmp6-port-unreachable).",
	},
	{
		Case: "tcp-zero-window-ack-processed", Ours: Pass, Linux: Fail,
		RFC: "RFC 9293 §3.10.7.4",
		Reason: "Linux (6.18 here) drops a one-byte probe into its zero window whole, ACK field included, and retransmits " +
			"the data the probe acknowledged at its RTO. It does not deadlock on that because it never refuses data inside a " +
			"window it advertised, so its peer's ACKs stay acceptable. Netstack's segment queue does refuse such data when " +
			"its receive memory is full, and the peer's ACKs then lie beyond its zero window: gVisor drops them the same way, " +
			"which stalled an io.Copy echo for good, so our link endpoint hands netstack their ACK fields as bare ACKs " +
			"(stack/zerowindow.go), as the section asks.",
	},
	{
		Case: "tcp-ack-unsent-data", Ours: Fail, Linux: Pass,
		RFC: "RFC 9293 §3.10.7.4 / RFC 5961 §5.2",
		Reason: "gVisor netstack answers a segment that acknowledges unsent data with an ACK but still queues the segment's " +
			"text for the application, where the RFCs say to drop the segment. A correct peer never sends such an ACK; " +
			"fixing it means patching gVisor's transport/tcp.",
	},
	{
		Case: "tcp-keepalive-idle-from-handshake", Ours: Fail, Linux: Pass,
		RFC: "RFC 1122 §4.2.3.6",
		Reason: "gVisor netstack arms the keepalive timer when it processes a segment in ESTABLISHED or an ACK empties its " +
			"send queue, not when the handshake completes: a connection idle since its handshake is never probed, so a dead " +
			"peer that never sent anything goes unnoticed. dgramio's stream kinds set no keepalive (a peer that stops " +
			"reading shows as TCP.SendStall instead).",
	},
}

// acceptedFor returns the accepted difference of a case, if any.
func acceptedFor(name string) (Difference, bool) {
	for _, d := range accepted {
		if d.Case == name {
			return d, true
		}
	}
	return Difference{}, false
}
