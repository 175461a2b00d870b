package native

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// icmp6Msg is an ICMPv6 message of type typ with body (after the 4-byte
// type, code, checksum), its checksum filled for src to dst.
func icmp6Msg(src, dst ip6Addr, typ, code uint8, body []byte) []byte {
	m := append([]byte{typ, code, 0, 0}, body...)
	putICMPv6Checksum(src, dst, m)
	return m
}

// TestICMPv6Check: a message shorter than its fixed part or with a wrong
// checksum over the pseudo-header is refused (RFC 4443 §2.3).
func TestICMPv6Check(t *testing.T) {
	m := icmp6Msg(a6B, a6A, icmp6EchoRequest, 0, []byte{0, 1, 0, 2, 'x'})
	h := ip6Hdr{src: a6B, dst: a6A}
	if e := checkICMPv6(&h, m); e != icmp6OK {
		t.Fatal(e)
	}
	if e := checkICMPv6(&h, m[:7]); e != icmp6Short {
		t.Errorf("7 bytes: %v", e)
	}
	h.dst = a6B // the pseudo-header covers the addresses
	if e := checkICMPv6(&h, m); e != icmp6Checksum {
		t.Errorf("other destination: %v", e)
	}
}

// TestICMPv6EchoReply: the reply carries the request's identifier,
// sequence number and data back to its source (RFC 4443 §4.2), and
// gopacket reads it as a valid echo reply.
func TestICMPv6EchoReply(t *testing.T) {
	data := []byte("ping data, any length")
	req := icmp6Msg(a6B, a6A, icmp6EchoRequest, 0, append([]byte{0x12, 0x34, 0x00, 0x07}, data...))
	p := pkt6(a6B, a6A, 64, nil, protoICMPv6, req)
	var h ip6Hdr
	if parseIPv6(p, &h) != ip6OK || checkICMPv6(&h, h.payload(p)) != icmp6OK {
		t.Fatal("request does not parse")
	}
	b := make([]byte, 1500)
	n := buildEchoReply6(b, a6A, &h, h.payload(p))
	if n != ip6Len+len(req) {
		t.Fatalf("length %d", n)
	}
	pkt := gopacket.NewPacket(b[:n], layers.LayerTypeIPv6, gopacket.Default)
	ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	echo, _ := pkt.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
	icmp, _ := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if ip == nil || echo == nil || icmp == nil || len(icmp.Payload) < 4 {
		t.Fatalf("gopacket: %v", pkt)
	}
	if icmp.TypeCode.Type() != icmp6EchoReply || echo.Identifier != 0x1234 || echo.SeqNumber != 7 ||
		!bytes.Equal(icmp.Payload[4:], data) || !ip.DstIP.Equal(a6B[:]) || !ip.SrcIP.Equal(a6A[:]) {
		t.Errorf("reply: %v %+v %+v", icmp.TypeCode, echo, ip)
	}
	var rh ip6Hdr
	if parseIPv6(b[:n], &rh) != ip6OK || checkICMPv6(&rh, rh.payload(b[:n])) != icmp6OK {
		t.Error("the reply's checksum does not verify")
	}
	if buildEchoReply6(b[:n-1], a6A, &h, h.payload(p)) != 0 {
		t.Error("built into a buffer too short")
	}
}

// TestICMPv6ErrorSize: an error quotes as much of the invoking packet as
// fits without exceeding the IPv6 minimum MTU (RFC 4443 §2.4 (c)), and
// goes back to the invoking packet's source.
func TestICMPv6ErrorSize(t *testing.T) {
	b := make([]byte, 2000)
	for _, c := range []struct{ in, want int }{{100, ip6Len + icmp6Len + 100}, {1232, 1280}, {1400, 1280}, {9000, 1280}} {
		p := pkt6(a6B, a6A, 64, nil, protoUDP, make([]byte, c.in-ip6Len))
		n := buildError6(b, a6A, p, icmp6Unreachable, unreach6Port, 0)
		if n != c.want {
			t.Errorf("invoking packet of %d bytes: error of %d, want %d", c.in, n, c.want)
			continue
		}
		var h ip6Hdr
		if parseIPv6(b[:n], &h) != ip6OK || checkICMPv6(&h, h.payload(b[:n])) != icmp6OK || h.dst != a6B || h.src != a6A {
			t.Errorf("%d bytes: error does not parse back: %+v", c.in, h)
		}
		if m := h.payload(b[:n]); m[0] != icmp6Unreachable || m[1] != unreach6Port || !bytes.Equal(m[icmp6Len:], p[:len(m)-icmp6Len]) {
			t.Errorf("%d bytes: type %d code %d or quote wrong", c.in, m[0], m[1])
		}
	}
	if n := buildError6(make([]byte, 80), a6A, pkt6(a6B, a6A, 64, nil, protoUDP, make([]byte, 8)), icmp6Unreachable, 4, 0); n != 0 {
		t.Errorf("a buffer that cannot hold the quoted header: %d", n)
	}
}

// TestICMPv6MayAnswerError: the packets no error answers (RFC 4443 §2.4
// (e)) and the two exceptions for multicast (e.3, e.4).
func TestICMPv6MayAnswerError(t *testing.T) {
	mcast := allNodes6
	udp := make([]byte, 8)
	errMsg := icmp6Msg(a6B, a6A, icmp6Unreachable, 0, make([]byte, 4))
	redirect := icmp6Msg(a6B, a6A, icmp6Redirect, 0, make([]byte, 4))
	echo := icmp6Msg(a6B, a6A, icmp6EchoRequest, 0, make([]byte, 4))
	opt10 := pkt6(a6B, mcast, 64, []ext6{optsHdr(extDestOpts, 0x9e, 0)}, protoUDP, udp)
	opt11 := pkt6(a6B, mcast, 64, []ext6{optsHdr(extDestOpts, 0xde, 0)}, protoUDP, udp)
	for _, c := range []struct {
		name      string
		p         []byte
		ll        bool
		typ, code uint8
		want      bool
	}{
		{"a UDP packet", pkt6(a6B, a6A, 64, nil, protoUDP, udp), false, icmp6Unreachable, 4, true},
		{"an echo request", pkt6(a6B, a6A, 64, nil, protoICMPv6, echo), false, icmp6ParamProblem, 0, true},
		{"(e.1) an ICMPv6 error", pkt6(a6B, a6A, 64, nil, protoICMPv6, errMsg), false, icmp6Unreachable, 4, false},
		{"(e.2) a redirect", pkt6(a6B, a6A, 64, nil, protoICMPv6, redirect), false, icmp6Unreachable, 4, false},
		{"(e.3) to a multicast address", pkt6(a6B, mcast, 64, nil, protoUDP, udp), false, icmp6Unreachable, 4, false},
		{"(e.3) to a multicast address: Packet Too Big", pkt6(a6B, mcast, 64, nil, protoUDP, udp), false, icmp6TooBig, 0, true},
		{"(e.4) link-layer multicast", pkt6(a6B, a6A, 64, nil, protoUDP, udp), true, icmp6Unreachable, 4, false},
		{"(e.3) multicast, option type 10: Parameter Problem 2", opt10, false, icmp6ParamProblem, 2, true},
		{"(e.3) multicast, option type 11: none", opt11, false, icmp6ParamProblem, 2, false},
		{"(e.6) from the unspecified address", pkt6(ip6Unspecified, a6A, 64, nil, protoUDP, udp), false, icmp6Unreachable, 4, false},
	} {
		var h ip6Hdr
		e := parseIPv6(c.p, &h)
		if e != ip6OK && e != ip6OptionUnknown {
			t.Fatalf("%s: %v", c.name, e)
		}
		if got := mayAnswerError6(c.p, &h, c.ll, c.typ, c.code); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestICMPv6RateLimit: the token bucket of RFC 4443 §2.4 (f): a burst,
// then one message per 1/rate, never more than the burst after a long
// pause, nothing refilled by a clock that went back.
func TestICMPv6RateLimit(t *testing.T) {
	b := newTokenBucket(10, 3) // 10 a second, burst 3
	now := int64(5e9)
	for i := range 3 {
		if !b.allow(now) {
			t.Fatalf("burst message %d refused", i)
		}
	}
	if b.allow(now) {
		t.Fatal("a fourth message in the burst")
	}
	if b.allow(now + 99e6) {
		t.Fatal("allowed before 1/rate passed")
	}
	if !b.allow(now + 100e6) {
		t.Fatal("refused after 1/rate")
	}
	if b.allow(now + 50e6) {
		t.Fatal("a clock that went back refilled the bucket")
	}
	later := now + 1e18 // a long pause: no overflow, only the burst
	n := 0
	for b.allow(later) {
		n++
	}
	if n != 3 {
		t.Fatalf("%d messages after a long pause, want the burst (3)", n)
	}
	var zero tokenBucket
	if zero.allow(now) {
		t.Error("the zero bucket allows")
	}
	// Rates and bursts past the bound are clamped, not overflowed.
	huge := newTokenBucket(1<<62, 1<<62)
	if !huge.allow(0) || !huge.allow(1<<62) || huge.credit < 0 {
		t.Errorf("a huge bucket: credit %d", huge.credit)
	}
}

// TestICMPv6PacketTooBig: a Packet Too Big quoting one of our TCP
// segments gives the MTU and the connection's ports; the path MTU takes a
// lower MTU, never a higher one, and a report below 1280 is discarded
// (RFC 8201 §4).
func TestICMPv6PacketTooBig(t *testing.T) {
	ours := pkt6(a6A, a6B, 64, []ext6{optsHdr(extDestOpts)}, protoTCP, tcp6(a6A, a6B, 40000, 443, make([]byte, 1440)))
	b := make([]byte, 1500)
	n := buildError6(b, a6B, ours, icmp6TooBig, 0, 1400)
	var h ip6Hdr
	if parseIPv6(b[:n], &h) != ip6OK || checkICMPv6(&h, h.payload(b[:n])) != icmp6OK {
		t.Fatal("PTB does not parse")
	}
	var e icmp6ErrMsg
	if r := parseICMPv6Error(h.payload(b[:n]), &e); r != icmp6OK {
		t.Fatal(r)
	}
	if e.typ != icmp6TooBig || e.param != 1400 || !e.hasPorts || e.sport != 40000 || e.dport != 443 ||
		e.inner.src != a6A || e.inner.dst != a6B || e.inner.proto != protoTCP {
		t.Fatalf("parsed %+v", e)
	}
	for _, c := range []struct {
		cur  int
		mtu  uint32
		want int
		ok   bool
	}{{1500, 1400, 1400, true}, {1400, 1500, 1400, true}, {1500, 1280, 1280, true}, {1500, 1279, 1500, false}, {1500, 68, 1500, false}} {
		if got, ok := pmtu6(c.cur, c.mtu); got != c.want || ok != c.ok {
			t.Errorf("path MTU %d, PTB %d: %d %v, want %d %v", c.cur, c.mtu, got, ok, c.want, c.ok)
		}
	}
	// A quote cut inside the extension headers cannot be read.
	m := append([]byte(nil), h.payload(b[:n])[:icmp6Len+ip6Len+4]...)
	if r := parseICMPv6Error(m, &e); r != icmp6BadQuote {
		t.Errorf("quote cut in a header: %v", r)
	}
	// An informational message is not an error.
	binary.BigEndian.PutUint16(m, icmp6EchoRequest<<8)
	if r := parseICMPv6Error(m, &e); r != icmp6BadQuote {
		t.Errorf("echo request read as an error: %v", r)
	}
}
