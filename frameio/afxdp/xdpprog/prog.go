// Package xdpprog builds the XDP programs that steer dgramio's frames into
// AF_XDP sockets, written with cilium/ebpf's asm package so that no C
// compiler is needed at build time, and loads them with their maps.
//
// Each program reads our port (and, variant TCP, the host address and SYN
// limit) from a one-entry config map, matches the frames of its Variant
// and hands them to bpf_redirect_map(xsks, rx_queue_index, XDP_PASS);
// everything else goes on to the kernel (XDP_PASS), except SYNs beyond the
// TCP variant's per-CPU token bucket (XDP_DROP). Because the fallback action of the redirect is XDP_PASS, a
// program left on an interface without a socket in its map is harmless:
// frames take the normal path. Every decision increments one slot of a
// per-CPU counter array, read with Objects.ReadCounters.
//
// Building the instructions (Instructions, CollectionSpec) needs no
// privileges; loading them (Load) needs CAP_BPF and CAP_NET_ADMIN on
// Linux >= 5.8 (CAP_SYS_ADMIN before), and XSKMAP needs Linux >= 4.18
// (bpf_ktime_get_ns, which the SYN bucket reads, is older).
//
// The TCP variant does not answer SYNs itself (SYN cookies with the
// kernel's bpf_tcp_raw_gen_syncookie_ipv4 and XDP_TX, as the kernel's XDP
// synproxy does): netstack validates only cookies of its own secret, so
// the ACK of a kernel cookie would find no connection there; a proxy that
// replays the handshake into netstack would be needed.
//
// This package serves frameio/afxdp and the tcp-xdp kind; it is not a
// stable API of its own.
package xdpprog

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Variant selects which frames a program redirects to the AF_XDP socket.
type Variant int

const (
	// UDP redirects Ethernet IPv4 frames without IP options (IHL 5), not
	// fragmented (MF clear, offset 0), carrying UDP to our port. This is
	// the program of the datagram kind xdp: ARP, ICMP and every other port
	// stay with the kernel. With IPv6 steering on (Objects.SetIPv6) it
	// also redirects IPv6 frames whose Next Header is UDP (no extension
	// header) to our port; IPv6 fragments and extension headers stay with
	// the kernel.
	UDP Variant = iota
	// UDPARP is UDP plus every ARP frame (EtherType 0x0806), for the
	// datagram kind when it answers ARP itself (Config.XDP.OwnARP). The
	// kernel then no longer sees ARP on that interface. With IPv6
	// steering on it also takes every IPv6 neighbour solicitation and
	// advertisement (RedirectedNDP; ICMPv6 types 135 and 136 right after
	// the fixed header), which package ndp then answers and learns from:
	// the kernel no longer sees neighbour discovery either. With a host
	// address (Objects.SetHost) it takes only the ARP frames whose target
	// is that address or that announce their sender (gratuitous), and with
	// an IPv6 one (Objects.SetHost6) only the solicitations and
	// advertisements sent to it and the solicitations whose target it is;
	// the rest goes to the kernel (PassOtherHost), whose own addresses on
	// the interface keep resolving. The port decides for UDP as before.
	UDPARP
	// TCP redirects IPv4 TCP (same IP rules as UDP) when our port is the
	// source or the destination port, so that a client with an ephemeral
	// port receives the server's answers, and every ARP frame: the
	// userspace TCP (tcp-xdp) resolves and answers ARP itself. With a
	// host address set (Objects.SetHost) it redirects instead every IPv4
	// frame to that address, whatever its protocol, port, options or
	// fragmentation, and the ARP frames whose target is that address or
	// that announce their sender (gratuitous: sender = target), and
	// passes frames to other addresses to the kernel (PassOtherHost: the
	// kernel's own addresses on the interface keep working):
	// the userspace stack then answers for its address as a host does
	// (RST for closed ports, ICMP echo and unreachables). SYNs (SYN
	// without ACK) to the host address then go through a per-CPU token
	// bucket (Objects.SetSYNLimit) and are dropped (DroppedSYN) beyond it.
	//
	// With IPv6 steering on (Objects.SetIPv6) the same holds for IPv6: IPv6
	// TCP frames (no extension header) from or to our port and every
	// neighbour solicitation and advertisement (RedirectedNDP), or, with an
	// IPv6 host address (Objects.SetHost6), every IPv6 frame to that
	// address (SYNs through the same bucket) and the neighbour
	// solicitations whose target it is (sent to its solicited-node
	// multicast address), the rest of IPv6 to the kernel (PassOtherHost).
	TCP
)

// String returns "udp", "udp+arp" or "tcp".
func (v Variant) String() string {
	switch v {
	case UDP:
		return "udp"
	case UDPARP:
		return "udp+arp"
	case TCP:
		return "tcp"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// Valid reports whether v is one of the defined variants.
func (v Variant) Valid() bool { return v == UDP || v == UDPARP || v == TCP }

// Counter indexes one slot of the program's per-CPU counter array. Exactly
// one counter is incremented per frame the program sees.
type Counter uint32

// The counters, in map order.
const (
	// Redirected counts IP frames that matched and that bpf_redirect_map
	// accepted (a socket was in the map at rx_queue_index). Delivery into
	// the socket can still fail; the socket's XDP_STATISTICS count that.
	Redirected Counter = iota
	// RedirectedARP counts ARP frames redirected (variants UDPARP, TCP).
	RedirectedARP
	// PassNoSocket counts frames that matched but found no socket at
	// rx_queue_index (the socket is closed, or the frame arrived on another
	// queue): they went to the kernel, so the socket lost them.
	PassNoSocket
	// PassNoConfig counts frames seen while no port was configured.
	PassNoConfig
	// PassShort counts frames too short for the headers they claim.
	PassShort
	// PassNotIPv4 counts frames whose EtherType is not IPv4 (nor ARP in the
	// variants that take ARP, nor IPv6 with IPv6 steering on).
	PassNotIPv4
	// PassIPOptions counts IPv4 frames whose first byte is not 0x45
	// (version 4, IHL 5): IP options, or a bad version.
	PassIPOptions
	// PassFragment counts IPv4 fragments (MF set or a fragment offset) and
	// IPv6 packets with a Fragment header first.
	PassFragment
	// PassOtherProto counts IP frames of another transport protocol.
	PassOtherProto
	// PassOtherPort counts frames of our protocol for another port.
	PassOtherPort
	// PassOtherHost counts IPv4 frames to another address than the host
	// address (variant TCP with SetHost), and IPv6 frames to another
	// address than the IPv6 host address (SetHost6) that are not a
	// solicitation for it: the kernel's. In variants TCP and UDPARP it
	// also counts the ARP frames about another address than the host
	// address, and in UDPARP the neighbour solicitations and
	// advertisements about another address than the IPv6 one.
	PassOtherHost
	// DroppedSYN counts SYNs to the host address dropped (XDP_DROP)
	// because the CPU's token bucket was empty (SetSYNLimit): a flood
	// that would otherwise fill the socket's ring ahead of the
	// established connections' segments. The peer retransmits a SYN
	// that was legitimate.
	DroppedSYN
	// RedirectedNDP counts ICMPv6 neighbour solicitations and
	// advertisements redirected (variants TCP and UDPARP with IPv6
	// steering on): every one without an IPv6 host address; with one, the
	// solicitations for it (to its solicited-node address), and in UDPARP
	// those sent to it too (in TCP they are in Redirected).
	RedirectedNDP
	// PassIPv6Ext counts IPv6 frames whose first Next Header is a
	// Hop-by-Hop, Routing or Destination Options header, when the port
	// decides (the program walks no extension header): the kernel's.
	PassIPv6Ext

	// NumCounters is the number of counters (the array's size).
	NumCounters
)

var counterNames = [NumCounters]string{
	Redirected:     "redirected",
	RedirectedARP:  "redirected_arp",
	PassNoSocket:   "pass_no_socket",
	PassNoConfig:   "pass_no_config",
	PassShort:      "pass_short",
	PassNotIPv4:    "pass_not_ipv4",
	PassIPOptions:  "pass_ip_options",
	PassFragment:   "pass_fragment",
	PassOtherProto: "pass_other_proto",
	PassOtherPort:  "pass_other_port",
	PassOtherHost:  "pass_other_host",
	DroppedSYN:     "dropped_syn",
	RedirectedNDP:  "redirected_ndp",
	PassIPv6Ext:    "pass_ipv6_ext",
}

// String returns the counter's name as Stats shows it ("redirected",
// "pass_other_port", ...).
func (c Counter) String() string {
	if c < NumCounters {
		return counterNames[c]
	}
	return fmt.Sprintf("Counter(%d)", uint32(c))
}

// Loss reports whether the counter counts frames meant for the socket that
// it did not get.
func (c Counter) Loss() bool { return c == PassNoSocket }

// Names of the maps and programs, as the kernel shows them (bpftool). The
// kernel keeps 15 characters.
const (
	MapSockets  = "dgramio_xsks"
	MapConfig   = "dgramio_cfg"
	MapCounters = "dgramio_cnt"
	// MapSYN is the per-CPU token bucket of SYNs (variant TCP): one
	// entry of synBucketSize bytes, the tokens in units of 1e-9 SYN, then
	// the bpf_ktime_get_ns of the last refill.
	MapSYN = "dgramio_syn"
)

const synBucketSize = 16

// ProgramName returns the program's name for v.
func ProgramName(v Variant) string {
	switch v {
	case UDPARP:
		return "dgramio_udparp"
	case TCP:
		return "dgramio_tcp"
	}
	return "dgramio_udp"
}

// XDP actions (enum xdp_action).
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// struct xdp_md offsets.
const (
	mdData         = 0
	mdDataEnd      = 4
	mdRxQueueIndex = 16
)

// Frame offsets: Ethernet header, then IPv4 without options.
const (
	offEtherType = 12
	offIP        = 14
	offIPFrag    = offIP + 6
	offIPProto   = offIP + 9
	offIPDst     = offIP + 16
	offTCPFlags  = offL4 + 13
	offL4        = offIP + 20
	// An ARP packet for IPv4 over Ethernet: the sender's and the target's
	// protocol addresses (RFC 826).
	offARPSender = offIP + 14
	offARPTarget = offIP + 24
	offARPEnd    = offIP + 28
	offSrcPort   = offL4
	offDstPort   = offL4 + 2
	lenUDPFrame  = offL4 + 8 // through the UDP header
	lenTCPPorts  = offL4 + 4 // through the TCP ports
)

// Frame offsets of IPv6 (RFC 8200 §3) with the upper-layer header right
// after the fixed header, and of a neighbour solicitation (RFC 4861 §4.3).
const (
	etherIPv6     = 0x86dd
	offIP6Next    = offIP + 6
	offIP6Dst     = offIP + 24
	offL46        = offIP + 40
	offSrcPort6   = offL46
	offDstPort6   = offL46 + 2
	offTCPFlags6  = offL46 + 13
	lenUDPFrame6  = offL46 + 8
	lenTCPPorts6  = offL46 + 4
	offICMP6Type  = offL46
	offNDTarget   = offL46 + 8
	lenNDFrame    = offNDTarget + 16
	icmp6NeighSol = 135
	icmp6NeighAdv = 136
)

// Instructions returns the program of variant v. It expects the maps
// MapConfig, MapSockets and MapCounters by reference (CollectionSpec
// supplies them).
//
// Registers: R6 the context, R7 the counter to increment, R8 the action to
// return, R9 our port as it appears on the wire (the config map stores it
// in network byte order and both sides are loaded the same way, so no byte
// swapping is needed), R1 (after the config lookup, until the redirect
// call) the number of ports from ours on (host order; 0 or 1: ours only).
// R2..R5 are scratch between helper calls.
//
// A destination port matches when it is ours, or, with a count n > 1 in
// the config, when it lies in [port, port+n): the ports of the queues of a
// datagram client (queue q sends from port+q).
//
// IPv6 frames go to the block at "ip6" when the config's flags say so
// (cfgFlagIPv6); otherwise they take the IPv4 program's path for another
// EtherType (PassNotIPv4), as before IPv6 steering existed.
func Instructions(v Variant) asm.Instructions {
	const (
		lCount    = "count"
		lRedirect = "redirect"
		lARP      = "arp"
		lOut      = "out"
		lPorts    = "ports"
		lIP6      = "ip6"
		lIP6Check = "ip6_check"
	)
	setCounter := func(c Counter) asm.Instruction { return asm.Mov.Imm(asm.R7, int32(c)) }
	// need jumps to count (with PassShort) unless data+n <= data_end.
	need := func(n int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, n),
			setCounter(PassShort),
			asm.JGT.Reg(asm.R4, asm.R3, lCount),
		}
	}
	takesARP := v == UDPARP || v == TCP
	proto := int32(17)
	l4Len := int32(lenUDPFrame)
	if v == TCP {
		proto = 6
		l4Len = lenTCPPorts
	}

	var p asm.Instructions
	add := func(ins ...asm.Instruction) { p = append(p, ins...) }

	add(
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R8, xdpPass),
		// port := cfg[0]
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(MapConfig),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		setCounter(PassNoConfig),
		asm.JEq.Imm(asm.R0, 0, lCount),
		asm.LoadMem(asm.R9, asm.R0, 0, asm.Half),
		asm.JEq.Imm(asm.R9, 0, lCount),
		asm.LoadMem(asm.R1, asm.R0, 2, asm.Half),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
	)
	if v == TCP || v == UDPARP {
		// The host address and the SYN bucket's rate and burst, kept
		// on the stack for hostPath and the neighbour frames' tests.
		for _, off := range []int16{cfgHost, cfgSYNRate, cfgSYNBurst} {
			add(asm.LoadMem(asm.R4, asm.R0, off, asm.Word), asm.StoreMem(asm.R10, stackHost-(off-cfgHost), asm.R4, asm.Word))
		}
		// The IPv6 host address, for ip6Path.
		add(
			asm.LoadMem(asm.R4, asm.R0, cfgHost6, asm.DWord), asm.StoreMem(asm.R10, stackHost6, asm.R4, asm.DWord),
			asm.LoadMem(asm.R4, asm.R0, cfgHost6+8, asm.DWord), asm.StoreMem(asm.R10, stackHost6+8, asm.R4, asm.DWord),
		)
	}
	add(asm.LoadMem(asm.R4, asm.R0, cfgFlags, asm.Word), asm.StoreMem(asm.R10, stackFlags, asm.R4, asm.Word))
	add(
		// The frame.
		asm.LoadMem(asm.R2, asm.R6, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, mdDataEnd, asm.Word),
	)
	add(need(offIP)...)
	add(
		asm.LoadMem(asm.R4, asm.R2, offEtherType, asm.Byte),
		asm.LoadMem(asm.R5, asm.R2, offEtherType+1, asm.Byte),
		setCounter(PassNotIPv4),
		asm.JEq.Imm(asm.R4, etherIPv6>>8, lIP6Check),
		asm.JNE.Imm(asm.R4, 0x08, lCount),
	)
	if takesARP {
		add(asm.JEq.Imm(asm.R5, 0x06, lARP))
	}
	add(asm.JNE.Imm(asm.R5, 0x00, lCount))
	add(need(offL4)...)
	if v == TCP {
		add(hostPath(need, lPorts, lRedirect, lCount)...)
	}
	add(
		asm.LoadMem(asm.R4, asm.R2, offIP, asm.Byte).WithSymbol(lPorts),
		setCounter(PassIPOptions),
		asm.JNE.Imm(asm.R4, 0x45, lCount),
		// Flags and fragment offset: reserved/DF bits may be set; MF
		// (0x20) and the offset's 13 bits must be zero.
		asm.LoadMem(asm.R4, asm.R2, offIPFrag, asm.Byte),
		asm.And.Imm(asm.R4, 0x3f),
		setCounter(PassFragment),
		asm.JNE.Imm(asm.R4, 0, lCount),
		asm.LoadMem(asm.R4, asm.R2, offIPFrag+1, asm.Byte),
		asm.JNE.Imm(asm.R4, 0, lCount),
		asm.LoadMem(asm.R4, asm.R2, offIPProto, asm.Byte),
		setCounter(PassOtherProto),
		asm.JNE.Imm(asm.R4, proto, lCount),
	)
	add(need(l4Len)...)
	add(portTest(v, offSrcPort, offDstPort, lRedirect, lCount)...)
	// ip6_check: the EtherType's first byte was 0x86.
	add(
		asm.JNE.Imm(asm.R5, etherIPv6&0xff, lCount).WithSymbol(lIP6Check),
		asm.LoadMem(asm.R4, asm.R10, stackFlags, asm.Word),
		asm.And.Imm(asm.R4, cfgFlagIPv6),
		asm.JEq.Imm(asm.R4, 0, lCount),
	)
	add(need(offL46)...)
	add(ip6Path(v, need, lIP6, lRedirect, lCount)...)
	if takesARP {
		// With a host address, ARP whose target is another address (the
		// kernel's, on the same interface) goes to the kernel; ours and
		// gratuitous announcements (sender = target) to the socket.
		const lARPTake = "arp_take"
		add(
			asm.LoadMem(asm.R4, asm.R10, stackHost, asm.Word).WithSymbol(lARP),
			asm.JEq.Imm(asm.R4, 0, lARPTake),
		)
		add(need(offARPEnd)...)
		add(
			asm.LoadMem(asm.R4, asm.R10, stackHost, asm.Word),
			asm.LoadMem(asm.R5, asm.R2, offARPTarget, asm.Word),
			asm.JEq.Reg(asm.R5, asm.R4, lARPTake),
			asm.LoadMem(asm.R4, asm.R2, offARPSender, asm.Word),
			setCounter(PassOtherHost),
			asm.JNE.Reg(asm.R4, asm.R5, lCount),
			setCounter(RedirectedARP).WithSymbol(lARPTake),
			asm.Ja.Label(lRedirect),
		)
	}
	// redirect: R7 holds the counter of success.
	add(
		asm.LoadMem(asm.R2, asm.R6, mdRxQueueIndex, asm.Word).WithSymbol(lRedirect),
		asm.LoadMapPtr(asm.R1, 0).WithReference(MapSockets),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.JEq.Imm(asm.R0, xdpRedirect, lCount),
		setCounter(PassNoSocket),
	)
	// count: counters[R7]++, return R8.
	add(
		asm.StoreMem(asm.R10, -8, asm.R7, asm.Word).WithSymbol(lCount),
		asm.LoadMapPtr(asm.R1, 0).WithReference(MapCounters),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, lOut),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R8).WithSymbol(lOut),
		asm.Return(),
	)
	return p
}

// portTest is the test of the ports at offSrc (variant TCP) and offDst,
// the lengths checked: our port, or a port of the range (R1 ports from R9
// on), goes to lRedirect as Redirected; another one to lCount as
// PassOtherPort.
func portTest(v Variant, offSrc, offDst int16, lRedirect, lCount string) asm.Instructions {
	var p asm.Instructions
	p = append(p, asm.Mov.Imm(asm.R7, int32(Redirected)))
	if v == TCP {
		p = append(p,
			asm.LoadMem(asm.R4, asm.R2, offSrc, asm.Half),
			asm.JEq.Reg(asm.R4, asm.R9, lRedirect),
		)
	}
	return append(p,
		asm.LoadMem(asm.R4, asm.R2, offDst, asm.Half),
		asm.JEq.Reg(asm.R4, asm.R9, lRedirect),
		asm.Mov.Imm(asm.R7, int32(PassOtherPort)),
		// A range of ports: dst - port < n, in host order and unsigned
		// (a dst below port wraps to a huge difference).
		asm.JLE.Imm(asm.R1, 1, lCount),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.Mov.Reg(asm.R5, asm.R9),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.Sub.Reg(asm.R4, asm.R5),
		asm.JGE.Reg(asm.R4, asm.R1, lCount),
		asm.Mov.Imm(asm.R7, int32(Redirected)),
		asm.Ja.Label(lRedirect),
	)
}

// ip6Path is the program's IPv6 block, entered at lIP6 with the fixed
// header's 40 bytes checked (R2 data, R3 data_end). It ends in jumps only.
//
// Variant TCP with an IPv6 host address (stackHost6 not zero): a frame to
// it is redirected, a TCP one through the SYN bucket (lSYNFlags with the
// flags in R4); a neighbour solicitation whose target it is (RFC 4861
// §4.3: sent to its solicited-node address) is redirected as
// RedirectedNDP; the rest is PassOtherHost. Otherwise the first Next
// Header decides: UDP (TCP for variant TCP) goes to the port test, a
// Fragment header is PassFragment, another extension header PassIPv6Ext;
// variants TCP and UDPARP also take every neighbour solicitation and
// advertisement (RedirectedNDP), as they take every ARP frame.
func ip6Path(v Variant, need func(int32) asm.Instructions, lIP6, lRedirect, lCount string) asm.Instructions {
	const (
		lPorts  = "ip6_ports"
		lNotOur = "ip6_not_ours"
		lL4     = "ip6_l4"
		lICMP   = "ip6_icmp"
		lNDP    = "ip6_ndp"
	)
	proto, l4Len := int32(17), int32(lenUDPFrame6)
	if v == TCP {
		proto, l4Len = 6, lenTCPPorts6
	}
	var p asm.Instructions
	add := func(ins ...asm.Instruction) { p = append(p, ins...) }
	if v == TCP {
		add(
			asm.LoadMem(asm.R4, asm.R10, stackHost6, asm.DWord).WithSymbol(lIP6),
			asm.LoadMem(asm.R5, asm.R10, stackHost6+8, asm.DWord),
			asm.Or.Reg(asm.R5, asm.R4),
			asm.JEq.Imm(asm.R5, 0, lPorts),
			asm.LoadMem(asm.R5, asm.R2, offIP6Dst, asm.DWord),
			asm.JNE.Reg(asm.R5, asm.R4, lNotOur),
			asm.LoadMem(asm.R4, asm.R10, stackHost6+8, asm.DWord),
			asm.LoadMem(asm.R5, asm.R2, offIP6Dst+8, asm.DWord),
			asm.JNE.Reg(asm.R5, asm.R4, lNotOur),
			asm.Mov.Imm(asm.R7, int32(Redirected)),
			asm.LoadMem(asm.R4, asm.R2, offIP6Next, asm.Byte),
			asm.JNE.Imm(asm.R4, 6, lRedirect),
		)
		add(need(offTCPFlags6 + 1)...)
		add(
			asm.Mov.Imm(asm.R7, int32(Redirected)),
			asm.LoadMem(asm.R4, asm.R2, offTCPFlags6, asm.Byte),
			asm.Ja.Label(lSYNFlags),
			// Not to the host address: a solicitation for it, or the kernel's.
			asm.Mov.Imm(asm.R7, int32(PassOtherHost)).WithSymbol(lNotOur),
			asm.LoadMem(asm.R4, asm.R2, offIP6Next, asm.Byte),
			asm.JNE.Imm(asm.R4, 58, lCount),
		)
		add(solicitsHost6(lCount)...)
		add(asm.Ja.Label(lRedirect))
	}
	first := asm.LoadMem(asm.R4, asm.R2, offIP6Next, asm.Byte).WithSymbol(lPorts)
	if v != TCP {
		first = first.WithSymbol(lIP6)
	}
	add(first)
	if v != UDP { // TCP and UDPARP take neighbour discovery
		add(asm.JEq.Imm(asm.R4, 58, lICMP))
	}
	add(
		asm.JEq.Imm(asm.R4, proto, lL4),
		asm.Mov.Imm(asm.R7, int32(PassFragment)),
		asm.JEq.Imm(asm.R4, 44, lCount),
		asm.Mov.Imm(asm.R7, int32(PassIPv6Ext)),
		asm.JEq.Imm(asm.R4, 0, lCount),
		asm.JEq.Imm(asm.R4, 43, lCount),
		asm.JEq.Imm(asm.R4, 60, lCount),
		asm.Mov.Imm(asm.R7, int32(PassOtherProto)),
		asm.Ja.Label(lCount),
	)
	l4 := need(l4Len)
	l4[0] = l4[0].WithSymbol(lL4)
	add(l4...)
	add(portTest(v, offSrcPort6, offDstPort6, lRedirect, lCount)...)
	if v != UDP {
		nd := need(offICMP6Type + 1)
		nd[0] = nd[0].WithSymbol(lICMP)
		add(nd...)
		add(
			asm.Mov.Imm(asm.R7, int32(PassOtherProto)),
			asm.LoadMem(asm.R4, asm.R2, offICMP6Type, asm.Byte),
			asm.JEq.Imm(asm.R4, icmp6NeighSol, lNDP),
			asm.JNE.Imm(asm.R4, icmp6NeighAdv, lCount),
			asm.Mov.Imm(asm.R7, int32(RedirectedNDP)).WithSymbol(lNDP),
		)
		if v == UDPARP {
			add(ndpForHost(lRedirect, lCount)...)
		}
		add(asm.Ja.Label(lRedirect))
	}
	return p
}

// ndpForHost is variant UDPARP's test of a neighbour solicitation or
// advertisement (R7 RedirectedNDP, the fixed header and the ICMPv6 type
// checked) against the IPv6 host address: with none set it falls
// through (every one is redirected); with one, a frame sent to it (an
// advertisement answering our solicitation, a unicast probe) or a
// solicitation whose target it is (RFC 4861 §4.3, sent to its
// solicited-node address) goes to lRedirect, the rest to the kernel
// (PassOtherHost): its own addresses on the interface keep their
// neighbour discovery.
func ndpForHost(lRedirect, lCount string) asm.Instructions {
	const lTarget = "ndp_target"
	p := asm.Instructions{
		asm.LoadMem(asm.R4, asm.R10, stackHost6, asm.DWord),
		asm.LoadMem(asm.R5, asm.R10, stackHost6+8, asm.DWord),
		asm.Or.Reg(asm.R5, asm.R4),
		asm.JEq.Imm(asm.R5, 0, lRedirect),
		asm.LoadMem(asm.R5, asm.R2, offIP6Dst, asm.DWord),
		asm.JNE.Reg(asm.R5, asm.R4, lTarget),
		asm.LoadMem(asm.R4, asm.R10, stackHost6+8, asm.DWord),
		asm.LoadMem(asm.R5, asm.R2, offIP6Dst+8, asm.DWord),
		asm.JEq.Reg(asm.R5, asm.R4, lRedirect),
		// Not sent to it: a solicitation whose target it is, or the
		// kernel's.
		asm.Mov.Imm(asm.R7, int32(PassOtherHost)).WithSymbol(lTarget),
	}
	return append(p, solicitsHost6(lCount)...)
}

// solicitsHost6 goes on (R7 RedirectedNDP) when the ICMPv6 frame (the
// fixed header checked) is a neighbour solicitation whose target is the
// IPv6 host address, and to lCount with R7 as it found it otherwise,
// a frame too short to hold a target included.
func solicitsHost6(lCount string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, lenNDFrame),
		asm.JGT.Reg(asm.R4, asm.R3, lCount),
		asm.LoadMem(asm.R4, asm.R2, offICMP6Type, asm.Byte),
		asm.JNE.Imm(asm.R4, icmp6NeighSol, lCount),
		asm.LoadMem(asm.R4, asm.R10, stackHost6, asm.DWord),
		asm.LoadMem(asm.R5, asm.R2, offNDTarget, asm.DWord),
		asm.JNE.Reg(asm.R5, asm.R4, lCount),
		asm.LoadMem(asm.R4, asm.R10, stackHost6+8, asm.DWord),
		asm.LoadMem(asm.R5, asm.R2, offNDTarget+8, asm.DWord),
		asm.JNE.Reg(asm.R5, asm.R4, lCount),
		asm.Mov.Imm(asm.R7, int32(RedirectedNDP)),
	}
}

// Config value offsets (ConfigSize bytes) and where the TCP variant keeps
// the host's fields on its stack.
const (
	cfgHost     = 4
	cfgSYNRate  = 8
	cfgSYNBurst = 12
	stackHost   = -12 // then the rate at -16, the burst at -20
	stackSYNKey = -24
	nanoSYN     = 1_000_000_000 // one SYN in the bucket's units
	cfgHost6    = 16            // the IPv6 host address, as on the wire (zero: none)
	cfgFlags    = 32            // uint32, host byte order: cfgFlagIPv6
	stackFlags  = -28
	stackHost6  = -48 // 16 bytes, to -33
	lSYNFlags   = "syn_flags"
)

// cfgFlagIPv6 in the config's flags turns IPv6 steering on.
const cfgFlagIPv6 = 1

// hostPath is the TCP variant's test of the host address: with none set it
// goes on at lPorts (the port test); a frame to another address is
// PassOtherHost; one to the host address is redirected, except a SYN that
// finds the CPU's token bucket empty, which is dropped (DroppedSYN). R2
// and R3 hold data and data_end; need checks a length as in Instructions.
//
// The bucket holds tokens in units of 1e-9 SYN: each refill adds the
// nanoseconds since the last one times the rate per second, caps the sum
// at burst SYNs, and a SYN takes one (1e9 units).
// A rate of 0 is no limit.
func hostPath(need func(int32) asm.Instructions, lPorts, lRedirect, lCount string) asm.Instructions {
	const lDrop = "syn_drop"
	p := asm.Instructions{
		asm.LoadMem(asm.R4, asm.R10, stackHost, asm.Word),
		asm.JEq.Imm(asm.R4, 0, lPorts),
		asm.LoadMem(asm.R5, asm.R2, offIPDst, asm.Word),
		asm.Mov.Imm(asm.R7, int32(PassOtherHost)),
		asm.JNE.Reg(asm.R5, asm.R4, lCount),
		asm.Mov.Imm(asm.R7, int32(Redirected)),
		// Only an unfragmented TCP segment without IP options can be a
		// SYN the bucket counts; the rest goes to the stack as it is.
		asm.LoadMem(asm.R4, asm.R2, offIP, asm.Byte),
		asm.JNE.Imm(asm.R4, 0x45, lRedirect),
		asm.LoadMem(asm.R4, asm.R2, offIPProto, asm.Byte),
		asm.JNE.Imm(asm.R4, 6, lRedirect),
		asm.LoadMem(asm.R4, asm.R2, offIPFrag, asm.Byte),
		asm.And.Imm(asm.R4, 0x3f),
		asm.JNE.Imm(asm.R4, 0, lRedirect),
		asm.LoadMem(asm.R4, asm.R2, offIPFrag+1, asm.Byte),
		asm.JNE.Imm(asm.R4, 0, lRedirect),
	}
	p = append(p, need(offTCPFlags+1)...)
	p = append(p,
		asm.Mov.Imm(asm.R7, int32(Redirected)),
		asm.LoadMem(asm.R4, asm.R2, offTCPFlags, asm.Byte),
		// syn_flags: R4 holds the TCP flags of a segment to the host
		// address (IPv4 or IPv6), R7 Redirected.
		asm.And.Imm(asm.R4, 0x12).WithSymbol(lSYNFlags), // SYN | ACK
		asm.JNE.Imm(asm.R4, 0x02, lRedirect),
		asm.LoadMem(asm.R4, asm.R10, stackHost-4, asm.Word), // rate
		asm.JEq.Imm(asm.R4, 0, lRedirect),
		asm.StoreImm(asm.R10, stackSYNKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(MapSYN),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, stackSYNKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, lRedirect), // no bucket: no limit
		// R9 (our port) is not needed past this point: the bucket.
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.LoadMem(asm.R1, asm.R9, 8, asm.DWord),
		asm.StoreMem(asm.R9, 8, asm.R0, asm.DWord),
		asm.Sub.Reg(asm.R0, asm.R1),
		asm.LoadMem(asm.R2, asm.R10, stackHost-4, asm.Word), // rate
		asm.LoadMem(asm.R3, asm.R10, stackHost-8, asm.Word), // burst
		asm.Mul.Imm(asm.R3, nanoSYN),
		// A pause long enough to fill the bucket fills it (and keeps
		// the product below from overflowing).
		asm.Mov.Reg(asm.R4, asm.R3),
		asm.Div.Reg(asm.R4, asm.R2),
		asm.Mov.Reg(asm.R1, asm.R3),
		asm.JGT.Reg(asm.R0, asm.R4, "syn_take"),
		asm.Mul.Reg(asm.R0, asm.R2),
		asm.LoadMem(asm.R1, asm.R9, 0, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R0),
		asm.JLE.Reg(asm.R1, asm.R3, "syn_take"),
		asm.Mov.Reg(asm.R1, asm.R3),
		asm.Mov.Imm(asm.R7, int32(DroppedSYN)).WithSymbol("syn_take"),
		asm.JLT.Imm(asm.R1, nanoSYN, lDrop),
		asm.Sub.Imm(asm.R1, nanoSYN),
		asm.StoreMem(asm.R9, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R7, int32(Redirected)),
		asm.Ja.Label(lRedirect),
		asm.StoreMem(asm.R9, 0, asm.R1, asm.DWord).WithSymbol(lDrop),
		asm.Mov.Imm(asm.R8, xdpDrop),
		asm.Ja.Label(lCount),
	)
	return p
}

// Spec describes what to load.
type Spec struct {
	// Variant selects the frames redirected.
	Variant Variant
	// Queues is the number of XSKMAP entries: the highest queue index that
	// will hold a socket, plus one. 0 means 1.
	Queues int
}

// CollectionSpec returns the program and its three maps, ready for
// ebpf.NewCollection. It makes no system call.
func (s Spec) CollectionSpec() (*ebpf.CollectionSpec, error) {
	if !s.Variant.Valid() {
		return nil, fmt.Errorf("xdpprog: unknown variant %d", int(s.Variant))
	}
	q := s.Queues
	if q == 0 {
		q = 1
	}
	if q < 0 || q > 1<<16 {
		return nil, fmt.Errorf("xdpprog: %d queues: want 1..65536", q)
	}
	name := ProgramName(s.Variant)
	return &ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{
			MapSockets: {Name: MapSockets, Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(q)},
			MapConfig:  {Name: MapConfig, Type: ebpf.Array, KeySize: 4, ValueSize: ConfigSize, MaxEntries: 1},
			MapCounters: {Name: MapCounters, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8,
				MaxEntries: uint32(NumCounters)},
			MapSYN: {Name: MapSYN, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: synBucketSize, MaxEntries: 1},
		},
		Programs: map[string]*ebpf.ProgramSpec{
			name: {
				Name:         name,
				Type:         ebpf.XDP,
				Instructions: Instructions(s.Variant),
				License:      "Dual BSD/GPL",
			},
		},
	}, nil
}

// ConfigSize is the size of the config map's value: the port in network
// byte order, then the number of ports matched from it on, in network byte
// order (0 and 1: the port alone); then (variant TCP) the host address as
// on the wire (0: none), and the SYN bucket's rate per second and burst,
// each a uint32 in the host's byte order (rate 0: no limit); then (variant
// TCP) the IPv6 host address as on the wire (zero: none); then flags, a
// uint32 in the host's byte order (bit 0: IPv6 steering on).
const ConfigSize = 36

// EncodeConfig returns the config map's value for port alone.
func EncodeConfig(port uint16) [ConfigSize]byte { return EncodePorts(port, 1) }

// EncodePorts returns the config map's value for the n ports from port on.
func EncodePorts(port, n uint16) [ConfigSize]byte {
	var b [ConfigSize]byte
	binary.BigEndian.PutUint16(b[:2], port)
	binary.BigEndian.PutUint16(b[2:], n)
	return b
}
