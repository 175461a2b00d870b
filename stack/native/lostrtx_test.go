package native

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// sendTap records the sequence numbers of the data segments B sends.
type sendTap struct{ seqs []uint32 }

func (tp *sendTap) fn(dir memio.Dir, f []byte) {
	if dir != memio.BtoA || tcpFrame(f) == nil || dataLen(f) == 0 {
		return
	}
	tp.seqs = append(tp.seqs, binary.BigEndian.Uint32(tcpFrame(f)[4:]))
}

// count is how many times a segment starting at seq left since the
// record's index from.
func (tp *sendTap) count(from int, seq uint32) int {
	n := 0
	for _, s := range tp.seqs[from:] {
		if s == seq {
			n++
		}
	}
	return n
}

// lostRtxWorld is rackWorld with a tap on B's segments: B measured a
// round trip of 10 ms, then sent 10 segments that A never saw, with 6
// more written behind them; A's SACKs of 1, 3 and 5–9 start recovery and
// B retransmits the holes 0, 2 and 4 (and new data, as PRR allows), all
// lost again on the way. It returns SND.UNA, the segment size and the
// tap's index after those retransmissions.
func lostRtxWorld(t *testing.T) (w *world, ca, cb *Conn, tp *sendTap, una, mss uint32, from int) {
	t.Helper()
	tp = &sendTap{}
	o := Options{MaxConns: 4, MinRTO: time.Second}
	w = newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64, Tap: tp.fn}, o, o)
	ca, cb = w.connect(7000)
	inFlight(t, w, cb, 1)
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndMax, flagACK, 0xffff, tsOpt(cb.tsRecent, cb.tsNow()-10), nil))
	if cb.sndUna != cb.sndMax || cb.srtt < 5*time.Millisecond.Nanoseconds() {
		t.Fatalf("set-up: SND.UNA %d of %d, SRTT %v", cb.sndUna, cb.sndMax, time.Duration(cb.srtt))
	}
	una, mss = inFlight(t, w, cb, 10)
	cb.Write(make([]byte, 6*int(mss)))
	seg := func(i uint32) uint32 { return una + i*mss }
	ackSACK(t, w, ca, cb, una, sackBlock{seg(5), seg(10)}, sackBlock{seg(3), seg(4)}, sackBlock{seg(1), seg(2)})
	if !cb.inRecovery {
		t.Fatal("set-up: the SACKs did not start recovery")
	}
	for _, i := range []uint32{0, 2, 4} {
		if tp.count(0, seg(i)) != 2 {
			t.Fatalf("set-up: segment %d sent %d times, want 2 (sent, retransmitted)", i, tp.count(0, seg(i)))
		}
	}
	return w, ca, cb, tp, una, mss, len(tp.seqs)
}

// RFC 8985 §6.2 step 5 (RACK's loss detection, retransmissions included
// by their send times; Linux's tcp_rack_detect_loss): in SACK recovery
// the retransmission of a hole above SND.UNA is lost again. Once data
// sent after it is SACKed and a round trip plus the reordering window
// went by since it left, it goes again, before SND.UNA reaches it and
// before the RTO; RFC 6675 alone sends a hole once, and the hole waited
// for the cumulative ACK (the rule at SND.UNA) or the RTO. Before the
// window passed, it does not go again (it may be reordered). Pipe
// (RFC 6675 §4) leaves it out while it is lost and counts it once when
// it has gone again.
func TestLostRetransmissionAboveUNARFC8985Sec6_2(t *testing.T) {
	w, ca, cb, tp, una, mss, from := lostRtxWorld(t)
	seg := func(i uint32) uint32 { return una + i*mss }
	sent := cb.sndMax // what B had sent: the new data it sends from here on is after the retransmissions

	// The retransmissions of 0 and 2 are lost; 4's arrives, and the new
	// data sent in recovery with it: SACKed at once, before a round trip
	// could tell a lost retransmission from a reordered one.
	ackSACK(t, w, ca, cb, una, sackBlock{seg(3), sent}, sackBlock{seg(1), seg(2)})
	if n := tp.count(from, seg(2)); n != 0 {
		t.Fatalf("segment 2 sent again %d times with no time gone by: the reordering window (RFC 8985 §6.2) was not waited", n)
	}
	// Half a round trip later: still within RTT + reo_wnd.
	w.clk.Advance(time.Duration(cb.srtt / 2))
	high := cb.sndMax
	ackSACK(t, w, ca, cb, una, sackBlock{seg(3), high}, sackBlock{seg(1), seg(2)})
	if n := tp.count(from, seg(2)); n != 0 {
		t.Fatalf("segment 2 sent again %d times half a round trip after it left", n)
	}

	// A round trip and the reordering window after the retransmissions
	// left, the data sent after them is SACKed: both are lost.
	w.clk.Advance(time.Duration(cb.srtt/2 + cb.reoWnd() + 1))
	lost := counterOf(t, w.b, "tcp_lost_retransmits")
	high = cb.sndMax
	ackB(w, ca, cb, una, sackBlock{seg(3), high}, sackBlock{seg(1), seg(2)})
	if !cb.inRecovery || cb.sndUna != una {
		t.Fatalf("set-up: in recovery %v, SND.UNA moved %d", cb.inRecovery, cb.sndUna-una)
	}
	if got, want := cb.pipe(), cb.sndMax-cb.sndUna-cb.sackedBytes()-2*mss; got != want {
		t.Errorf("pipe %d with the retransmissions of 0 and 2 found lost, want %d (RFC 6675 §4: a lost segment is not in flight)", got, want)
	}
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := tp.count(from, seg(2)); n != 1 {
		t.Fatalf("segment 2 sent again %d times, want 1: its lost retransmission waits for SND.UNA or the RTO", n)
	}
	if n := tp.count(from, seg(0)); n != 1 {
		t.Errorf("segment 0 sent again %d times, want 1", n)
	}
	if got := counterOf(t, w.b, "tcp_lost_retransmits"); got != lost+2 {
		t.Errorf("tcp_lost_retransmits %d, want %d", got, lost+2)
	}
	if got, want := cb.pipe(), cb.sndMax-cb.sndUna-cb.sackedBytes(); got != want {
		t.Errorf("pipe %d after they went again, want %d (each counted once)", got, want)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}
	// Once is enough: a further ACK at once does not send them again.
	ackSACK(t, w, ca, cb, una, sackBlock{seg(3), high}, sackBlock{seg(1), seg(2)})
	if n := tp.count(from, seg(2)); n != 1 {
		t.Errorf("segment 2 sent %d times after it went again, want 1", n)
	}
}

// RFC 8985 §6.2 step 5: a retransmission that the peer SACKs was not
// lost, however long it took; only the one still missing goes again.
func TestSACKedRetransmissionNotResentRFC8985Sec6_2(t *testing.T) {
	w, ca, cb, tp, una, mss, from := lostRtxWorld(t)
	seg := func(i uint32) uint32 { return una + i*mss }
	sent := cb.sndMax
	ackSACK(t, w, ca, cb, una, sackBlock{seg(3), sent}, sackBlock{seg(1), seg(2)})
	// Late, the retransmission of 2 arrives, and new data after it.
	w.clk.Advance(time.Duration(cb.srtt + cb.reoWnd() + 1))
	ackSACK(t, w, ca, cb, una, sackBlock{seg(1), cb.sndMax})
	if n := tp.count(from, seg(2)); n != 0 {
		t.Errorf("segment 2, SACKed, sent again %d times", n)
	}
	if n := tp.count(from, seg(0)); n != 1 {
		t.Errorf("segment 0 sent again %d times, want 1", n)
	}
}

// RFC 8985 §6.3: with no ACK after the one that told of data sent after
// a retransmission, RACK's timer fires when a round trip and the
// reordering window have passed since the retransmission left, and it
// goes again then, not at the RTO.
func TestLostRetransmissionTimerRFC8985Sec6_3(t *testing.T) {
	w, ca, cb, tp, una, mss, from := lostRtxWorld(t)
	seg := func(i uint32) uint32 { return una + i*mss }
	left := w.clk.Now()
	ackSACK(t, w, ca, cb, una, sackBlock{seg(3), cb.sndMax}, sackBlock{seg(1), seg(2)})
	wait := time.Duration(cb.srtt + cb.reoWnd())
	for tp.count(from, seg(2)) == 0 {
		if w.clk.Now().Sub(left) > 3*wait {
			t.Fatalf("segment 2 not sent again %v after its retransmission left (RTT + reo_wnd %v)", w.clk.Now().Sub(left), wait)
		}
		runB(t, w, time.Millisecond)
	}
	if d := w.clk.Now().Sub(left); d < wait {
		t.Errorf("segment 2 sent again %v after it left, before RTT + reo_wnd %v", d, wait)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}
}

// The record of a recovery's retransmissions (lostrtx.go): a range sent
// again over recorded ones takes their place with its own send time and
// order, the parts it does not cover keep theirs (a lost part stays
// lost); the record holds rtxTableMax ranges, and a retransmission past
// them is counted (tcp_lost_retransmit_untracked) and left to the rule
// at SND.UNA (RFC 8985 §6.2 applied where send times are known).
func TestRtxRecordRangesAndBound(t *testing.T) {
	w, _, cb := lossWorld(t)
	cb.inRecovery = true
	base := cb.sndUna
	rec := func(s, e uint32) { cb.rtxRecord(base+s, base+e) }
	rec(0, 100)
	rec(100, 200)
	rec(300, 400)
	cb.rk.rtx.e[0].lost, cb.rk.rtx.nlost = true, 1
	w.clk.Advance(time.Millisecond)
	w.b.tick()
	rec(50, 150)
	want := []struct {
		s, e  uint32
		order uint32
		lost  bool
	}{{0, 50, 1, true}, {50, 150, 4, false}, {150, 200, 2, false}, {300, 400, 3, false}}
	es := cb.rk.rtx.e
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(es), len(want), es)
	}
	for i, x := range want {
		g := es[i]
		if g.start != base+x.s || g.end != base+x.e || g.order != x.order || g.lost != x.lost {
			t.Errorf("entry %d: [%d, %d) order %d lost %v, want [%d, %d) order %d lost %v",
				i, g.start-base, g.end-base, g.order, g.lost, x.s, x.e, x.order, x.lost)
		}
	}
	if es[1].sentAt != w.b.now || es[0].sentAt == w.b.now {
		t.Error("the range sent again did not take the new send time alone")
	}
	if cb.rk.rtx.nlost != 1 {
		t.Errorf("nlost %d, want 1", cb.rk.rtx.nlost)
	}
	// Inside one entry: it splits around the new range.
	rec(320, 340)
	if es := cb.rk.rtx.e; len(es) != 6 || es[3].end != base+320 || es[4].start != base+320 || es[5].start != base+340 {
		t.Errorf("a range inside an entry: %+v", es)
	}

	// The bound.
	cb.rtxTableReset()
	for i := uint32(0); i < rtxTableMax+6; i++ {
		rec(1000+10*i, 1010+10*i)
	}
	if n := len(cb.rk.rtx.e); n != rtxTableMax {
		t.Errorf("%d entries, want the bound %d", n, rtxTableMax)
	}
	if got := counterOf(t, w.b, "tcp_lost_retransmit_untracked"); got != 6 {
		t.Errorf("tcp_lost_retransmit_untracked %d, want 6", got)
	}
	// Full, a range sent again over a recorded one still replaces it.
	rec(1000, 1010)
	if n := len(cb.rk.rtx.e); n != rtxTableMax || cb.rk.rtx.e[0].order != rtxTableMax+7 {
		t.Errorf("full: %d entries, first of order %d, want %d and %d", n, cb.rk.rtx.e[0].order, rtxTableMax, rtxTableMax+7)
	}
	// Out of recovery nothing is recorded.
	cb.inRecovery = false
	cb.rtxTableReset()
	rec(0, 100)
	if n := len(cb.rk.rtx.e); n != 0 {
		t.Errorf("%d entries recorded outside recovery", n)
	}
}

// RFC 8985 §6.2 step 2: a retransmission SACKed sooner than the minimum
// RTT after it left may be its original's late arrival, and tells
// nothing of the order of transmissions: it does not make an earlier
// retransmission lost. Delivered later than that, it does.
func TestRetransmissionDeliveredTooSoonRFC8985Sec6_2(t *testing.T) {
	for _, late := range []bool{false, true} {
		w, ca, cb, tp, una, mss, from := lostRtxWorld(t)
		seg := func(i uint32) uint32 { return una + i*mss }
		minRTT := cb.rk.minRTT
		if minRTT == 0 {
			minRTT = cb.srtt
		}
		// Only 4's retransmission is SACKed, none of the new data.
		d := time.Duration(minRTT / 4)
		if late {
			d = time.Duration(minRTT)
		}
		w.clk.Advance(d)
		ackSACK(t, w, ca, cb, una, sackBlock{seg(3), seg(10)}, sackBlock{seg(1), seg(2)})
		w.clk.Advance(time.Duration(cb.srtt+cb.reoWnd()) - d + time.Millisecond)
		ackSACK(t, w, ca, cb, una, sackBlock{seg(3), seg(10)}, sackBlock{seg(1), seg(2)})
		n := tp.count(from, seg(2))
		if !late && n != 0 {
			t.Errorf("segment 2 sent again %d times: a retransmission SACKed %v after it left (minimum RTT %v) counted as sent after it", n, d, time.Duration(minRTT))
		}
		if late && n != 1 {
			t.Errorf("segment 2 sent again %d times, want 1: the retransmission after it was SACKed a minimum RTT after it left", n)
		}
	}
}
