package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// rackWorld is lossWorld with a round trip of 10 ms measured by B (from
// the timestamp A echoes), so that the reordering window and the PTO
// have their sizes; the minimum RTO (1 s) stays out of the way.
func rackWorld(t *testing.T, o Options) (w *world, ca, cb *Conn) {
	t.Helper()
	o.MaxConns, o.MinRTO = 4, time.Second
	w = newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb = w.connect(7000)
	inFlight(t, w, cb, 1)
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndMax, flagACK, 0xffff, tsOpt(cb.tsRecent, cb.tsNow()-10), nil))
	if cb.sndUna != cb.sndMax || cb.srtt < 5*time.Millisecond.Nanoseconds() {
		t.Fatalf("set-up: SND.UNA %d of %d, SRTT %v", cb.sndUna, cb.sndMax, time.Duration(cb.srtt))
	}
	return w, ca, cb
}

// runB advances the clock by d and runs B's timers and output.
func runB(t *testing.T, w *world, d time.Duration) {
	t.Helper()
	w.clk.Advance(d)
	w.b.tick()
	w.b.runTimers()
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
}

// ackSACK hands B an ACK of ack from A (window 0xffff) with the SACK
// blocks bs, and flushes B.
func ackSACK(t *testing.T, w *world, ca, cb *Conn, ack uint32, bs ...sackBlock) {
	t.Helper()
	var opts []byte
	if len(bs) > 0 {
		opts = sackOpt(bs...)
	}
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, ack, flagACK, 0xffff, opts, nil))
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
}

// RFC 3042 §2 (limited transmit) as RFC 6675 §4's pipe has it: with a
// full congestion window in flight, an ACK that SACKs a segment takes
// that segment out of the bytes in flight, and a new segment leaves, so
// that a loss near the end of a small flight still gets the SACKs that
// start recovery. With NoRACK, SACKed bytes stay in flight outside
// recovery and nothing leaves.
func TestLimitedTransmitRFC3042(t *testing.T) {
	for _, off := range []bool{false, true} {
		w, ca, cb := rackWorld(t, Options{NoRACK: off})
		mss := uint32(cb.segData())
		n := int(cb.cwnd / mss)
		una, _ := inFlight(t, w, cb, n)
		cb.Write(make([]byte, 4*int(mss)))
		if err := w.b.Flush(); err != nil {
			t.Fatal(err)
		}
		if cb.sndMax != una+uint32(n)*mss {
			t.Fatalf("set-up: %d bytes in flight, want cwnd %d", cb.sndMax-una, cb.cwnd)
		}
		ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 2*mss})
		if cb.inRecovery {
			t.Fatal("one SACKed segment started recovery")
		}
		got := (cb.sndMax - una) / mss
		want := uint32(n + 1)
		if off {
			want = uint32(n)
		}
		if got != want {
			t.Errorf("NoRACK %v: %d segments sent after the SACK, want %d", off, got, want)
		}
	}
}

// RFC 8985 §6.2: a hole below SACKed data that DupThresh does not call
// lost is lost once the reordering window passed; the reordering timer
// starts recovery then, without more ACKs and without the RTO. A hole
// that fills by itself within the window was reordering (§6.2 step 2):
// no recovery, and the connection counts reordering seen.
func TestRACKReorderingTimerRFC8985Sec6_2(t *testing.T) {
	w, ca, cb := rackWorld(t, Options{})
	una, mss := inFlight(t, w, cb, 5)
	ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 2*mss})
	if cb.inRecovery {
		t.Fatal("one SACKed segment started recovery at once")
	}
	reo := cb.reoWnd()
	if reo <= 0 || cb.rk.kind != lossReo || cb.rk.tLoss == 0 {
		t.Fatalf("reordering timer not armed: window %v, kind %d, at %d", time.Duration(reo), cb.rk.kind, cb.rk.tLoss)
	}
	runB(t, w, time.Duration(reo)/2)
	if cb.inRecovery {
		t.Fatal("recovery started within the reordering window")
	}
	rtx := counterOf(t, w.b, "tcp_retransmits")
	runB(t, w, time.Duration(reo))
	if !cb.inRecovery {
		t.Fatal("recovery did not start when the reordering window passed")
	}
	if got := counterOf(t, w.b, "tcp_rack_recoveries"); got != 1 {
		t.Errorf("tcp_rack_recoveries %d, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_retransmits"); got == rtx {
		t.Error("the hole was not retransmitted")
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}

	// The hole fills by itself within the window: reordering.
	w2, ca2, cb2 := rackWorld(t, Options{})
	una, mss = inFlight(t, w2, cb2, 5)
	ackSACK(t, w2, ca2, cb2, una, sackBlock{una + mss, una + 2*mss})
	ackSACK(t, w2, ca2, cb2, una+2*mss)
	runB(t, w2, time.Duration(cb2.reoWnd())*2)
	if cb2.inRecovery || counterOf(t, w2.b, "tcp_rack_recoveries") != 0 {
		t.Error("a hole filled within the reordering window started recovery")
	}
	if !cb2.rk.reoSeen || counterOf(t, w2.b, "tcp_rack_reordering_seen") != 1 {
		t.Errorf("reordering seen %v (counter %d), want true", cb2.rk.reoSeen, counterOf(t, w2.b, "tcp_rack_reordering_seen"))
	}
}

// RFC 8985 §6.2 step 4: a D-SACK of a retransmission (a spurious one,
// RFC 3708 §2) widens the reordering window by a quarter of the minimum
// RTT, once a round trip, up to SRTT.
func TestRACKReoWndFromDSACKRFC8985Sec6_2(t *testing.T) {
	w, ca, cb := rackWorld(t, Options{})
	before := cb.reoWnd()
	una, mss := inFlight(t, w, cb, 6)
	// Three segments SACKed above SND.UNA: the segment at SND.UNA is
	// lost (RFC 6675 IsLost) and sent again.
	rtx := counterOf(t, w.b, "tcp_retransmits")
	ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	if !cb.inRecovery || counterOf(t, w.b, "tcp_retransmits") == rtx {
		t.Fatalf("set-up: recovery %v, retransmits %d -> %d", cb.inRecovery, rtx, counterOf(t, w.b, "tcp_retransmits"))
	}
	// The original was only late: both copies arrived, and the ACK of
	// the first reports the second in a D-SACK below the cumulative ACK
	// (RFC 2883 §4).
	ackSACK(t, w, ca, cb, una+4*mss, sackBlock{una, una + mss})
	if got := counterOf(t, w.b, "tcp_rack_reo_wnd_widened"); got != 1 {
		t.Fatalf("tcp_rack_reo_wnd_widened %d, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_spurious_retransmits"); got != 1 {
		t.Errorf("tcp_spurious_retransmits %d, want 1", got)
	}
	after := cb.reoWnd()
	if after <= before || after > cb.srtt {
		t.Errorf("reordering window %v -> %v, want wider, at most SRTT %v", time.Duration(before), time.Duration(after), time.Duration(cb.srtt))
	}
	// A second D-SACK in the same round trip does not widen it again.
	ackSACK(t, w, ca, cb, una+5*mss, sackBlock{una, una + mss})
	if got := counterOf(t, w.b, "tcp_rack_reo_wnd_widened"); got != 1 {
		t.Errorf("tcp_rack_reo_wnd_widened %d after a second D-SACK in the round, want 1", got)
	}
}

// RFC 8985 §6.2 step 4 with RFC 3708 §2: a D-SACK of data sent only once
// is the network's duplicate, not a spurious retransmission: it neither
// widens the reordering window nor counts as reordering. The lossy wire
// duplicates 1% of segments; every such D-SACK widened the window, once
// a round trip, and renewed reo_wnd_persist, so that the window sat at
// SRTT for the whole connection (70 to 110 widenings a 64 MiB echo).
// After a timeout, whose go-back-N is not recorded, a D-SACK may be of a
// retransmission and widens the window as before.
func TestRACKReoWndIgnoresNetworkDuplicatesRFC8985Sec6_2(t *testing.T) {
	w, ca, cb := rackWorld(t, Options{})
	before := cb.reoWnd()
	una, mss := inFlight(t, w, cb, 4)
	// Segments 3 and 4 arrived twice, though sent once: the ACKs after
	// them D-SACK them below the cumulative ACK (RFC 2883 §4).
	ackSACK(t, w, ca, cb, una+3*mss, sackBlock{una + 2*mss, una + 3*mss})
	ackSACK(t, w, ca, cb, una+4*mss, sackBlock{una + 3*mss, una + 4*mss})
	if got := counterOf(t, w.b, "tcp_dsacks_received"); got != 2 {
		t.Fatalf("tcp_dsacks_received %d, want 2", got)
	}
	if got := counterOf(t, w.b, "tcp_rack_reo_wnd_widened"); got != 0 {
		t.Errorf("tcp_rack_reo_wnd_widened %d after D-SACKs of data sent once, want 0", got)
	}
	if got := counterOf(t, w.b, "tcp_spurious_retransmits"); got != 0 {
		t.Errorf("tcp_spurious_retransmits %d, want 0", got)
	}
	if after := cb.reoWnd(); after != before || cb.rk.reoSeen {
		t.Errorf("reordering window %v -> %v, reordering seen %v; want unchanged, false", time.Duration(before), time.Duration(after), cb.rk.reoSeen)
	}

	// After a timeout the record is incomplete: a D-SACK widens. (The
	// tail loss probe goes first, §7.2; the timeout follows it.)
	una, mss = inFlight(t, w, cb, 2)
	runB(t, w, time.Duration(cb.rto)+time.Millisecond)
	runB(t, w, time.Duration(cb.tRTO-w.b.now))
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 1 {
		t.Fatalf("set-up: tcp_timeouts %d, want 1", got)
	}
	ackSACK(t, w, ca, cb, una+mss, sackBlock{una, una + mss})
	if got := counterOf(t, w.b, "tcp_rack_reo_wnd_widened"); got != 1 {
		t.Errorf("tcp_rack_reo_wnd_widened %d after a D-SACK following a timeout, want 1", got)
	}
}

// RFC 8985 §7.2–7.3: with the last segments of a flight lost and nothing
// more to send, the PTO (2*SRTT + 2 ms, well before the RTO) sends the
// last segment again; its SACK shows the hole below it, and RACK's
// reordering timer starts fast recovery: the tail is repaired without
// the RTO.
func TestTailLossProbeRFC8985Sec7(t *testing.T) {
	w, ca, cb := rackWorld(t, Options{})
	una, mss := inFlight(t, w, cb, 3)
	if cb.rk.kind != lossTLP || cb.rk.tLoss == 0 || cb.rk.tLoss >= cb.tRTO {
		t.Fatalf("PTO not armed before the RTO: kind %d, at %d, RTO at %d", cb.rk.kind, cb.rk.tLoss, cb.tRTO)
	}
	pto := time.Duration(2*cb.srtt + ptoExtra)
	runB(t, w, pto-time.Millisecond)
	if got := counterOf(t, w.b, "tcp_tlp_probes"); got != 0 {
		t.Fatalf("a probe left before the PTO")
	}
	runB(t, w, time.Millisecond)
	if got := counterOf(t, w.b, "tcp_tlp_probes"); got != 1 {
		t.Fatalf("tcp_tlp_probes %d at the PTO, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_retransmits"); got != 1 {
		t.Fatalf("tcp_retransmits %d, want 1 (the last segment)", got)
	}
	// The probe arrives: A SACKs it.
	ackSACK(t, w, ca, cb, una, sackBlock{una + 2*mss, una + 3*mss})
	runB(t, w, time.Duration(cb.reoWnd())+time.Microsecond)
	if !cb.inRecovery {
		t.Fatal("the probe's SACK did not lead to recovery")
	}
	ackSACK(t, w, ca, cb, una+3*mss)
	if cb.inRecovery || cb.sndUna != cb.sndMax {
		t.Fatalf("not repaired: in recovery %v, %d bytes unacknowledged", cb.inRecovery, cb.sndMax-cb.sndUna)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}
}

// RFC 8985 §7.4: a probe that retransmitted the last segment and whose
// ACK covers it with no D-SACK repaired a loss, a congestion event (cwnd
// reduced, tcp_tlp_recoveries); one the peer D-SACKs was not needed (cwnd
// kept, tcp_tlp_spurious).
func TestTailLossProbeDetectsLossRFC8985Sec7_4(t *testing.T) {
	for _, spurious := range []bool{false, true} {
		w, ca, cb := rackWorld(t, Options{})
		una, mss := inFlight(t, w, cb, 3)
		runB(t, w, time.Duration(2*cb.srtt+ptoExtra))
		if got := counterOf(t, w.b, "tcp_tlp_probes"); got != 1 {
			t.Fatalf("set-up: tcp_tlp_probes %d, want 1", got)
		}
		cwnd := cb.cwnd
		end := una + 3*mss
		if spurious {
			ackSACK(t, w, ca, cb, end, sackBlock{end - mss, end})
		} else {
			ackSACK(t, w, ca, cb, end)
		}
		rec, spu := counterOf(t, w.b, "tcp_tlp_recoveries"), counterOf(t, w.b, "tcp_tlp_spurious")
		if spurious && (spu != 1 || rec != 0 || cb.cwnd < cwnd) {
			t.Errorf("D-SACKed probe: spurious %d, recoveries %d, cwnd %d -> %d; want 1, 0, not reduced", spu, rec, cwnd, cb.cwnd)
		}
		if !spurious && (rec != 1 || spu != 0 || cb.cwnd >= cwnd) {
			t.Errorf("probe that repaired a loss: recoveries %d, spurious %d, cwnd %d -> %d; want 1, 0, reduced", rec, spu, cwnd, cb.cwnd)
		}
	}
}

// RFC 8985 §7.2: no probe after an RTO until what was in flight then is
// acknowledged (the timer backs off alone, RFC 6298 §5.5).
func TestNoTailLossProbeAfterRTORFC8985Sec7_2(t *testing.T) {
	w, _, cb := rackWorld(t, Options{})
	inFlight(t, w, cb, 3)
	w.until(10*time.Second, "two RTOs", func() bool { return counterOf(t, w.b, "tcp_timeouts") >= 2 })
	if got := counterOf(t, w.b, "tcp_tlp_probes"); got != 1 {
		t.Errorf("tcp_tlp_probes %d, want 1 (before the first RTO only)", got)
	}
}

// RFC 8985 §6.2 (RACK.reo_wnd, step 4: zero at DupThresh only while
// RACK.reordering_seen is false): once a hole filled by itself, three
// segments SACKed above the next hole no longer start recovery at once
// (RFC 6675's DupThresh and IsLost); the hole is lost when the
// reordering window has passed, and the reordering timer starts
// recovery then. On the lossy wire (5% reordering) the immediate
// DupThresh recovery retransmitted 40 to 120 segments an echo that
// arrived anyway.
func TestRACKReorderingSeenDefersDupThreshRFC8985Sec6_2(t *testing.T) {
	w, ca, cb := rackWorld(t, Options{})
	una, mss := inFlight(t, w, cb, 2)
	ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 2*mss})
	ackSACK(t, w, ca, cb, una+2*mss)
	if !cb.rk.reoSeen || cb.inRecovery {
		t.Fatalf("set-up: reordering seen %v, in recovery %v", cb.rk.reoSeen, cb.inRecovery)
	}

	una, mss = inFlight(t, w, cb, 6)
	fast := counterOf(t, w.b, "tcp_fast_retransmits")
	ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 2*mss})
	ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 3*mss})
	ackSACK(t, w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	if cb.inRecovery || counterOf(t, w.b, "tcp_fast_retransmits") != fast {
		t.Fatal("three SACKed segments started recovery at once after reordering was seen")
	}
	if cb.rk.kind != lossReo || cb.rk.tLoss == 0 {
		t.Fatalf("reordering timer not armed: kind %d, at %d", cb.rk.kind, cb.rk.tLoss)
	}
	runB(t, w, time.Duration(cb.reoWnd())+time.Microsecond)
	if !cb.inRecovery {
		t.Fatal("recovery did not start when the reordering window passed")
	}
	if got := counterOf(t, w.b, "tcp_rack_recoveries"); got != 1 {
		t.Errorf("tcp_rack_recoveries %d, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}
}

// RFC 8985 §7.2 (TLP_calc_PTO: if Now() + PTO > TCP_RTO_expiration(),
// PTO = TCP_RTO_expiration() - Now()) and §7.3: a PTO later than the RTO
// fires at the RTO's time, and the probe goes in its place, the RTO
// armed again after it. A lone segment's PTO (2*SRTT plus WCDelAckT) is
// past an RTO of SRTT plus the 25 ms MinRTO; the engine left it to the
// RTO, which collapsed cwnd for the loss of one segment (the 16
// connections of the 3% / 10 ms model, whose receive windows left a
// segment or less in flight).
func TestTailLossProbeCappedAtRTORFC8985Sec7_2(t *testing.T) {
	w, ca, cb := rackWorld(t, Options{})
	w.b.minRTO = int64(25 * time.Millisecond)
	cb.rto = cb.srtt + max(w.b.minRTO, 4*cb.rttvar)
	una, mss := inFlight(t, w, cb, 1)
	if cb.tRTO == 0 || cb.rk.kind != lossTLP || cb.rk.tLoss != cb.tRTO {
		t.Fatalf("PTO not armed at the RTO: kind %d, PTO in %v, RTO in %v", cb.rk.kind,
			time.Duration(cb.rk.tLoss-w.b.now), time.Duration(cb.tRTO-w.b.now))
	}
	cwnd := cb.cwnd
	runB(t, w, time.Duration(cb.tRTO-w.b.now))
	if got := counterOf(t, w.b, "tcp_tlp_probes"); got != 1 {
		t.Fatalf("tcp_tlp_probes %d at the RTO's time, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Fatalf("tcp_timeouts %d: the RTO fired instead of the probe", got)
	}
	if cb.tRTO <= w.b.now || cb.cwnd != cwnd {
		t.Fatalf("after the probe: RTO in %v, cwnd %d -> %d; want the RTO armed again, cwnd kept",
			time.Duration(cb.tRTO-w.b.now), cwnd, cb.cwnd)
	}
	// The probe arrives: its ACK repairs the loss (§7.4).
	ackSACK(t, w, ca, cb, una+mss)
	if cb.sndUna != cb.sndMax {
		t.Fatalf("not repaired: %d bytes unacknowledged", cb.sndMax-cb.sndUna)
	}
	if got := counterOf(t, w.b, "tcp_tlp_recoveries"); got != 1 {
		t.Errorf("tcp_tlp_recoveries %d, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}
}
