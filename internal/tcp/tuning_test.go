package tcp

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/faketime"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/stack"
)

// segment is one TCP segment seen on the memio wire.
type segment struct {
	dir memio.Dir
	tcp *layers.TCP
}

func (s segment) opt(kind layers.TCPOptionKind) (layers.TCPOption, bool) {
	for _, o := range s.tcp.Options {
		if o.OptionType == kind {
			return o, true
		}
	}
	return layers.TCPOption{}, false
}

// capture records every TCP segment memio's Tap sees (before impairment).
type capture struct {
	mu   sync.Mutex
	segs []segment
}

func (c *capture) tap(dir memio.Dir, frame []byte) {
	pk := gopacket.NewPacket(append([]byte(nil), frame...), layers.LayerTypeEthernet, gopacket.Default)
	t, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		return
	}
	c.mu.Lock()
	c.segs = append(c.segs, segment{dir: dir, tcp: t})
	c.mu.Unlock()
}

func (c *capture) all(match func(segment) bool) []segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []segment
	for _, s := range c.segs {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

func (c *capture) reset() {
	c.mu.Lock()
	c.segs = nil
	c.mu.Unlock()
}

// The client sits on port B: its segments go BtoA, the server's AtoB.
func isSYN(s segment) bool    { return s.dir == memio.BtoA && s.tcp.SYN && !s.tcp.ACK }
func isSYNACK(s segment) bool { return s.dir == memio.AtoB && s.tcp.SYN && s.tcp.ACK }
func clientData(s segment) bool {
	return s.dir == memio.BtoA && len(s.tcp.Payload) > 0
}

func TestTuningReadBack(t *testing.T) {
	for _, tc := range []Tuning{
		TuningFromConfig(dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}}),
		{NoDelay: false, SendBuf: 256 << 10, RecvBuf: 512 << 10, Congestion: "cubic", SACK: false, Moderate: false,
			RACK: true, MinRTO: 50 * time.Millisecond, MaxRetries: 5},
		{NoDelay: true, SendBuf: 4096, RecvBuf: 64 << 10, Congestion: "reno", SACK: true, Moderate: true,
			RACK: false, MinRTO: time.Millisecond, MaxRetries: 1},
	} {
		pa, pb := memio.NewPair(memio.Options{})
		st, err := stack.New(pa, stack.Options{Addr: srvIP})
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.Apply(st.NS); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		got, err := ReadStackTuning(st.NS)
		if err != nil || got != tc {
			t.Fatalf("stack read back %+v, %v; want %+v", got, err, tc)
		}
		ep, terr := st.NS.NewEndpoint(ntcp.ProtocolNumber, 0x0800, new(waiter.Queue))
		if terr != nil {
			t.Fatal(terr)
		}
		if err := tc.ApplyEndpoint(ep); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		ge, err := ReadEndpointTuning(ep)
		if err != nil || ge.NoDelay != tc.NoDelay || ge.SendBuf != tc.SendBuf || ge.Congestion != tc.Congestion {
			t.Fatalf("endpoint read back %+v, %v; want %+v", ge, err, tc)
		}
		want := tc.RecvBuf
		if tc.Moderate {
			want = min(tc.RecvBuf, ModerateStart)
		}
		if ge.RecvBuf != want {
			t.Errorf("endpoint receive buffer %d, want %d", ge.RecvBuf, want)
		}
		ep.Close()
		st.Close()
		pa.Close()
		pb.Close()
	}
	// A value netstack keeps differently is an error, never a default.
	a := Tuning{Congestion: "cubic", MinRTO: time.Millisecond}
	b := a
	b.MinRTO = 2 * time.Millisecond
	var ig *ErrIgnored
	if err := a.compare(b, true); !errors.As(err, &ig) || ig.Option != "MinRTO" {
		t.Fatalf("compare = %v, want ErrIgnored for MinRTO", err)
	}
	if err := (Tuning{Congestion: "vegas", SendBuf: 1 << 20, RecvBuf: 1 << 20, MinRTO: time.Millisecond, MaxRetries: 1}).Validate(); err == nil {
		t.Fatal("congestion vegas accepted")
	}
}

// connectCaptured opens server and client over a tapped memio pair and
// returns the capture.
func connectCaptured(t *testing.T, mo memio.Options, scfg, ccfg dgramio.Config, copts Options, body func(*Backend) func(context.Context) bool) (*Backend, *Backend, *capture, *memio.Port, *memio.Port) {
	t.Helper()
	c := &capture{}
	mo.Tap = c.tap
	pa, pb := memio.NewPair(mo)
	srv, err := NewOverFrameIO(scfg, pa, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		body = func(b *Backend) func(context.Context) bool { return echo(t, b) }
	}
	p := startPoller(srv, body(srv))
	cli, err := NewOverFrameIO(ccfg, pb, copts)
	if err != nil {
		p.stop()
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.Close()
		p.stop()
		srv.Close()
	})
	return srv, cli, c, pa, pb
}

// TestSYNOptions: MSS, window scale and SACK-permitted in the SYN and
// SYN-ACK follow the MTU, RecvBuf and SACK.
func TestSYNOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mtu     int
		recvBuf int
		noSACK  bool
		mss     uint16
		ws      byte
	}{
		{"defaults", 0, 0, false, 1460, 5},
		{"64KiB no SACK", 0, 64 << 10, true, 1460, 1},
		{"32KiB", 0, 32 << 10, false, 1460, 0},
		{"4MiB MTU 4000", 4000, 4 << 20, false, 3960, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scfg, ccfg := serverConfig(), clientConfig()
			for _, c := range []*dgramio.Config{&scfg, &ccfg} {
				c.TCP.RecvBuf = tc.recvBuf
				c.TCP.NoSACK = tc.noSACK
			}
			_, _, c, _, _ := connectCaptured(t, memio.Options{MTU: tc.mtu}, scfg, ccfg, Options{}, nil)
			for _, which := range []func(segment) bool{isSYN, isSYNACK} {
				segs := c.all(which)
				if len(segs) != 1 {
					t.Fatalf("%d SYNs in one direction", len(segs))
				}
				s := segs[0]
				mss, ok := s.opt(layers.TCPOptionKindMSS)
				if !ok || uint16(mss.OptionData[0])<<8|uint16(mss.OptionData[1]) != tc.mss {
					t.Errorf("MSS option %v, want %d", mss, tc.mss)
				}
				ws, ok := s.opt(layers.TCPOptionKindWindowScale)
				if !ok || ws.OptionData[0] != tc.ws {
					t.Errorf("window scale option %v, want %d", ws, tc.ws)
				}
				_, sack := s.opt(layers.TCPOptionKindSACKPermitted)
				if sack == tc.noSACK {
					t.Errorf("SACK-permitted present %v with NoSACK %v", sack, tc.noSACK)
				}
				if _, ok := s.opt(layers.TCPOptionKindTimestamps); !ok {
					t.Errorf("no timestamps option")
				}
			}
		})
	}
}

// advertised returns the largest window (scaled) the server advertised in
// the segments after the handshake, and the first one.
func advertised(c *capture) (first, max int) {
	var ws uint
	if s := c.all(isSYNACK); len(s) == 1 {
		if o, ok := s[0].opt(layers.TCPOptionKindWindowScale); ok {
			ws = uint(o.OptionData[0])
		}
	}
	first = -1
	for _, s := range c.all(func(s segment) bool { return s.dir == memio.AtoB && !s.tcp.SYN }) {
		w := int(s.tcp.Window) << ws
		if first < 0 {
			first = w
		}
		if w > max {
			max = w
		}
	}
	return first, max
}

// TestModerateAndRecvBuf: without moderation the server advertises about
// RecvBuf from its first ACK; with it, the window starts at ModerateStart
// and grows as the application reads.
func TestModerateAndRecvBuf(t *testing.T) {
	const recvBuf = 2 << 20
	run := func(noModerate bool) (first, max int) {
		scfg, ccfg := serverConfig(), clientConfig()
		scfg.TCP.RecvBuf, scfg.TCP.NoModerate = recvBuf, noModerate
		ccfg.TCP.RecvBuf, ccfg.TCP.NoModerate = recvBuf, noModerate
		_, cli, c, _, _ := connectCaptured(t, memio.Options{}, scfg, ccfg, Options{}, nil)
		stream(t, cli, 8<<20, func(uint64) int { return 1472 }, 120*time.Second)
		return advertised(c)
	}
	f0, m0 := run(true)
	f1, m1 := run(false)
	t.Logf("moderation off: first window %d, max %d; on: first %d, max %d", f0, m0, f1, m1)
	// netstack advertises half the free buffer (rcvAdvWndScale = 1).
	if f0 < recvBuf/2-64<<10 || m0 > recvBuf {
		t.Errorf("moderation off: first window %d, want about %d", f0, recvBuf/2)
	}
	if f1 > ModerateStart {
		t.Errorf("moderation on: first window %d, want at most %d", f1, ModerateStart)
	}
	if m1 <= ModerateStart {
		t.Errorf("moderation on: window never grew past %d (max %d)", ModerateStart, m1)
	}
}

// TestNagle: with Config.Nagle a second small record waits for the ACK of
// the first; without it (NoDelay, the default) every record leaves at once.
// The server's ACKs are dropped so nothing gets acknowledged.
func TestNagle(t *testing.T) {
	for _, nagle := range []bool{false, true} {
		scfg, ccfg := serverConfig(), clientConfig()
		ccfg.Nagle = nagle
		ccfg.TCP.MinRTO = 5 * time.Second // no retransmission during the test
		_, cli, c, pa, _ := connectCaptured(t, memio.Options{}, scfg, ccfg, Options{}, nil)
		if got, _ := ReadEndpointTuning(cli.conn(0).ep); got.NoDelay == nagle {
			t.Fatalf("endpoint NoDelay %v with Nagle %v", got.NoDelay, nagle)
		}
		pa.SetImpairment(memio.Impairment{Loss: 1}) // server -> client lost
		for i := 0; i < 3; i++ {
			if cli.Queue([]byte{byte('a' + i)}) != nil {
				t.Fatal("Queue refused")
			}
			if err := cli.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Give netstack ample time to send what it would send.
		time.Sleep(200 * time.Millisecond)
		cli.Flush()
		seqs := map[uint32]bool{}
		for _, s := range c.all(clientData) {
			seqs[s.tcp.Seq] = true
		}
		want := 3
		if nagle {
			want = 1
		}
		if len(seqs) != want {
			t.Errorf("Nagle %v: %d data segments left, want %d", nagle, len(seqs), want)
		}
	}
}

// driveUntil drives b's stack (Flush: deliver, send, kick; it does not
// read records, cond does if it wants them) until cond or 10 s. Flush's
// errors fail the test.
func driveUntil(t *testing.T, b *Backend, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within 10s; stats %+v", b.Stats())
		}
		if err := b.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle drives b (Flush) for d of real time and reports whether cond held
// at some point, or returns the first Flush error.
func settle(b *Backend, d time.Duration, cond func() bool) (bool, error) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if err := b.Flush(); err != nil {
			return false, err
		}
		if cond() {
			return true, nil
		}
	}
	return false, nil
}

// lossySetup connects a client whose netstack runs on a manual clock, sends
// one record back and forth so an RTT is measured (0 on a manual clock:
// the RTO is then MinRTO), then loses every client segment.
func lossySetup(t *testing.T, ccfg dgramio.Config) (*Backend, *capture, *faketime.ManualClock) {
	t.Helper()
	clock := faketime.NewManualClock()
	_, cli, c, _, pb := connectCaptured(t, memio.Options{}, serverConfig(), ccfg, Options{Clock: clock}, nil)
	cli.Queue([]byte("warm-up"))
	var n int
	pkts := make([]dgramio.Packet, 1)
	driveUntil(t, cli, func() bool {
		k, _ := cli.Rx(pkts)
		for _, p := range pkts[:k] {
			if p.Event == dgramio.EventData {
				n++
			}
		}
		return n == 1
	})
	c.reset()
	pb.SetImpairment(memio.Impairment{Loss: 1})
	if cli.Queue([]byte("lost")) != nil {
		t.Fatal("Queue refused")
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	driveUntil(t, cli, func() bool { return len(c.all(clientData)) == 1 })
	return cli, c, clock
}

// TestMinRTO: the first retransmission comes MinRTO after the send, on
// netstack's (manual) clock: not at MinRTO-1ms, and at MinRTO+1ms.
func TestMinRTO(t *testing.T) {
	for _, rto := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond} {
		ccfg := clientConfig()
		ccfg.TCP.MinRTO = rto
		cli, c, clock := lossySetup(t, ccfg)
		clock.Advance(rto - time.Millisecond)
		if ok, _ := settle(cli, 100*time.Millisecond, func() bool { return len(c.all(clientData)) > 1 }); ok {
			t.Fatalf("MinRTO %v: retransmitted before %v", rto, rto-time.Millisecond)
		}
		clock.Advance(2 * time.Millisecond)
		driveUntil(t, cli, func() bool { return len(c.all(clientData)) == 2 })
		segs := c.all(clientData)
		if segs[0].tcp.Seq != segs[1].tcp.Seq {
			t.Fatalf("second data segment is not a retransmission")
		}
		if st := cli.Stats(); must(st.Counter("netstack", "tcp_timeouts")) != 1 {
			t.Errorf("tcp_timeouts = %d", must(st.Counter("netstack", "tcp_timeouts")))
		}
	}
}

// TestMaxRetries: after MaxRetries retransmissions (RTO doubling from
// MinRTO) netstack gives the connection up (ETIMEDOUT), reported once.
func TestMaxRetries(t *testing.T) {
	const retries = 3
	ccfg := clientConfig()
	ccfg.TCP.MinRTO = 10 * time.Millisecond
	ccfg.TCP.MaxRetries = retries
	ccfg.Events = true
	cli, c, clock := lossySetup(t, ccfg)
	pkts := make([]dgramio.Packet, 4)
	var gave error
	for i := 0; i < 20 && gave == nil; i++ {
		clock.Advance(10 * time.Millisecond << i)
		_, ferr := settle(cli, 20*time.Millisecond, func() bool {
			n, err := cli.Rx(pkts)
			if err != nil {
				t.Fatalf("Rx: %v; a connection's end is no error", err)
			}
			for _, p := range pkts[:n] {
				if p.Event == dgramio.EventReset {
					gave = p.Err
					return true
				}
			}
			return false
		})
		if gave == nil {
			gave = ferr
		}
	}
	var pe *dgramio.PeerError
	if !errors.As(gave, &pe) || !errors.Is(gave, syscall.ETIMEDOUT) {
		t.Fatalf("EventReset's Err %v, want a PeerError with ETIMEDOUT", gave)
	}
	if n := len(c.all(clientData)); n != 1+retries {
		t.Fatalf("%d transmissions of the segment, want 1 + %d retransmissions", n, retries)
	}
	if s := cli.Stats(); s.Conns != 0 || s.Resets != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRACK: with RACK-TLP a tail loss is probed before the RTO; without,
// nothing leaves until the RTO.
func TestRACK(t *testing.T) {
	for _, rack := range []bool{false, true} {
		ccfg := clientConfig()
		ccfg.TCP.MinRTO = time.Second
		ccfg.TCP.RACK = rack
		cli, c, clock := lossySetup(t, ccfg)
		probed := false
		for step := 0; step < 18 && !probed; step++ { // up to 900 ms of the 1 s RTO
			clock.Advance(50 * time.Millisecond)
			var err error
			if probed, err = settle(cli, 20*time.Millisecond, func() bool { return len(c.all(clientData)) > 1 }); err != nil {
				t.Fatal(err)
			}
		}
		if probed != rack {
			t.Errorf("RACK %v: retransmitted before the RTO: %v", rack, probed)
		}
	}
}

// TestSACK: with SACK the receiver's ACKs carry SACK blocks when segments
// are lost; without it they never do.
func TestSACK(t *testing.T) {
	for _, noSACK := range []bool{false, true} {
		seed := memio.Seed(t)
		scfg, ccfg := serverConfig(), clientConfig()
		scfg.TCP.NoSACK, ccfg.TCP.NoSACK = noSACK, noSACK
		mo := memio.Options{Seed: seed, BtoA: memio.Impairment{Loss: 0.02}}
		_, cli, c, _, _ := connectCaptured(t, mo, scfg, ccfg, Options{}, nil)
		stream(t, cli, 2<<20, func(uint64) int { return 1472 }, 120*time.Second)
		sacks := len(c.all(func(s segment) bool {
			_, ok := s.opt(layers.TCPOptionKindSACK)
			return s.dir == memio.AtoB && ok
		}))
		if noSACK && sacks != 0 || !noSACK && sacks == 0 {
			t.Errorf("NoSACK %v: %d ACKs with SACK blocks", noSACK, sacks)
		}
		t.Logf("NoSACK %v: %d ACKs with SACK blocks", noSACK, sacks)
	}
}

// TestCongestion: the algorithm reads back per connection and decides the
// slow-start threshold after a retransmission timeout (one segment in
// flight, on a manual clock, so every number is exact): reno halves the
// flight (at least 2 segments), cubic keeps 0.7 of the congestion window.
// This is netstack's state (TCP_INFO), not a count of frames on the wire.
func TestCongestion(t *testing.T) {
	for _, cc := range []dgramio.Congestion{dgramio.CongestionReno, dgramio.CongestionCubic} {
		ccfg := clientConfig()
		ccfg.TCP.Congestion = cc
		ccfg.TCP.MinRTO = 100 * time.Millisecond
		cli, c, clock := lossySetup(t, ccfg)
		ep := cli.conn(0).ep
		if got, _ := ReadEndpointTuning(ep); got.Congestion != cc {
			t.Fatalf("endpoint congestion %q, want %q", got.Congestion, cc)
		}
		var before, after tcpip.TCPInfoOption
		if err := ep.GetSockOpt(&before); err != nil {
			t.Fatal(err)
		}
		clock.Advance(ccfg.TCP.MinRTO + time.Millisecond)
		driveUntil(t, cli, func() bool { return len(c.all(clientData)) == 2 })
		if err := ep.GetSockOpt(&after); err != nil {
			t.Fatal(err)
		}
		want := uint32(2)
		if cc == "cubic" {
			want = uint32(float64(before.SndCwnd) * 0.7)
		}
		t.Logf("%s: cwnd %d before the timeout; after it cwnd %d ssthresh %d", cc, before.SndCwnd, after.SndCwnd, after.SndSsthresh)
		if after.SndSsthresh != want || after.SndCwnd != 1 {
			t.Errorf("%s: after the timeout ssthresh %d cwnd %d, want %d and 1", cc, after.SndSsthresh, after.SndCwnd, want)
		}
	}
}

// TestSendBuf: against a server that does not read, the client's netstack
// takes SendBuf bytes beyond what the server's window let onto the wire.
func TestSendBuf(t *testing.T) {
	stalled := func(b *Backend) func(context.Context) bool {
		return func(ctx context.Context) bool {
			if err := b.Flush(); err != nil && !isPeer(err) {
				return false
			}
			time.Sleep(time.Millisecond)
			return true
		}
	}
	held := map[int]int64{}
	for _, sendBuf := range []int{256 << 10, 1 << 20} {
		scfg, ccfg := serverConfig(), clientConfig()
		scfg.TCP.RecvBuf, scfg.TCP.NoModerate = 256<<10, true
		ccfg.TCP.SendBuf = sendBuf
		ccfg.TCP.SendStall = 200 * time.Millisecond
		_, cli, c, _, _ := connectCaptured(t, memio.Options{}, scfg, ccfg, Options{}, stalled)
		if got, _ := ReadEndpointTuning(cli.conn(0).ep); got.SendBuf != sendBuf {
			t.Fatalf("endpoint send buffer %d, want %d", got.SendBuf, sendBuf)
		}
		buf := make([]byte, 1000)
		for deadline := time.Now().Add(30 * time.Second); ; {
			if time.Now().After(deadline) {
				t.Fatal("never stalled")
			}
			for cli.Queue(buf) == nil {
			}
			if err := cli.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if sendStalls(cli) > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		st := cli.Stats()
		taken, _ := st.Counter("stream", "bytes_tx")
		var first, end uint32
		for i, s := range c.all(clientData) {
			if i == 0 {
				first = s.tcp.Seq
			}
			if e := s.tcp.Seq + uint32(len(s.tcp.Payload)); e-first > end {
				end = e - first
			}
		}
		held[sendBuf] = int64(taken) - int64(end)
		t.Logf("SendBuf %d: netstack took %d bytes, %d went on the wire, %d held", sendBuf, taken, end, held[sendBuf])
	}
	d := held[1<<20] - held[256<<10]
	if want := int64(768 << 10); d < want*85/100 || d > want*115/100 {
		t.Errorf("quadrupling SendBuf held %d more bytes, want about %d", d, want)
	}
}
