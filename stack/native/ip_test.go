package native

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
)

// bench is one engine on port A and raw frames on port B.
type bench struct {
	t   *testing.T
	clk *memio.FakeClock
	pa  *memio.Port
	pb  *memio.Port
	e   *Engine
}

func newBench(t *testing.T, o Options) *bench {
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	pa, pb := memio.NewPair(memio.Options{Clock: clk})
	o.Addr, o.Clock = addrA, clk
	e, err := New(pa, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); pa.Close(); pb.Close() })
	return &bench{t: t, clk: clk, pa: pa, pb: pb, e: e}
}

// send puts frame on the wire to the engine and runs it.
func (b *bench) send(frame []byte) {
	b.pb.TxFrame(frame)
	b.pb.Kick()
	b.e.Poll(64)
	b.e.Flush()
}

// recv returns the frames the engine sent.
func (b *bench) recv() [][]byte {
	var out [][]byte
	b.pb.RxFrames(64, func(f []byte) { out = append(out, append([]byte(nil), f...)) })
	return out
}

// datagram builds an IPv4 frame from B to A.
func (b *bench) datagram(proto uint8, id uint16, frag uint16, payload []byte) []byte {
	f := make([]byte, ethLen+ipLen+len(payload))
	putEth(f, [6]byte(b.pa.MAC()), [6]byte(b.pb.MAC()), etherIPv4)
	putIPv4(f[ethLen:], id, proto, addrB.As4(), addrA.As4(), ipLen+len(payload))
	binary.BigEndian.PutUint16(f[ethLen+6:], frag)
	f[ethLen+10], f[ethLen+11] = 0, 0
	binary.BigEndian.PutUint16(f[ethLen+10:], fold(csum(0, f[ethLen:ethLen+ipLen])))
	copy(f[ethLen+ipLen:], payload)
	return f
}

func echoRequest(id uint16, data []byte) []byte {
	m := make([]byte, 8+len(data))
	m[0] = icmpEcho
	binary.BigEndian.PutUint16(m[4:], id)
	copy(m[8:], data)
	binary.BigEndian.PutUint16(m[2:], fold(csum(0, m)))
	return m
}

// RFC 1122 §3.2.2.6: an echo request is answered with its data; RFC 791
// §3.2: also when it came in fragments, in any order; RFC 1122 §3.2.1:
// bad checksums, options and unknown versions are dropped and counted.
func TestIPv4AndICMPRFC1122Sec3_2(t *testing.T) {
	b := newBench(t, Options{})
	data := randBytes(5, 1000)
	req := echoRequest(7, data)
	b.send(b.datagram(protoICMP, 1, 0x4000, req))
	check := func(what string) {
		fs := b.recv()
		if len(fs) != 1 {
			t.Fatalf("%s: %d frames back", what, len(fs))
		}
		r := ipv4(fs[0][ethLen:])
		if r.check() != ipOK || r.proto() != protoICMP || r.dst() != addrB.As4() {
			t.Fatalf("%s: reply is not an IPv4 ICMP datagram to B", what)
		}
		m := r.payload()
		if m[0] != icmpEchoReply || fold(csum(0, m)) != 0 || !bytes.Equal(m[8:], data) {
			t.Fatalf("%s: not an echo reply carrying the request's data", what)
		}
	}
	check("whole")
	// In three fragments, last first.
	var frags [][]byte
	for off := 0; off < len(req); off += 400 {
		end := min(off+400, len(req))
		fl := uint16(off / 8)
		if end < len(req) {
			fl |= 0x2000
		}
		frags = append(frags, b.datagram(protoICMP, 2, fl, req[off:end]))
	}
	for i := len(frags) - 1; i >= 0; i-- {
		b.send(frags[i])
	}
	check("fragmented")
	if counterOf(t, b.e, "ip_reassembled") != 1 {
		t.Error("reassembly not counted")
	}
	// A fragment whose datagram never completes is given up after 30 s.
	b.send(frags[0])
	b.clk.Advance(31 * time.Second)
	b.e.Poll(1)
	if counterOf(t, b.e, "ip_reassembly_timeout") != 1 {
		t.Error("reassembly timeout not counted")
	}
	bad := b.datagram(protoICMP, 3, 0, req)
	bad[ethLen+10] ^= 0xff
	b.send(bad)
	opt := b.datagram(protoICMP, 4, 0, req)
	opt[ethLen] = 0x46
	binary.BigEndian.PutUint16(opt[ethLen+10:], 0)
	binary.BigEndian.PutUint16(opt[ethLen+10:], fold(csum(0, opt[ethLen:ethLen+24])))
	b.send(opt)
	if fs := b.recv(); len(fs) != 0 {
		t.Fatalf("%d answers to datagrams that must be dropped", len(fs))
	}
	if counterOf(t, b.e, "ip_bad_checksum") != 1 || counterOf(t, b.e, "ip_options_dropped") != 1 {
		t.Error("drops not counted by reason")
	}
	// RFC 1122 §3.2.2.1: UDP (no sockets here) gets port unreachable.
	b.send(b.datagram(protoUDP, 5, 0, make([]byte, 16)))
	fs := b.recv()
	if len(fs) != 1 || fs[0][ethLen+ipLen] != icmpUnreachable || fs[0][ethLen+ipLen+1] != 3 {
		t.Fatal("no port unreachable for UDP")
	}
}

// RFC 826: the engine answers ARP for its address; Dial resolves the peer
// first, and fails with ErrHostUnreachable when nobody answers
// (Options.ARPRetries requests); an off-link peer goes through the
// gateway, and without one it is unreachable at once.
func TestARPRFC826(t *testing.T) {
	b := newBench(t, Options{Gateway: netip.MustParseAddr("198.18.0.254"), ARPRetries: 3})
	b.send(arp.AppendRequest(nil, b.pb.MAC(), addrB, addrA))
	fs := b.recv()
	if len(fs) != 1 {
		t.Fatalf("%d answers to a request for our address", len(fs))
	}
	m, err := arp.ParseARP(fs[0])
	if err != nil || m.Op != arp.OpReply || m.SenderIP != addrA || m.SenderMAC != [6]byte(b.pa.MAC()) || len(fs[0]) != 60 {
		t.Fatalf("bad reply %+v %v (len %d)", m, err, len(fs[0]))
	}
	// Nobody answers for .9.
	c, err := b.e.Dial(netip.MustParseAddrPort("198.18.0.9:80"), 0)
	if err != nil {
		t.Fatal(err)
	}
	asks := 0
	for i := 0; i < 10 && c.Err() == nil; i++ {
		b.e.Flush()
		for _, f := range b.recv() {
			if m, err := arp.ParseARP(f); err == nil && m.Op == arp.OpRequest && m.TargetIP == netip.MustParseAddr("198.18.0.9") {
				asks++
			}
		}
		b.clk.Advance(time.Second)
		b.e.Poll(1)
	}
	if !errors.Is(c.Err(), ErrHostUnreachable) || asks != 3 {
		t.Fatalf("err %v after %d requests, want ErrHostUnreachable after 3", c.Err(), asks)
	}
	c.Close()
	// Off-link: the request is for the gateway.
	if _, err := b.e.Dial(netip.MustParseAddrPort("192.0.2.1:80"), 0); err != nil {
		t.Fatal(err)
	}
	b.e.Flush()
	fs = b.recv()
	if len(fs) != 1 {
		t.Fatalf("%d frames for an off-link dial", len(fs))
	}
	if m, err := arp.ParseARP(fs[0]); err != nil || m.TargetIP != netip.MustParseAddr("198.18.0.254") {
		t.Fatalf("asked for %v, want the gateway", m.TargetIP)
	}
	nogw := newBench(t, Options{})
	if _, err := nogw.e.Dial(netip.MustParseAddrPort("192.0.2.1:80"), 0); !errors.Is(err, ErrHostUnreachable) {
		t.Fatalf("off-link without a gateway: %v", err)
	}
}

// RFC 791 §3.1, RFC 1071: the header checksum putIPv4 adds up from its
// fields is the one the header's bytes sum to, for any length, ID,
// protocol and addresses (the largest words included, whose sum carries).
func TestIPv4HeaderChecksumRFC791Sec3_1(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := make([]byte, ipLen)
	for i := range 100000 {
		id, n, proto := uint16(r.Uint32()), ipLen+int(r.Uint32()%65516), uint8(r.Uint32())
		var src, dst [4]byte
		binary.BigEndian.PutUint32(src[:], r.Uint32())
		binary.BigEndian.PutUint32(dst[:], r.Uint32())
		if i == 0 {
			id, n, proto, src, dst = 0xffff, 0xffff, 0xff, [4]byte{0xff, 0xff, 0xff, 0xff}, [4]byte{0xff, 0xff, 0xff, 0xff}
		}
		putIPv4(h, id, proto, src, dst, n)
		got := binary.BigEndian.Uint16(h[10:])
		h[10], h[11] = 0, 0
		if want := fold(csum(0, h)); got != want {
			t.Fatalf("id %#x length %d proto %d %v > %v: checksum %#04x, the header's bytes give %#04x", id, n, proto, src, dst, got, want)
		}
	}
}

// RFC 1071 §2 (B): check sums a 20-byte header as five 32-bit words; its
// verdict on the checksum is the one the sum of 16-bit words gives, for
// any header bytes (a valid checksum, and any other).
func TestIPv4CheckWordSumRFC1071(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := make([]byte, ipLen)
	for i := range 200000 {
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		if i == 0 {
			for j := range h {
				h[j] = 0xff
			}
		}
		h[0], h[2], h[3] = 0x45, 0, ipLen // version 4, no options, length 20
		// Half of them with a correct checksum.
		if i%2 == 0 {
			h[10], h[11] = 0, 0
			binary.BigEndian.PutUint16(h[10:], fold(csum(0, h)))
		}
		want := fold(csum(0, h)) == 0
		if got := ipv4(h).check() != ipChecksum; got != want {
			t.Fatalf("% x: check says checksum valid %v, the 16-bit sum says %v", h, got, want)
		}
	}
}
