package native

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Test addresses from the IPv6 benchmarking range 2001:2::/48 (RFC 5180).
var (
	a6A = ip6Addr{0x20, 0x01, 0x00, 0x02, 15: 1}
	a6B = ip6Addr{0x20, 0x01, 0x00, 0x02, 15: 2}
)

// ext6 is one extension header for pkt6: its type and the bytes after
// its Next Header byte (and, for options and routing headers, after the
// length byte, which pkt6 fills).
type ext6 struct {
	typ  uint8
	body []byte
}

// optsHdr is the body of an options header holding opts, padded with PadN
// (or Pad1) to a multiple of 8 bytes.
func optsHdr(typ uint8, opts ...byte) ext6 {
	b := append([]byte(nil), opts...)
	if pad := (8 - (2+len(b))%8) % 8; pad == 1 {
		b = append(b, 0)
	} else if pad > 1 {
		b = append(b, 1, byte(pad-2))
		b = append(b, make([]byte, pad-2)...)
	}
	return ext6{typ, b}
}

// fragHdr is the body of a Fragment header.
func fragHdr(off int, more bool, id uint32) ext6 {
	b := make([]byte, 7)
	fo := uint16(off) &^ 7
	if more {
		fo |= 1
	}
	binary.BigEndian.PutUint16(b[1:], fo)
	binary.BigEndian.PutUint32(b[3:], id)
	return ext6{extFragment, b}
}

// pkt6 builds an IPv6 packet from src to dst through chain, ending in
// upper-layer data upper of protocol proto.
func pkt6(src, dst ip6Addr, hops uint8, chain []ext6, proto uint8, upper []byte) []byte {
	p := make([]byte, ip6Len)
	next := proto
	if len(chain) > 0 {
		next = chain[0].typ
	}
	putIPv6(p, next, hops, src, dst, 0)
	for i, e := range chain {
		n := proto
		if i+1 < len(chain) {
			n = chain[i+1].typ
		}
		if e.typ == extFragment {
			p = append(p, n)
			p = append(p, e.body...)
			continue
		}
		p = append(p, n, byte((2+len(e.body))/8-1))
		p = append(p, e.body...)
	}
	p = append(p, upper...)
	binary.BigEndian.PutUint16(p[4:], uint16(len(p)-ip6Len))
	return p
}

// tcp6 is a TCP header (no options) with data, its checksum over the
// IPv6 pseudo-header filled.
func tcp6(src, dst ip6Addr, sport, dport uint16, data []byte) []byte {
	b := make([]byte, tcpLen+len(data))
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	b[12], b[13] = 5<<4, flagACK
	binary.BigEndian.PutUint16(b[14:], 65535)
	copy(b[tcpLen:], data)
	binary.BigEndian.PutUint16(b[16:], checksum6(src, dst, protoTCP, b))
	return b
}

// TestIPv6FixedHeader: the fixed header's checks (RFC 8200 §3): version
// 6, a payload length within the frame (Ethernet padding after it is
// ignored), a source that is not multicast (RFC 4291 §2.7).
func TestIPv6FixedHeader(t *testing.T) {
	good := pkt6(a6B, a6A, 64, nil, protoTCP, tcp6(a6B, a6A, 1, 2, []byte("hi")))
	var h ip6Hdr
	if e := parseIPv6(good, &h); e != ip6OK || h.proto != protoTCP || h.off != ip6Len || h.end != len(good) ||
		h.src != a6B || h.dst != a6A || h.hops != 64 || h.nExt != 0 {
		t.Fatalf("valid packet: %v %+v", e, h)
	}
	padded := append(append([]byte(nil), good...), 0, 0, 0, 0)
	if e := parseIPv6(padded, &h); e != ip6OK || h.end != len(good) {
		t.Errorf("padded frame: %v, end %d want %d", e, h.end, len(good))
	}
	mut := func(f func(p []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, c := range []struct {
		name string
		p    []byte
		want ip6Error
	}{
		{"short", good[:39], ip6Short},
		{"version 4", mut(func(p []byte) []byte { p[0] = 0x45; return p }), ip6Version},
		{"payload length past the frame", mut(func(p []byte) []byte { p[5]++; return p }), ip6Length},
		{"multicast source", mut(func(p []byte) []byte { p[8] = 0xff; return p }), ip6SrcMulticast},
	} {
		if e := parseIPv6(c.p, &h); e != c.want {
			t.Errorf("%s: %v, want %v", c.name, e, c.want)
		}
	}
}

// TestIPv6ExtChain walks extension-header chains (RFC 8200 §4): the
// recognised headers in the order §4.1 allows, each rule that drops a
// packet with its reason and, for the Parameter Problem, its pointer.
func TestIPv6ExtChain(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, nil)
	hbh := optsHdr(extHopByHop)
	dst := optsHdr(extDestOpts)
	rt0 := ext6{extRouting, []byte{0, 0, 0, 0, 0, 0}} // type 0, segments left 0
	rt1 := ext6{extRouting, []byte{4, 1, 0, 0, 0, 0}} // type 4, segments left 1
	many := make([]ext6, maxExt6Headers+1)
	for i := range many {
		many[i] = dst
	}
	long := ext6{extDestOpts, append([]byte{1, 252}, make([]byte, 252)...)} // PadN of 256 bytes: too much padding…
	big := make([]byte, 0, 600)                                             // …so the too-long case uses real options
	for len(big) < 590 {
		big = append(big, 0x1e, 4, 0, 0, 0, 0) // a skippable (action 00) option type
	}
	for _, c := range []struct {
		name  string
		chain []ext6
		proto uint8
		want  ip6Error
		bad   int // the pointer, when want has one
		check func(t *testing.T, h *ip6Hdr)
	}{
		{name: "§4.1 hop-by-hop, destination options, routing (0 left), TCP", chain: []ext6{hbh, dst, rt0}, proto: protoTCP,
			check: func(t *testing.T, h *ip6Hdr) {
				if h.nExt != 3 || h.off != ip6Len+24 || h.proto != protoTCP {
					t.Errorf("walked %d headers to %d proto %d", h.nExt, h.off, h.proto)
				}
			}},
		{name: "§4.7 no next header", chain: []ext6{dst}, proto: extNoNext,
			check: func(t *testing.T, h *ip6Hdr) {
				if h.proto != extNoNext {
					t.Errorf("proto %d", h.proto)
				}
			}},
		{name: "§4.3 hop-by-hop not first", chain: []ext6{dst, hbh}, proto: protoTCP, want: ip6HopByHopNotFirst, bad: ip6Len},
		{name: "§4 unrecognised next header (ESP)", chain: []ext6{dst}, proto: 50, want: ip6ExtUnknown, bad: ip6Len},
		{name: "§4.4 routing header with segments left", chain: []ext6{rt1}, proto: protoTCP, want: ip6RoutingSegments, bad: ip6Len + 2},
		{name: "§4.2 option type 00: skipped", chain: []ext6{optsHdr(extDestOpts, 0x1e, 2, 0, 0)}, proto: protoTCP},
		{name: "§4.2 option type 01: silently discarded", chain: []ext6{optsHdr(extDestOpts, 0x5e, 0)}, proto: protoTCP, want: ip6OptionDiscard, bad: ip6Len + 2},
		{name: "§4.2 option type 10: discarded, answered", chain: []ext6{optsHdr(extDestOpts, 0x9e, 0)}, proto: protoTCP, want: ip6OptionUnknown, bad: ip6Len + 2},
		{name: "§4.2 option type 11: discarded, answered unless multicast", chain: []ext6{optsHdr(extDestOpts, 0xde, 0)}, proto: protoTCP, want: ip6OptionUnknown, bad: ip6Len + 2},
		{name: "RFC 2675 jumbo payload option: not supported", chain: []ext6{optsHdr(extHopByHop, 0xc2, 4, 0, 1, 0, 0)}, proto: protoTCP, want: ip6OptionUnknown, bad: ip6Len + 2},
		{name: "RFC 2711 router alert in hop-by-hop", chain: []ext6{optsHdr(extHopByHop, 5, 2, 0, 0)}, proto: protoTCP},
		{name: "option past its header", chain: []ext6{{extDestOpts, []byte{0x1e, 9, 0, 0, 0, 0}}}, proto: protoTCP, want: ip6OptionMalformed, bad: ip6Len + 2},
		{name: "RFC 4942 §2.1.9.5 padding beyond 7 bytes", chain: []ext6{long}, proto: protoTCP, want: ip6OptionMalformed},
		{name: "RFC 8504 §5.3 more headers than the limit", chain: many, proto: protoTCP, want: ip6ExtTooMany},
		{name: "RFC 8504 §5.3 more bytes than the limit", chain: []ext6{optsHdr(extDestOpts, big...)}, proto: protoTCP, want: ip6ExtTooLong},
		{name: "RFC 6946 §4 atomic fragment: processed whole", chain: []ext6{dst, fragHdr(0, false, 7)}, proto: protoTCP,
			check: func(t *testing.T, h *ip6Hdr) {
				if !h.atomic || h.frag || h.proto != protoTCP || h.off != ip6Len+16 {
					t.Errorf("atomic fragment: %+v", h)
				}
			}},
		{name: "§4.5 fragment: walk stops at it", chain: []ext6{hbh, fragHdr(1448, true, 0xabcdef01)}, proto: protoTCP,
			check: func(t *testing.T, h *ip6Hdr) {
				if !h.frag || h.fragOff != 1448 || !h.fragMore || h.fragID != 0xabcdef01 || h.fragAt != ip6Len+8 ||
					h.fragPrev != ip6Len || h.off != ip6Len+16 || h.proto != protoTCP {
					t.Errorf("fragment: %+v", h)
				}
			}},
		{name: "two fragment headers", chain: []ext6{fragHdr(0, false, 1), fragHdr(8, true, 1)}, proto: protoTCP, want: ip6FragmentTwice, bad: ip6Len},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pkt6(a6B, a6A, 64, c.chain, c.proto, up)
			var h ip6Hdr
			e := parseIPv6(p, &h)
			if e != c.want {
				t.Fatalf("%v, want %v", e, c.want)
			}
			if _, ok := e.paramProblem(); ok && h.bad != c.bad {
				t.Errorf("pointer %d, want %d", h.bad, c.bad)
			}
			if e == ip6OK && (h.off > h.end || h.end != len(p)) {
				t.Errorf("data [%d:%d] of %d", h.off, h.end, len(p))
			}
			if c.check != nil {
				c.check(t, &h)
			}
		})
	}
	// A header cut by the payload length: truncated, not read past.
	p := pkt6(a6B, a6A, 64, []ext6{dst}, protoTCP, nil)
	binary.BigEndian.PutUint16(p[4:], 4)
	var h ip6Hdr
	if e := parseIPv6(p[:ip6Len+4], &h); e != ip6ExtTruncated {
		t.Errorf("truncated header: %v", e)
	}
}

// TestIPv6ParamProblemCodes: the Parameter Problem codes RFC 8200 asks
// for (§4: code 1 for an unrecognised Next Header, §4.2: code 2 for an
// option, §4.4: code 0 for a routing header); the other drops are silent.
func TestIPv6ParamProblemCodes(t *testing.T) {
	want := map[ip6Error]uint8{ip6ExtUnknown: 1, ip6HopByHopNotFirst: 1, ip6OptionUnknown: 2, ip6RoutingSegments: 0}
	for e := ip6OK; e < nIP6Errors; e++ {
		code, ok := e.paramProblem()
		w, wok := want[e]
		if ok != wok || code != w {
			t.Errorf("%v: code %d %v, want %d %v", e, code, ok, w, wok)
		}
		if e.String() == "" || e.String() == "ip6_unknown_error" {
			t.Errorf("reason %d has no counter name", e)
		}
	}
}

// TestIPv6ChecksumMatchesGopacket: the upper-layer checksum over the IPv6
// pseudo-header (RFC 8200 §8.1) agrees with gopacket's for TCP, UDP and
// ICMPv6, odd lengths included; a UDP checksum that sums to 0 is sent as
// 0xffff and a zero one is refused.
func TestIPv6ChecksumMatchesGopacket(t *testing.T) {
	ip := &layers.IPv6{Version: 6, HopLimit: 64, SrcIP: net.IP(a6B[:]), DstIP: net.IP(a6A[:])}
	for _, n := range []int{0, 1, 7, 100, 1401} {
		data := bytes.Repeat([]byte{0xa5, 0x3c, 0x01}, n)[:n]
		for _, c := range []struct {
			proto uint8
			l     gopacket.SerializableLayer
			nl    gopacket.NetworkLayer
		}{
			{protoTCP, &layers.TCP{SrcPort: 1000, DstPort: 2000, Seq: 7, Ack: 9, DataOffset: 5, ACK: true, Window: 512}, nil},
			{protoUDP, &layers.UDP{SrcPort: 1000, DstPort: 2000}, nil},
			{protoICMPv6, &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(icmp6EchoRequest, 0)}, nil},
		} {
			ip.NextHeader = layers.IPProtocol(c.proto)
			switch l := c.l.(type) {
			case *layers.TCP:
				l.SetNetworkLayerForChecksum(ip)
			case *layers.UDP:
				l.SetNetworkLayerForChecksum(ip)
			case *layers.ICMPv6:
				l.SetNetworkLayerForChecksum(ip)
			}
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
				ip, c.l, gopacket.Payload(data)); err != nil {
				t.Fatal(err)
			}
			u := append([]byte(nil), buf.Bytes()[ip6Len:]...)
			off := map[uint8]int{protoTCP: 16, protoUDP: 6, protoICMPv6: 2}[c.proto]
			gp := binary.BigEndian.Uint16(u[off:])
			if !verify6(a6B, a6A, c.proto, u) {
				t.Errorf("proto %d, %d bytes: gopacket's checksum %#04x does not verify", c.proto, n, gp)
			}
			u[off], u[off+1] = 0, 0
			if got := checksum6(a6B, a6A, c.proto, u); got != gp {
				t.Errorf("proto %d, %d bytes: checksum %#04x, gopacket %#04x", c.proto, n, got, gp)
			}
		}
	}
	// UDP: a computed 0 goes out as 0xffff, which verifies; 0 is refused.
	u := make([]byte, 10)
	binary.BigEndian.PutUint16(u[8:], fold(csum(pseudo6(a6B, a6A, protoUDP, len(u)), u)))
	if got := checksum6(a6B, a6A, protoUDP, u); got != 0xffff {
		t.Fatalf("UDP checksum summing to 0: %#04x, want 0xffff", got)
	}
	binary.BigEndian.PutUint16(u[6:], 0xffff)
	if !verify6(a6B, a6A, protoUDP, u) {
		t.Error("0xffff does not verify")
	}
	u[6], u[7] = 0, 0
	if verify6(a6B, a6A, protoUDP, u) {
		t.Error("a zero UDP checksum verifies (RFC 8200 §8.1: discard it)")
	}
}

// TestIPv6TCPMSS: the MSS for a link is its MTU less 60 bytes of headers
// (RFC 8200 §8.3), and never below what a 1280-byte path carries (§5).
func TestIPv6TCPMSS(t *testing.T) {
	for mtu, want := range map[int]uint16{1500: 1440, 9000: 8940, 1280: 1220, 576: 1220} {
		if got := tcpMSS6(mtu); got != want {
			t.Errorf("MTU %d: MSS %d, want %d", mtu, got, want)
		}
	}
}

// TestIPv6ParseAllocs: the walk allocates nothing.
func TestIPv6ParseAllocs(t *testing.T) {
	p := pkt6(a6B, a6A, 64, []ext6{optsHdr(extHopByHop), optsHdr(extDestOpts)}, protoTCP, tcp6(a6B, a6A, 1, 2, nil))
	var h ip6Hdr
	if n := testing.AllocsPerRun(100, func() { parseIPv6(p, &h) }); n != 0 {
		t.Errorf("%v allocations a parse", n)
	}
}
