package stack

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/dgramio/dgramio/frameio/memio"
)

// v6TB is the testing.TB of a test run over IPv6: seg and synFrameX
// build their frames over IPv6 between addr6A and addr6B for it.
type v6TB struct{ testing.TB }

var (
	addr6A = netip.MustParseAddr("2001:2::1")
	addr6B = netip.MustParseAddr("2001:2::2")
)

// forFamilies runs f as subtests IPv4 and IPv6 (f's frames from seg and
// synFrameX are of that family).
func forFamilies(t *testing.T, f func(t testing.TB)) {
	t.Run("IPv4", func(t *testing.T) { f(t) })
	t.Run("IPv6", func(t *testing.T) { f(v6TB{t}) })
}

// ipLayer is the IP header of a test frame from B to A (or with fromA the
// other way) in t's family (v6TB: IPv6), and the Ethernet type for it.
func ipLayer(t testing.TB, fromA bool) (gopacket.NetworkLayer, layers.EthernetType) {
	if _, v6 := t.(v6TB); v6 {
		src, dst := addr6B, addr6A
		if fromA {
			src, dst = dst, src
		}
		return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}, layers.EthernetTypeIPv6
	}
	src, dst := addrB, addrA
	if fromA {
		src, dst = dst, src
	}
	return &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}, layers.EthernetTypeIPv4
}

// seg is an Ethernet frame with an ACK segment (flags added) carrying a
// timestamp option: from B:40000 to A:5000, or with fromA the other way
// (A is netstack's side in these tests), over IPv4, or IPv6 for a v6TB.
func seg(t testing.TB, fromA bool, seq, ack uint32, win uint16, payload int, extra func(*layers.TCP)) []byte {
	t.Helper()
	sport, dport := layers.TCPPort(40000), layers.TCPPort(5000)
	if fromA {
		sport, dport = dport, sport
	}
	ip, etype := ipLayer(t, fromA)
	tcp := &layers.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ack, ACK: true, Window: win, Options: []layers.TCPOption{
		{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{0, 0, 0, 9, 0, 0, 0, 8}},
	}}
	if extra != nil {
		extra(tcp)
	}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: etype},
		ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(bytes.Repeat([]byte{'x'}, payload)))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func view(t testing.TB, frame []byte) tcpView {
	t.Helper()
	v, ok := parseTCP(frame)
	if !ok {
		t.Fatalf("not a TCP frame: % x", frame)
	}
	return v
}

// TestZeroWindowACKSalvage: RFC 9293 §3.10.7.4, "If the RCV.WND is zero,
// no segments will be acceptable, but special allowance should be made to
// accept valid ACKs". Netstack (A) has advertised a zero window at
// RCV.NXT=1000; the peer's pure ACK at seq 1012 and its window probe with
// data, which netstack would drop whole, are preceded by a pure ACK at
// seq 1000 with the peer's ACK number, window and options, once per news;
// acceptable segments, corrupt ones, other connections and a reset one
// get none.
func TestZeroWindowACKSalvage(t *testing.T) { forFamilies(t, testZeroWindowACKSalvage) }

func testZeroWindowACKSalvage(t testing.TB) {
	var a ackSalvage
	buf := make([]byte, 200)
	a.sent(view(t, synFrameX(t, true, 4999, 1000, 1, 2, true))) // SYN-ACK, window scale 7
	a.sent(view(t, seg(t, true, 5000, 1000, 0, 0, nil)))        // zero window at RCV.NXT 1000

	check := func(name string, frame []byte, wantAck uint32, wantWin uint16) {
		t.Helper()
		got := a.received(view(t, frame), buf)
		if wantAck == 0 {
			if got != nil {
				t.Errorf("%s: salvaged % x, want nothing", name, got)
			}
			return
		}
		if got == nil {
			t.Fatalf("%s: nothing salvaged", name)
		}
		v := view(t, got)
		if v.tcp.SequenceNumber() != 1000 || v.tcp.AckNumber() != wantAck || v.tcp.WindowSize() != wantWin ||
			v.payload != 0 || v.tcp.Flags() != header.TCPFlagAck || !checksumsValid(v) {
			t.Errorf("%s: salvaged seq %d ack %d win %d payload %d flags %v csum ok %v; want seq 1000 ack %d win %d, a bare ACK",
				name, v.tcp.SequenceNumber(), v.tcp.AckNumber(), v.tcp.WindowSize(), v.payload, v.tcp.Flags(),
				checksumsValid(v), wantAck, wantWin)
		}
		if !bytes.Equal(v.tcp.Options(), view(t, frame).tcp.Options()) {
			t.Errorf("%s: options % x, want the original's % x", name, v.tcp.Options(), view(t, frame).tcp.Options())
		}
	}
	check("pure ACK beyond RCV.NXT", seg(t, false, 1012, 6000, 500, 0, nil), 6000, 500)
	check("the same ACK again", seg(t, false, 1012, 6000, 500, 0, nil), 0, 0)
	check("probe with data, old ACK", seg(t, false, 1000, 6000, 500, 12, nil), 0, 0)
	check("probe with data, new ACK", seg(t, false, 1000, 7000, 500, 12, func(s *layers.TCP) { s.PSH = true }), 7000, 500)
	check("same ACK, new window", seg(t, false, 1012, 7000, 900, 0, nil), 7000, 900)
	bad := seg(t, false, 1012, 8000, 900, 0, nil)
	bad[len(bad)-1] ^= 0xff // inside the options: the TCP checksum fails
	check("corrupt segment", bad, 0, 0)
	other := seg(t, false, 1012, 9000, 900, 0, func(s *layers.TCP) { s.SrcPort = 40001 })
	check("another connection", other, 0, 0)

	// An open window (10 << 7 bytes): data inside it is acceptable and
	// netstack reads its ACK itself; data beyond its edge is not.
	a.sent(view(t, seg(t, true, 5000, 1000, 10, 0, nil)))
	check("data inside the window", seg(t, false, 1000, 9000, 900, 100, nil), 0, 0)
	check("old ACK beyond the edge", seg(t, false, 1000+1280+1, 9000, 900, 100, nil), 0, 0)
	check("new ACK beyond the edge", seg(t, false, 1000+1280+1, 9500, 900, 100, nil), 9500, 900)

	// A corrupt segment judged acceptable (its checksum is netstack's to
	// check) with a wild ACK number must not hide the genuine ACKs that
	// follow (found with the 256 MiB soak: 0.1% corruption stalled it).
	wild := seg(t, false, 1000, 0x70000000, 900, 100, nil)
	wild[len(wild)-1] ^= 0xff
	check("corrupt, inside the window", wild, 0, 0)
	a.sent(view(t, seg(t, true, 5000, 1000, 0, 0, nil)))
	check("genuine ACK after a corrupt one", seg(t, false, 1012, 9600, 900, 0, nil), 9600, 900)

	// A corrupt acceptable segment that carries the genuine ACK number
	// and window (the byte the wire flipped is elsewhere) is dropped by
	// netstack's checksum check: netstack never heard them, so the same
	// ACK on a segment it would refuse is still news.
	same := seg(t, false, 1000, 9800, 950, 0, nil)
	same[len(same)-1] ^= 0xff
	check("corrupt, acceptable, the genuine ACK", same, 0, 0)
	check("that ACK beyond RCV.NXT", seg(t, false, 1012, 9800, 950, 0, nil), 9800, 950)

	a.sent(view(t, seg(t, true, 5000, 1000, 0, 0, func(s *layers.TCP) { s.RST = true })))
	check("after netstack's RST", seg(t, false, 1012, 9900, 900, 0, nil), 0, 0)
}

// TestSalvageAfterStaleWindow: the table judges a peer's segment by what
// netstack last advertised, and netstack by where it is; when a burst has
// filled netstack's window before its ACK said so, netstack refuses a
// pure ACK the table took for acceptable (RFC 9293 §3.10.7.4), and its
// retransmission of acknowledged data shows it. The peer's next segment
// with that same ACK is then salvaged (found by the io.Copy echo on
// tcp-xdp: netstack retransmitted its first unacknowledged segment with
// RTO backoff for a minute while the peer's identical ACKs, all beyond
// its zero window, were judged old news).
func TestSalvageAfterStaleWindow(t *testing.T) { forFamilies(t, testSalvageAfterStaleWindow) }

func testSalvageAfterStaleWindow(t testing.TB) {
	var a ackSalvage
	buf := make([]byte, 200)
	a.sent(view(t, synFrameX(t, true, 4999, 1000, 1, 2, true))) // SYN-ACK, window scale 7
	a.sent(view(t, seg(t, true, 5000, 1000, 10, 0, nil)))       // window 1280 at RCV.NXT 1000
	ack := seg(t, false, 1008, 6000, 500, 0, nil)               // beyond netstack's real RCV.NXT, inside what it advertised
	if got := a.received(view(t, ack), buf); got != nil {
		t.Fatalf("salvaged a segment inside the advertised window")
	}
	a.sent(view(t, seg(t, true, 6000, 1000, 0, 0, nil))) // netstack: zero window at 1000
	if got := a.received(view(t, ack), buf); got != nil {
		t.Fatalf("salvaged an ACK the table believes netstack took")
	}
	a.sent(view(t, seg(t, true, 5000, 1000, 0, 100, nil))) // it sends again data the peer acknowledged
	got := a.received(view(t, ack), buf)
	if got == nil {
		t.Fatal("the ACK netstack missed was not salvaged")
	}
	if v := view(t, got); v.tcp.SequenceNumber() != 1000 || v.tcp.AckNumber() != 6000 || v.payload != 0 {
		t.Fatalf("salvaged seq %d ack %d payload %d, want seq 1000 ack 6000 and no payload",
			v.tcp.SequenceNumber(), v.tcp.AckNumber(), v.payload)
	}
	if got := a.received(view(t, ack), buf); got != nil {
		t.Fatalf("salvaged the same ACK twice")
	}
}

// TestSalvageAfterStaleWindowUpdate: as TestSalvageAfterStaleWindow, for
// a window update alone: netstack refused the peer's segment that opened
// its window (the table had judged it acceptable), and probes the window
// it believes closed with the same byte again; the peer's next segment
// with that window is salvaged.
func TestSalvageAfterStaleWindowUpdate(t *testing.T) {
	forFamilies(t, testSalvageAfterStaleWindowUpdate)
}

func testSalvageAfterStaleWindowUpdate(t testing.TB) {
	var a ackSalvage
	buf := make([]byte, 200)
	a.sent(view(t, synFrameX(t, true, 4999, 1000, 1, 2, true))) // SYN-ACK, window scale 7
	a.sent(view(t, seg(t, true, 5000, 1000, 10, 0, nil)))       // window 1280 at RCV.NXT 1000
	shut := seg(t, false, 1000, 6000, 0, 0, nil)                // the peer's zero window, taken
	if got := a.received(view(t, shut), buf); got != nil {
		t.Fatalf("salvaged an acceptable segment")
	}
	open := seg(t, false, 1008, 6000, 500, 0, nil) // the update, past netstack's real RCV.NXT
	if got := a.received(view(t, open), buf); got != nil {
		t.Fatalf("salvaged a segment inside the advertised window")
	}
	a.sent(view(t, seg(t, true, 6000, 1000, 0, 0, nil))) // netstack: zero window at 1000
	a.sent(view(t, seg(t, true, 6000, 1000, 0, 1, nil))) // its window probe: one new byte
	if got := a.received(view(t, open), buf); got != nil {
		t.Fatalf("salvaged before netstack showed it missed the update")
	}
	a.sent(view(t, seg(t, true, 6000, 1000, 0, 1, nil))) // the same probe again
	got := a.received(view(t, open), buf)
	if got == nil {
		t.Fatal("the window update netstack missed was not salvaged")
	}
	if v := view(t, got); v.tcp.SequenceNumber() != 1000 || v.tcp.AckNumber() != 6000 || v.tcp.WindowSize() != 500 {
		t.Fatalf("salvaged seq %d ack %d win %d, want seq 1000 ack 6000 win 500",
			v.tcp.SequenceNumber(), v.tcp.AckNumber(), v.tcp.WindowSize())
	}
}

// TestSalvageWithoutWindowScale: a peer's SYN-ACK without the window
// scale option leaves netstack's window unscaled (RFC 7323 §2.2), so a
// window field of 10 is 10 bytes and a segment past it is refused.
func TestSalvageWithoutWindowScale(t *testing.T) { forFamilies(t, testSalvageWithoutWindowScale) }

func testSalvageWithoutWindowScale(t testing.TB) {
	var a ackSalvage
	buf := make([]byte, 200)
	a.sent(view(t, synFrameX(t, true, 999, 0, 1, 0, false))) // netstack's SYN offers scale 7
	synack := seg(t, false, 4999, 1000, 29200, 0, func(s *layers.TCP) { s.SYN = true; s.Options = nil })
	if got := a.received(view(t, synack), buf); got != nil {
		t.Fatalf("salvaged a SYN-ACK")
	}
	a.sent(view(t, seg(t, true, 1000, 5000, 10, 0, nil)))
	if got := a.received(view(t, seg(t, false, 5000+11, 1000, 100, 100, nil)), buf); got == nil {
		t.Errorf("a segment past an unscaled 10-byte window got no salvaged ACK")
	}
	if got := a.received(view(t, seg(t, false, 5000, 1001, 100, 5, nil)), buf); got != nil {
		t.Errorf("a segment inside the window got a salvaged ACK")
	}
}

// FuzzZeroWindowSalvage feeds arbitrary frames to both sides of the
// table: it never panics, and whatever it hands netstack is a bare ACK
// with valid checksums and no payload.
func FuzzZeroWindowSalvage(f *testing.F) {
	f.Add(seg(f, true, 5000, 1000, 0, 0, nil), seg(f, false, 1012, 6000, 500, 0, nil))
	f.Add(synFrameX(f, true, 4999, 1000, 1, 2, true), seg(f, false, 1000, 7000, 500, 12, nil))
	f.Add(seg(v6TB{f}, true, 5000, 1000, 0, 0, nil), seg(v6TB{f}, false, 1012, 6000, 500, 0, nil))
	f.Add(synFrameX(v6TB{f}, true, 4999, 1000, 1, 2, true), seg(v6TB{f}, false, 1000, 7000, 500, 12, nil))
	f.Fuzz(func(t *testing.T, out, in []byte) {
		var a ackSalvage
		buf := make([]byte, ethHeader+120)
		if v, ok := parseTCP(out); ok {
			a.sent(v)
		}
		v, ok := parseTCP(in)
		if !ok {
			return
		}
		got := a.received(v, buf)
		if got == nil {
			return
		}
		w, ok := parseTCP(got)
		if !ok || w.payload != 0 || w.tcp.Flags() != header.TCPFlagAck || !checksumsValid(w) {
			t.Fatalf("salvaged an invalid frame % x from % x", got, in)
		}
	})
}

// recorder is a netstack dispatcher that keeps the frames it is handed.
type recorder struct{ frames [][]byte }

func (r *recorder) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *nstack.PacketBuffer) {
	r.frames = append(r.frames, pkt.ToView().AsSlice())
}

func (r *recorder) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *nstack.PacketBuffer) {}

// TestEndpointSalvage: through the Endpoint, in either family, netstack's
// zero window (seen on its way out) makes the peer's pure ACK beyond
// RCV.NXT arrive preceded by the salvaged ACK at RCV.NXT (RFC 9293
// §3.10.7.4), counted as acks_salvaged.
func TestEndpointSalvage(t *testing.T) { forFamilies(t, testEndpointSalvage) }

func testEndpointSalvage(t testing.TB) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	e := NewEndpoint(pa)
	e.SetLinkAddress(tcpip.LinkAddress([]byte{2, 0, 0, 0, 0, 2})) // seg's destination MAC
	r := &recorder{}
	e.Attach(r)
	for _, f := range [][]byte{synFrameX(t, true, 4999, 1000, 1, 2, true), seg(t, true, 5000, 1000, 0, 0, nil)} {
		e.ackMu.Lock()
		e.acks.sent(view(t, f)) // what WritePackets notes of netstack's SYN-ACK and its zero window
		e.ackMu.Unlock()
	}
	in := seg(t, false, 1012, 6000, 500, 0, nil)
	e.dispatch(in)
	if len(r.frames) != 2 || !bytes.Equal(r.frames[1], in) {
		t.Fatalf("netstack was handed %d frames, want the salvaged ACK then the original", len(r.frames))
	}
	v := view(t, r.frames[0])
	if _, v6 := t.(v6TB); v.v6 != v6 || v.tcp.SequenceNumber() != 1000 || v.tcp.AckNumber() != 6000 || v.payload != 0 || !checksumsValid(v) {
		t.Errorf("salvaged: v6 %v seq %d ack %d payload %d checksums %v; want seq 1000 ack 6000, no payload, valid",
			v.v6, v.tcp.SequenceNumber(), v.tcp.AckNumber(), v.payload, checksumsValid(v))
	}
	if got := e.acksSalvaged.Load(); got != 1 {
		t.Errorf("acks_salvaged %d, want 1", got)
	}
}
