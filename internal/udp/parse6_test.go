package udp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	addr6A = netip.MustParseAddrPort("[2001:2::1]:40000")
	addr6B = netip.MustParseAddrPort("[2001:2::2]:5000")
	ours6  = Filter{MAC: macB, Addr: addr6B.Addr(), Port: 5000}
)

// good6 returns an IPv6 frame from A to B carrying an n-byte payload.
func good6(n int) []byte {
	tp, _ := NewTemplate(Endpoints{SrcMAC: macA, DstMAC: macB, Src: addr6A, Dst: addr6B})
	return tp.Append(nil, payloadOf(n))
}

// fixUDP6 recomputes the UDP checksum of an IPv6 frame by the reference
// (naiveChecksum over a pseudo-header built here).
func fixUDP6(f []byte) {
	pl := int(binary.BigEndian.Uint16(f[18:20]))
	u := f[54 : 54+pl]
	binary.BigEndian.PutUint16(u[6:8], 0)
	binary.BigEndian.PutUint16(u[6:8], naive6(f[22:38], f[38:54], u))
}

// naive6 is the UDP checksum over the IPv6 pseudo-header of RFC 8200 §8.1,
// written out byte by byte.
func naive6(src, dst, u []byte) uint16 {
	var ph []byte
	ph = append(ph, src...)
	ph = append(ph, dst...)
	ph = binary.BigEndian.AppendUint32(ph, uint32(len(u)))
	ph = append(ph, 0, 0, 0, ProtoUDP)
	ph = append(ph, u...)
	return naiveChecksum(ph)
}

// TestParseVerdicts6: IPv6/UDP frames and what Parse says of each damage
// (RFC 8200 §3 header, §8.1 the mandatory UDP checksum).
func TestParseVerdicts6(t *testing.T) {
	withNext := func(nh byte) func() []byte {
		return func() []byte { f := good6(100); f[20] = nh; return f }
	}
	cases := []verdictCase{
		{"good", func() []byte { return good6(100) }, ours6, OK},
		{"good, any filter", func() []byte { return good6(100) }, Filter{}, OK},
		{"empty payload", func() []byte { return good6(0) }, ours6, OK},
		{"IPv4 to an IPv6 filter", func() []byte { return good(100) }, ours6, OtherFamily},
		{"truncated fixed header", func() []byte { return good6(100)[:14+39] }, ours6, Short},
		{"version 4 in IPv6 EtherType", func() []byte { f := good6(100); f[14] = 0x40; return f }, ours6, BadVersion},
		{"TCP", withNext(6), ours6, OtherProto},
		{"ICMPv6", withNext(58), ours6, OtherProto},
		{"other address", func() []byte { f := good6(100); f[53] = 9; return f }, ours6, OtherAddr},
		{"fragment header, other address", func() []byte { f := withNext(44)(); f[53] = 9; return f }, ours6, OtherAddr},
		{"fragment header", withNext(44), ours6, Fragment},
		{"hop-by-hop options", withNext(0), ours6, ExtHeader},
		{"routing header", withNext(43), ours6, ExtHeader},
		{"destination options", withNext(60), ours6, ExtHeader},
		{"payload length beyond frame", func() []byte { f := good6(100); f[19]++; return f }, ours6, BadTotalLen},
		{"trailing bytes", func() []byte { return append(good6(100), 0, 0) }, ours6, BadTotalLen},
		{"payload length below UDP", func() []byte {
			f := good6(0)
			binary.BigEndian.PutUint16(f[18:20], 7)
			return f[:14+40+7]
		}, ours6, BadTotalLen},
		{"other port", func() []byte { f := good6(100); f[54+3]++; return f }, ours6, OtherPort},
		{"UDP length too long", func() []byte { f := good6(100); f[54+5]++; return f }, ours6, BadUDPLen},
		{"zero UDP checksum", func() []byte { f := good6(100); f[54+6], f[54+7] = 0, 0; return f }, ours6, ZeroUDPChecksum6},
		{"bad UDP checksum", func() []byte { f := good6(100); f[70] ^= 1; return f }, ours6, BadUDPChecksum},
		{"damaged source address", func() []byte { f := good6(100); f[30] ^= 1; return f }, ours6, BadUDPChecksum},
		{"hop limit changes nothing", func() []byte { f := good6(100); f[21] = 1; return f }, ours6, OK},
	}
	runVerdicts(t, cases, addr6A, addr6B)
	if ZeroUDPChecksum6.Class() != ClassMalformed || OtherFamily.Class() != ClassFiltered || ExtHeader.Class() != ClassMalformed {
		t.Fatal("classes of the IPv6 reasons")
	}
}

// TestBuildParseRoundTrip6: IPv6 frames of every size parse back, with the
// hop limit, the checksum the reference computes, and no padding.
func TestBuildParseRoundTrip6(t *testing.T) {
	for _, n := range []int{0, 1, 17, 100, 1452, 8952} {
		e := Endpoints{SrcMAC: macA, DstMAC: macB, Src: addr6A, Dst: addr6B, TTL: 9}
		tp, err := NewTemplate(e)
		if err != nil {
			t.Fatal(err)
		}
		if tp.HeaderLen() != HeaderLen6 {
			t.Fatalf("header length %d", tp.HeaderLen())
		}
		p := payloadOf(n)
		f := tp.Append(nil, p)
		if len(f) != 62+n {
			t.Fatalf("n=%d: frame length %d", n, len(f))
		}
		d, r := Parse(f, &ours6)
		if r != OK || !bytes.Equal(d.Payload, p) || d.From != addr6A || d.To != addr6B {
			t.Fatalf("n=%d: Parse %v %+v", n, r, d)
		}
		if IPv6(f[14:]).HopLimit() != 9 || IPv6(f[14:]).PayloadLen() != 8+n {
			t.Fatalf("n=%d: hop limit %d payload length %d", n, IPv6(f[14:]).HopLimit(), IPv6(f[14:]).PayloadLen())
		}
		u := f[54:]
		if want := naive6(f[22:38], f[38:54], append(append([]byte(nil), u[:6]...), append([]byte{0, 0}, u[8:]...)...)); Header(u).Checksum() != want {
			t.Fatalf("n=%d: checksum %#04x, reference %#04x", n, Header(u).Checksum(), want)
		}
		if got := UDPChecksum6(addr6A.Addr().As16(), addr6B.Addr().As16(), u); got != Header(u).Checksum() {
			t.Fatalf("UDPChecksum6 %#04x", got)
		}
		buf := make([]byte, 9100)
		tw, _ := NewTemplate(e)
		if k := tw.Build(buf, p); !bytes.Equal(buf[:k], f) {
			t.Fatal("Build and Append differ")
		}
	}
}

// TestTemplateFamilies: a template takes two addresses of one family only.
func TestTemplateFamilies(t *testing.T) {
	bad := []Endpoints{
		{Src: addrA, Dst: addr6B},
		{Src: addr6A, Dst: addrB},
		{Src: netip.MustParseAddrPort("[::ffff:198.18.0.1]:1"), Dst: addr6B},
		{Src: netip.MustParseAddrPort("[fe80::1%eth0]:1"), Dst: addr6B},
	}
	for _, e := range bad {
		e.SrcMAC, e.DstMAC = macA, macB
		if _, err := NewTemplate(e); err == nil {
			t.Errorf("template %v -> %v accepted", e.Src, e.Dst)
		}
	}
}

// TestGopacketAgrees6 compares our IPv6 frames with gopacket's
// serialization, checksums computed by gopacket.
func TestGopacketAgrees6(t *testing.T) {
	for _, n := range []int{0, 5, 100, 1452} {
		tp, _ := NewTemplate(Endpoints{SrcMAC: macA, DstMAC: macB, Src: addr6A, Dst: addr6B, TTL: 33})
		p := payloadOf(n)
		f := tp.Append(nil, p)
		ip := &layers.IPv6{Version: 6, HopLimit: 33, NextHeader: layers.IPProtocolUDP,
			SrcIP: net.IP(addr6A.Addr().AsSlice()), DstIP: net.IP(addr6B.Addr().AsSlice())}
		u := &layers.UDP{SrcPort: 40000, DstPort: 5000}
		if err := u.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}, ip, u, gopacket.Payload(p))
		if err != nil {
			t.Fatal(err)
		}
		if want := buf.Bytes(); !bytes.Equal(f, want) {
			t.Fatalf("n=%d: our frame differs from gopacket's:\nours   %x\ntheirs %x", n, f[:62], want[:62])
		}
	}
}

// FuzzParse6 is FuzzParse (fuzzParse) seeded with IPv6 frames and
// filtering for an IPv6 address.
func FuzzParse6(f *testing.F) {
	for _, n := range []int{0, 1, 100, 1452} {
		f.Add(good6(n))
	}
	frag := good6(10)
	frag[20] = 44
	f.Add(frag)
	f.Add(good(10))
	f.Add(make([]byte, 62))
	f.Fuzz(func(t *testing.T, frame []byte) { fuzzParse(t, frame, ours6) })
}
