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
	f.Add([]byte{})
	f.Add(make([]byte, 13))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Decode(append([]byte(nil), b...), 0)
		_ = d.String()
		_ = d.Opts()
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
