package conformance

import (
	"net"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	ipA  = net.IP{198, 18, 0, 1}
	ipB  = net.IP{198, 18, 0, 2}
)

func build(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// sampleFrames are good frames of every kind Decode checks.
func sampleFrames(t testing.TB) map[string][]byte {
	eth := func() *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
	}
	ip := func(p layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: p, SrcIP: ipA, DstIP: ipB}
	}
	out := map[string][]byte{}
	i := ip(layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, Seq: 100, Ack: 200, ACK: true, PSH: true, Window: 1000,
		Options: tsOption(1, 2)}
	tcp.SetNetworkLayerForChecksum(i)
	out["tcp"] = build(t, eth(), i, tcp, gopacket.Payload("hello, odd"))
	i = ip(layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: 3, DstPort: 4}
	udp.SetNetworkLayerForChecksum(i)
	out["udp"] = build(t, eth(), i, udp, gopacket.Payload("datagram"))
	out["icmp"] = build(t, eth(), ip(layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 2}, gopacket.Payload("ping"))
	frag := ip(layers.IPProtocolUDP)
	frag.Flags, frag.FragOffset = layers.IPv4MoreFragments, 0
	out["fragment"] = build(t, eth(), frag, gopacket.Payload(make([]byte, 64)))
	out["arp"] = build(t, &layers.Ethernet{SrcMAC: macA, DstMAC: broadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: ipA, DstHwAddress: make([]byte, 6), DstProtAddress: ipB})
	return out
}

// TestDecodeChecks decodes good frames cleanly, and finds one flipped bit
// anywhere in an IPv4 header or a transport message.
func TestDecodeChecks(t *testing.T) {
	for name, f := range sampleFrames(t) {
		d := Decode(f, 0)
		if len(d.Bad) > 0 {
			t.Errorf("%s: good frame reported bad: %v", name, d.Bad)
		}
		if d.String() == "" {
			t.Errorf("%s: no description", name)
		}
		if name == "arp" || name == "fragment" {
			continue
		}
		// Every bit from the IPv4 header's checksum field to the end,
		// except the length and fragment fields (which change what is
		// checked rather than its sum).
		end := 14 + (int(f[16])<<8 | int(f[17])) // gopacket pads to 60 bytes; padding is not checked
		for i := 14; i < end; i++ {
			if i >= 16 && i < 18 || i >= 20 && i < 22 || i == 14 {
				continue
			}
			g := append([]byte(nil), f...)
			g[i] ^= 0x10
			if len(checkSums(g)) == 0 && !(name == "udp" && i >= 40 && i < 42) {
				t.Errorf("%s: bit flipped at byte %d not found", name, i)
			}
		}
	}
	zero := sampleFrames(t)["udp"]
	zero[14+20+6], zero[14+20+7] = 0, 0
	if bad := checkSums(zero); len(bad) != 0 {
		t.Errorf("a UDP checksum of zero (none, RFC 768) reported bad: %v", bad)
	}
}

// TestDecodeOptions reads the TCP options the bench puts in a SYN back.
func TestDecodeOptions(t *testing.T) {
	i := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: ipA, DstIP: ipB}
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, Seq: 7, SYN: true, Window: 100, Options: synOptions(FullOpts, 11, 0, false)}
	tcp.SetNetworkLayerForChecksum(i)
	f := Decode(build(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, i, tcp), 0)
	o := f.Opts()
	if o.MSS != 1460 || o.WScale != 7 || !o.SACKOK || !o.TS || o.TSVal != 11 || o.TSE != 0 {
		t.Fatalf("options %+v", o)
	}
	if f.Flags() != "S" || !strings.Contains(f.String(), "wscale 7") {
		t.Fatalf("flags %q, %s", f.Flags(), f)
	}
}

// TestMutantRewrites checks the mutants' frame rewrites: padding trimmed,
// windows opened and checksums fixed so that Decode finds them good.
func TestMutantRewrites(t *testing.T) {
	fs := sampleFrames(t)
	arp := append(fs["arp"], make([]byte, 18)...)
	if got := trimPadding(arp, nil); len(got) != 42 {
		t.Errorf("ARP trimmed to %d bytes, want 42", len(got))
	}
	tcp := fs["tcp"]
	if got := trimPadding(append(append([]byte(nil), tcp...), 0, 0, 0), nil); len(got) != len(tcp) {
		t.Errorf("TCP trimmed to %d bytes, want %d", len(got), len(tcp))
	}
	w := Decode(openWindow(tcp, nil), 0)
	if len(w.Bad) > 0 || w.TCP.Window != 0xffff {
		t.Errorf("opened window %d, bad %v", w.TCP.Window, w.Bad)
	}
	for name, f := range fs {
		g := append([]byte(nil), f...)
		g[len(g)-1] ^= 0xff
		g[24] ^= 0x01 // IPv4 header checksum
		if bad := checkSums(fixChecksums(g, nil)); len(bad) > 0 {
			t.Errorf("%s: fixed frame still bad: %v", name, bad)
		}
	}
	if dropRST(tcp, nil) == nil || dropARPReply(fs["arp"], nil) == nil {
		t.Errorf("a frame that is neither RST nor ARP reply was dropped")
	}
}

// TestParseSNMP reads /proc/net/snmp's pairs of lines.
func TestParseSNMP(t *testing.T) {
	in := "Ip: Forwarding InHdrErrors\nIp: 2 5\nTcp: RtoMin OutRsts\nTcp: 200 -1\n"
	got := map[string]uint64{}
	if err := parseSNMP(in, func(n string, v uint64) { got[n] = v }); err != nil {
		t.Fatal(err)
	}
	if got["Ip.InHdrErrors"] != 5 || got["Tcp.RtoMin"] != 200 || len(got) != 4 {
		t.Fatalf("got %v", got)
	}
	if err := parseSNMP("Ip: A B\nIp: 1\n", func(string, uint64) {}); err == nil {
		t.Fatal("a short value line was accepted")
	}
}

// FuzzDecode feeds arbitrary bytes to the frame decoder and the checksum
// code: they never panic, and a frame whose checksums fixChecksums has
// recomputed verifies.
func FuzzDecode(f *testing.F) {
	for _, fr := range sampleFrames(f) {
		f.Add(fr)
	}
	for _, fr := range sampleFrames6(f) {
		f.Add(fr)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 13))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Decode(append([]byte(nil), b...), 0)
		_ = d.String()
		_ = d.Opts()
		_ = checkSums6(b)
		for _, rw := range []func(f, scratch []byte) []byte{mss6As1460, clearNASolicited, broadcastNS, trimOverlap6(), broadcastARPRequests, dropHopByHop} {
			_ = rw(append([]byte(nil), b...), nil)
		}
		bad := checkSums(b)
		unusable := false
		for _, s := range bad {
			unusable = unusable || strings.Contains(s, "unusable")
		}
		if unusable {
			return
		}
		if still := checkSums(fixChecksums(b, nil)); len(still) > 0 {
			t.Fatalf("after fixChecksums: %v", still)
		}
		_ = trimPadding(b, nil)
		_ = openWindow(b, nil)
	})
}

var (
	ip6A = net.ParseIP("2001:2:0:ff::1")
	ip6B = net.ParseIP("2001:2:0:ff::2")
)

// sampleFrames6 are good IPv6 frames of every kind Decode checks.
func sampleFrames6(t testing.TB) map[string][]byte {
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}
	ip := func(p layers.IPProtocol) *layers.IPv6 {
		return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: p, SrcIP: ip6A, DstIP: ip6B}
	}
	out := map[string][]byte{}
	i := ip(layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, Seq: 100, SYN: true, Window: 1000, Options: synOptions(PlainOpts, 0, 0, false)}
	tcp.SetNetworkLayerForChecksum(i)
	out["tcp6"] = build(t, eth, i, tcp, gopacket.Payload("hello, odd"))
	i = ip(layers.IPProtocolIPv6Destination)
	tcp = &layers.TCP{SrcPort: 1, DstPort: 2, Seq: 100, SYN: true, Window: 1000}
	tcp.SetNetworkLayerForChecksum(i)
	out["destopts-tcp6"] = build(t, eth, i, gopacket.Payload(DestOpts(layers.IPProtocolTCP, []byte{0x1e, 2, 1, 2})), tcp)
	i = ip(layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: 3, DstPort: 4}
	udp.SetNetworkLayerForChecksum(i)
	out["udp6"] = build(t, eth, i, udp, gopacket.Payload("datagram"))
	i = ip(layers.IPProtocolICMPv6)
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
	icmp.SetNetworkLayerForChecksum(i)
	out["echo6"] = build(t, eth, i, icmp, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 2}, gopacket.Payload("ping"))
	i = ip(layers.IPProtocolICMPv6)
	i.HopLimit = 255
	icmp = &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	icmp.SetNetworkLayerForChecksum(i)
	out["na"] = build(t, eth, i, icmp, &layers.ICMPv6NeighborAdvertisement{Flags: naSolicited | naOverride, TargetAddress: ip6A,
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: macA}}})
	out["fragment6"] = build(t, eth, ip(layers.IPProtocolIPv6Fragment),
		gopacket.Payload([]byte{byte(layers.IPProtocolICMPv6), 0, 0, 1, 0, 0, 0, 7}), gopacket.Payload(make([]byte, 64)))
	return out
}

// TestDecodeChecks6 decodes good IPv6 frames cleanly, and finds one
// flipped bit in the addresses (the pseudo-header, RFC 8200 §8.1) or
// anywhere in the upper-layer message.
func TestDecodeChecks6(t *testing.T) {
	for name, f := range sampleFrames6(t) {
		d := Decode(f, 0)
		if len(d.Bad) > 0 || d.IP6 == nil {
			t.Errorf("%s: good frame reported bad or not IPv6: %v", name, d.Bad)
		}
		if d.String() == "" {
			t.Errorf("%s: no description", name)
		}
		if name == "fragment6" {
			if d.Frag6 == nil || d.TCP != nil || d.ICMP6 != nil {
				t.Errorf("fragment decoded as %v", d)
			}
			continue
		}
		for i := 14 + 8; i < len(f); i++ {
			g := append([]byte(nil), f...)
			g[i] ^= 0x10
			if i >= 14+40 && name == "destopts-tcp6" && i < 14+48 {
				continue // the options' bytes are not checksummed (padding, length: the walk)
			}
			if len(checkSums6(g)) == 0 {
				t.Errorf("%s: bit flipped at byte %d not found", name, i)
			}
		}
	}
	if d := Decode(sampleFrames6(t)["na"], 0); d.NA == nil || !d.NA.TargetAddress.Equal(ip6A) {
		t.Errorf("advertisement decoded as %v", d)
	}
	zero := sampleFrames6(t)["udp6"]
	zero[14+40+6], zero[14+40+7] = 0, 0
	if bad := checkSums6(zero); len(bad) == 0 {
		t.Errorf("a UDP checksum of zero over IPv6 (not allowed, RFC 8200 §8.1) reported good")
	}
}

// TestMutantRewrites6 checks the IPv6 mutants' rewrites: the frames they
// make decode as good, with the defect in.
func TestMutantRewrites6(t *testing.T) {
	fs := sampleFrames6(t)
	m := Decode(mss6As1460(fs["tcp6"], nil), 0)
	if len(m.Bad) > 0 || m.Opts().MSS != 1460 {
		t.Errorf("MSS rewritten to %d, bad %v", m.Opts().MSS, m.Bad)
	}
	na := Decode(clearNASolicited(fs["na"], nil), 0)
	if len(na.Bad) > 0 || na.NA.Flags&naSolicited != 0 {
		t.Errorf("advertisement flags %#x, bad %v", na.NA.Flags, na.Bad)
	}
	if dropICMP6Type(128)(fs["echo6"], nil) != nil || dropICMP6Type(4)(fs["echo6"], nil) == nil {
		t.Errorf("dropICMP6Type drops the wrong messages")
	}
	// Two fragments of one datagram, the second starting 8 bytes inside
	// the first: trimmed to start where the first ended.
	frag := func(off, n int, more bool) []byte {
		v := uint16(off)
		if more {
			v |= 1
		}
		fh := []byte{byte(layers.IPProtocolICMPv6), 0, byte(v >> 8), byte(v), 0, 0, 0, 9}
		return build(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6},
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Fragment, SrcIP: ip6A, DstIP: ip6B},
			gopacket.Payload(fh), gopacket.Payload(make([]byte, n)))
	}
	trim := trimOverlap6()
	if got := trim(frag(0, 16, true), nil); len(got) != 14+40+8+16 {
		t.Fatalf("first fragment rewritten to %d bytes", len(got))
	}
	d := Decode(trim(frag(8, 24, false), nil), 0)
	if d.Frag6 == nil || d.Frag6.FragmentOffset != 2 || len(d.Payload) != 16 || d.Frag6.MoreFragments {
		t.Fatalf("overlapping fragment rewritten to %v", d)
	}
}
