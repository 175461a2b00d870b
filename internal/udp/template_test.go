package udp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	macA  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	addrA = netip.MustParseAddrPort("198.18.0.1:40000")
	addrB = netip.MustParseAddrPort("198.18.0.2:5000")
)

func endpoints() Endpoints {
	return Endpoints{SrcMAC: macA, DstMAC: macB, Src: addrA, Dst: addrB, DF: true}
}

// naiveChecksum is RFC 1071 written the plain way, as a reference.
func naiveChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

func TestChecksumRFC1071Example(t *testing.T) {
	// RFC 1071 section 3: the sum of 0001 f203 f4f5 f6f7 is ddf2.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := Fold(Sum(0, b)); got != 0xddf2 {
		t.Fatalf("sum %#04x, want 0xddf2", got)
	}
	if got := Checksum(b); got != ^uint16(0xddf2) {
		t.Fatalf("checksum %#04x", got)
	}
}

func TestChecksumAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if n%7 == 0 {
			for i := range b {
				b[i] = 0xff // worst case for carries
			}
		}
		if got, want := Checksum(b), naiveChecksum(b); got != want {
			t.Fatalf("len %d: %#04x, want %#04x", n, got, want)
		}
		// Sums of even-length pieces add up.
		if n%2 == 0 && n > 10 {
			split := (n / 4) * 2
			if got := ^Fold(Add(Sum(0, b[:split]), Sum(0, b[split:]))); got != naiveChecksum(b) {
				t.Fatalf("len %d split %d: %#04x", n, split, got)
			}
		}
	}
}

func TestTemplateRejects(t *testing.T) {
	e := endpoints()
	e.DstMAC = net.HardwareAddr{1, 2, 3}
	if _, err := NewTemplate(e); err == nil {
		t.Error("short MAC accepted")
	}
	e = endpoints()
	e.Dst = netip.MustParseAddrPort("[2001:db8::1]:5")
	if _, err := NewTemplate(e); err == nil {
		t.Error("IPv6 accepted")
	}
}

func payloadOf(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + n)
	}
	return p
}

func TestBuildParseRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		n    int
		df   bool
		ttl  uint8
		sp   uint16
		dp   uint16
	}{
		{"empty", 0, true, 0, 40000, 5000},
		{"one byte, padded", 1, false, 1, 1, 2},
		{"17 bytes, padded to 60", 17, true, 255, 65535, 65535},
		{"18 bytes, exactly 60", 18, true, 64, 5000, 5000},
		{"odd 99", 99, false, 64, 1234, 5000},
		{"100 bytes, the benchmark message", 100, true, 64, 40000, 5000},
		{"1472, a full MTU", 1472, true, 64, 40000, 5000},
		{"8972, jumbo", 8972, true, 64, 40000, 5000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := Endpoints{SrcMAC: macA, DstMAC: macB,
				Src: netip.AddrPortFrom(addrA.Addr(), c.sp), Dst: netip.AddrPortFrom(addrB.Addr(), c.dp),
				TTL: c.ttl, DF: c.df, ID: 0xfffe}
			tp, err := NewTemplate(e)
			if err != nil {
				t.Fatal(err)
			}
			twin, _ := NewTemplate(e)
			p := payloadOf(c.n)
			for i := 0; i < 3; i++ { // the IPv4 ID wraps from 0xffff to 0
				f := tp.Append(nil, p)
				if len(f) != max(42+c.n, 60) {
					t.Fatalf("frame length %d", len(f))
				}
				for _, b := range f[42+c.n:] {
					if b != 0 {
						t.Fatal("padding not zero")
					}
				}
				d, r := Parse(f, &Filter{MAC: macB, Addr: addrB.Addr(), Port: c.dp})
				if r != OK {
					t.Fatalf("Parse: %v", r)
				}
				if !bytes.Equal(d.Payload, p) || d.From != e.Src || d.To != e.Dst || net.HardwareAddr(d.SrcMAC[:]).String() != macA.String() {
					t.Fatalf("parsed %+v", d)
				}
				ip := IPv4(f[14:])
				wantTTL := c.ttl
				if wantTTL == 0 {
					wantTTL = 64
				}
				if ip.TTL() != wantTTL || ip.DF() != c.df || ip.ID() != uint16(0xfffe+i) {
					t.Fatalf("TTL %d DF %v ID %#x", ip.TTL(), ip.DF(), ip.ID())
				}
				if naiveChecksum(f[14:34]) != 0 {
					t.Fatal("IPv4 checksum wrong by the reference")
				}
				// Build, on a twin template, gives the same bytes.
				buf := make([]byte, 9100)
				n := twin.Build(buf, p)
				if !bytes.Equal(buf[:n], f) {
					t.Fatal("Build and Append differ")
				}
			}
		})
	}
}

func TestBuildInPlaceAndShort(t *testing.T) {
	tp, _ := NewTemplate(endpoints())
	buf := make([]byte, 200)
	p := buf[HeaderLen : HeaderLen+100]
	copy(p, payloadOf(100))
	n := tp.Build(buf, p)
	if n != 142 {
		t.Fatalf("n %d", n)
	}
	d, r := Parse(buf[:n], &Filter{})
	if r != OK || !bytes.Equal(d.Payload, payloadOf(100)) {
		t.Fatalf("in place: %v", r)
	}
	if tp.Build(make([]byte, 59), nil) != 0 {
		t.Fatal("Build into 59 bytes should fail: the frame pads to 60")
	}
	if tp.Build(make([]byte, 141), payloadOf(100)) != 0 {
		t.Fatal("Build into a short buffer succeeded")
	}
}

// TestGopacketAgrees decodes our frames with gopacket, an independent
// implementation, and compares them with gopacket's own serialization with
// computed checksums.
func TestGopacketAgrees(t *testing.T) {
	for _, n := range []int{0, 5, 18, 100, 1001, 1472} {
		tp, _ := NewTemplate(Endpoints{SrcMAC: macA, DstMAC: macB, Src: addrA, Dst: addrB, TTL: 33, DF: true, ID: 777})
		p := payloadOf(n)
		f := tp.Append(nil, p)

		pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("n=%d: gopacket: %v", n, el.Error())
		}
		eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		u := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if eth.SrcMAC.String() != macA.String() || eth.DstMAC.String() != macB.String() || eth.EthernetType != layers.EthernetTypeIPv4 {
			t.Fatalf("n=%d: ethernet %v", n, eth)
		}
		if ip.SrcIP.String() != "198.18.0.1" || ip.DstIP.String() != "198.18.0.2" || ip.TTL != 33 ||
			ip.Flags != layers.IPv4DontFragment || ip.Id != 777 || int(ip.Length) != 28+n || ip.IHL != 5 {
			t.Fatalf("n=%d: ipv4 %+v", n, ip)
		}
		if u.SrcPort != 40000 || u.DstPort != 5000 || int(u.Length) != 8+n || !bytes.Equal(u.Payload, p) {
			t.Fatalf("n=%d: udp %+v", n, u)
		}

		// gopacket's serialization, checksums computed by gopacket.
		ip2 := &layers.IPv4{Version: 4, IHL: 5, TTL: 33, Flags: layers.IPv4DontFragment, Id: 777,
			Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
		u2 := &layers.UDP{SrcPort: 40000, DstPort: 5000}
		if err := u2.SetNetworkLayerForChecksum(ip2); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip2, u2, gopacket.Payload(p))
		if err != nil {
			t.Fatal(err)
		}
		want := buf.Bytes()
		if !bytes.Equal(f[:len(want)], want) {
			t.Fatalf("n=%d: our frame differs from gopacket's:\nours %x\ntheirs %x", n, f[:42], want[:42])
		}
	}
}

// TestZeroUDPChecksumSentAsFFFF: a payload whose UDP checksum computes
// to 0 goes out as 0xffff and parses, over IPv4 (RFC 768: 0 means no
// checksum) and IPv6 (RFC 8200 §8.1 forbids sending 0).
func TestZeroUDPChecksumSentAsFFFF(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Endpoints
		udp  int // where the UDP header starts
	}{
		{"IPv4", endpoints(), 34},
		{"IPv6", Endpoints{SrcMAC: macA, DstMAC: macB, Src: addr6A, Dst: addr6B}, 54},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp, _ := NewTemplate(c.e)
			p := make([]byte, 2)
			for v := 0; v < 1<<16; v++ {
				binary.BigEndian.PutUint16(p, uint16(v))
				f := tp.Append(nil, p)
				switch Header(f[c.udp:]).Checksum() {
				case 0xffff:
					if _, r := Parse(f, &Filter{}); r != OK {
						t.Fatalf("0xffff checksum refused: %v", r)
					}
					return
				case 0:
					t.Fatal("a computed 0 was sent as 0 (\"no checksum\")")
				}
			}
			t.Fatal("no payload gave checksum 0xffff")
		})
	}
}

func TestAllocs(t *testing.T) {
	tp, _ := NewTemplate(endpoints())
	buf := make([]byte, 0, 2048)
	p := payloadOf(100)
	f := &Filter{MAC: macB, Addr: addrB.Addr(), Port: 5000}
	allocs := testing.AllocsPerRun(1000, func() {
		fr := tp.Append(buf[:0], p)
		if _, r := Parse(fr, f); r != OK {
			panic(r)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per build+parse", allocs)
	}
}

func BenchmarkAppend100(b *testing.B) {
	tp, _ := NewTemplate(endpoints())
	buf := make([]byte, 0, 2048)
	p := payloadOf(100)
	b.SetBytes(100)
	for b.Loop() {
		buf = tp.Append(buf[:0], p)
	}
}

func BenchmarkParse100(b *testing.B) {
	tp, _ := NewTemplate(endpoints())
	fr := tp.Append(nil, payloadOf(100))
	f := &Filter{MAC: macB, Addr: addrB.Addr(), Port: 5000}
	b.SetBytes(100)
	for b.Loop() {
		Parse(fr, f)
	}
}
