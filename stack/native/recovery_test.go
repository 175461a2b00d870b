package native

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// RFC 9293 §3.10.7.4: a peer that filled our receive window numbers its
// ACKs at its SND.NXT, the window's right edge (RCV.NXT+RCV.WND). When
// one of its segments before the edge is lost, RCV.WND is not zero, and
// such an ACK of our data must still be taken: dropping it left our data
// to be retransmitted by RTO after RTO, each answered by an ACK that was
// dropped again, until the peer retransmitted its own lost segment
// (against Linux on a lossy wire, the 25, 50 and 100 ms RTO chains of
// the io.Copy echo).
func TestACKAtRightEdgeTakenRFC9293Sec3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)

	// B sends; A receives it, but A's ACKs are lost.
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	end := cb.sndMax + uint32(cb.Write([]byte("the answer")))
	w.until(time.Second, "A to receive B's data", func() bool { return ca.rcvNxt == end })
	if cb.sndUna == cb.sndMax || cb.rcvWnd() == 0 {
		t.Fatalf("set-up: B's data acknowledged (%v) or its window closed (%d)", cb.sndUna == cb.sndMax, cb.rcvWnd())
	}
	w.pa.SetImpairment(memio.Impairment{})

	// A's ACK of it, numbered at the right edge of B's window: A sent up
	// to the edge and its data before the edge was lost.
	edge := cb.rcvNxt + cb.rcvWnd()
	out := counterOf(t, w.b, "tcp_out_of_window")
	w.b.tick()
	w.b.input(segFrame(w, ca, edge, cb.sndMax, flagACK, 1024, nil, nil))
	if cb.sndUna != cb.sndMax {
		t.Fatalf("B's SND.UNA %d, want %d: the ACK at the window's right edge was dropped", cb.sndUna, cb.sndMax)
	}
	if got := counterOf(t, w.b, "tcp_out_of_window"); got != out {
		t.Errorf("tcp_out_of_window %d, want %d", got, out)
	}

	// One byte beyond the edge is still out of the window.
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	end = cb.sndMax + uint32(cb.Write([]byte("more")))
	w.until(time.Second, "A to receive more", func() bool { return ca.rcvNxt == end })
	w.pa.SetImpairment(memio.Impairment{})
	una := cb.sndUna
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt+cb.rcvWnd()+1, cb.sndMax, flagACK, 1024, nil, nil))
	if cb.sndUna != una {
		t.Fatal("an ACK numbered beyond the window's right edge was taken")
	}
	if got := counterOf(t, w.b, "tcp_out_of_window"); got != out+1 {
		t.Errorf("tcp_out_of_window %d, want %d", got, out+1)
	}
}

// sackOpt is a SACK option (RFC 2018 §3) with the blocks bs, NOP-aligned.
func sackOpt(bs ...sackBlock) []byte {
	o := []byte{optNOP, optNOP, optSACK, uint8(2 + 8*len(bs))}
	for _, b := range bs {
		o = binary.BigEndian.AppendUint32(o, b.start)
		o = binary.BigEndian.AppendUint32(o, b.end)
	}
	return o
}

// lossWorld is two connected engines whose minimum RTO (1 s) keeps the
// RTO out of a test that drives loss recovery with its own ACKs.
func lossWorld(t *testing.T) (w *world, ca, cb *Conn) {
	t.Helper()
	o := Options{MaxConns: 4, MinRTO: time.Second}
	w = newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb = w.connect(7000)
	return w, ca, cb
}

// ackB hands B an ACK of ack from A (window 1024), with the SACK blocks
// bs if any.
func ackB(w *world, ca, cb *Conn, ack uint32, bs ...sackBlock) {
	var opts []byte
	if len(bs) > 0 {
		opts = sackOpt(bs...)
	}
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, ack, flagACK, 1024, opts, nil))
}

// inFlight has B send n full segments that A never sees, and returns
// SND.UNA and the segment size.
func inFlight(t *testing.T, w *world, cb *Conn, n int) (una, mss uint32) {
	t.Helper()
	mss = uint32(cb.segData())
	w.pb.SetImpairment(memio.Impairment{Loss: 1})
	cb.Write(make([]byte, n*int(mss)))
	w.until(time.Second, "B to send", func() bool { return cb.sndMax == cb.sndUna+uint32(n)*mss })
	return cb.sndUna, mss
}

// RFC 6675 §5 step 3 and §4 IsLost: one duplicate ACK whose SACK blocks
// cover more than (DupThresh-1)*SMSS bytes above SND.UNA starts loss
// recovery. A receiver that acknowledges fewer segments than it gets
// (Linux compresses its SACKs) tells of three segments above a hole in
// one or two ACKs; waiting for three duplicate ACKs, or for more than
// three segments SACKed, left such a loss to the RTO.
func TestSACKIsLostEntersRecoveryRFC6675Sec4(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 5)

	ackB(w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	if !cb.inRecovery {
		t.Fatalf("one duplicate ACK SACKing 3 segments above SND.UNA did not start recovery (dupacks %d)", cb.dupacks)
	}
	if got := counterOf(t, w.b, "tcp_fast_retransmits"); got != 1 {
		t.Errorf("tcp_fast_retransmits %d, want 1", got)
	}
	rtx := counterOf(t, w.b, "tcp_retransmits")
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := counterOf(t, w.b, "tcp_retransmits"); got == rtx {
		t.Error("no retransmission left at the Flush after recovery started")
	}

	// Two segments' worth above the hole, in one block, is not a loss yet
	// (the segments may be reordered).
	w2, ca2, cb2 := lossWorld(t)
	una, mss = inFlight(t, w2, cb2, 5)
	ackB(w2, ca2, cb2, una, sackBlock{una + mss, una + 3*mss})
	if cb2.inRecovery {
		t.Error("2 segments SACKed above SND.UNA started recovery")
	}
}

// RFC 6675 §5: in SACK-based recovery cwnd stays at ssthresh and pipe
// decides what leaves. A partial ACK that covers a retransmitted hole and
// the SACKed data above it does not deflate cwnd (RFC 6582's partial-ACK
// rule, which brought it to one segment and recovery to a crawl), and
// does not send a hole again that was already retransmitted.
func TestSACKPartialACKKeepsCwndRFC6675Sec5(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 10)

	// Segments 0 and 5 are lost; the others are SACKed.
	ackB(w, ca, cb, una, sackBlock{una + 6*mss, una + 10*mss}, sackBlock{una + mss, una + 5*mss})
	if !cb.inRecovery {
		t.Fatal("recovery did not start")
	}
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	rtx := counterOf(t, w.b, "tcp_retransmits")
	if rtx != 2 {
		t.Fatalf("tcp_retransmits %d after recovery started, want 2 (both holes)", rtx)
	}
	ssthresh := cb.ssthresh

	// The retransmission of segment 0 arrives: SND.UNA moves to the
	// second hole, which was retransmitted already.
	ackB(w, ca, cb, una+5*mss, sackBlock{una + 6*mss, una + 10*mss})
	if !cb.inRecovery {
		t.Fatal("a partial ACK ended recovery")
	}
	if cb.cwnd < ssthresh {
		t.Errorf("cwnd %d after a partial ACK, below ssthresh %d", cb.cwnd, ssthresh)
	}
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := counterOf(t, w.b, "tcp_retransmits"); got != rtx {
		t.Errorf("tcp_retransmits %d after the partial ACK, want %d: a retransmitted hole went again", got, rtx)
	}

	// The second hole's retransmission arrives: recovery ends at ssthresh.
	ackB(w, ca, cb, una+10*mss)
	if cb.inRecovery || cb.cwnd != ssthresh {
		t.Errorf("after the full ACK: in recovery %v, cwnd %d, want out of it at ssthresh %d", cb.inRecovery, cb.cwnd, ssthresh)
	}
}

// RFC 7323 §5.3 R1 and §4.3: a retransmission that fills the hole at
// RCV.NXT moves TS.Recent to its (newer) timestamp; a segment with new
// data that the peer sent one tick before it, reordered behind it, is
// taken (pawsSlack) and does not move TS.Recent back; one two ticks older
// is rejected by PAWS.
func TestPAWSReorderedSegmentRFC7323Sec5_3(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	if !cb.tsOK {
		t.Fatal("timestamps not negotiated")
	}
	ts := cb.tsRecent + 100
	data := []byte("0123456789")
	send := func(val uint32) {
		w.b.tick()
		w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndMax, flagACK|flagPSH, 1024, tsOpt(val, 0), data))
		if err := w.b.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// The retransmission at RCV.NXT, timestamp ts.
	send(ts)
	if cb.tsRecent != ts {
		t.Fatalf("TS.Recent %d, want %d", cb.tsRecent, ts)
	}
	// New data sent one tick earlier.
	nxt := cb.rcvNxt
	paws := counterOf(t, w.b, "tcp_paws_rejected")
	send(ts - 1)
	if cb.rcvNxt != nxt+uint32(len(data)) {
		t.Fatalf("RCV.NXT %d, want %d: the segment one tick older was dropped", cb.rcvNxt, nxt+uint32(len(data)))
	}
	if cb.tsRecent != ts {
		t.Errorf("TS.Recent %d after an older segment, want %d (RFC 7323 §4.3: SEG.TSval >= TS.Recent)", cb.tsRecent, ts)
	}
	// Two ticks older: PAWS rejects it.
	nxt = cb.rcvNxt
	send(ts - 2)
	if cb.rcvNxt != nxt {
		t.Error("a segment two ticks older than TS.Recent was taken")
	}
	if got := counterOf(t, w.b, "tcp_paws_rejected"); got != paws+1 {
		t.Errorf("tcp_paws_rejected %d, want %d", got, paws+1)
	}
}

// RFC 8985 §6.2 (RACK's rule for a lost retransmission): in SACK
// recovery, when data sent after the retransmission of the segment at
// SND.UNA is SACKed and a round trip and a quarter went by, that
// retransmission was lost, and it goes again without waiting for the RTO
// (RFC 6675 alone sends a hole once; against Linux on the lossy wire,
// most of the RTOs left were such holes).
func TestLostRetransmissionRFC8985Sec6_2(t *testing.T) {
	w, ca, cb := lossWorld(t)
	// A first round trip of 10 ms, from the timestamp A echoes.
	una, _ := inFlight(t, w, cb, 1)
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndMax, flagACK, 0xffff, tsOpt(cb.tsRecent, cb.tsNow()-10), nil))
	if cb.sndUna == una || cb.srtt < 5*time.Millisecond.Nanoseconds() {
		t.Fatalf("set-up: SND.UNA %d (from %d), SRTT %v", cb.sndUna, una, time.Duration(cb.srtt))
	}
	una, mss := inFlight(t, w, cb, 10)
	cb.Write(make([]byte, 4*int(mss))) // new data, for after the retransmission
	ack := func(end uint32) {
		t.Helper()
		w.b.tick()
		w.b.input(segFrame(w, ca, cb.rcvNxt, una, flagACK, 0xffff, sackOpt(sackBlock{una + mss, end}), nil))
		if err := w.b.Flush(); err != nil {
			t.Fatal(err)
		}
	}

	// Segment 0 is lost; the SACKs start recovery and it is retransmitted.
	ack(una + 4*mss)
	if !cb.inRecovery || counterOf(t, w.b, "tcp_retransmits") != 1 {
		t.Fatalf("set-up: in recovery %v, %d retransmissions", cb.inRecovery, counterOf(t, w.b, "tcp_retransmits"))
	}
	mark := cb.sndMax
	// The rest of the flight is SACKed: new data leaves, after the retransmission.
	ack(una + 10*mss)
	if !seqGT(cb.sndMax, mark) {
		t.Fatal("set-up: no new data sent in recovery")
	}
	rtx := counterOf(t, w.b, "tcp_retransmits")

	// New data is SACKed at once: too early to call the retransmission lost
	// (it may be reordered).
	ack(una + 11*mss)
	if got := counterOf(t, w.b, "tcp_retransmits"); got != rtx {
		t.Fatalf("the retransmission was sent again %v after it left", time.Duration(w.b.now-cb.unaRtxAt))
	}
	// A round trip later, more new data is SACKed and SND.UNA has not moved.
	w.clk.Advance(time.Duration(cb.srtt * 2))
	ack(una + 12*mss)
	if got := counterOf(t, w.b, "tcp_retransmits"); got != rtx+1 {
		t.Fatalf("tcp_retransmits %d, want %d: the lost retransmission did not go again", got, rtx+1)
	}
	if got := counterOf(t, w.b, "tcp_lost_retransmits"); got != 1 {
		t.Errorf("tcp_lost_retransmits %d, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got != 0 {
		t.Errorf("tcp_timeouts %d, want 0", got)
	}
}

// RFC 6675 §5 and RFC 5681 §3.2 (RFC 6582 §3.2 step 2): one reduction
// per window of data. Two segments of one flight are lost; the first
// starts recovery and sets ssthresh, the second, found lost by SACK
// while the recovery point is not acknowledged yet, is repaired in the
// same recovery without a second reduction, and the full ACK ends it
// with cwnd at the one ssthresh (Linux: tcp_enter_recovery once per
// CA_Recovery episode).
func TestOneReductionPerWindowRFC6675Sec5(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 10)

	ackB(w, ca, cb, una, sackBlock{una + mss, una + 5*mss})
	if !cb.inRecovery {
		t.Fatal("set-up: SACKs of 4 segments above SND.UNA did not start recovery")
	}
	ssthresh, recover := cb.ssthresh, cb.recover
	// The retransmission of the first hole arrived; segment 5 was lost
	// too and the segments after it are SACKed: a partial ACK.
	ackB(w, ca, cb, una+5*mss, sackBlock{una + 6*mss, una + 10*mss})
	w.step()
	if !cb.inRecovery || cb.ssthresh != ssthresh || cb.recover != recover {
		t.Fatalf("a second loss in the window: in recovery %v, ssthresh %d (was %d), recover %d (was %d)",
			cb.inRecovery, cb.ssthresh, ssthresh, cb.recover, recover)
	}
	ackB(w, ca, cb, una+10*mss)
	if cb.inRecovery || cb.cwnd != ssthresh {
		t.Fatalf("after the full ACK: in recovery %v, cwnd %d, want the one reduction's ssthresh %d", cb.inRecovery, cb.cwnd, ssthresh)
	}
	if got := counterOf(t, w.b, "tcp_fast_retransmits"); got != 1 {
		t.Errorf("tcp_fast_retransmits %d, want 1 reduction for two losses in one window", got)
	}
}

// RFC 6937 §3 (Proportional Rate Reduction): while pipe is above
// ssthresh, a SACK recovery sends ssthresh/RecoverFS of what the ACKs
// deliver, so that the reduction is spread over the round trip: with
// RFC 6675 alone (cwnd = ssthresh) nothing but the first retransmission
// left until half the flight was delivered, and then a burst. At the end
// of recovery cwnd is ssthresh.
func TestPRRProportionalRFC6937Sec3(t *testing.T) {
	w, ca, cb := lossWorld(t)
	mss := uint32(cb.segData())
	cb.cwnd, cb.ssthresh = 20*mss, 1<<30
	w.pb.SetImpairment(memio.Impairment{Loss: 1})
	una := cb.sndUna
	cb.Write(make([]byte, 30*int(mss))) // 20 in flight, 10 waiting for cwnd
	w.until(time.Second, "B to send", func() bool { return cb.sndMax == una+20*mss })

	ackWide(w, ca, cb, una, sackBlock{una + mss, una + 5*mss}) // 4 segments delivered: recovery
	if !cb.inRecovery || !cb.prr.on {
		t.Fatalf("set-up: recovery %v, PRR %v", cb.inRecovery, cb.prr.on)
	}
	ssthresh, fs := cb.ssthresh, cb.prr.fs
	if ssthresh != 10*mss || fs != 20*mss {
		t.Fatalf("set-up: ssthresh %d, RecoverFS %d; want %d, %d", ssthresh, fs, 10*mss, 20*mss)
	}
	for i := uint32(0); i < 3; i++ {
		w.step()
		sent, delivered := cb.prr.out, cb.prr.delivered
		// prr_out never runs ahead of CEIL(prr_delivered*ssthresh/RecoverFS)
		// by more than the segment rounding of a retransmission.
		if limit := (delivered*ssthresh+fs-1)/fs + mss; sent > limit {
			t.Fatalf("ACK %d: %d bytes sent in recovery for %d delivered, want at most %d", i, sent, delivered, limit)
		}
		if sent < delivered*ssthresh/fs-mss {
			t.Fatalf("ACK %d: %d bytes sent in recovery for %d delivered: the ACK clock stopped", i, sent, delivered)
		}
		ackWide(w, ca, cb, una, sackBlock{una + mss, una + (7+2*i)*mss})
	}
	if got := counterOf(t, w.b, "tcp_prr_recoveries"); got != 1 {
		t.Errorf("tcp_prr_recoveries %d, want 1", got)
	}
	ackWide(w, ca, cb, cb.sndMax)
	if cb.inRecovery || cb.cwnd != ssthresh {
		t.Fatalf("after the full ACK: recovery %v, cwnd %d, want ssthresh %d", cb.inRecovery, cb.cwnd, ssthresh)
	}
}

// ackWide is ackB with the peer's window at its largest (65535 scaled).
func ackWide(w *world, ca, cb *Conn, ack uint32, bs ...sackBlock) {
	var opts []byte
	if len(bs) > 0 {
		opts = sackOpt(bs...)
	}
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, ack, flagACK, 65535, opts, nil))
}

// RFC 6298 §5 with RFC 5681 §4.2: a receiver may hold the ACK of a lone
// segment, Linux for 40 ms (TCP_DELACK_MIN), longer than the RTO's 25 ms
// floor; before, every lone segment to a delaying peer was sent twice,
// cwnd collapsed and the sender went back N. Without timestamps the
// timer of a lone segment waits the RTO plus that delay; with them the
// timeout may come, and its ACK tells it spurious (RFC 3522) and undoes
// it (RFC 4015): cwnd as before, nothing sent again but the one segment
// (or a tail loss probe goes in the RTO's place, RFC 8985 §7.2). A lone
// segment really lost is still repaired at the timer's time, by the
// probe.
func TestRTOOutlastsPeerDelayedACKRFC6298Sec5(t *testing.T) {
	for _, ts := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-timestamps", true: "timestamps"}[ts], func(t *testing.T) {
			peer := Options{MaxConns: 4, DelayedACK: 40 * time.Millisecond, MinRTO: 200 * time.Millisecond, NoTimestamps: !ts}
			w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, peer, Options{MaxConns: 4, NoTimestamps: !ts})
			ca, cb := w.connect(7000)
			w.clk.Advance(5 * time.Millisecond) // timestamps (ms) that are not 0: RTT samples
			buf := make([]byte, 64<<10)
			// Bulk first: the peer ACKs every second segment at once, and
			// the RTO comes down to its floor.
			data := make([]byte, 256<<10)
			sent, got := 0, 0
			w.until(time.Second, "the bulk data and its ACKs", func() bool {
				if sent < len(data) {
					sent += cb.Write(data[sent:])
				}
				n, _ := ca.Read(buf)
				got += n
				return got == len(data) && cb.sndUna == cb.sndMax
			})
			if cb.rto >= int64(40*time.Millisecond) {
				t.Fatalf("set-up: RTO %v is not below the peer's delayed ACK", time.Duration(cb.rto))
			}
			cwnd := cb.cwnd
			cb.Write([]byte("a lone segment"))
			w.until(time.Second, "the lone segment and its ACK", func() bool {
				n, _ := ca.Read(buf)
				got += n
				return got == len(data)+14 && cb.sndUna == cb.sndMax
			})
			rtos, spurious := counterOf(t, w.b, "tcp_timeouts"), counterOf(t, w.b, "tcp_spurious_rtos")
			probes := counterOf(t, w.b, "tcp_tlp_probes")
			if !ts && rtos+probes != 0 {
				t.Fatalf("tcp_timeouts %d, tcp_tlp_probes %d for a lone segment whose ACK the peer delayed 40 ms, want 0", rtos, probes)
			}
			if rtos != spurious || rtos+probes > 1 {
				t.Fatalf("tcp_timeouts %d (tcp_spurious_rtos %d), tcp_tlp_probes %d: want at most one timeout told spurious, or a probe in its place (RFC 8985 §7.2)", rtos, spurious, probes)
			}
			if rtx := counterOf(t, w.b, "tcp_retransmits"); rtx != rtos+probes {
				t.Fatalf("tcp_retransmits %d, want %d", rtx, rtos+probes)
			}
			if cb.cwnd < cwnd {
				t.Fatalf("cwnd %d after the delayed ACK, was %d", cb.cwnd, cwnd)
			}

			w.pb.SetImpairment(memio.Impairment{Loss: 1})
			cb.Write([]byte("lost"))
			w.step()
			w.pb.SetImpairment(memio.Impairment{})
			w.until(time.Second, "the lost segment repaired", func() bool {
				n, _ := ca.Read(buf)
				got += n
				return got == len(data)+18 && cb.sndUna == cb.sndMax
			})
			// Repaired at the timer's time by the tail loss probe that goes
			// in the RTO's place (RFC 8985 §7.2), not by a timeout.
			if got := counterOf(t, w.b, "tcp_tlp_probes"); got != probes+1 {
				t.Errorf("tcp_tlp_probes %d after a lone segment was lost, want %d", got, probes+1)
			}
			if got := counterOf(t, w.b, "tcp_timeouts"); got != rtos {
				t.Errorf("tcp_timeouts %d after a lone segment was lost, want %d", got, rtos)
			}
			if got := counterOf(t, w.b, "tcp_spurious_rtos"); got != spurious {
				t.Errorf("tcp_spurious_rtos %d after a real loss, want %d", got, spurious)
			}
		})
	}
}

// RFC 3522 (Eifel detection) and RFC 4015 (its response): a timeout whose
// first ACK echoes a timestamp older than the retransmission's was
// spurious, the original having arrived: cwnd and ssthresh come back to
// what they were before it (Linux's tcp_try_undo_loss) and sending goes
// on after SND.MAX, not back over the data the peer holds.
func TestSpuriousRTOUndoneRFC4015(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o)
	ca, cb := w.connect(7000)
	w.clk.Advance(5 * time.Millisecond) // timestamps (ms) that are not 0: RTT samples
	buf := make([]byte, 64<<10)
	data := make([]byte, 64<<10)
	sent, got := 0, 0
	pump := func() bool {
		if sent < len(data) {
			sent += cb.Write(data[sent:])
		}
		n, _ := ca.Read(buf)
		got += n
		return got == sent && sent == len(data) && cb.sndUna == cb.sndMax
	}
	w.until(time.Second, "the first data and its ACKs", pump)
	cwnd, rto := cb.cwnd, cb.rto

	// The path holds A's ACKs back for three RTOs: B times out although
	// A received everything.
	w.pa.SetImpairment(memio.Impairment{Delay: time.Duration(3 * rto)})
	sent, data = 0, make([]byte, 8*cb.segData())
	got = 0
	for i := 0; i < 200 && !pump(); i++ {
		w.clk.Advance(time.Millisecond)
		w.step()
	}
	if !pump() {
		t.Fatalf("the data was not acknowledged: SND.UNA %d, SND.MAX %d", cb.sndUna, cb.sndMax)
	}
	if got := counterOf(t, w.b, "tcp_timeouts"); got == 0 {
		t.Fatal("set-up: no timeout")
	}
	if got := counterOf(t, w.b, "tcp_spurious_rtos"); got != 1 {
		t.Fatalf("tcp_spurious_rtos %d, want 1", got)
	}
	if cb.cwnd < cwnd {
		t.Errorf("cwnd %d after the spurious timeout was undone, want at least %d (before it)", cb.cwnd, cwnd)
	}
	if rtx := counterOf(t, w.b, "tcp_retransmits"); rtx > 2 {
		t.Errorf("tcp_retransmits %d: the sender went back N after a spurious timeout", rtx)
	}
}

// RFC 6675 §5.1, as Linux's tcp_enter_loss: the first retransmission
// timeout keeps the SACK scoreboard, and the go-back-N after it sends
// only what the peer did not SACK; a repeated timeout clears it (the
// peer may have reneged).
func TestRTOKeepsSACKScoreboard(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 8)
	ackB(w, ca, cb, una, sackBlock{una + 2*mss, una + 6*mss})
	w.until(5*time.Second, "the first timeout", func() bool { return counterOf(t, w.b, "tcp_timeouts") == 1 })
	if cb.nsacked != 1 {
		t.Fatalf("%d SACK blocks after the first timeout, want the one SACKed", cb.nsacked)
	}
	w.step()
	rtx := counterOf(t, w.b, "tcp_retransmits")
	ackB(w, ca, cb, una+2*mss) // the two holes arrived
	w.step()
	// The peer's window (ackB's) lets one or two segments leave.
	sent := (cb.sndNxt - (una + 6*mss) + mss - 1) / mss
	if !seqGT(cb.sndNxt, una+6*mss) {
		t.Fatalf("SND.NXT %d segments past SND.UNA after the holes were acknowledged: the SACKed 2..6 not skipped", (cb.sndNxt-una)/mss)
	}
	if got := counterOf(t, w.b, "tcp_retransmits") - rtx; got != uint64(sent) {
		t.Errorf("%d retransmissions after the holes were acknowledged, want %d (from segment 6 on)", got, sent)
	}
	// Without an ACK in between, the second timeout is a repeated one.
	w, ca, cb = lossWorld(t)
	una, mss = inFlight(t, w, cb, 8)
	ackB(w, ca, cb, una, sackBlock{una + 2*mss, una + 6*mss})
	w.until(10*time.Second, "the second timeout", func() bool { return counterOf(t, w.b, "tcp_timeouts") == 2 })
	if cb.nsacked != 0 {
		t.Errorf("%d SACK blocks after a repeated timeout, want the scoreboard cleared", cb.nsacked)
	}
}

// RFC 6298 §2.3 with Linux's floor: the RTO is SRTT plus at least MinRTO
// (Linux's tcp_rto_min bounds the variance term), so that on a path
// whose RTT is near MinRTO a steady RTT does not leave the timer a
// hair above it.
func TestRTOFloorAboveSRTT(t *testing.T) {
	w, _, cb := lossWorld(t) // MinRTO 1 s
	cb.hasRTT, cb.srtt, cb.rttvar = true, int64(900*time.Millisecond), 0
	cb.tsOK, cb.rttTiming, cb.rttSeq, cb.rttAt = false, true, cb.sndUna, w.b.now-int64(900*time.Millisecond)
	cb.rttSample(&segment{ack: cb.sndUna + 1})
	if want := cb.srtt + int64(time.Second); cb.rto != want {
		t.Fatalf("RTO %v with SRTT %v and RTTVAR %v, want SRTT + MinRTO", time.Duration(cb.rto), time.Duration(cb.srtt), time.Duration(cb.rttvar))
	}
}

// RFC 6675 §5 (NextSeg): in a SACK recovery a partial ACK retransmits
// the segment at SND.UNA only when SACKed data above it makes it a hole.
// A flight acknowledged a segment at a time after the loss was repaired
// (a queue draining) is not lost: retransmitting at each partial ACK, as
// RFC 6582 does without SACK, sent it twice.
func TestSACKPartialACKRetransmitsOnlyHolesRFC6675Sec5(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 8)
	ackB(w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	if !cb.inRecovery {
		t.Fatal("no recovery")
	}
	w.step()
	rtx := counterOf(t, w.b, "tcp_retransmits")
	ackB(w, ca, cb, una+4*mss) // the hole repaired; the rest of the flight still on its way
	ackB(w, ca, cb, una+5*mss)
	w.step()
	if !cb.inRecovery {
		t.Fatal("recovery ended before the flight it began with was acknowledged")
	}
	if got := counterOf(t, w.b, "tcp_retransmits") - rtx; got != 0 {
		t.Errorf("%d retransmissions on partial ACKs without SACKed data above SND.UNA, want 0", got)
	}
	ackB(w, ca, cb, una+5*mss, sackBlock{una + 6*mss, una + 7*mss}) // now a hole at SND.UNA
	ackB(w, ca, cb, una+6*mss, sackBlock{una + 7*mss, una + 8*mss}) // partial ACK with a hole: it goes
	w.step()
	if got := counterOf(t, w.b, "tcp_retransmits") - rtx; got == 0 {
		t.Error("no retransmission of a hole below SACKed data after a partial ACK")
	}
}

// RFC 3522's detection on a duplicate ACK's SACK (as RFC 5682 §3's
// SACK-enhanced F-RTO): after a timeout, an ACK that SACKs new data and
// echoes a timestamp older than the timeout was sent for an original
// segment, so the timeout was spurious: cwnd comes back and go-back-N
// stops (SND.NXT back at SND.MAX).
func TestSpuriousTimeoutBySACKRFC3522(t *testing.T) {
	w, ca, cb := lossWorld(t)
	if !cb.tsOK {
		t.Fatal("set-up: no timestamps")
	}
	una, mss := inFlight(t, w, cb, 8)
	cwnd := cb.cwnd
	w.until(5*time.Second, "the timeout", func() bool { return counterOf(t, w.b, "tcp_timeouts") == 1 })
	if !cb.eifel.on || cb.sndNxt == cb.sndMax {
		t.Fatalf("set-up: after the timeout eifel %v, SND.NXT at SND.MAX %v", cb.eifel.on, cb.sndNxt == cb.sndMax)
	}
	ts := []byte{optNOP, optNOP, optTimestamp, 10}
	ts = binary.BigEndian.AppendUint32(ts, cb.tsRecent+1)
	ts = binary.BigEndian.AppendUint32(ts, cb.eifel.ts-5) // an original's TSval
	opts := append(ts, sackOpt(sackBlock{una + mss, una + 3*mss})...)
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, una, flagACK, 1024, opts, nil))
	if got := counterOf(t, w.b, "tcp_spurious_rtos"); got != 1 {
		t.Fatalf("tcp_spurious_rtos %d after a SACK of an original segment, want 1", got)
	}
	if cb.sndNxt != cb.sndMax || cb.cwnd < cwnd {
		t.Errorf("after the undo SND.NXT %d short of SND.MAX, cwnd %d (before the timeout %d)", cb.sndMax-cb.sndNxt, cb.cwnd, cwnd)
	}
}

// RFC 6675 §5 NextSeg rule 1: in recovery a hole below the highest SACKed
// byte is retransmitted only once IsLost (1.c) holds for it, DupThresh
// blocks or more than (DupThresh-1)*SMSS bytes SACKed above it; until
// then it counts in pipe as in flight (§4 SetPipe). One segment SACKed
// past it says that data is reordered, or that an ACK reported a later
// block first (a receiver that compresses its ACKs), not that it is
// lost: sending it at once was a spurious retransmission (the lossy
// wire's io.Copy echo saw 100 to 130 a run).
func TestSACKHoleRetransmittedOnlyWhenLostRFC6675Sec5(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 10)
	cb.cwnd = 20 * mss // room to send whatever NextSeg names
	ackB(w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	if !cb.inRecovery {
		t.Fatal("no recovery")
	}
	w.step()
	rtx := counterOf(t, w.b, "tcp_retransmits")
	// The hole [4, 6) with one segment SACKed above it.
	ackB(w, ca, cb, una, sackBlock{una + 6*mss, una + 7*mss}, sackBlock{una + mss, una + 4*mss})
	w.step()
	if got := counterOf(t, w.b, "tcp_retransmits") - rtx; got != 0 {
		t.Fatalf("%d retransmissions of a hole with one segment SACKed above it, want 0", got)
	}
	if p, want := cb.pipe(), cb.sndMax-cb.sndUna-4*mss; p != want {
		t.Errorf("pipe %d, want %d: the hole's 2 segments are in flight", p, want)
	}
	// Three segments SACKed above it: lost.
	ackB(w, ca, cb, una, sackBlock{una + 6*mss, una + 9*mss}, sackBlock{una + mss, una + 4*mss})
	w.step()
	if got := counterOf(t, w.b, "tcp_retransmits") - rtx; got == 0 {
		t.Error("no retransmission of the hole once 3 segments were SACKed above it")
	}
}
