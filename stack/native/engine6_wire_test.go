package native

import (
	"encoding/binary"
	"github.com/dgramio/dgramio/frameio/memio"
	"net/netip"
	"testing"
	"time"
)

// Tests of the engine's IPv6 input on the wire: a bench engine (IPv4
// 198.18.0.1 and IPv6 2001:2::1) and raw frames from 2001:2::2.

// newBench6 is newBench with Addr6 2001:2::1 as well.
func newBench6(t *testing.T, o Options) *bench {
	o.Addr6 = addr6A
	return newBench(t, o)
}

// frame6 wraps IPv6 packet p in an Ethernet frame from the test's port
// to dst (the engine's MAC when zero).
func (b *bench) frame6(dst [6]byte, p []byte) []byte {
	if dst == ([6]byte{}) {
		dst = [6]byte(b.pa.MAC())
	}
	f := make([]byte, ethLen+len(p))
	putEth(f, dst, [6]byte(b.pb.MAC()), etherIPv6)
	copy(f[ethLen:], p)
	return f
}

// sent6 is an IPv6 frame the engine sent, parsed.
type sent6 struct {
	dstMAC [6]byte
	p      []byte
	h      ip6Hdr
}

// recv6 returns the IPv6 frames the engine sent.
func (b *bench) recv6() []sent6 {
	var out []sent6
	for _, f := range b.recv() {
		if binary.BigEndian.Uint16(f[12:]) != etherIPv6 {
			continue
		}
		s := sent6{dstMAC: [6]byte(f[0:6]), p: f[ethLen:]}
		if err := parseIPv6(s.p, &s.h); err != ip6OK {
			b.t.Fatalf("the engine sent an IPv6 packet it cannot parse: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// icmp6Of returns the ICMPv6 messages of type typ among frames.
func icmp6Of(fs []sent6, typ uint8) []sent6 {
	var out []sent6
	for _, f := range fs {
		if f.h.proto == protoICMPv6 && f.p[f.h.off] == typ {
			out = append(out, f)
		}
	}
	return out
}

// nsFrom builds a solicitation for target from src (with its source
// link-layer address) to dst.
func (b *bench) nsFrom(src, dst, target ip6Addr) []byte {
	p := make([]byte, ndpMsgLen)
	n := buildNS(p, src, dst, target, [6]byte(b.pb.MAC()))
	return b.frame6(multicastMAC6(dst), p[:n])
}

// naFrom builds a solicited advertisement of target at the test's MAC.
func (b *bench) naFrom(target, dst ip6Addr, flags uint8) []byte {
	p := make([]byte, ndpMsgLen)
	n := buildNA(p, target, dst, target, [6]byte(b.pb.MAC()), flags)
	return b.frame6([6]byte{}, p[:n])
}

var a6C = ip6Addr{0x20, 0x01, 0x00, 0x02, 15: 3}

// RFC 4861 §7.2.3, §7.2.4: a solicitation for our global address, and
// one for our link-local address, are answered with a solicited
// advertisement (S and O set, R clear) carrying our MAC, to the
// solicitation's source at the MAC it gave; the source is learnt (STALE).
// A solicitation for an address that is not ours gets nothing.
func TestNDPAnswersSolicitationRFC4861Sec7_2_4(t *testing.T) {
	b := newBench6(t, Options{})
	ll := linkLocal6([6]byte(b.pa.MAC()))
	peerLL := linkLocal6([6]byte(b.pb.MAC()))
	for _, c := range []struct {
		name        string
		src, target ip6Addr
	}{
		{"global", a6B, addr6A.As16()},
		{"link-local", peerLL, ll},
	} {
		b.send(b.nsFrom(c.src, solicitedNode(c.target), c.target))
		na := icmp6Of(b.recv6(), icmp6NeighAdv)
		if len(na) != 1 {
			t.Fatalf("%x: %d advertisements, want 1", c.target, len(na))
		}
		var nd ndMsg
		if err := parseNDP(&na[0].h, na[0].p[na[0].h.off:na[0].h.end], &nd); err != ndpOK {
			t.Fatalf("advertisement does not parse: %v", err)
		}
		if nd.target != c.target || !nd.solicited || !nd.override || nd.router || nd.ll != [6]byte(b.pa.MAC()) ||
			na[0].h.src != c.target || na[0].h.dst != c.src || na[0].dstMAC != [6]byte(b.pb.MAC()) {
			t.Fatalf("advertisement %+v from %x to %x at %x", nd, na[0].h.src, na[0].h.dst, na[0].dstMAC)
		}
		if en := b.e.six.neigh.get(c.src); en == nil || en.state != neighStale || en.mac != [6]byte(b.pb.MAC()) {
			t.Fatalf("the solicitation's source was not learnt STALE: %+v", en)
		}
	}
	b.send(b.nsFrom(a6B, addr6A.As16(), a6C)) // to our address, for another
	if na := icmp6Of(b.recv6(), icmp6NeighAdv); len(na) != 0 || counterOf(t, b.e, "ndp_ns_not_ours") != 1 {
		t.Fatalf("a solicitation for another address: %d answers, ndp_ns_not_ours %d", len(na), counterOf(t, b.e, "ndp_ns_not_ours"))
	}
}

// RFC 4861 §7.2.2, §7.2.5: a Dial to an unknown neighbour makes an
// INCOMPLETE entry and sends a multicast solicitation to its
// solicited-node address; the solicited advertisement makes it
// REACHABLE and the SYN leaves to the advertised MAC. §7.3.3: a neighbour
// that never answers fails after MAX_MULTICAST_SOLICIT (ARPRetries)
// solicitations, RetransTimer (ARPTimeout) apart, and the connection with
// it (ErrHostUnreachable).
func TestNDPResolutionRFC4861Sec7_2_2(t *testing.T) {
	b := newBench6(t, Options{})
	c, err := b.e.Dial(netip.AddrPortFrom(addr6B, 80), 0)
	if err != nil {
		t.Fatal(err)
	}
	b.e.Flush()
	ns := icmp6Of(b.recv6(), icmp6NeighSol)
	if len(ns) != 1 || ns[0].h.dst != solicitedNode(a6B) || ns[0].dstMAC != multicastMAC6(solicitedNode(a6B)) ||
		ns[0].h.src != addr6A.As16() || ns[0].h.hops != 255 {
		t.Fatalf("solicitations %+v, want one to %x", ns, solicitedNode(a6B))
	}
	if en := b.e.six.neigh.get(a6B); en == nil || en.state != neighIncomplete {
		t.Fatalf("entry %+v, want INCOMPLETE", en)
	}
	b.send(b.naFrom(a6B, addr6A.As16(), naFlagSolic|naFlagOver))
	if en := b.e.six.neigh.get(a6B); en == nil || en.state != neighReachable {
		t.Fatalf("entry %+v after the advertisement, want REACHABLE", en)
	}
	var syn []sent6
	for _, f := range b.recv6() {
		if f.h.proto == protoTCP && f.p[f.h.off+13]&flagSYN != 0 {
			syn = append(syn, f)
		}
	}
	if len(syn) != 1 || syn[0].dstMAC != [6]byte(b.pb.MAC()) || c.Err() != nil {
		t.Fatalf("SYNs %d (err %v), want one to the advertised MAC", len(syn), c.Err())
	}
	if got := binary.BigEndian.Uint16(syn[0].p[syn[0].h.off+22:]); int(got) != b.pa.MTU()-60 {
		t.Fatalf("SYN's MSS %d, want MTU-60", got)
	}

	// A neighbour that never answers.
	c2, err := b.e.Dial(netip.AddrPortFrom(netip.AddrFrom16(a6C), 80), 0)
	if err != nil {
		t.Fatal(err)
	}
	b.e.Flush()
	asked := len(icmp6Of(b.recv6(), icmp6NeighSol))
	for i := 0; i < 10 && c2.Err() == nil; i++ {
		b.clk.Advance(DefaultARPTimeout)
		b.e.Poll(64)
		b.e.Flush()
		asked += len(icmp6Of(b.recv6(), icmp6NeighSol))
	}
	if c2.Err() != ErrHostUnreachable || asked != DefaultARPRetries {
		t.Fatalf("unanswered: err %v after %d solicitations, want ErrHostUnreachable after %d", c2.Err(), asked, DefaultARPRetries)
	}
	if b.e.six.neigh.get(a6C) != nil || counterOf(t, b.e, "ndp_neigh_failed") != 1 {
		t.Fatal("the unanswered entry stays, or was not counted")
	}
}

// RFC 4861 §7.3.3: a REACHABLE entry goes STALE after ReachableTime; used
// again (a Dial) it goes to DELAY and, unconfirmed after
// DELAY_FIRST_PROBE_TIME, to PROBE with a unicast solicitation to the
// MAC it has; the solicited advertisement makes it REACHABLE again.
func TestNDPStaleProbeRFC4861Sec7_3_3(t *testing.T) {
	b := newBench6(t, Options{})
	b.e.Dial(netip.AddrPortFrom(addr6B, 80), 0)
	b.e.Flush()
	b.recv()
	b.send(b.naFrom(a6B, addr6A.As16(), naFlagSolic|naFlagOver))
	b.recv()
	b.clk.Advance(DefaultARPReachable + time.Second)
	b.e.Poll(64)
	if en := b.e.six.neigh.get(a6B); en.state != neighStale {
		t.Fatalf("after ReachableTime: %v, want STALE", en.state)
	}
	if _, err := b.e.Dial(netip.AddrPortFrom(addr6B, 81), 0); err != nil {
		t.Fatal(err)
	}
	b.e.Flush()
	if en := b.e.six.neigh.get(a6B); en.state != neighDelay {
		t.Fatalf("used while STALE: %v, want DELAY", en.state)
	}
	if ns := icmp6Of(b.recv6(), icmp6NeighSol); len(ns) != 0 {
		t.Fatalf("%d solicitations in DELAY, want none", len(ns))
	}
	b.clk.Advance(5 * time.Second) // DELAY_FIRST_PROBE_TIME
	b.e.Poll(64)
	b.e.Flush()
	ns := icmp6Of(b.recv6(), icmp6NeighSol)
	if en := b.e.six.neigh.get(a6B); en.state != neighProbe || len(ns) != 1 ||
		ns[0].h.dst != a6B || ns[0].dstMAC != [6]byte(b.pb.MAC()) {
		t.Fatalf("after DELAY: %v, %d solicitations (want PROBE and one unicast to the known MAC)", en.state, len(ns))
	}
	if counterOf(t, b.e, "ndp_ns_probes") != 1 {
		t.Fatal("ndp_ns_probes not counted")
	}
	b.send(b.naFrom(a6B, addr6A.As16(), naFlagSolic))
	if en := b.e.six.neigh.get(a6B); en.state != neighReachable {
		t.Fatalf("after the probe's answer: %v, want REACHABLE", en.state)
	}
}

// RFC 4443 §4.2: an echo request to our address is answered from it with
// its identifier, sequence number and data; one to the link-local
// address from the link-local one.
func TestICMPv6EchoRFC4443Sec4_2(t *testing.T) {
	b := newBench6(t, Options{})
	body := append([]byte{0x12, 0x34, 0, 7}, "hello, IPv6"...)
	for _, c := range []struct{ src, dst ip6Addr }{
		{a6B, addr6A.As16()},
		{linkLocal6([6]byte(b.pb.MAC())), linkLocal6([6]byte(b.pa.MAC()))},
	} {
		b.send(b.frame6([6]byte{}, pkt6(c.src, c.dst, 64, nil, protoICMPv6, icmp6Msg(c.src, c.dst, icmp6EchoRequest, 0, body))))
		r := icmp6Of(b.recv6(), icmp6EchoReply)
		if len(r) != 1 || r[0].h.src != c.dst || r[0].h.dst != c.src || string(r[0].p[r[0].h.off+4:r[0].h.end]) != string(body) {
			t.Fatalf("echo to %x: %d replies", c.dst, len(r))
		}
		if !verify6(r[0].h.src, r[0].h.dst, protoICMPv6, r[0].p[r[0].h.off:r[0].h.end]) {
			t.Fatal("the reply's checksum is wrong")
		}
	}
}

// RFC 4443 §3.1 and §2.4 (f): UDP to a port with no socket (the engine
// has none) is answered with Destination Unreachable code 4 (port
// unreachable) quoting it, at most ICMPBurst at once and then
// ICMPRateLimit a second; the rest are counted, not sent.
func TestICMPv6PortUnreachableRateLimitedRFC4443Sec2_4(t *testing.T) {
	b := newBench6(t, Options{ICMPBurst: 3, ICMPRateLimit: 1})
	udp := make([]byte, 8+4)
	binary.BigEndian.PutUint16(udp[0:], 5000)
	binary.BigEndian.PutUint16(udp[2:], 53)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	binary.BigEndian.PutUint16(udp[6:], checksum6(a6B, addr6A.As16(), protoUDP, udp))
	p := pkt6(a6B, addr6A.As16(), 64, nil, protoUDP, udp)
	got := 0
	for range 10 {
		b.send(b.frame6([6]byte{}, p))
		for _, u := range icmp6Of(b.recv6(), icmp6Unreachable) {
			m := u.p[u.h.off:u.h.end]
			if m[1] != unreach6Port || string(m[icmp6Len:]) != string(p) || u.h.dst != a6B {
				t.Fatalf("unreachable code %d quoting %d bytes", m[1], len(m)-icmp6Len)
			}
			got++
		}
	}
	if got != 3 || counterOf(t, b.e, "icmp6_errors_limited") != 7 {
		t.Fatalf("%d unreachables, %d limited; want 3 and 7", got, counterOf(t, b.e, "icmp6_errors_limited"))
	}
	b.clk.Advance(time.Second)
	b.send(b.frame6([6]byte{}, p))
	if n := len(icmp6Of(b.recv6(), icmp6Unreachable)); n != 1 {
		t.Fatalf("a second later: %d unreachables, want 1", n)
	}
}

// RFC 8200 §4: a packet through a Hop-by-Hop and a Destination Options
// header (padding only) is taken; one with an unknown option whose type
// says "discard and answer" (10xxxxxx, §4.2) is answered with a Parameter
// Problem code 2 pointing at the option; a chain longer than the walk's
// bound (RFC 8504 §5.3) is dropped and counted.
func TestIPv6ExtensionHeaderChainRFC8200Sec4(t *testing.T) {
	b := newBench6(t, Options{})
	dst := addr6A.As16()
	echo := icmp6Msg(a6B, dst, icmp6EchoRequest, 0, []byte{0, 1, 0, 1})
	b.send(b.frame6([6]byte{}, pkt6(a6B, dst, 64, []ext6{optsHdr(extHopByHop), optsHdr(extDestOpts)}, protoICMPv6, echo)))
	if r := icmp6Of(b.recv6(), icmp6EchoReply); len(r) != 1 {
		t.Fatalf("through Hop-by-Hop and Destination Options: %d replies, want 1", len(r))
	}
	bad := pkt6(a6B, dst, 64, []ext6{optsHdr(extDestOpts, 0x80, 1, 0)}, protoICMPv6, echo)
	b.send(b.frame6([6]byte{}, bad))
	pp := icmp6Of(b.recv6(), icmp6ParamProblem)
	if len(pp) != 1 {
		t.Fatalf("unknown option 10xxxxxx: %d Parameter Problems, want 1", len(pp))
	}
	m := pp[0].p[pp[0].h.off:pp[0].h.end]
	if m[1] != 2 || binary.BigEndian.Uint32(m[4:]) != ip6Len+2 {
		t.Fatalf("Parameter Problem code %d pointer %d, want 2 and %d", m[1], binary.BigEndian.Uint32(m[4:]), ip6Len+2)
	}
	chain := make([]ext6, maxExt6Headers+1)
	for i := range chain {
		chain[i] = optsHdr(extDestOpts)
	}
	b.send(b.frame6([6]byte{}, pkt6(a6B, dst, 64, chain, protoICMPv6, echo)))
	if r := b.recv6(); len(r) != 0 || counterOf(t, b.e, "ip6_ext_too_many") != 1 {
		t.Fatalf("a chain of %d headers: %d answers, ip6_ext_too_many %d", len(chain), len(r), counterOf(t, b.e, "ip6_ext_too_many"))
	}
}

// RFC 8200 §4.5: fragments are reassembled (an echo request in two
// fragments, in any order, is answered); RFC 5722 §4: when a fragment
// overlaps one received, the whole packet is dropped, with the fragments
// that follow it, and counted.
func TestIPv6OverlappingFragmentsDroppedRFC5722(t *testing.T) {
	b := newBench6(t, Options{})
	dst := addr6A.As16()
	echo := icmp6Msg(a6B, dst, icmp6EchoRequest, 0, make([]byte, 100))
	frag := func(id uint32, off, end int, more bool) []byte {
		return b.frame6([6]byte{}, pkt6(a6B, dst, 64, []ext6{fragHdr(off, more, id)}, protoICMPv6, echo[off:end]))
	}
	b.send(frag(1, 56, len(echo), false))
	b.send(frag(1, 0, 56, true))
	if r := icmp6Of(b.recv6(), icmp6EchoReply); len(r) != 1 || counterOf(t, b.e, "ip6_reassembled") != 1 {
		t.Fatalf("two fragments: %d replies, want 1", len(r))
	}
	b.send(frag(2, 0, 56, true))
	b.send(frag(2, 48, len(echo), false)) // overlaps bytes 48..56
	b.send(frag(2, 56, len(echo), false)) // the right piece, too late
	if r := b.recv6(); len(r) != 0 {
		t.Fatalf("overlapping fragments: %d answers, want none", len(r))
	}
	if counterOf(t, b.e, "ip6_fragment_overlap") != 1 || counterOf(t, b.e, "ip6_fragment_abandoned") != 1 {
		t.Fatalf("ip6_fragment_overlap %d, ip6_fragment_abandoned %d; want 1 and 1",
			counterOf(t, b.e, "ip6_fragment_overlap"), counterOf(t, b.e, "ip6_fragment_abandoned"))
	}
}

// RFC 8201 §4 (and RFC 4443 §3.2): a Packet Too Big quoting a segment in
// flight lowers the connection's MSS to the reported MTU less 60, and
// what was in flight goes again at the new size; one reporting less than
// 1280 is discarded (§4: the IPv6 minimum link MTU), as is one quoting a
// sequence number not in flight (RFC 5927 §5.1).
func TestIPv6PacketTooBigLowersMSSRFC8201(t *testing.T) {
	w := newWorld6(t, memio9000(), Options{}, Options{}, false)
	l, err := w.b.Listen(80, 0)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := w.connectTo(l, netip.AddrPortFrom(addr6B, 80))
	if ca.peerMSS != 9000-60 {
		t.Fatalf("MSS %d on a 9000-byte link", ca.peerMSS)
	}
	ca.Write(pattern(64<<10, 3))
	w.a.Flush()
	ptb := func(mtu uint32, seq uint32) []byte {
		// The quote: our segment's IPv6 and TCP headers.
		q := pkt6(addr6A.As16(), addr6B.As16(), 64, nil, protoTCP, make([]byte, tcpLen))
		tcp := q[ip6Len:]
		binary.BigEndian.PutUint16(tcp[0:], ca.LocalPort())
		binary.BigEndian.PutUint16(tcp[2:], 80)
		binary.BigEndian.PutUint32(tcp[4:], seq)
		body := make([]byte, 4+len(q))
		binary.BigEndian.PutUint32(body, mtu)
		copy(body[4:], q)
		router := ip6Addr{0x20, 0x01, 0, 2, 15: 0xfe}
		m := icmp6Msg(router, addr6A.As16(), icmp6TooBig, 0, body)
		f := make([]byte, ethLen)
		putEth(f, [6]byte(w.pa.MAC()), [6]byte(w.pb.MAC()), etherIPv6)
		return append(f, pkt6(router, addr6A.As16(), 64, nil, protoICMPv6, m)...)
	}
	inject := func(f []byte) {
		w.pb.TxFrame(f)
		w.pb.Kick()
		w.a.Poll(1) // the PTB is behind nothing: B has not sent since
	}
	inject(ptb(1000, ca.sndUna))
	inject(ptb(1400, ca.sndMax+100000))
	if ca.peerMSS != 9000-60 || counterOf(t, w.a, "icmp6_packet_too_big_below_1280") != 1 ||
		counterOf(t, w.a, "icmp6_packet_too_big_ignored") != 1 {
		t.Fatalf("MSS %d after a PTB below 1280 and one out of window", ca.peerMSS)
	}
	inject(ptb(1400, ca.sndUna))
	if ca.peerMSS != 1400-60 || ca.smss > 1340 || counterOf(t, w.a, "tcp_pmtu_lowered") != 1 {
		t.Fatalf("after a PTB of 1400: MSS %d, SMSS %d", ca.peerMSS, ca.smss)
	}
	p := newPipe(cb, ca, nil)
	w.until(30*time.Second, "data after the PTB", func() bool {
		n, _ := cb.Read(make([]byte, 128<<10))
		p.got.Write(make([]byte, n))
		return p.got.Len() == 64<<10
	})
}

// One engine serves both families on one interface: connections over
// IPv4 and IPv6 between the same two engines at once, on one listener,
// each with its own tuple, data and close; TIME-WAIT records of both
// families in the one table.
func TestDualStackOneEngine(t *testing.T) {
	w := newWorld6(t, memioDefault(), Options{}, Options{}, true)
	l, err := w.b.Listen(80, 0)
	if err != nil {
		t.Fatal(err)
	}
	c4a, c4b := w.connectTo(l, netip.AddrPortFrom(addrB, 80))
	c6a, c6b := w.connectTo(l, netip.AddrPortFrom(addr6B, 80))
	if c4b.Peer().Addr() != addrA || c6b.Peer().Addr() != addr6A {
		t.Fatalf("peers %v and %v", c4b.Peer(), c6b.Peer())
	}
	if c4a.peerMSS != w.pa.MTU()-40 || c6a.peerMSS != w.pa.MTU()-60 {
		t.Fatalf("MSS %d (IPv4) and %d (IPv6)", c4a.peerMSS, c6a.peerMSS)
	}
	d4, d6 := pattern(200<<10, 4), pattern(200<<10, 6)
	p := []*pipe{newPipe(c4a, c4b, d4), newPipe(c6a, c6b, d6), newPipe(c4b, c4a, d6[:1000]), newPipe(c6b, c6a, d4[:1000])}
	w.until(60*time.Second, "both families", func() bool {
		done := true
		for _, x := range p {
			x.pump(t)
			done = done && x.done()
		}
		return done
	})
	if string(p[0].got.Bytes()) != string(d4) || string(p[1].got.Bytes()) != string(d6) {
		t.Fatal("data differs")
	}
	for _, c := range []*Conn{c4a, c6a, c4b, c6b} {
		c.Close()
	}
	w.until(10*time.Second, "close", func() bool {
		return len(w.a.free) == w.a.o.MaxConns && len(w.b.free) == w.b.o.MaxConns
	})
	if n := w.a.TimeWaits() + w.b.TimeWaits(); n != 2 {
		t.Fatalf("%d TIME-WAIT records, want one per connection", n)
	}
}

func memio9000() memio.Options    { return memio.Options{MTU: 9000} }
func memioDefault() memio.Options { return memio.Options{} }
