package native

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// Dial refuses what the engine cannot reach: an IPv6 peer without
// Addr6, an IPv4 one without Addr, 0.0.0.0/8 (no host, RFC 1122
// §3.2.1.3, and where the IPv6 aliases live), multicast, unspecified and
// our own address.
func TestDialRefusesOtherFamiliesAndAliases(t *testing.T) {
	b4 := newBench(t, Options{})
	w6 := newWorld6(t, memio.Options{}, Options{}, Options{}, false)
	for _, c := range []struct {
		e   *Engine
		dst string
	}{
		{b4.e, "[2001:2::2]:80"},
		{b4.e, "0.0.0.1:80"},
		{b4.e, "0.1.2.3:80"},
		{w6.a, "198.18.0.2:80"},
		{w6.a, "[ff02::1]:80"},
		{w6.a, "[::]:80"},
		{w6.a, "[2001:2::1]:80"},
	} {
		if _, err := c.e.Dial(netip.MustParseAddrPort(c.dst), 0); err != ErrHostUnreachable {
			t.Errorf("Dial %s: %v, want ErrHostUnreachable", c.dst, err)
		}
	}
	if n := len(w6.a.six.byAddr); n != 0 {
		t.Fatalf("%d aliases left by refused Dials", n)
	}
}

// FuzzIPv6Input feeds arbitrary IPv6 packets (their checksums fixed when
// asked, so that the fuzzer gets past them) to an engine with a live
// IPv6 connection and a listener, to its MAC or to a multicast one: no
// panic, the connection's invariants hold, and it still carries data.
func FuzzIPv6Input(f *testing.F) {
	f.Add(true, false, pkt6(a6B, addr6A.As16(), 64, []ext6{optsHdr(extDestOpts)}, protoICMPv6, icmp6Msg(a6B, addr6A.As16(), icmp6EchoRequest, 0, []byte{1, 2, 3, 4})))
	f.Add(true, true, pkt6(a6B, solicitedNode(addr6A.As16()), 255, nil, protoICMPv6, icmp6Msg(a6B, solicitedNode(addr6A.As16()), icmp6NeighSol, 0, make([]byte, 20))))
	f.Add(false, false, pkt6(a6B, addr6A.As16(), 64, []ext6{fragHdr(8, true, 7)}, protoTCP, make([]byte, 16)))
	f.Add(true, false, pkt6(a6B, addr6A.As16(), 64, nil, protoTCP, tcp6(a6B, addr6A.As16(), 40000, 7000, []byte("data"))))
	f.Fuzz(func(t *testing.T, fix, mcast bool, p []byte) {
		if len(p) > 1600 {
			return
		}
		o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
		w := newWorld6(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o, true)
		l, err := w.a.Listen(7000, 0)
		if err != nil {
			t.Fatal(err)
		}
		lb, _ := w.b.Listen(7001, 0)
		ca, cb := w.connectTo(lb, netip.AddrPortFrom(addr6B, 7001))
		var h ip6Hdr
		if fix && parseIPv6(p, &h) == ip6OK && !h.frag && h.off+18 <= h.end {
			u := p[h.off:h.end]
			switch h.proto {
			case protoTCP:
				u[16], u[17] = 0, 0
				binary.BigEndian.PutUint16(u[16:], checksum6(h.src, h.dst, protoTCP, u))
			case protoICMPv6:
				putICMPv6Checksum(h.src, h.dst, u)
			}
		}
		f := make([]byte, ethLen+len(p))
		dst := w.a.mac
		if mcast {
			dst = multicastMAC6(solicitedNode(addr6A.As16()))
		}
		putEth(f, dst, w.b.mac, etherIPv6)
		copy(f[ethLen:], p)
		w.a.tick()
		w.a.input(f)
		checkConn(t, ca)
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			c.Abort()
		}
		cb.Write(make([]byte, 3000))
		got, buf := 0, make([]byte, 4096)
		w.until(10*time.Minute, "data after the packet", func() bool {
			n, _ := ca.Read(buf)
			got += n
			checkConn(t, ca)
			return got == 3000 || ca.Err() != nil
		})
	})
}

// FuzzPacketTooBigOnLiveConnection6 sends a Packet Too Big with any MTU
// and a quoted sequence number near the connection's to its engine (RFC
// 8201 §4, RFC 5927 §5.1): no panic, the MSS never drops below what a
// 1280-byte path carries (1220), and the data still arrives.
func FuzzPacketTooBigOnLiveConnection6(f *testing.F) {
	f.Add(uint32(1280), uint32(0))
	f.Add(uint32(100), uint32(0))
	f.Add(uint32(0xffffffff), uint32(5))
	f.Fuzz(func(t *testing.T, mtu, dseq uint32) {
		o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
		w := newWorld6(t, memio.Options{TxSlots: 64, RxSlots: 64, MTU: 9000}, o, o, false)
		l, err := w.b.Listen(80, 0)
		if err != nil {
			t.Fatal(err)
		}
		ca, cb := w.connectTo(l, netip.AddrPortFrom(addr6B, 80))
		ca.Write(make([]byte, 12000))
		if err := w.a.Flush(); err != nil {
			t.Fatal(err)
		}
		q := pkt6(addr6A.As16(), addr6B.As16(), 64, nil, protoTCP, make([]byte, tcpLen))
		binary.BigEndian.PutUint16(q[ip6Len:], ca.LocalPort())
		binary.BigEndian.PutUint16(q[ip6Len+2:], 80)
		binary.BigEndian.PutUint32(q[ip6Len+4:], ca.sndUna+dseq)
		body := binary.BigEndian.AppendUint32(nil, mtu)
		body = append(body, q...)
		m := icmp6Msg(a6C, addr6A.As16(), icmp6TooBig, 0, body)
		fr := make([]byte, ethLen)
		putEth(fr, w.a.mac, w.b.mac, etherIPv6)
		fr = append(fr, pkt6(a6C, addr6A.As16(), 64, nil, protoICMPv6, m)...)
		tooBigTaken(t, w, ca, cb, fr, minMTU6-ip6Len-tcpLen, 12000)
	})
}

// RFC 4987 §3.6 over IPv6: with the listener's SYN backlog full, a SYN is
// answered with a cookie whose hash covers both 16-byte addresses, and
// the ACK that returns it makes the connection, which carries data.
func TestSYNCookieIPv6RFC4987(t *testing.T) {
	w := newWorld6(t, memio.Options{}, Options{}, Options{SYNBacklog: 1}, false)
	l, err := w.b.Listen(80, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(addr6B, 80)
	c1, err := w.a.Dial(dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := w.a.Dial(dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []*Conn
	w.until(10*time.Second, "both handshakes", func() bool {
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			got = append(got, c)
		}
		return len(got) == 2 && c1.State() == Established && c2.State() == Established
	})
	if counterOf(t, w.b, "tcp_syncookies_sent") == 0 || counterOf(t, w.b, "tcp_syncookies_ok") != 1 {
		t.Fatalf("cookies sent %d, taken %d; want some and 1",
			counterOf(t, w.b, "tcp_syncookies_sent"), counterOf(t, w.b, "tcp_syncookies_ok"))
	}
	for i, c := range []*Conn{c1, c2} {
		var peer *Conn
		for _, g := range got {
			if g.Peer().Port() == c.LocalPort() {
				peer = g
			}
		}
		if peer == nil {
			t.Fatalf("connection %d not accepted", i)
		}
		w.exchange(c, peer, pattern(20000, byte(i)), pattern(3000, byte(i+1)))
	}
}
