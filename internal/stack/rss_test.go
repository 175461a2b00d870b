package stack

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// msKey is the key of Microsoft's RSS verification suite.
var msKey, _ = hex.DecodeString("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")

// TestToeplitzVerificationSuite checks Toeplitz against the published
// IPv4 vectors ("Verifying the RSS hash calculation"): the hash over the
// addresses alone and over addresses and TCP ports.
func TestToeplitzVerificationSuite(t *testing.T) {
	cases := []struct {
		dst, src      string
		ipv4, ipv4tcp uint32
	}{
		{"161.142.100.80:1766", "66.9.149.187:2794", 0x323e8fc2, 0x51ccc178},
		{"65.69.140.83:4739", "199.92.111.2:14230", 0xd718262a, 0xc626b0ea},
		{"12.22.207.184:38024", "24.19.198.95:12898", 0xd2d0a5de, 0x5c2b394a},
		{"209.142.163.6:2217", "38.27.205.30:48228", 0x82989176, 0xafc7327f},
		{"202.188.127.2:1303", "153.39.163.191:44251", 0x5d1809c5, 0x10e828a2},
	}
	for _, c := range cases {
		dst, src := netip.MustParseAddrPort(c.dst), netip.MustParseAddrPort(c.src)
		tu := Tuple4(src, dst)
		if got := Toeplitz(msKey, tu[:8]); got != c.ipv4 {
			t.Errorf("%s → %s, addresses: %#08x, want %#08x", c.src, c.dst, got, c.ipv4)
		}
		if got := Toeplitz(msKey, tu[:]); got != c.ipv4tcp {
			t.Errorf("%s → %s, addresses and ports: %#08x, want %#08x", c.src, c.dst, got, c.ipv4tcp)
		}
	}
}

func TestSourcePorts(t *testing.T) {
	local := netip.MustParseAddr("198.18.0.1")
	peer := netip.MustParseAddrPort("198.18.0.2:5000")
	rss := RSS{Key: msKey, Indir: make([]uint32, 128)}
	for i := range rss.Indir {
		rss.Indir[i] = uint32(i % 4) // four queues, round robin (ethtool's default)
	}
	seen := map[uint16]int{}
	for q := range 4 {
		ports := SourcePorts(rss, local, peer, q, 4, q, 50)
		if len(ports) != 50 {
			t.Fatalf("queue %d: %d ports, want 50", q, len(ports))
		}
		for _, p := range ports {
			if p < EphemeralLow || p > EphemeralHigh || int(p)%4 != q {
				t.Fatalf("queue %d: port %d outside its share of the ephemeral range", q, p)
			}
			if other, dup := seen[p]; dup {
				t.Fatalf("port %d chosen by queues %d and %d", p, other, q)
			}
			seen[p] = q
			// The peer's answers come back on queue q: what the NIC
			// computes for the frame peer → local:p.
			if got, _ := rss.Queue(peer, netip.AddrPortFrom(local, p)); got != q {
				t.Fatalf("queue %d: port %d hashes the answers to queue %d", q, p, got)
			}
		}
	}
	// Device queues offset by a base (XDP.QueueID 2): queue q is device q+2.
	for i := range rss.Indir {
		rss.Indir[i] = uint32(2 + i%2)
	}
	for q := range 2 {
		for _, p := range SourcePorts(rss, local, peer, q, 2, 2+q, 10) {
			if got, _ := rss.Queue(peer, netip.AddrPortFrom(local, p)); got != 2+q {
				t.Fatalf("queue %d (device %d): port %d hashes to %d", q, 2+q, p, got)
			}
		}
	}
	// Without RSS: the partition alone.
	ports := SourcePorts(RSS{}, local, peer, 1, 2, 1, 5)
	if len(ports) != 5 {
		t.Fatalf("no RSS: %v", ports)
	}
	for _, p := range ports {
		if p%2 != 1 {
			t.Fatalf("no RSS, queue 1 of 2: port %d", p)
		}
	}
	// A device queue the table never names: no port.
	if ps := SourcePorts(rss, local, peer, 0, 2, 7, 5); len(ps) != 0 {
		t.Fatalf("device queue 7 is not in the table, got ports %v", ps)
	}
}

func TestReadRSSOnVeth(t *testing.T) {
	p := hosttest.New(t, testhost.Options{Queues: 2})
	err := p.A.Do(func() error {
		_, err := ReadRSS(p.A.Iface)
		return err
	})
	if !errors.Is(err, dgramio.ErrNotSupported) {
		t.Fatalf("veth has no RSS table: ReadRSS = %v, want ErrNotSupported", err)
	}
}

// FuzzToeplitz checks the bitwise definition against a byte-at-a-time
// one (a table of the key windows) for any key and data.
func FuzzToeplitz(f *testing.F) {
	f.Add(msKey, []byte{66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6})
	f.Add([]byte{1, 2, 3}, []byte{0xff})
	f.Add([]byte{}, []byte{1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, key, data []byte) {
		if len(data) > 64 {
			data = data[:64]
		}
		if got, want := Toeplitz(key, data), toeplitzBytes(key, data); got != want {
			t.Fatalf("key % x data % x: %#x, want %#x", key, data, got, want)
		}
	})
}

// toeplitzBytes computes the hash a byte at a time: for data byte i, bit
// b set, XOR the 32-bit key window starting at bit 8i+b.
func toeplitzBytes(key, data []byte) uint32 {
	k := func(i int) byte {
		if i < len(key) {
			return key[i]
		}
		return 0
	}
	var h uint32
	for i, d := range data {
		// The 40 key bits starting at byte i.
		w := uint64(k(i))<<32 | uint64(k(i+1))<<24 | uint64(k(i+2))<<16 | uint64(k(i+3))<<8 | uint64(k(i+4))
		for b := 0; b < 8; b++ {
			if d&(0x80>>b) != 0 {
				h ^= uint32(w >> (8 - b))
			}
		}
	}
	return h
}

func TestIsARPReply(t *testing.T) {
	frame := make([]byte, 42)
	frame[12], frame[13] = 0x08, 0x06
	frame[ethHeader+7] = 2
	if !isARPReply(frame) {
		t.Error("ARP reply not recognised")
	}
	frame[ethHeader+7] = 1
	if isARPReply(frame) {
		t.Error("ARP request taken for a reply")
	}
	frame[ethHeader+7], frame[13] = 2, 0x00
	if isARPReply(frame) {
		t.Error("IPv4 frame taken for an ARP reply")
	}
	if isARPReply(frame[:20]) {
		t.Error("short frame taken for an ARP reply")
	}
}

// TestToeplitzVerificationSuite6 checks Tuple6 and Toeplitz against the
// published IPv6 vectors of the same suite: the hash over the addresses
// alone and over addresses and TCP ports.
func TestToeplitzVerificationSuite6(t *testing.T) {
	cases := []struct {
		dst, src      string
		ipv6, ipv6tcp uint32
	}{
		{"[3ffe:2501:200:3::1]:1766", "[3ffe:2501:200:1fff::7]:2794", 0x2cc18cd5, 0x40207d3d},
		{"[ff02::1]:4739", "[3ffe:501:8::260:97ff:fe40:efab]:14230", 0x0f0c461c, 0xdde51bbf},
		{"[fe80::200:f8ff:fe21:67cf]:38024", "[3ffe:1900:4545:3:200:f8ff:fe21:67cf]:44251", 0x4b61e985, 0x02d1feef},
	}
	for _, c := range cases {
		dst, src := netip.MustParseAddrPort(c.dst), netip.MustParseAddrPort(c.src)
		tu := Tuple6(src, dst)
		if got := Toeplitz(msKey, tu[:32]); got != c.ipv6 {
			t.Errorf("%s → %s, addresses: %#08x, want %#08x", c.src, c.dst, got, c.ipv6)
		}
		if got := Toeplitz(msKey, tu[:]); got != c.ipv6tcp {
			t.Errorf("%s → %s, addresses and ports: %#08x, want %#08x", c.src, c.dst, got, c.ipv6tcp)
		}
	}
}

// TestSourcePortsIPv6: over IPv6, queue q's ports are those whose answers
// (peer → local:port) the NIC hashes over the IPv6 tuple onto q, each in
// the queue's share only; an IPv4-mapped peer is hashed as IPv4, and a
// peer of the other family than local hashes nowhere.
func TestSourcePortsIPv6(t *testing.T) {
	local := netip.MustParseAddr("2001:2::1")
	peer := netip.MustParseAddrPort("[2001:2::2]:5000")
	rss := RSS{Key: msKey, Indir: make([]uint32, 128)}
	for i := range rss.Indir {
		rss.Indir[i] = uint32(i % 4)
	}
	seen := map[uint16]bool{}
	for q := range 4 {
		ports := SourcePorts(rss, local, peer, q, 4, q, 50)
		if len(ports) != 50 {
			t.Fatalf("queue %d: %d ports, want 50", q, len(ports))
		}
		for _, p := range ports {
			if int(p)%4 != q || seen[p] {
				t.Fatalf("queue %d: port %d outside its share, or taken twice", q, p)
			}
			seen[p] = true
			tu := Tuple6(peer, netip.AddrPortFrom(local, p))
			if got := int(rss.Indir[Toeplitz(msKey, tu[:])%128]); got != q {
				t.Fatalf("queue %d: port %d hashes the answers to queue %d", q, p, got)
			}
		}
	}
	mapped := netip.AddrPortFrom(netip.MustParseAddr("::ffff:198.18.0.2"), 5000)
	q4, ok4 := rss.Queue(mapped, netip.MustParseAddrPort("198.18.0.1:40000"))
	want, _ := rss.Queue(netip.MustParseAddrPort("198.18.0.2:5000"), netip.MustParseAddrPort("198.18.0.1:40000"))
	if !ok4 || q4 != want {
		t.Fatalf("an IPv4-mapped peer: queue %d %v, want %d as IPv4", q4, ok4, want)
	}
	if _, ok := rss.Queue(peer, netip.MustParseAddrPort("198.18.0.1:40000")); ok {
		t.Fatal("a queue for a frame from an IPv6 peer to an IPv4 address")
	}
}
