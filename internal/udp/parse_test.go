package udp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

// good returns a frame from A to B carrying an n-byte payload.
func good(n int) []byte {
	tp, _ := NewTemplate(endpoints())
	return tp.Append(nil, payloadOf(n))
}

func fixIP(f []byte) {
	hl := int(f[14]&0x0f) * 4
	binary.BigEndian.PutUint16(f[24:26], 0)
	binary.BigEndian.PutUint16(f[24:26], naiveChecksum(f[14:14+hl]))
}

var ours = Filter{MAC: macB, Addr: addrB.Addr(), Port: 5000}

// verdictCase is a frame and what Parse says of it with filter.
type verdictCase struct {
	name   string
	frame  func() []byte
	filter Filter
	want   Reason
}

// runVerdicts runs each case as a subtest: Parse says want and leaves the
// frame as it was, and a frame it accepts is from src (any port) to dst,
// from macA. It returns the verdicts counted.
func runVerdicts(t *testing.T, cases []verdictCase, src, dst netip.AddrPort) *Counters {
	var c Counters
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.frame()
			orig := append([]byte(nil), f...)
			d, r := Parse(f, &tc.filter)
			if r != tc.want {
				t.Fatalf("Parse = %v, want %v", r, tc.want)
			}
			if !bytes.Equal(f, orig) {
				t.Fatal("Parse modified the frame")
			}
			if r == OK && (d.From.Addr() != src.Addr() || d.To != dst || d.SrcMAC != [6]byte(macA)) {
				t.Fatalf("parsed %+v", d)
			}
			c.Count(r)
		})
	}
	return &c
}

func TestParseVerdicts(t *testing.T) {
	cases := []verdictCase{
		{"good", func() []byte { return good(100) }, ours, OK},
		{"good, any filter", func() []byte { return good(100) }, Filter{}, OK},
		{"padded short frame", func() []byte { return good(1) }, ours, OK},
		{"empty payload", func() []byte { return good(0) }, ours, OK},
		{"zero UDP checksum means none", func() []byte {
			f := good(100)
			f[34+6], f[34+7] = 0, 0
			f[50] ^= 0xff // the payload changes, no checksum tells
			return f
		}, ours, OK},
		{"shorter than Ethernet", func() []byte { return good(100)[:13] }, ours, Short},
		{"IPv6 EtherType to an IPv4 filter", func() []byte { f := good(100); f[12], f[13] = 0x86, 0xdd; return f }, ours, OtherFamily},
		{"ARP", func() []byte { f := good(100); f[12], f[13] = 0x08, 0x06; return f }, ours, NotIPv4},
		{"802.1Q tag", func() []byte { f := good(100); f[12], f[13] = 0x81, 0x00; return f }, ours, VLAN},
		{"802.1ad tag", func() []byte { f := good(100); f[12], f[13] = 0x88, 0xa8; return f }, ours, VLAN},
		{"other MAC", func() []byte { f := good(100); f[5] = 0x0c; return f }, ours, OtherMAC},
		{"broadcast MAC", func() []byte { f := good(100); copy(f, []byte{255, 255, 255, 255, 255, 255}); return f }, ours, OtherMAC},
		{"truncated IPv4", func() []byte { return good(100)[:14+19] }, ours, Short},
		{"version 6 in IPv4 EtherType", func() []byte { f := good(100); f[14] = 0x65; fixIP(f); return f }, ours, BadVersion},
		{"IHL 4", func() []byte { f := good(100); f[14] = 0x44; return f }, ours, BadIHL},
		{"IHL beyond frame", func() []byte { f := good(100)[:14+20]; f[14] = 0x46; return f }, ours, Short},
		{"bad IPv4 checksum", func() []byte { f := good(100); f[22]--; /* TTL */ return f }, ours, BadIPChecksum},
		{"damaged destination address", func() []byte { f := good(100); f[33] ^= 4; return f }, ours, BadIPChecksum},
		{"TCP", func() []byte { f := good(100); f[23] = 6; fixIP(f); return f }, ours, OtherProto},
		{"other address", func() []byte { f := good(100); f[33] = 3; fixIP(f); return f }, ours, OtherAddr},
		{"IP options", func() []byte {
			g := good(100)
			f := append([]byte(nil), g[:34]...)
			f = append(f, 1, 1, 1, 0) // NOP NOP NOP EOL
			f = append(f, g[34:]...)
			f[14] = 0x46
			binary.BigEndian.PutUint16(f[16:18], uint16(len(f)-14))
			fixIP(f)
			return f
		}, ours, IPOptions},
		{"more fragments", func() []byte { f := good(100); f[20] |= 0x20; fixIP(f); return f }, ours, Fragment},
		{"non-first fragment", func() []byte { f := good(100); f[20], f[21] = 0, 8; fixIP(f); return f }, ours, Fragment},
		{"total length beyond frame", func() []byte {
			f := good(100)
			binary.BigEndian.PutUint16(f[16:18], 129)
			fixIP(f)
			return f
		}, ours, BadTotalLen},
		{"trailing bytes beyond 60", func() []byte { f := append(good(100), 0, 0); return f }, ours, BadTotalLen},
		{"padding beyond 60", func() []byte { f := append(good(1), 0, 0, 0, 0); return f }, ours, BadTotalLen},
		{"total length too short for UDP", func() []byte {
			f := good(1)
			binary.BigEndian.PutUint16(f[16:18], 27)
			fixIP(f)
			return f
		}, ours, BadTotalLen},
		{"other port", func() []byte { f := good(100); f[34+3]++; return f }, ours, OtherPort},
		{"UDP length too long", func() []byte { f := good(100); f[34+5]++; return f }, ours, BadUDPLen},
		{"UDP length too short", func() []byte { f := good(100); f[34+5]--; return f }, ours, BadUDPLen},
		{"bad UDP checksum", func() []byte { f := good(100); f[60] ^= 1; return f }, ours, BadUDPChecksum},
		{"damaged source port", func() []byte { f := good(100); f[34] ^= 0x80; return f }, ours, BadUDPChecksum},
	}
	c := runVerdicts(t, cases, addrA, addrB)
	if c.Class(ClassDelivered) != 5 || c.Class(ClassFiltered) != 9 || c.Class(ClassBadChecksum) != 4 ||
		c.Class(ClassMalformed) != uint64(len(cases))-18 {
		t.Fatalf("classes: delivered %d filtered %d malformed %d checksum %d", c.Class(ClassDelivered),
			c.Class(ClassFiltered), c.Class(ClassMalformed), c.Class(ClassBadChecksum))
	}
	layers := c.AppendLayers(nil, "udp")
	if len(layers) != int(numReasons)-1 {
		t.Fatalf("%d layer counters", len(layers))
	}
	for _, l := range layers {
		if l.Loss || l.Layer != "udp" || l.Name == "unknown" || l.Name == "ok" {
			t.Fatalf("layer counter %+v", l)
		}
		if l.Name == "vlan" && l.Value != 2 {
			t.Fatalf("vlan counted %d", l.Value)
		}
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := OK; r < numReasons; r++ {
		n := r.String()
		if n == "" || seen[n] {
			t.Fatalf("reason %d has name %q", r, n)
		}
		seen[n] = true
	}
	if Reason(200).String() != "unknown" {
		t.Fatal("out of range name")
	}
}

// FuzzParse feeds Parse arbitrary frames. It must not panic, must not
// modify the frame, and what it accepts must be a consistent datagram:
// correct checksums by the reference implementation, the payload inside
// the frame, and a frame rebuilt from the parsed fields parses the same.
func FuzzParse(f *testing.F) {
	for _, n := range []int{0, 1, 18, 100, 1472} {
		f.Add(good(n))
	}
	opt := good(10)
	opt[14] = 0x46
	f.Add(opt)
	frag := good(10)
	frag[20] |= 0x20
	fixIP(frag)
	f.Add(frag)
	f.Add([]byte{})
	f.Add(make([]byte, 60))
	f.Fuzz(func(t *testing.T, frame []byte) { fuzzParse(t, frame, ours) })
}

// fuzzParse is the body of FuzzParse and FuzzParse6: Parse, with no
// filter and with ours, must not panic or modify frame, and a datagram it
// accepts (of either family) is consistent: correct checksums by the
// reference implementation (over IPv6 a non-zero UDP checksum, RFC 8200
// §8.1), the payload where the headers say, and a frame rebuilt from the
// parsed fields parses the same.
func fuzzParse(t *testing.T, frame []byte, ours Filter) {
	orig := append([]byte(nil), frame...)
	for _, filt := range []Filter{{}, ours} {
		d, r := Parse(frame, &filt)
		if !bytes.Equal(frame, orig) {
			t.Fatal("Parse modified the frame")
		}
		if r >= numReasons {
			t.Fatalf("reason %d", r)
		}
		if r != OK {
			continue
		}
		if binary.BigEndian.Uint16(frame[12:14]) == EtherIPv6 {
			pl := int(binary.BigEndian.Uint16(frame[18:20]))
			u := frame[54 : 54+pl]
			if Header(u).Checksum() == 0 || naive6(frame[22:38], frame[38:54], u) != 0 {
				t.Fatal("accepted a zero or wrong UDP checksum")
			}
			if len(d.Payload) != pl-8 || (len(d.Payload) > 0 && &d.Payload[0] != &frame[62]) {
				t.Fatal("payload not where the headers say")
			}
		} else {
			if naiveChecksum(frame[14:34]) != 0 {
				t.Fatal("accepted a bad IPv4 checksum")
			}
			tl := int(binary.BigEndian.Uint16(frame[16:18]))
			u := frame[34 : 14+tl]
			if sum := binary.BigEndian.Uint16(u[6:8]); sum != 0 {
				if want := UDPChecksum(d.From.Addr().As4(), d.To.Addr().As4(), u); want != sum {
					t.Fatalf("accepted UDP checksum %#04x, want %#04x", sum, want)
				}
			}
			if len(d.Payload) != tl-28 || (len(d.Payload) > 0 && &d.Payload[0] != &frame[42]) {
				t.Fatal("payload not where the headers say")
			}
		}
		tp, err := NewTemplate(Endpoints{SrcMAC: net.HardwareAddr(d.SrcMAC[:]), DstMAC: net.HardwareAddr(frame[0:6]),
			Src: d.From, Dst: d.To})
		if err != nil {
			t.Fatal(err)
		}
		d2, r2 := Parse(tp.Append(nil, d.Payload), &filt)
		if r2 != OK || !bytes.Equal(d2.Payload, d.Payload) || d2.From != d.From || d2.To != d.To {
			t.Fatalf("rebuilt frame parsed as %v", r2)
		}
	}
}

func TestParseIPv4Accessors(t *testing.T) {
	f := good(100)
	ip := IPv4(f[14:])
	if ip.Version() != 4 || ip.HeaderLen() != 20 || ip.TotalLen() != 128 || ip.Protocol() != 17 ||
		ip.Src() != netip.MustParseAddr("198.18.0.1") || ip.Dst() != netip.MustParseAddr("198.18.0.2") || ip.IsFragment() {
		t.Fatal("accessors")
	}
	if Ethernet(f).Type() != EtherIPv4 || Header(f[34:]).Length() != 108 || MaxPayload(1500) != 1472 || FrameLen(100) != 142 {
		t.Fatal("helpers")
	}
}
