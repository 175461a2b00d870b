package native

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// bbrLink is a run of one bulk transfer from a to b over a memio wire
// with a bottleneck (Impairment.Rate), fake time moving in steps of at
// most quantum while nothing moves. each, when set, is called after
// every step with the sender's connection.
type bbrLink struct {
	o       Options
	imp     memio.Impairment
	n       int           // bytes to send
	limit   time.Duration // of engine time; the run stops there
	quantum time.Duration
	each    func(c *Conn, now time.Time)
	seed    uint64 // the wire's; 0: 1
	slots   int    // the wire's TxSlots and RxSlots (the bottleneck's queue); 0: 4096
}

// run returns the bytes delivered and the engine time it took.
func (l bbrLink) run(t testing.TB) (w *world, got int, el time.Duration) {
	t.Helper()
	slots := l.slots
	if slots == 0 {
		slots = 4096
	}
	w = newWorld(t, memio.Options{Seed: max(l.seed, 1), TxSlots: slots, RxSlots: slots}, l.o, l.o)
	ca, cb := w.connect(7200)
	w.pa.SetImpairment(l.imp)
	w.pb.SetImpairment(memio.Impairment{Loss: l.imp.Loss, Delay: l.imp.Delay})
	p := newPipe(ca, cb, randBytes(3, l.n))
	start := w.clk.Now()
	end := start.Add(l.limit)
	for !p.done() && w.clk.Now().Before(end) {
		p.pump(t)
		moved := w.step()
		if l.each != nil {
			l.each(ca, w.clk.Now())
		}
		if moved == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			d := l.quantum
			for _, e := range []*Engine{w.a, w.b} {
				if at, ok := e.NextTimer(); ok && at.Sub(w.clk.Now()) < d {
					d = max(at.Sub(w.clk.Now()), time.Microsecond)
				}
			}
			w.clk.Advance(d)
		}
	}
	return w, p.got.Len(), w.clk.Now().Sub(start)
}

// TestBBRFullPipe is draft-cardwell-iccrg-bbr-congestion-control-00
// §4.3.2.2: Startup has filled the pipe when three rounds in a row
// (rounds not app-limited) did not raise the bandwidth estimate by 25%;
// a round that did starts the count again.
func TestBBRFullPipe(t *testing.T) {
	c := &Conn{bbr: &bbrState{}}
	b := c.bbr
	round := func(bw float64, appLimited bool) bool {
		b.bw, b.roundStart = bw, true
		c.bbrCheckFullPipe(&rateSample{ok: true, bw: bw, appLimited: appLimited})
		return b.filledPipe
	}
	for _, bw := range []float64{100, 200, 400, 800} {
		if round(bw, false) {
			t.Fatalf("full at %v while it doubles", bw)
		}
	}
	if round(900, false) || round(950, false) {
		t.Fatal("full after two rounds under 25% growth")
	}
	if round(1200, false) { // at least 1.25 × 800: the baseline moves to 1200
		t.Fatal("a round with 25% growth over the baseline ended Startup")
	}
	if round(1300, true) || round(1300, true) || round(1300, true) {
		t.Fatal("app-limited rounds counted")
	}
	if round(1300, false) || round(1400, false) {
		t.Fatal("full after two rounds under 25% growth over the new baseline")
	}
	if !round(1450, false) {
		t.Fatal("not full after three rounds under 25% growth")
	}
}

// TestBBRBandwidthFilterWindowedMax is draft-cardwell-iccrg-bbr-
// congestion-control-00 §4.1.1: BtlBw is the maximum of the delivery-rate
// samples of the last BtlBwFilterLen (10) round trips, an app-limited
// sample counting only when it is at least the estimate (§4.1.1.2). The
// filter keeps its maximum as samples come and recomputes it only when
// the round that held it leaves the window: checked against the
// maximum taken anew over the samples of the last ten rounds, for
// random samples, rounds and app-limited marks.
func TestBBRBandwidthFilterWindowedMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 36))
	c := &Conn{bbr: &bbrState{}}
	b := c.bbr
	var taken [][]float64 // taken[r]: the samples counted in round r
	round := uint64(0)
	for i := 0; i < 20000; i++ {
		rs := rateSample{ok: true, bw: float64(rng.IntN(1000)), appLimited: rng.IntN(4) == 0}
		if rng.IntN(5) == 0 { // a sample sent after the round's end: a new round
			rs.priorDelivered = b.nextRoundDlvd
			b.rate.delivered += 1000
		} else {
			rs.priorDelivered = b.nextRoundDlvd - 1
		}
		if rng.IntN(50) == 0 {
			rs.bw = float64(5000 + rng.IntN(1000)) // a peak that must age out
		}
		before := b.bw
		c.bbrUpdateBw(&rs)
		if b.roundStart {
			round++
		}
		for uint64(len(taken)) <= round {
			taken = append(taken, nil)
		}
		if !rs.appLimited || rs.bw >= before {
			taken[round] = append(taken[round], rs.bw)
		}
		want := 0.0
		for r := int(round); r >= 0 && r > int(round)-bbrBwRounds; r-- {
			for _, v := range taken[r] {
				want = max(want, v)
			}
		}
		if b.bw != want {
			t.Fatalf("sample %d (round %d): estimate %v, the last %d rounds' maximum %v", i, round, b.bw, bbrBwRounds, want)
		}
	}
	if !c.bbrUpdateBwKeeps(rateSample{}) {
		t.Fatal("an invalid sample moved the estimate")
	}
}

// bbrUpdateBwKeeps reports whether an invalid sample rs leaves the
// estimate as it was (§4.1.1: only valid samples feed the filter).
func (c *Conn) bbrUpdateBwKeeps(rs rateSample) bool {
	bw := c.bbr.bw
	c.bbrUpdateBw(&rs)
	return c.bbr.bw == bw
}

// TestBBRStartupExitsAtLinkRate runs §4.3.2 over a 100 Mbit/s wire with
// 1 ms each way: Startup exits once the bandwidth estimate stops
// growing (to Drain, §4.3.3, then ProbeBW, §4.3.4), with the estimate
// at the wire's rate, and the transfer runs near the rate.
func TestBBRStartupExitsAtLinkRate(t *testing.T) {
	const rate = 100e6 / 8
	var exitBw float64
	var exitRounds uint64
	l := bbrLink{
		o:   Options{Congestion: BBR, SendBuf: 2 << 20, RecvBuf: 2 << 20},
		imp: memio.Impairment{Rate: rate, Delay: time.Millisecond}, n: 8 << 20,
		limit: 10 * time.Second, quantum: 10 * time.Microsecond,
		each: func(c *Conn, _ time.Time) {
			if b := c.bbr; b.filledPipe && exitRounds == 0 {
				exitBw, exitRounds = b.bw, b.rounds
			}
		},
	}
	w, got, el := l.run(t)
	if got != l.n {
		t.Fatalf("delivered %d of %d bytes in %v", got, l.n, el)
	}
	if exitRounds == 0 {
		t.Fatal("Startup never found the pipe full")
	}
	if exitBw < 0.8*rate || exitBw > 1.2*rate {
		t.Errorf("bandwidth at Startup's end %.3g B/s, the wire carries %.3g", exitBw, rate)
	}
	if n := counterOf(t, w.a, "tcp_bbr_startup_exits"); n != 1 {
		t.Errorf("tcp_bbr_startup_exits %d, want 1", n)
	}
	if n := counterOf(t, w.a, "tcp_bbr_probe_bw"); n < 1 {
		t.Errorf("tcp_bbr_probe_bw %d: Drain never ended", n)
	}
	if c := w.a.conns[0].bbr; c == nil {
		t.Fatal("the connection runs no BBR")
	}
	if tput := float64(got) / el.Seconds(); tput < 0.8*rate {
		t.Errorf("%.3g B/s over a %.3g B/s wire", tput, rate)
	}
	t.Logf("Startup ended in round %d at %.3g B/s; %.1f Mbit/s over %v; pacing delays %d", exitRounds, exitBw,
		float64(got)*8/el.Seconds()/1e6, el, counterOf(t, w.a, "tcp_pacing_delays"))
}

// TestBBRProbeRTT is §4.3.5: a connection that saw no lower RTT for 10 s
// enters ProbeRTT, holds its flight at four segments for at least
// 200 ms and a round trip, then goes back to ProbeBW (the pipe was
// full) with the minimum RTT taken afresh.
func TestBBRProbeRTT(t *testing.T) {
	const rate = 2e6 / 8
	var enteredAt, leftAt time.Time
	var stamp, sinceMin int64 // the minimum RTT's stamp at the step before; engine ns
	maxCwnd := uint32(0)
	l := bbrLink{
		o:   Options{Congestion: BBR},
		imp: memio.Impairment{Rate: rate, Delay: 5 * time.Millisecond}, n: 4 << 20,
		limit: 13 * time.Second, quantum: 100 * time.Microsecond,
	}
	l.each = func(c *Conn, now time.Time) {
		b := c.bbr
		if b.mode == bbrProbeRTT {
			if enteredAt.IsZero() {
				enteredAt, sinceMin = now, c.e.now-stamp
			}
			if b.probeRTTDone != 0 {
				maxCwnd = max(maxCwnd, c.cwnd)
			}
		} else if !enteredAt.IsZero() && leftAt.IsZero() {
			leftAt = now
			if b.mode != bbrProbeBW {
				t.Errorf("left ProbeRTT for mode %d, want ProbeBW", b.mode)
			}
			if b.minRTTAt != c.e.now {
				t.Error("the minimum RTT's stamp was not renewed on leaving ProbeRTT")
			}
		}
		stamp = b.minRTTAt
	}
	w, _, _ := l.run(t)
	if enteredAt.IsZero() {
		t.Fatal("no ProbeRTT in 13 s")
	}
	if d := time.Duration(sinceMin); d < 10*time.Second || d > 10*time.Second+50*time.Millisecond {
		t.Errorf("ProbeRTT %v after the minimum RTT was last set, want 10 s", d)
	}
	if leftAt.IsZero() {
		t.Fatal("ProbeRTT never ended")
	}
	if d := leftAt.Sub(enteredAt); d < 200*time.Millisecond {
		t.Errorf("ProbeRTT lasted %v, less than 200 ms", d)
	}
	if mss := uint32(w.a.conns[0].smss); maxCwnd > bbrMinCwndSegs*mss {
		t.Errorf("cwnd %d in ProbeRTT, above four segments (%d)", maxCwnd, bbrMinCwndSegs*mss)
	}
	if n := counterOf(t, w.a, "tcp_bbr_probe_rtt"); n != 1 {
		t.Errorf("tcp_bbr_probe_rtt %d, want 1", n)
	}
}

// TestBBRRandomLoss: BBR's model (§4.1: bandwidth and RTT, not loss) keeps
// a 100 Mbit/s wire with 10 ms each way near its rate at 1% random
// loss each way (§4.2.3.4: recovery conserves packets, then restores
// cwnd), where NewReno's halving for every loss (RFC 5681 §3.1) keeps
// it at a small fraction of it.
func TestBBRRandomLoss(t *testing.T) {
	const rate = 100e6 / 8
	tput := map[Congestion]float64{}
	for _, cc := range []Congestion{BBR, NewReno} {
		l := bbrLink{
			o:   Options{Congestion: cc, SendBuf: 4 << 20, RecvBuf: 4 << 20},
			imp: memio.Impairment{Rate: rate, Delay: 10 * time.Millisecond, Loss: 0.01}, n: 16 << 20,
			limit: 3 * time.Second, quantum: 20 * time.Microsecond,
		}
		w, got, el := l.run(t)
		tput[cc] = float64(got) / el.Seconds()
		var cs []string
		for _, n := range []string{"tcp_retransmits", "tcp_timeouts", "tcp_fast_retransmits", "tcp_lost_retransmits",
			"tcp_tlp_probes", "tcp_dsacks_received", "tcp_spurious_retransmits", "tcp_rack_recoveries", "tcp_pacing_delays", "tcp_segments_out"} {
			cs = append(cs, fmt.Sprintf("%s %d", n, counterOf(t, w.a, n)))
		}
		t.Logf("%s: %.1f Mbit/s, %v", cc, tput[cc]*8/1e6, cs)
	}
	if tput[BBR] < 0.7*rate {
		t.Errorf("BBR at 1%% loss: %.1f Mbit/s over a 100 Mbit/s wire", tput[BBR]*8/1e6)
	}
	if tput[BBR] < 3*tput[NewReno] {
		t.Errorf("BBR %.1f Mbit/s, NewReno %.1f: BBR should not cut on random loss", tput[BBR]*8/1e6, tput[NewReno]*8/1e6)
	}
}

// TestPacingSpreadsAndIdleSendsAtOnce: a paced connection (pacing.go,
// §4.2.1's pacing rate, sent in aggregates of the send quantum, §4.6.3)
// sends a quantum (two segments at a low rate) at once, then a quantum
// each time the pacing timer fires, armed for the departure time; once idle,
// its next small write leaves at the first Flush, with no pacing delay.
func TestPacingSpreadsAndIdleSendsAtOnce(t *testing.T) {
	o := Options{Congestion: BBR}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7300)
	mss := ca.segData()
	ca.bbr.pace.setRate(1e6) // 1 MB/s: a segment every ~1.4 ms
	sent := func() uint32 { return ca.sndNxt - ca.sndUna }
	ca.Write(make([]byte, 20*mss))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := sent(); got != uint32(2*mss) {
		t.Fatalf("%d bytes left at once at 1 MB/s, want a quantum of two segments (%d)", got, 2*mss)
	}
	if counterOf(t, w.a, "tcp_pacing_delays") == 0 {
		t.Error("tcp_pacing_delays 0 with segments held back")
	}
	if ca.tPace == 0 {
		t.Fatal("no pacing timer armed")
	}
	if want := ca.bbr.pace.next; ca.tPace != want {
		t.Errorf("pacing timer at %d, want the departure time %d", ca.tPace, want)
	}
	w.clk.Advance(time.Duration(ca.tPace - w.a.now))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := sent(); got != uint32(4*mss) {
		t.Fatalf("%d bytes out after the pacing timer, want a second quantum (four segments)", got)
	}
	// Drain it all, then let the connection idle.
	buf := make([]byte, 64<<10)
	w.until(10*time.Second, "the transfer", func() bool {
		n, _ := cb.Read(buf)
		_ = n
		return ca.sndUna == ca.sndMax && ca.sLen == 0
	})
	w.clk.Advance(time.Second)
	delays := counterOf(t, w.a, "tcp_pacing_delays")
	una := ca.sndUna
	ca.Write(make([]byte, 100))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	if ca.sndNxt != una+100 {
		t.Fatalf("a 100-byte write after idle: %d bytes left at the first Flush", ca.sndNxt-una)
	}
	if got := counterOf(t, w.a, "tcp_pacing_delays"); got != delays {
		t.Errorf("tcp_pacing_delays went from %d to %d for a write after idle", delays, got)
	}
}

// TestRateRingGrows: the delivery-rate records (draft-cheng-iccrg-
// delivery-rate-estimation §3.2, one per transmission) grow when short
// segments outnumber the ring, keeping their order.
func TestRateRingGrows(t *testing.T) {
	var r rateState
	r.init()
	n := len(r.recs)
	for i := 0; i < n; i++ { // wrap the ring's head past its start
		r.recs[(3+i)%n] = txRec{start: uint32(i * 10), end: uint32(i*10 + 10)}
	}
	r.head, r.n = 3, n
	if !r.grow() || len(r.recs) != 2*n {
		t.Fatalf("ring of %d not grown to %d (now %d)", n, 2*n, len(r.recs))
	}
	for i := 0; i < n; i++ {
		if q := r.at(i); q.start != uint32(i*10) {
			t.Fatalf("record %d starts at %d after growing, want %d", i, q.start, i*10)
		}
	}
	if got := r.find(55); got != 5 {
		t.Errorf("find(55) = %d, want 5", got)
	}
	r.recs = make([]txRec, rateMaxRecs)
	if r.grow() {
		t.Error("grew past rateMaxRecs")
	}
}

// TestBBRTimeoutDuringRecovery: a retransmission timeout in fast
// recovery leaves cwnd at one segment to grow from (§4.2.3.4 restores
// the cwnd of before a recovery only when it ends, and a timeout is no
// end: Linux's Loss state), so go-back-N does not resend the flight at
// once; once what was in flight at the timeout is acknowledged, cwnd is
// at least what it was.
func TestBBRTimeoutDuringRecovery(t *testing.T) {
	o := Options{Congestion: BBR, MaxConns: 4, MinRTO: time.Second}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	una, mss := inFlight(t, w, cb, 8)
	ackB(w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	if !cb.inRecovery {
		t.Fatal("no recovery")
	}
	ackB(w, ca, cb, una, sackBlock{una + mss, una + 5*mss}) // BBR sees the recovery
	prior := cb.bbr.priorCwnd
	w.until(5*time.Second, "the timeout", func() bool { return counterOf(t, w.b, "tcp_timeouts") == 1 })
	ackB(w, ca, cb, una, sackBlock{una + mss, una + 6*mss}) // an ACK after it, nothing new acknowledged
	if cb.cwnd > 4*mss {
		t.Fatalf("cwnd %d segments after a timeout in recovery, want it from one segment (BBR's floor four)", cb.cwnd/mss)
	}
	ackB(w, ca, cb, una+8*mss)
	if cb.cwnd < prior {
		t.Errorf("cwnd %d after the flight of the timeout was acknowledged, below the %d of before", cb.cwnd, prior)
	}
}

// TestSpuriousTimeoutAfterPause: the receiver pauses 150 ms, longer than
// the RTO and a tail loss probe that may go at its time (RFC 8985 §7.2),
// with 4 MiB in flight (a loaded machine). The timer fires, the
// ACKs after the pause tell it spurious (RFC 3522, by their cumulative
// part or their SACKs: TestSpuriousTimeoutBySACKRFC3522), and go-back-N
// does not resend the flight that was on its way (counted by the peer's
// D-SACKs of data it got twice) nor BBR's cwnd of before it let the
// flight out again at once (TestBBRTimeoutDuringRecovery).
func TestSpuriousTimeoutAfterPause(t *testing.T) {
	o := Options{Congestion: BBR, SendBuf: 4 << 20, RecvBuf: 4 << 20}
	w := newWorld(t, memio.Options{Seed: 1, TxSlots: 4096, RxSlots: 8192}, o, o)
	ca, cb := w.connect(7400)
	w.pa.SetImpairment(memio.Impairment{Rate: 1e9 / 8, Delay: 10 * time.Millisecond, Loss: 0.001})
	w.pb.SetImpairment(memio.Impairment{Delay: 10 * time.Millisecond, Loss: 0.001})
	p := newPipe(ca, cb, randBytes(3, 64<<20))
	start := w.clk.Now()
	stalled := false
	for !p.done() && w.clk.Now().Sub(start) < 3*time.Second {
		if !stalled && w.clk.Now().Sub(start) > 300*time.Millisecond {
			stalled = true
			for end := w.clk.Now().Add(150 * time.Millisecond); w.clk.Now().Before(end); {
				p.pump(t)
				w.a.Poll(64) // only the sender's engine runs
				w.a.Flush()
				w.clk.Advance(10 * time.Microsecond)
			}
		}
		p.pump(t)
		if w.step() == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			d := 10 * time.Microsecond
			if at, ok := w.a.NextTimer(); ok && at.Sub(w.clk.Now()) < d {
				d = max(at.Sub(w.clk.Now()), time.Microsecond)
			}
			w.clk.Advance(d)
		}
	}
	if !p.done() {
		t.Fatalf("%d of %d bytes in 3 s", p.got.Len(), len(p.data))
	}
	if n := counterOf(t, w.a, "tcp_timeouts"); n == 0 {
		t.Fatal("no timeout: the pause did not test anything")
	}
	if n := counterOf(t, w.a, "tcp_spurious_rtos"); n == 0 {
		t.Error("the timeout was not found spurious")
	}
	t.Logf("timeouts %d spurious %d D-SACKs %d retransmits %d", counterOf(t, w.a, "tcp_timeouts"), counterOf(t, w.a, "tcp_spurious_rtos"), counterOf(t, w.a, "tcp_dsacks_received"), counterOf(t, w.a, "tcp_retransmits"))
	if n := counterOf(t, w.a, "tcp_dsacks_received"); n > 20 {
		t.Errorf("%d D-SACKs: the flight in the path was sent again", n)
	}
}

// TestBBRRetransmissionRTOBehindQueue: a retransmission of SND.UNA (and
// a tail loss probe) leaves behind everything in flight, so its round
// trip is at least that flight over the bottleneck's rate (draft-
// cardwell-iccrg-bbr-congestion-control-00 §4.1.1, BtlBw), while SRTT
// was measured on segments sent before Startup's queue grew. An RTO of
// SRTT plus the variance term (RFC 6298 §2.3, re-armed at the
// retransmission as Linux's tcp_xmit_retransmit_queue does) fired before
// the retransmission could be answered: a spurious timeout (RFC 4015
// §1), a collapsed cwnd and the flight sent again. Over a 500 Mbit/s
// wire with 10 ms each way and 0.1% loss, a seeded run that had one
// such timeout now has none, and queuedRTOWait covers the drain time.
func TestBBRRetransmissionRTOBehindQueue(t *testing.T) {
	l := bbrLink{
		o:   Options{Congestion: BBR, SendBuf: 4 << 20, RecvBuf: 6 << 20},
		imp: memio.Impairment{Rate: 125e6 / 2, Delay: 10 * time.Millisecond, Loss: 0.001}, n: 64 << 20,
		limit: time.Second, quantum: 20 * time.Microsecond,
	}
	checked := false
	l.each = func(c *Conn, now time.Time) {
		if c.bbr == nil || c.bbr.bw <= 0 || checked {
			return
		}
		if p := c.pipe(); float64(p) > 2*c.bbr.bw*float64(c.srtt)/1e9 {
			// Twice what SRTT covers is queued: the wait covers draining it.
			drain := int64(float64(p) * 1e9 / c.bbr.bw)
			if w := c.queuedRTOWait(); w < drain || w < c.rtoWait() {
				t.Errorf("pipe %d at %.0f B/s (drain %v): queuedRTOWait %v, rtoWait %v", p, c.bbr.bw, time.Duration(drain), time.Duration(w), time.Duration(c.rtoWait()))
			}
			checked = true
		}
	}
	w, got, _ := l.run(t)
	if !checked {
		t.Error("no queue twice SRTT's flight formed: the run does not test the wait")
	}
	if got == 0 {
		t.Fatal("nothing delivered")
	}
	if n := counterOf(t, w.a, "tcp_timeouts"); n != 0 {
		t.Errorf("%d retransmission timeouts (%d spurious) with 0.1%% loss behind Startup's queue", n, counterOf(t, w.a, "tcp_spurious_rtos"))
	}
}

// TestBBRBDPFollowsEstimates is draft-cardwell-iccrg-bbr-congestion-
// control-00 §4.2.3.2: BDP = BtlBw × RTprop, times the gain; the product
// bbrBDP keeps between ACKs follows either estimate as soon as it moves.
func TestBBRBDPFollowsEstimates(t *testing.T) {
	c := &Conn{bbr: &bbrState{}, smss: 1000}
	b := c.bbr
	if got := c.bbrBDP(1); got != initialWindow(1000) {
		t.Errorf("no estimate: BDP %d, want the initial window %d", got, initialWindow(1000))
	}
	for _, tc := range []struct {
		bw     float64
		minRTT int64
		gain   float64
		want   uint32
	}{
		{1e6, 10e6, 1, 10000},
		{1e6, 10e6, 2, 20000},
		{2e6, 10e6, 1, 20000}, // BtlBw moved
		{2e6, 5e6, 1, 10000},  // RTprop moved
		{2e6, 5e6, 1.25, 12500},
		{1e12, 10e9, 1, 1 << 30}, // bounded
	} {
		b.bw, b.minRTT = tc.bw, tc.minRTT
		if got := c.bbrBDP(tc.gain); got != tc.want {
			t.Errorf("bw %v, minRTT %v, gain %v: BDP %d, want %d", tc.bw, time.Duration(tc.minRTT), tc.gain, got, tc.want)
		}
	}
}

// TestRACKLostRetransmitByXmitTimeRFC8985Sec6_2: RACK marks a segment
// lost when a segment sent after it was delivered and RTT plus the
// reordering window went by since it left (RFC 8985 §6.2), whether it
// was a first transmission or a retransmission. With only the
// sequence-space test (a SACK above what was sent when the hole at
// SND.UNA went again), a sender whose send buffer the holes had filled
// sent no new data, got no such SACK, and waited for the RTO when the
// retransmission was lost as well; under BBR the delivery-rate records
// date each transmission, and the loss is found by time. Over a
// 500 Mbit/s wire with 10 ms each way and 3% loss, six seeded runs with
// a 512 KiB send buffer had 7 to 14 timeouts among them (three tries);
// now next to none (BBR's random ProbeBW phase moves the runs: one run
// in fifteen still had one).
func TestRACKLostRetransmitByXmitTimeRFC8985Sec6_2(t *testing.T) {
	timeouts := uint64(0)
	for seed := uint64(1); seed <= 6; seed++ {
		l := bbrLink{
			o:   Options{Congestion: BBR, SendBuf: 512 << 10, RecvBuf: 6 << 20},
			imp: memio.Impairment{Rate: 125e6 / 2, Delay: 10 * time.Millisecond, Loss: 0.03}, n: 64 << 20,
			limit: 3 * time.Second, quantum: 20 * time.Microsecond, seed: seed,
		}
		w, got, _ := l.run(t)
		if got == 0 {
			t.Fatalf("seed %d: nothing delivered", seed)
		}
		if n := counterOf(t, w.a, "tcp_lost_retransmits"); n == 0 {
			t.Errorf("seed %d: no lost retransmission found at 3%% loss", seed)
		}
		timeouts += counterOf(t, w.a, "tcp_timeouts")
	}
	if timeouts > 3 {
		t.Errorf("%d retransmission timeouts in six runs", timeouts)
	}
}

// TestRateRtxLostAt is rtxLostAt's rule (RFC 8985 §6.2): the
// retransmission at seq is lost only when it was retransmitted, is not
// delivered, a segment sent after it was delivered (RACK.xmit_ts) and
// the wait went by since it left.
func TestRateRtxLostAt(t *testing.T) {
	var r rateState
	r.init()
	r.recs[0] = txRec{start: 100, end: 200, sentAt: 1000, rtx: true}
	r.recs[1] = txRec{start: 200, end: 300, sentAt: 1500, done: true}
	r.n = 2
	for _, tc := range []struct {
		name   string
		seq    uint32
		xmitTs int64
		now    int64
		set    func(q *txRec)
		want   bool
	}{
		{"later segment delivered, wait passed", 100, 1500, 2000, nil, true},
		{"inside the record", 150, 1500, 2000, nil, true},
		{"wait not passed", 100, 1500, 1999, nil, false},
		{"nothing sent later delivered", 100, 1000, 3000, nil, false},
		{"not a retransmission (RACK's first-transmission rule is elsewhere)", 100, 1500, 3000, func(q *txRec) { q.rtx = false }, false},
		{"delivered", 100, 1500, 3000, func(q *txRec) { q.done = true }, false},
		{"no record", 400, 1500, 3000, nil, false},
	} {
		q := r.recs[0]
		if tc.set != nil {
			tc.set(&r.recs[0])
		}
		r.xmitTs = tc.xmitTs
		if got := r.rtxLostAt(tc.seq, tc.now, 1000); got != tc.want {
			t.Errorf("%s: rtxLostAt = %v, want %v", tc.name, got, tc.want)
		}
		r.recs[0] = q
	}
}
