package stack

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/faketime"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// synFrame is an Ethernet frame from B:40000 to A:5000 with a SYN (a
// SYN-ACK with ack) carrying MSS, SACK-permitted and a timestamp whose
// TSval is tsval.
func synFrame(t testing.TB, seq, tsval uint32, ack bool) []byte {
	return synFrameX(t, false, seq, 0, tsval, 77, ack)
}

// synFrameX is synFrame with every field: reverse sends from A:5000 to
// B:40000; ackNum and tsecr are the ACK number and the echoed timestamp.
func synFrameX(t testing.TB, reverse bool, seq, ackNum, tsval, tsecr uint32, ack bool) []byte {
	ts := make([]byte, 8)
	binary.BigEndian.PutUint32(ts, tsval)
	binary.BigEndian.PutUint32(ts[4:], tsecr)
	buf := gopacket.NewSerializeBuffer()
	sport, dport := layers.TCPPort(40000), layers.TCPPort(5000)
	if reverse {
		sport, dport = dport, sport
	}
	ip, etype := ipLayer(t, reverse) // IPv6 for a v6TB
	tcp := &layers.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ackNum, SYN: true, ACK: ack, Window: 29200, Options: []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}},
		{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts},
		{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
	}}
	tcp.SetNetworkLayerForChecksum(ip)
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: etype},
		ip.(gopacket.SerializableLayer), tcp)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// tcpChecksumOK verifies the TCP checksum of an Ethernet/IPv4/TCP or
// Ethernet/IPv6/TCP frame.
func tcpChecksumOK(frame []byte) bool {
	v, ok := parseTCP(frame)
	return ok && checksum.Checksum(v.tcp, pseudoHeader(v.src, v.dst, len(v.tcp))) == 0xffff
}

func tsvalOf(t testing.TB, frame []byte) uint32 { return tsOf(t, frame, 0) }

// tsOf returns the TSval (at 0) or TSecr (at 4) of frame.
func tsOf(t testing.TB, frame []byte, at int) uint32 {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		t.Fatal("no TCP layer")
	}
	for _, o := range tcp.Options {
		if o.OptionType == layers.TCPOptionKindTimestamps {
			return binary.BigEndian.Uint32(o.OptionData[at:])
		}
	}
	t.Fatal("no timestamp option")
	return 0
}

func TestSYNRestamp(t *testing.T) { forFamilies(t, testSYNRestamp) }

func testSYNRestamp(t testing.TB) {
	for _, ack := range []bool{false, true} {
		var st synStamps
		first := synFrame(t, 1000, 5000, ack)
		if !isSYN(first) {
			t.Fatal("isSYN: false for a SYN")
		}
		if st.restamp(first, 100) {
			t.Fatal("the first transmission was rewritten")
		}
		// The retransmission, 1003 ms later, carries the same TSval.
		re := synFrame(t, 1000, 5000, ack)
		if !st.restamp(re, 1103) {
			t.Fatal("the retransmission was not rewritten")
		}
		if got := tsvalOf(t, re); got != 6003 {
			t.Fatalf("ack %v: TSval %d, want 6003", ack, got)
		}
		if !tcpChecksumOK(re) {
			t.Fatalf("ack %v: checksum wrong after the rewrite", ack)
		}
		diff := 0
		for i := range re {
			if re[i] != first[i] {
				diff++
			}
		}
		if diff > 6 {
			t.Fatalf("%d bytes changed; only TSval and the checksum may", diff)
		}
		// Another connection (other ISN) is a first transmission.
		other := synFrame(t, 2000, 5000, ack)
		if st.restamp(other, 1103) {
			t.Fatal("a SYN with another sequence number was rewritten")
		}
		// A retransmission netstack stamped afresh is left alone.
		fresh := synFrame(t, 1000, 7000, ack)
		if st.restamp(fresh, 1200) {
			t.Fatal("a fresh TSval was rewritten")
		}
	}
	// Not SYNs: data, ARP, a SYN without timestamp.
	var st synStamps
	data := tcpFrame(t, []byte("x"), nil)
	if isSYN(data) || st.restamp(data, 0) {
		t.Fatal("a data segment taken for a SYN")
	}
	noTS := synFrame(t, 1, 1, false)
	off := bytes.Index(noTS, []byte{8, 10})
	noTS[off] = 1 // the timestamp option's kind becomes a NOP: no timestamp left
	noTS[off+1] = 1
	if _, _, _, ok := synStampAt(noTS); ok {
		t.Fatal("found a timestamp in a SYN without one")
	}
}

// TestSYNACKEchoesLatestSYN: our SYN-ACK echoes the TSval of the latest
// SYN its peer sent, as Linux's does; a SYN-ACK to a peer never seen, or
// already echoing it, is left alone.
func TestSYNACKEchoesLatestSYN(t *testing.T) { forFamilies(t, testSYNACKEchoesLatestSYN) }

func testSYNACKEchoesLatestSYN(t testing.TB) {
	var st synStamps
	st.notePeerSYN(synFrameX(t, false, 1000, 0, 500, 0, false)) // B's SYN
	first := synFrameX(t, true, 9000, 1001, 70, 500, true)      // our SYN-ACK
	if st.restamp(first, 10) {
		t.Fatal("the first SYN-ACK, echoing the SYN, was changed")
	}
	st.notePeerSYN(synFrameX(t, false, 1000, 0, 1500, 0, false)) // B's SYN again, 1 s later
	again := synFrameX(t, true, 9000, 1001, 70, 500, true)       // netstack resends it as it was
	if !st.restamp(again, 1010) {
		t.Fatal("the resent SYN-ACK was not changed")
	}
	if got := tsOf(t, again, 4); got != 1500 {
		t.Errorf("TSecr %d, want 1500 (the latest SYN's TSval)", got)
	}
	if got := tsvalOf(t, again); got != 1070 {
		t.Errorf("TSval %d, want 1070", got)
	}
	if !tcpChecksumOK(again) {
		t.Error("checksum wrong")
	}
	// A SYN-ACK for another ISN (another connection) keeps its echo.
	other := synFrameX(t, true, 9500, 2001, 70, 42, true)
	if st.restamp(other, 1010) || tsOf(t, other, 4) != 42 {
		t.Error("a SYN-ACK to a SYN never seen was changed")
	}
	// A SYN with ACK set (ours or anyone's) is not a peer's SYN.
	st.notePeerSYN(synFrameX(t, false, 3000, 5, 99, 0, true))
	src, dst := addrB, addrA
	if _, v6 := t.(v6TB); v6 {
		src, dst = addr6B, addr6A
	}
	k := synKey{sport: 40000, dport: 5000, seq: 3000, v6: src.Is6()}
	copy(k.src[:], src.AsSlice())
	copy(k.dst[:], dst.AsSlice())
	if p := st.find(st.peers[:], k); p != nil {
		t.Error("a SYN-ACK was noted as a peer's SYN")
	}
}

func TestSYNRestampEvicts(t *testing.T) { forFamilies(t, testSYNRestampEvicts) }

func testSYNRestampEvicts(t testing.TB) {
	var st synStamps
	for i := 0; i <= synStampSlots; i++ {
		st.restamp(synFrame(t, uint32(i), 100, false), 0)
	}
	// The first was forgotten, the second is still known.
	if st.restamp(synFrame(t, 0, 100, false), 50) {
		t.Fatal("the oldest SYN is still remembered after synStampSlots others")
	}
	if !st.restamp(synFrame(t, 2, 100, false), 50) {
		t.Fatal("a recent SYN was forgotten")
	}
}

func FuzzSYNRestamp(f *testing.F) {
	f.Add(synFrame(f, 1, 2, false), int64(10))
	f.Add(synFrameX(f, true, 9, 2, 3, 4, true), int64(1000))
	f.Add(tcpFrame(f, nil, nil), int64(1))
	f.Add(synFrame(v6TB{f}, 1, 2, false), int64(10))
	f.Add(synFrameX(v6TB{f}, true, 9, 2, 3, 4, true), int64(1000))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, frame []byte, dt int64) {
		var st synStamps
		orig := append([]byte(nil), frame...)
		st.notePeerSYN(frame) // as received
		if !bytes.Equal(frame, orig) {
			t.Fatal("notePeerSYN changed the frame")
		}
		st.restamp(frame, 0)
		first := append([]byte(nil), frame...)
		if !st.restamp(frame, dt) {
			if !bytes.Equal(frame, first) {
				t.Fatal("restamp changed a frame and said it did not")
			}
			return
		}
		if !isSYN(orig) {
			t.Fatal("rewrote a frame isSYN rejects")
		}
		_, off, v, _ := synStampAt(orig)
		sum := ethHeader + v.ipLen + 16 // the TCP checksum
		for i := range frame {
			inTS := i >= off && i < off+8
			inSum := i >= sum && i < sum+2
			if frame[i] != first[i] && !inTS && !inSum {
				t.Fatalf("byte %d changed outside the timestamps and the checksum", i)
			}
		}
		if tcpChecksumOK(orig) && !tcpChecksumOK(frame) {
			t.Fatal("a valid checksum became invalid")
		}
	})
}

// dropFirstSYN swallows the first SYN (SYN-ACK with ack) it is given: the
// frame is lost on the wire.
type dropFirstSYN struct {
	*memio.Port
	ack     bool
	dropped atomic.Bool
}

func (d *dropFirstSYN) TxFrame(frame []byte) bool {
	if _, _, v, ok := synStampAt(frame); ok && !d.dropped.Load() &&
		(v.tcp.Flags()&header.TCPFlagAck != 0) == d.ack {
		d.dropped.Store(true)
		return true
	}
	return d.Port.TxFrame(frame)
}

var _ frameio.FrameIO = (*dropFirstSYN)(nil)

// TestLostSYNKeepsRTO: a connection whose first SYN or SYN-ACK was lost
// does not start with the SYN's backoff as its round-trip time. On
// netstack's manual clock the handshake takes 1 s of backoff and no time
// on the wire; without the fresh TSval (and, when the client's second SYN
// brings the SYN-ACK again, the fresh echo) netstack measured the 1 s and
// set an RTO of 3 s (SRTT 1 s + 4 × 500 ms).
func TestLostSYNKeepsRTO(t *testing.T) {
	for _, tc := range []lostSYN{
		{"SYN lost", false, false},
		{"SYN-ACK lost, resent by the server's timer", true, true},
		{"SYN-ACK lost, resent for the client's second SYN", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) { lostSYNKeepsRTO(t, tc) })
	}
}

// lostSYN is a case of TestLostSYNKeepsRTO.
type lostSYN struct {
	name string
	// synack: the server's first SYN-ACK is lost, not the client's SYN.
	// server: the server runs on the manual clock and is checked (its
	// SYN-ACK timer resends); otherwise the client (its SYN timer
	// resends, and the server answers that SYN).
	synack, server bool
}

func lostSYNKeepsRTO(t *testing.T, tc lostSYN) {
	srv, cli, drop, clock := lostSYNPair(t, tc)
	ln, accepted := listenTCP(t, srv, full(addrA, 7001))
	defer ln.Close()
	ep, connected := connectTCP(t, cli, full(addrA, 7001))
	defer ep.Close()
	for deadline := time.Now().Add(10 * time.Second); !drop.dropped.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no SYN was sent")
		}
	}
	// The handshake's retransmission timer: 1 s.
	clock.Advance(time.Second)
	var sep interface {
		GetSockOpt(tcpip.GettableSocketOption) tcpip.Error
	} = ep
	select {
	case <-connected:
	case <-time.After(20 * time.Second):
		t.Fatal("not connected")
	}
	side := "client"
	if tc.server {
		side = "server"
		select {
		case <-accepted:
		case <-time.After(20 * time.Second):
			t.Fatal("nothing to accept")
		}
		aep, _, terr := ln.Accept(nil)
		if terr != nil {
			t.Fatal(terr)
		}
		defer aep.Close()
		sep = aep
	}
	var info tcpip.TCPInfoOption
	if terr := sep.GetSockOpt(&info); terr != nil {
		t.Fatal(terr)
	}
	t.Logf("%s RTT %v, RTO %v", side, info.RTT, info.RTO)
	if info.RTO >= 2*time.Second {
		t.Errorf("%s RTO %v: the backoff was taken for the round trip", side, info.RTO)
	}
	// Who rewrote: the side that sent the handshake frame again.
	st := cli
	if tc.synack {
		st = srv
	}
	if v := get(st.AppendCounters(nil), "link", "syn_restamped"); v != 1 {
		t.Errorf("syn_restamped %d, want 1", v)
	}
}

// lostSYNPair opens the server (A) and client (B) stacks of a
// TestLostSYNKeepsRTO case over a memio pair, with the side that loses
// its first handshake frame behind drop and the side checked on the
// manual clock, each polled by its own loop; all closed at cleanup.
func lostSYNPair(t *testing.T, tc lostSYN) (srv, cli *Stack, drop *dropFirstSYN, clock *faketime.ManualClock) {
	pa, pb := memio.NewPair(memio.Options{})
	t.Cleanup(func() { pa.Close(); pb.Close() })
	clock = faketime.NewManualClock()
	cliFIO, srvFIO := frameio.FrameIO(pb), frameio.FrameIO(pa)
	cliOpts, srvOpts := Options{Addr: addrB, PrefixLen: 24}, Options{Addr: addrA, PrefixLen: 24}
	if tc.synack {
		drop = &dropFirstSYN{Port: pa, ack: true}
		srvFIO = drop
	} else {
		drop = &dropFirstSYN{Port: pb}
		cliFIO = drop
	}
	if tc.server {
		srvOpts.Clock = clock
	} else {
		cliOpts.Clock = clock
	}
	srv, err := New(srvFIO, srvOpts)
	if err != nil {
		t.Fatal(err)
	}
	ls := startLoop(t, srv)
	t.Cleanup(ls.stop)
	cli, err = New(cliFIO, cliOpts)
	if err != nil {
		t.Fatal(err)
	}
	lc := startLoop(t, cli)
	t.Cleanup(lc.stop)
	return srv, cli, drop, clock
}

// listenTCP opens a netstack TCP listener on s at addr; accepted is
// signalled when it has a connection to accept.
func listenTCP(t *testing.T, s *Stack, addr tcpip.FullAddress) (ln tcpip.Endpoint, accepted <-chan struct{}) {
	t.Helper()
	ln, accepted = tcpEndpoint(t, s, waiter.ReadableEvents)
	if terr := ln.Bind(addr); terr != nil {
		ln.Close()
		t.Fatal(terr)
	}
	if terr := ln.Listen(8); terr != nil {
		ln.Close()
		t.Fatal(terr)
	}
	return ln, accepted
}

// connectTCP starts a netstack TCP connect from s to to; connected is
// signalled when it is established (or failed).
func connectTCP(t *testing.T, s *Stack, to tcpip.FullAddress) (ep tcpip.Endpoint, connected <-chan struct{}) {
	t.Helper()
	ep, connected = tcpEndpoint(t, s, waiter.WritableEvents|waiter.EventErr|waiter.EventHUp)
	if terr := ep.Connect(to); terr != nil {
		if _, ok := terr.(*tcpip.ErrConnectStarted); !ok {
			ep.Close()
			t.Fatal(terr)
		}
	}
	return ep, connected
}

// tcpEndpoint makes a netstack TCP endpoint on s whose events in mask
// signal ready.
func tcpEndpoint(t *testing.T, s *Stack, mask waiter.EventMask) (ep tcpip.Endpoint, ready <-chan struct{}) {
	t.Helper()
	wq := new(waiter.Queue)
	ep, terr := s.NS.NewEndpoint(ntcp.ProtocolNumber, ipv4.ProtocolNumber, wq)
	if terr != nil {
		t.Fatal(terr)
	}
	entry, ch := waiter.NewChannelEntry(mask)
	wq.EventRegister(&entry)
	return ep, ch
}
