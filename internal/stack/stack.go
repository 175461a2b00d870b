package stack

import (
	"fmt"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
)

// NICID is the netstack NIC the Stack creates over its Endpoint.
const NICID tcpip.NICID = 1

// Options describe the one interface of a Stack.
type Options struct {
	// Addr is our IPv4 or IPv6 address (the stack's one family).
	// Required.
	Addr netip.Addr
	// PrefixLen is Addr's subnet prefix length. 0 means 32 (128 for IPv6):
	// the address alone. Either way every destination is on the link (a
	// default route without gateway on the NIC): there is no router, and
	// netstack resolves each peer with ARP, or for IPv6 with neighbour
	// discovery (RFC 4861).
	PrefixLen int
	// Neighbors are static neighbour entries (Config.DstMAC), of Addr's
	// family: these peers are never resolved. The map is not kept.
	Neighbors map[netip.Addr]net.HardwareAddr
	// Clock is netstack's clock. nil: the system clock. Tests pass a
	// faketime.ManualClock to move TCP's timers by hand.
	Clock tcpip.Clock
	// OwnerKicks: only the poll loop kicks the FrameIO (see
	// Endpoint.SetOwnerKicks); a queue of a group sets it.
	OwnerKicks bool
}

// OptionsFromConfig returns the Options of cfg: LocalIP, and DstMAC as the
// static neighbour of every Dests entry when it is set.
func OptionsFromConfig(cfg dgramio.Config) Options {
	o := Options{Addr: cfg.LocalIP}
	if len(cfg.DstMAC) != 0 {
		o.Neighbors = make(map[netip.Addr]net.HardwareAddr, len(cfg.Dests))
		for _, d := range cfg.Dests {
			o.Neighbors[d.Addr()] = cfg.DstMAC
		}
	}
	return o
}

// Stack is a netstack instance with one NIC over an Endpoint.
type Stack struct {
	// NS is the netstack. Package tcp sets its TCP options and opens its
	// endpoints; nothing else should change it.
	NS *nstack.Stack
	// EP is the link endpoint: the poll loop calls its Poll, Flush and
	// Sleep.
	EP *Endpoint
	// Addr is our address.
	Addr netip.Addr
}

// New builds a netstack over fio: for an IPv4 Addr, ARP, IPv4 (which
// answers ping) and ICMP; for an IPv6 one, IPv6 with neighbour discovery
// and ICMPv6 (echo, errors), a link-local address made from the FrameIO's
// MAC (RFC 4291 Appendix A), and none of duplicate address detection,
// router solicitation, autoconfiguration or MLD (the test hosts turn the
// same off on the kernel's side); TCP; one NIC (NICID) with opts.Addr and
// a default route on it. fio must be open; the Stack does not close it
// (close it after Stack.Close).
func New(fio frameio.FrameIO, opts Options) (*Stack, error) {
	a := opts.Addr.Unmap()
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "" {
		return nil, &dgramio.ConfigError{Field: "LocalIP", Value: opts.Addr, Reason: "the userspace stack needs our unicast IPv4 or IPv6 address"}
	}
	opts.Addr = a
	v6 := a.Is6()
	bits := a.BitLen()
	if opts.PrefixLen == 0 {
		opts.PrefixLen = bits
	}
	if opts.PrefixLen < 1 || opts.PrefixLen > bits {
		return nil, &dgramio.ConfigError{Field: "PrefixLen", Value: opts.PrefixLen, Reason: fmt.Sprintf("must be 1 to %d", bits)}
	}
	min := header.IPv4MinimumMTU
	if v6 {
		min = header.IPv6MinimumMTU
	}
	if fio.MTU() < min {
		return nil, fmt.Errorf("stack: FrameIO MTU %d is below the minimum %d of %s", fio.MTU(), min, map[bool]string{false: "IPv4", true: "IPv6"}[v6])
	}
	so := nstack.Options{
		NetworkProtocols:   []nstack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []nstack.TransportProtocolFactory{tcp.NewProtocol, icmp.NewProtocol4},
		Clock:              opts.Clock,
	}
	if v6 {
		// The zero NDP, DAD and MLD options: no router solicitations,
		// router advertisements ignored, no DAD, no MLD reports.
		so.NetworkProtocols = []nstack.NetworkProtocolFactory{ipv6.NewProtocolWithOptions(ipv6.Options{AutoGenLinkLocal: true})}
		so.TransportProtocols = []nstack.TransportProtocolFactory{tcp.NewProtocol, icmp.NewProtocol6}
	}
	ns := nstack.New(so)
	ep := NewEndpoint(fio)
	ep.clock = ns.Clock()
	ep.SetOwnerKicks(opts.OwnerKicks)
	s := &Stack{NS: ns, EP: ep, Addr: opts.Addr}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := ns.CreateNICWithOptions(NICID, ep, nstack.NICOptions{QDisc: qdisc{ep}}); err != nil {
		return nil, fmt.Errorf("stack: create NIC: %s", err)
	}
	pa := tcpip.ProtocolAddress{
		Protocol:          s.Proto(),
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: Addr(opts.Addr), PrefixLen: opts.PrefixLen},
	}
	if err := ns.AddProtocolAddress(NICID, pa, nstack.AddressProperties{}); err != nil {
		return nil, fmt.Errorf("stack: add address %s: %s", opts.Addr, err)
	}
	if v6 {
		ns.SetRouteTable([]tcpip.Route{{Destination: header.IPv6EmptySubnet, NIC: NICID}})
	} else {
		ns.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: NICID}})
	}
	for ip, mac := range opts.Neighbors {
		ip = ip.Unmap()
		if ip.Is6() != v6 || len(mac) != 6 {
			return nil, &dgramio.ConfigError{Field: "DstMAC", Value: mac, Reason: "a static neighbour needs an address of LocalIP's family and a 6-byte MAC"}
		}
		if err := ns.AddStaticNeighbor(NICID, s.Proto(), Addr(ip), tcpip.LinkAddress(mac)); err != nil {
			return nil, fmt.Errorf("stack: static neighbour %s: %s", ip, err)
		}
	}
	ok = true
	return s, nil
}

// Proto returns the network protocol of the Stack's family: IPv4's or
// IPv6's, the one to open endpoints with.
func (s *Stack) Proto() tcpip.NetworkProtocolNumber {
	if s.Addr.Is6() {
		return ipv6.ProtocolNumber
	}
	return ipv4.ProtocolNumber
}

// Addr returns a as netstack's address (4 or 16 bytes; an IPv4-mapped a
// is IPv4).
func Addr(a netip.Addr) tcpip.Address {
	a = a.Unmap()
	if a.Is4() {
		return tcpip.AddrFrom4(a.As4())
	}
	return tcpip.AddrFrom16(a.As16())
}

// AddrOf returns netstack's address a as a netip.Addr (the zero Addr for
// an empty one).
func AddrOf(a tcpip.Address) netip.Addr {
	switch a.Len() {
	case 4:
		return netip.AddrFrom4(a.As4())
	case 16:
		return netip.AddrFrom16(a.As16()).Unmap()
	}
	return netip.Addr{}
}

// Close shuts netstack down: every endpoint is aborted (a connected TCP
// endpoint sends RST), netstack's goroutines are waited for, and the NIC is
// removed, which closes the Endpoint (WritePackets refuses from then on).
// The poll loop must be stopped before Close and must not run again; the
// FrameIO stays open for its owner to close. Close is not safe to call
// twice.
func (s *Stack) Close() {
	s.NS.Close()
	s.NS.Wait()
}

// AppendCounters appends netstack's and the Endpoint's counters to dst, in
// the layers "netstack" (TCP, IP, ARP and NDP as netstack counts them) and "link"
// (the Endpoint's frames), and returns the extended slice.
func (s *Stack) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	st := s.NS.Stats()
	t := st.TCP
	add := func(name string, v uint64, loss bool) {
		dst = append(dst, dgramio.Counter{Layer: "netstack", Name: name, Value: v, Loss: loss})
	}
	add("tcp_segments_sent", t.SegmentsSent.Value(), false)
	add("tcp_segments_received", t.ValidSegmentsReceived.Value(), false)
	add("tcp_invalid_segments", t.InvalidSegmentsReceived.Value(), false)
	add("tcp_checksum_errors", t.ChecksumErrors.Value(), false)
	add("tcp_retransmits", t.Retransmits.Value(), false)
	add("tcp_fast_retransmits", t.FastRetransmit.Value(), false)
	add("tcp_timeouts", t.Timeouts.Value(), false)
	add("tcp_tlp", t.TLPRecovery.Value(), false)
	add("tcp_sack_recovery", t.SACKRecovery.Value(), false)
	add("tcp_resets_sent", t.ResetsSent.Value(), false)
	add("tcp_resets_received", t.ResetsReceived.Value(), false)
	add("tcp_send_errors", t.SegmentSendErrors.Value(), false)
	dst = append(dst, dgramio.Counter{Layer: "netstack", Name: "tcp_established", Value: t.CurrentEstablished.Value(), Gauge: true})
	add("tcp_active_opens", t.ActiveConnectionOpenings.Value(), false)
	add("tcp_passive_opens", t.PassiveConnectionOpenings.Value(), false)
	add("tcp_failed_connects", t.FailedConnectionAttempts.Value(), false)
	add("tcp_listen_overflow_syn_drop", t.ListenOverflowSynDrop.Value(), false)
	add("ip_packets_received", st.IP.PacketsReceived.Value(), false)
	add("ip_malformed", st.IP.MalformedPacketsReceived.Value(), false)
	add("ip_invalid_destination", st.IP.InvalidDestinationAddressesReceived.Value(), false)
	add("arp_requests_received", st.ARP.RequestsReceived.Value(), false)
	add("arp_replies_sent", st.ARP.OutgoingRepliesSent.Value(), false)
	add("arp_requests_sent", st.ARP.OutgoingRequestsSent.Value(), false)
	add("icmp_echo_replies_sent", st.ICMP.V4.PacketsSent.EchoReply.Value(), false)
	add("icmp6_echo_replies_sent", st.ICMP.V6.PacketsSent.EchoReply.Value(), false)
	add("ndp_solicits_received", st.ICMP.V6.PacketsReceived.NeighborSolicit.Value(), false)
	add("ndp_adverts_sent", st.ICMP.V6.PacketsSent.NeighborAdvert.Value(), false)
	add("ndp_solicits_sent", st.ICMP.V6.PacketsSent.NeighborSolicit.Value(), false)
	return s.EP.AppendCounters(dst)
}

// AppendCounters appends the Endpoint's counters (layer "link") to dst.
// tx_ring_full counts frames netstack wrote that did not fit the TX ring
// (TCP retransmits them; not a message loss).
func (e *Endpoint) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	add := func(name string, v uint64) {
		dst = append(dst, dgramio.Counter{Layer: "link", Name: name, Value: v})
	}
	add("rx_frames", e.rxFrames.Load())
	add("rx_bytes", e.rxBytes.Load())
	add("rx_other_host", e.rxOtherHost.Load())
	add("rx_malformed", e.rxMalformed.Load())
	add("rx_tcp_data_frames", e.rxDataFrames.Load())
	add("tx_frames", e.txFrames.Load())
	add("tx_tcp_data_frames", e.txDataFrames.Load())
	add("tx_bytes", e.txBytes.Load())
	add("tx_ring_full", e.txRingFull.Load())
	add("tx_oversize", e.txOversize.Load())
	add("kicks", e.kicks.Load())
	add("writer_kicks", e.writerKicks.Load())
	add("wakeups", e.wakeups.Load())
	add("rx_injected", e.rxInjected.Load())
	add("arp_replies_shared", e.arpShared.Load())
	add("syn_restamped", e.synRestamped.Load())
	add("acks_salvaged", e.acksSalvaged.Load())
	add("rx_syn_fin_dropped", e.rxSynFin.Load())
	return dst
}
