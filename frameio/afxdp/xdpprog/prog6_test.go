package xdpprog

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// IPv6 test addresses from the benchmarking range 2001:2::/48 (RFC 5180).
var (
	hostAddr6  = netip.MustParseAddr("2001:2::1")
	peerAddr6  = netip.MustParseAddr("2001:2::2")
	otherAddr6 = netip.MustParseAddr("2001:2::9")
	allNodes   = netip.MustParseAddr("ff02::1")
)

// solicitedNode is a's solicited-node multicast address (RFC 4291 §2.7.1).
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 1, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// classify6 is the reference model with IPv6 steering on or off and the
// IPv6 host address host6 (zero: none); IPv4 frames and IPv6 ones with
// steering off are classifyHost's.
func classify6(v Variant, port, n uint16, host [4]byte, on bool, host6 [16]byte, frame []byte) Counter {
	if port == 0 || len(frame) < offIP || !on || frame[offEtherType] != 0x86 || frame[offEtherType+1] != 0xdd {
		return classifyHost(v, port, n, host, frame)
	}
	if len(frame) < offL46 {
		return PassShort
	}
	next := frame[offIP6Next]
	if v == TCP && host6 != [16]byte{} {
		if [16]byte(frame[offIP6Dst:offL46]) == host6 {
			if next == 6 && len(frame) < offTCPFlags6+1 {
				return PassShort
			}
			return PassNoSocket
		}
		if next == 58 && len(frame) >= lenNDFrame && frame[offICMP6Type] == icmp6NeighSol &&
			[16]byte(frame[offNDTarget:lenNDFrame]) == host6 {
			return PassNoSocket
		}
		return PassOtherHost
	}
	if v != UDP && next == 58 {
		if len(frame) < offICMP6Type+1 {
			return PassShort
		}
		t := frame[offICMP6Type]
		if t != icmp6NeighSol && t != icmp6NeighAdv {
			return PassOtherProto
		}
		if host6 == [16]byte{} || [16]byte(frame[offIP6Dst:offL46]) == host6 {
			return PassNoSocket // UDPARP: sent to the host address
		}
		if len(frame) >= lenNDFrame && t == icmp6NeighSol && [16]byte(frame[offNDTarget:lenNDFrame]) == host6 {
			return PassNoSocket
		}
		return PassOtherHost
	}
	proto, need := byte(17), lenUDPFrame6
	if v == TCP {
		proto, need = 6, lenTCPPorts6
	}
	switch next {
	case proto:
	case 44:
		return PassFragment
	case 0, 43, 60:
		return PassIPv6Ext
	default:
		return PassOtherProto
	}
	if len(frame) < need {
		return PassShort
	}
	dst := binary.BigEndian.Uint16(frame[offDstPort6:])
	src := binary.BigEndian.Uint16(frame[offSrcPort6:])
	if dst == port || v == TCP && src == port || n > 1 && int(dst) >= int(port) && int(dst) < int(port)+int(n) {
		return PassNoSocket
	}
	return PassOtherPort
}

func ethIPv6(dst netip.Addr) *layers.Ethernet {
	e := ethIPv4()
	e.EthernetType = layers.EthernetTypeIPv6
	if dst.IsMulticast() {
		b := dst.As16()
		e.DstMAC = []byte{0x33, 0x33, b[12], b[13], b[14], b[15]}
	}
	return e
}

func ip6(next layers.IPProtocol, dst netip.Addr) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: peerAddr6.AsSlice(), DstIP: dst.AsSlice()}
}

func udp6Frame(t testing.TB, dst netip.Addr, sport, dport uint16) []byte {
	ip := ip6(layers.IPProtocolUDP, dst)
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	_ = udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ethIPv6(dst), ip, udp, gopacket.Payload("hello, dgramio"))
}

func tcp6Frame(t testing.TB, dst netip.Addr, sport, dport uint16, syn, ack bool) []byte {
	ip := ip6(layers.IPProtocolTCP, dst)
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: syn, ACK: ack, Window: 1024}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ethIPv6(dst), ip, tcp)
}

// withExt6 puts an extension header of type typ (8 bytes; a Fragment
// header for 44) between the fixed header and the upper-layer header of
// an IPv6 frame built without one.
func withExt6(frame []byte, typ byte) []byte {
	f := append([]byte(nil), frame[:offL46]...)
	ext := []byte{frame[offIP6Next], 0, 1, 4, 0, 0, 0, 0} // PadN
	if typ == 44 {
		ext = []byte{frame[offIP6Next], 0, 0, 9, 0, 0, 0, 1} // offset 1, M
	}
	f[offIP6Next] = typ
	f = append(append(f, ext...), frame[offL46:]...)
	binary.BigEndian.PutUint16(f[offIP+4:], uint16(len(f)-offL46))
	return f
}

func icmp6Frame(t testing.TB, dst netip.Addr, typ uint8, ls ...gopacket.SerializableLayer) []byte {
	ip := ip6(layers.IPProtocolICMPv6, dst)
	ip.HopLimit = 255
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	_ = icmp.SetNetworkLayerForChecksum(ip)
	return serialize(t, append([]gopacket.SerializableLayer{ethIPv6(dst), ip, icmp}, ls...)...)
}

// nsFrame is a neighbour solicitation for target sent to dst (RFC 4861
// §4.3), with a source link-layer address option.
func nsFrame(t testing.TB, dst, target netip.Addr) []byte {
	return icmp6Frame(t, dst, icmp6NeighSol, &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: []byte{2, 0, 0, 0, 0, 1}}}})
}

// naFrame is a neighbour advertisement for target sent to dst (§4.4).
func naFrame(t testing.TB, dst, target netip.Addr) []byte {
	return icmp6Frame(t, dst, icmp6NeighAdv, &layers.ICMPv6NeighborAdvertisement{TargetAddress: target.AsSlice(), Flags: 0x60,
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: []byte{2, 0, 0, 0, 0, 1}}}})
}

func echo6Frame(t testing.TB, dst netip.Addr) []byte {
	return icmp6Frame(t, dst, layers.ICMPv6TypeEchoRequest, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1}, gopacket.Payload("ping"))
}

// TestProgramIPv6Verdicts: with IPv6 steering on, each variant takes the
// IPv6 frames of its protocol to our port (the address unchecked, as for
// IPv4), leaves fragments, extension headers and other protocols to the
// kernel, and variants TCP and UDPARP take every neighbour solicitation
// and advertisement (RFC 4861 §4.3, §4.4) as they take every ARP frame. With it off, every IPv6 frame
// is PassNotIPv4, as before.
func TestProgramIPv6Verdicts(t *testing.T) {
	u := udp6Frame(t, hostAddr6, 40000, ourPort)
	tc := tcp6Frame(t, hostAddr6, 40000, ourPort, true, false)
	cases := []struct {
		name  string
		frame []byte
		want  map[Variant]Counter
	}{
		{"udp to our port", u, map[Variant]Counter{UDP: PassNoSocket, UDPARP: PassNoSocket, TCP: PassOtherProto}},
		{"udp to our port, another address", udp6Frame(t, otherAddr6, 40000, ourPort), map[Variant]Counter{UDP: PassNoSocket}},
		{"udp from our port", udp6Frame(t, hostAddr6, ourPort, 40000), map[Variant]Counter{UDP: PassOtherPort, UDPARP: PassOtherPort}},
		{"udp other port", udp6Frame(t, hostAddr6, 40000, 5001), map[Variant]Counter{UDP: PassOtherPort}},
		{"udp header cut", u[:lenUDPFrame6-1], map[Variant]Counter{UDP: PassShort}},
		{"fixed header cut", u[:offL46-1], map[Variant]Counter{UDP: PassShort, TCP: PassShort}},
		{"udp behind destination options", withExt6(u, 60), map[Variant]Counter{UDP: PassIPv6Ext, TCP: PassIPv6Ext}},
		{"udp behind hop-by-hop", withExt6(u, 0), map[Variant]Counter{UDP: PassIPv6Ext}},
		{"udp fragment", withExt6(u, 44), map[Variant]Counter{UDP: PassFragment, TCP: PassFragment}},
		{"tcp to our port", tc, map[Variant]Counter{UDP: PassOtherProto, TCP: PassNoSocket}},
		{"tcp from our port", tcp6Frame(t, hostAddr6, ourPort, 40000, false, true), map[Variant]Counter{TCP: PassNoSocket}},
		{"tcp other ports", tcp6Frame(t, hostAddr6, 40000, 5001, true, false), map[Variant]Counter{TCP: PassOtherPort}},
		{"neighbour solicitation", nsFrame(t, solicitedNode(hostAddr6), hostAddr6), map[Variant]Counter{UDP: PassOtherProto, UDPARP: PassNoSocket, TCP: PassNoSocket}},
		{"neighbour advertisement", naFrame(t, hostAddr6, peerAddr6), map[Variant]Counter{UDP: PassOtherProto, UDPARP: PassNoSocket, TCP: PassNoSocket}},
		{"echo request", echo6Frame(t, hostAddr6), map[Variant]Counter{UDP: PassOtherProto, UDPARP: PassOtherProto, TCP: PassOtherProto}},
		{"icmpv6 without a type", echo6Frame(t, hostAddr6)[:offL46], map[Variant]Counter{UDPARP: PassShort, TCP: PassShort}},
	}
	for _, on := range []bool{true, false} {
		objs := map[Variant]*Objects{}
		for _, v := range []Variant{UDP, UDPARP, TCP} {
			objs[v] = load(t, v, ourPort)
			if err := objs[v].SetIPv6(on); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range cases {
			for v, want := range c.want {
				if !on && len(c.frame) >= offIP {
					want = PassNotIPv4
				}
				if got := classify6(v, ourPort, 1, [4]byte{}, on, [16]byte{}, c.frame); got != want {
					t.Fatalf("%s/%v (IPv6 %v): reference model says %s, table says %s", c.name, v, on, got, want)
				}
				if ret, got := run(t, objs[v], c.frame); got != want || ret != xdpPass {
					t.Errorf("%s/%v (IPv6 %v): counter %s action %d, want %s and XDP_PASS", c.name, v, on, got, ret, want)
				}
			}
		}
	}
}

// TestProgramHost6: with an IPv6 host address, the TCP variant hands the
// stack every IPv6 frame to it (any protocol, port or extension header)
// and the neighbour solicitations for it, sent to its solicited-node
// address (RFC 4861 §4.3, §7.2.2); the rest of IPv6, our port to another
// address included, is the kernel's. IPv4 keeps its own rules.
func TestProgramHost6(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		want  Counter
	}{
		{"tcp to our port", tcp6Frame(t, hostAddr6, 40000, ourPort, true, false), PassNoSocket},
		{"tcp to a closed port", tcp6Frame(t, hostAddr6, 40000, 22, true, false), PassNoSocket},
		{"udp", udp6Frame(t, hostAddr6, 40000, 53), PassNoSocket},
		{"echo request", echo6Frame(t, hostAddr6), PassNoSocket},
		{"extension header", withExt6(udp6Frame(t, hostAddr6, 1, 2), 60), PassNoSocket},
		{"fragment", withExt6(udp6Frame(t, hostAddr6, 1, 2), 44), PassNoSocket},
		{"solicitation for us, to our solicited-node address", nsFrame(t, solicitedNode(hostAddr6), hostAddr6), PassNoSocket},
		{"solicitation for us, unicast (a probe)", nsFrame(t, hostAddr6, hostAddr6), PassNoSocket},
		{"advertisement to us", naFrame(t, hostAddr6, peerAddr6), PassNoSocket},
		{"solicitation for another address", nsFrame(t, solicitedNode(otherAddr6), otherAddr6), PassOtherHost},
		{"advertisement to all nodes", naFrame(t, allNodes, peerAddr6), PassOtherHost},
		{"tcp to another address, our port", tcp6Frame(t, otherAddr6, 40000, ourPort, true, false), PassOtherHost},
		{"echo request to another address (shorter than a solicitation)", echo6Frame(t, otherAddr6)[:lenNDFrame-1], PassOtherHost},
		{"tcp header cut before the flags", tcp6Frame(t, hostAddr6, 1, 2, false, true)[:offTCPFlags6], PassShort},
		{"ipv4 tcp to our port", tcpFrame(t, 40000, ourPort), PassNoSocket},
		{"ipv4 tcp, other ports", tcpFrame(t, 40000, 5001), PassOtherPort},
		{"arp", arpFrame(t), PassNoSocket},
	}
	o := load(t, TCP, ourPort)
	if err := o.SetHost6(hostAddr6); err != nil {
		t.Fatal(err)
	}
	h6 := hostAddr6.As16()
	for _, c := range cases {
		if got := classify6(TCP, ourPort, 1, [4]byte{}, true, h6, c.frame); got != c.want {
			t.Fatalf("%s: reference model says %s, table says %s", c.name, got, c.want)
		}
		if ret, got := run(t, o, c.frame); got != c.want || ret != xdpPass {
			t.Errorf("%s: counter %s action %d, want %s and XDP_PASS", c.name, got, ret, c.want)
		}
	}
	if err := o.SetHost6(netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, got := run(t, o, tcp6Frame(t, hostAddr6, 40000, 22, true, false)); got != PassOtherPort {
		t.Errorf("without an IPv6 host address, a closed port: %s, want %s", got, PassOtherPort)
	}
	for _, a := range []string{"198.18.0.1", "::ffff:198.18.0.1", "::", "ff02::1"} {
		if err := o.SetHost6(netip.MustParseAddr(a)); err == nil {
			t.Errorf("SetHost6 took %s", a)
		}
	}
	if err := load(t, UDP, ourPort).SetHost6(hostAddr6); err == nil {
		t.Error("the UDP variant took an IPv6 host address")
	}
	// The config keeps every field through the other setters.
	if err := o.SetHost6(hostAddr6); err != nil {
		t.Fatal(err)
	}
	if err := o.SetHost(hostAddr); err != nil {
		t.Fatal(err)
	}
	if err := o.SetPort(ourPort); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.cfg[cfgHost6:cfgHost6+16], h6[:]) || binary.NativeEndian.Uint32(o.cfg[cfgFlags:]) != cfgFlagIPv6 {
		t.Errorf("config after SetHost and SetPort: % x", o.cfg)
	}
	if _, got := run(t, o, nsFrame(t, solicitedNode(hostAddr6), hostAddr6)); got != PassNoSocket {
		t.Errorf("after SetHost and SetPort, a solicitation for us: %s", got)
	}
}

// TestProgramSYNLimit6: SYNs over IPv6 to the IPv6 host address go
// through the same per-CPU bucket as IPv4 ones: a burst, then XDP_DROP.
func TestProgramSYNLimit6(t *testing.T) {
	o := load(t, TCP, ourPort)
	if err := o.SetHost(hostAddr); err != nil {
		t.Fatal(err)
	}
	if err := o.SetHost6(hostAddr6); err != nil {
		t.Fatal(err)
	}
	if err := o.SetSYNLimit(1, 3); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pinToOneCPU(t)
	syn6 := tcp6Frame(t, hostAddr6, 40000, ourPort, true, false)
	for i := range 3 {
		if ret, got := run(t, o, syn6); got != PassNoSocket || ret != xdpPass {
			t.Fatalf("IPv6 SYN %d of the burst: counter %s action %d", i, got, ret)
		}
	}
	if ret, got := run(t, o, syn6); got != DroppedSYN || ret != xdpDrop {
		t.Fatalf("IPv6 SYN past the burst: counter %s action %d, want %s and XDP_DROP", got, ret, DroppedSYN)
	}
	if ret, got := run(t, o, tcpFrameTo(t, hostAddr, 40000, ourPort, true, false)); got != DroppedSYN || ret != xdpDrop {
		t.Errorf("IPv4 SYN after the IPv6 burst: counter %s action %d, want %s (one bucket)", got, ret, DroppedSYN)
	}
	if ret, got := run(t, o, tcp6Frame(t, hostAddr6, 40000, ourPort, false, true)); got != PassNoSocket || ret != xdpPass {
		t.Errorf("an IPv6 ACK behind the flood: counter %s action %d", got, ret)
	}
}

// TestProgramUDPARPHost: with host addresses, variant UDPARP (a datagram
// kind that answers neighbour discovery for its address itself) takes
// only the neighbour frames about them: ARP whose target is the IPv4 one
// or that announces its sender (RFC 5227 §3), the solicitations and
// advertisements sent to the IPv6 one and the solicitations whose target
// it is (RFC 4861 §4.3, §4.4, §7.2.2); ARP, solicitations and
// advertisements about the kernel's addresses on the interface go to the
// kernel. The port decides for UDP, whatever the address, as without.
func TestProgramUDPARPHost(t *testing.T) {
	other := netip.MustParseAddr("198.18.0.9")
	cases := []struct {
		name  string
		frame []byte
		want  Counter
	}{
		{"arp for our address", arpFrame(t), PassNoSocket},
		{"gratuitous arp", arpFrameAddrs(t, []byte{198, 18, 0, 7}, []byte{198, 18, 0, 7}), PassNoSocket},
		{"arp for the kernel's address", arpFrameAddrs(t, []byte{198, 18, 0, 2}, other.AsSlice()), PassOtherHost},
		{"arp cut before the target address", arpFrame(t)[:offARPEnd-1], PassShort},
		{"solicitation for us, to our solicited-node address", nsFrame(t, solicitedNode(hostAddr6), hostAddr6), PassNoSocket},
		{"solicitation for us, unicast (a probe)", nsFrame(t, hostAddr6, hostAddr6), PassNoSocket},
		{"advertisement to us (the answer to our solicitation)", naFrame(t, hostAddr6, peerAddr6), PassNoSocket},
		{"solicitation for the kernel's address", nsFrame(t, solicitedNode(otherAddr6), otherAddr6), PassOtherHost},
		{"advertisement to the kernel's address", naFrame(t, otherAddr6, peerAddr6), PassOtherHost},
		{"advertisement to all nodes", naFrame(t, allNodes, peerAddr6), PassOtherHost},
		{"solicitation cut before its target", nsFrame(t, solicitedNode(otherAddr6), otherAddr6)[:lenNDFrame-1], PassOtherHost},
		{"echo request to us", echo6Frame(t, hostAddr6), PassOtherProto},
		{"udp to our port, another address", udp6Frame(t, otherAddr6, 40000, ourPort), PassNoSocket},
		{"udp to another port", udp6Frame(t, hostAddr6, 40000, 5001), PassOtherPort},
		{"ipv4 udp to our port", udpFrame(t, 40000, ourPort), PassNoSocket},
	}
	o := load(t, UDPARP, ourPort)
	if err := o.SetHost(hostAddr); err != nil {
		t.Fatal(err)
	}
	if err := o.SetHost6(hostAddr6); err != nil {
		t.Fatal(err)
	}
	h, h6 := hostAddr.As4(), hostAddr6.As16()
	for _, c := range cases {
		if got := classify6(UDPARP, ourPort, 1, h, true, h6, c.frame); got != c.want {
			t.Fatalf("%s: reference model says %s, table says %s", c.name, got, c.want)
		}
		if ret, got := run(t, o, c.frame); got != c.want || ret != xdpPass {
			t.Errorf("%s: counter %s action %d, want %s and XDP_PASS", c.name, got, ret, c.want)
		}
	}
	// Without them, every neighbour frame, as before.
	if err := o.SetHost(netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := o.SetHost6(netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]byte{arpFrameAddrs(t, []byte{198, 18, 0, 2}, other.AsSlice()), nsFrame(t, solicitedNode(otherAddr6), otherAddr6), naFrame(t, allNodes, peerAddr6)} {
		if _, got := run(t, o, f); got != PassNoSocket {
			t.Errorf("without host addresses, a neighbour frame about another address: %s, want %s", got, PassNoSocket)
		}
	}
}
