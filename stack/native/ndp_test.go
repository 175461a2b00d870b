package native

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	mac6A = [6]byte{0x02, 0, 0, 0, 0, 0x0a}
	mac6B = [6]byte{0x02, 0, 0, 0, 0, 0x0b}
)

// TestNDPAddresses: the solicited-node multicast address (RFC 4291
// §2.7.1), its MAC (RFC 2464 §7) and the EUI-64 link-local address (RFC
// 4291 Appendix A) of known values.
func TestNDPAddresses(t *testing.T) {
	a := ip6Addr(net.ParseIP("2001:2::1234:5678:9abc"))
	sn := solicitedNode(a)
	if want := ip6Addr(net.ParseIP("ff02::1:ff78:9abc")); sn != want {
		t.Errorf("solicited-node %v, want %v", net.IP(sn[:]), net.IP(want[:]))
	}
	if !isSolicitedNode(sn) || isSolicitedNode(a) || isSolicitedNode(allNodes6) {
		t.Error("isSolicitedNode")
	}
	if m := multicastMAC6(sn); m != [6]byte{0x33, 0x33, 0xff, 0x78, 0x9a, 0xbc} {
		t.Errorf("MAC %x", m)
	}
	ll := linkLocal6([6]byte{0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e})
	if want := ip6Addr(net.ParseIP("fe80::21b:21ff:fe3c:4d5e")); ll != want || !isLinkLocal6(ll) {
		t.Errorf("link-local %v, want %v", net.IP(ll[:]), net.IP(want[:]))
	}
}

// TestNDPBuildParse: a solicitation and an advertisement we build are
// read back by parseNDP and by gopacket (RFC 4861 §4.3, §4.4, §4.6.1);
// a solicitation from the unspecified address carries no source
// link-layer address (§4.3).
func TestNDPBuildParse(t *testing.T) {
	b := make([]byte, 200)
	var h ip6Hdr
	var nd ndMsg
	n := buildNS(b, a6B, solicitedNode(a6A), a6A, mac6B)
	if parseIPv6(b[:n], &h) != ip6OK || h.hops != 255 {
		t.Fatalf("NS header: %+v", h)
	}
	if e := parseNDP(&h, h.payload(b[:n]), &nd); e != ndpOK || nd.typ != icmp6NeighSol || nd.target != a6A || !nd.hasLL || nd.ll != mac6B {
		t.Fatalf("NS: %v %+v", e, nd)
	}
	pkt := gopacket.NewPacket(b[:n], layers.LayerTypeIPv6, gopacket.Default)
	ns, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if ns == nil || !ns.TargetAddress.Equal(a6A[:]) || len(ns.Options) != 1 ||
		ns.Options[0].Type != layers.ICMPv6OptSourceAddress || string(ns.Options[0].Data) != string(mac6B[:]) {
		t.Fatalf("gopacket NS: %v", pkt)
	}

	n = buildNS(b, ip6Unspecified, solicitedNode(a6A), a6A, mac6B)
	if n != ip6Len+ndLen || parseIPv6(b[:n], &h) != ip6OK {
		t.Fatalf("DAD NS length %d", n)
	}
	if e := parseNDP(&h, h.payload(b[:n]), &nd); e != ndpOK || nd.hasLL {
		t.Fatalf("DAD NS: %v %+v", e, nd)
	}

	n = buildNA(b, a6A, a6B, a6A, mac6A, naFlagSolic|naFlagOver)
	if parseIPv6(b[:n], &h) != ip6OK {
		t.Fatal("NA header")
	}
	if e := parseNDP(&h, h.payload(b[:n]), &nd); e != ndpOK || nd.typ != icmp6NeighAdv || nd.target != a6A ||
		!nd.solicited || !nd.override || nd.router || !nd.hasLL || nd.ll != mac6A {
		t.Fatalf("NA: %v %+v", e, nd)
	}
	pkt = gopacket.NewPacket(b[:n], layers.LayerTypeIPv6, gopacket.Default)
	na, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if na == nil || !na.Solicited() || !na.Override() || na.Router() || !na.TargetAddress.Equal(a6A[:]) ||
		len(na.Options) != 1 || na.Options[0].Type != layers.ICMPv6OptTargetAddress || string(na.Options[0].Data) != string(mac6A[:]) {
		t.Fatalf("gopacket NA: %v", pkt)
	}
}

// TestNDPValidity: the checks of RFC 4861 §7.1.1 (solicitations) and
// §7.1.2 (advertisements), each on a message otherwise valid.
func TestNDPValidity(t *testing.T) {
	type msg struct {
		src, dst ip6Addr
		hops     uint8
		m        []byte
	}
	ns := func(src, dst, target ip6Addr, opts ...byte) msg {
		m := append([]byte{icmp6NeighSol, 0, 0, 0, 0, 0, 0, 0}, target[:]...)
		m = append(m, opts...)
		putICMPv6Checksum(src, dst, m)
		return msg{src, dst, 255, m}
	}
	na := func(dst ip6Addr, flags uint8, opts ...byte) msg {
		m := append([]byte{icmp6NeighAdv, 0, 0, 0, flags, 0, 0, 0}, a6B[:]...)
		m = append(m, opts...)
		putICMPv6Checksum(a6B, dst, m)
		return msg{a6B, dst, 255, m}
	}
	sll := append([]byte{ndOptSrcLL, 1}, mac6B[:]...)
	tll := append([]byte{ndOptTgtLL, 1}, mac6B[:]...)
	sn := solicitedNode(a6A)
	set := func(m msg, f func(*msg)) msg { m.m = append([]byte(nil), m.m...); f(&m); return m }
	for _, c := range []struct {
		name string
		m    msg
		want ndpError
	}{
		{"NS valid", ns(a6B, sn, a6A, sll...), ndpOK},
		{"NS unknown option skipped (§4.6)", ns(a6B, sn, a6A, append([]byte{99, 1, 0, 0, 0, 0, 0, 0}, sll...)...), ndpOK},
		{"§7.1.1 NS hop limit not 255", set(ns(a6B, sn, a6A, sll...), func(m *msg) { m.hops = 254 }), ndpHopLimit},
		{"§7.1.1 NS bad checksum", set(ns(a6B, sn, a6A, sll...), func(m *msg) { m.m[2] ^= 1 }), ndpChecksum},
		{"§7.1.1 NS code not 0", set(ns(a6B, sn, a6A), func(m *msg) { m.m[1] = 1; putICMPv6Checksum(m.src, m.dst, m.m) }), ndpCode},
		{"§7.1.1 NS shorter than 24 bytes", set(ns(a6B, sn, a6A), func(m *msg) { m.m = m.m[:20]; putICMPv6Checksum(m.src, m.dst, m.m) }), ndpShort},
		{"§7.1.1 NS multicast target", ns(a6B, sn, allNodes6), ndpTargetMulticast},
		{"§7.1.1 NS option of length 0", ns(a6B, sn, a6A, ndOptSrcLL, 0, 0, 0, 0, 0, 0, 0), ndpOptionLength},
		{"§7.1.1 NS option past the message", ns(a6B, sn, a6A, ndOptSrcLL, 2, 0, 0, 0, 0, 0, 0), ndpOptionLength},
		{"RFC 2464 §6 NS link-layer option not 8 bytes", ns(a6B, sn, a6A, append([]byte{ndOptSrcLL, 2}, make([]byte, 14)...)...), ndpBadLLOption},
		{"§7.1.1 DAD NS not to a solicited-node address", ns(ip6Unspecified, allNodes6, a6A), ndpDADDest},
		{"§7.1.1 DAD NS with a source link-layer address", ns(ip6Unspecified, sn, a6A, sll...), ndpDADSrcLL},
		{"DAD NS valid", ns(ip6Unspecified, sn, a6A), ndpOK},
		{"NA valid", na(a6A, naFlagSolic|naFlagOver, tll...), ndpOK},
		{"NA unsolicited to all-nodes", na(allNodes6, naFlagOver, tll...), ndpOK},
		{"§7.1.2 NA hop limit not 255", set(na(a6A, naFlagSolic, tll...), func(m *msg) { m.hops = 64 }), ndpHopLimit},
		{"§7.1.2 NA solicited to a multicast address", na(allNodes6, naFlagSolic, tll...), ndpSolicitedToMcast},
		{"§7.1.2 NA option of length 0", na(a6A, naFlagSolic, ndOptTgtLL, 0, 0, 0, 0, 0, 0, 0), ndpOptionLength},
		{"not NDP", msg{a6B, a6A, 255, icmp6Msg(a6B, a6A, icmp6EchoRequest, 0, make([]byte, 20))}, ndpNotND},
	} {
		h := ip6Hdr{src: c.m.src, dst: c.m.dst, hops: c.m.hops}
		var nd ndMsg
		if e := parseNDP(&h, c.m.m, &nd); e != c.want {
			t.Errorf("%s: %v, want %v", c.name, e, c.want)
		}
	}
}

// TestNDPAnswerNS: a solicitation for our address is answered to its
// source with S and O set, one for duplicate address detection to
// all-nodes with S clear (RFC 4861 §7.2.4); one for another address is
// not answered. A probe without a link-layer option goes back to the
// Ethernet source.
func TestNDPAnswerNS(t *testing.T) {
	b := make([]byte, 200)
	out := make([]byte, 200)
	for _, c := range []struct {
		name    string
		src     ip6Addr
		dst     ip6Addr
		target  ip6Addr
		wantDst ip6Addr
		wantMAC [6]byte
		flags   uint8
	}{
		{"resolution", a6B, solicitedNode(a6A), a6A, a6B, mac6B, naFlagSolic | naFlagOver},
		{"duplicate address detection", ip6Unspecified, solicitedNode(a6A), a6A, allNodes6, multicastMAC6(allNodes6), naFlagOver},
		{"another target", a6B, solicitedNode(a6B), a6B, ip6Unspecified, [6]byte{}, 0},
	} {
		n := buildNS(b, c.src, c.dst, c.target, mac6B)
		var h ip6Hdr
		var nd ndMsg
		if parseIPv6(b[:n], &h) != ip6OK || parseNDP(&h, h.payload(b[:n]), &nd) != ndpOK {
			t.Fatalf("%s: NS does not parse", c.name)
		}
		m, mac := answerNS(out, a6A, mac6A, &h, &nd, mac6B)
		if c.wantDst == ip6Unspecified {
			if m != 0 {
				t.Errorf("%s: answered", c.name)
			}
			continue
		}
		var ah ip6Hdr
		var an ndMsg
		if parseIPv6(out[:m], &ah) != ip6OK || parseNDP(&ah, ah.payload(out[:m]), &an) != ndpOK {
			t.Fatalf("%s: NA does not parse", c.name)
		}
		if ah.dst != c.wantDst || ah.src != a6A || mac != c.wantMAC || an.target != a6A || an.ll != mac6A ||
			an.solicited != (c.flags&naFlagSolic != 0) || !an.override || an.router {
			t.Errorf("%s: NA to %v (%x) %+v", c.name, net.IP(ah.dst[:]), mac, an)
		}
	}
	// A unicast probe without a source link-layer address.
	h := ip6Hdr{src: a6B, dst: a6A, hops: 255}
	nd := ndMsg{typ: icmp6NeighSol, target: a6A}
	if _, mac := answerNS(out, a6A, mac6A, &h, &nd, [6]byte{2, 9, 9, 9, 9, 9}); mac != [6]byte{2, 9, 9, 9, 9, 9} {
		t.Errorf("probe answered to %x", mac)
	}
}
