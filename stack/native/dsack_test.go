package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// sackTap keeps the SACK blocks of every segment B sends.
type sackTap struct{ acks [][]sackBlock }

func (tp *sackTap) fn(dir memio.Dir, f []byte) {
	t := tcpFrame(f)
	if dir != memio.BtoA || t == nil {
		return
	}
	var s segment
	if !parseOptions(&s, t[tcpLen:int(t[12]>>4)*4]) {
		return
	}
	tp.acks = append(tp.acks, append([]sackBlock(nil), s.sacks[:s.nsack]...))
}

// last returns the SACK blocks of the latest segment B sent.
func (tp *sackTap) last(t *testing.T) []sackBlock {
	t.Helper()
	if len(tp.acks) == 0 {
		t.Fatal("B sent nothing")
	}
	return tp.acks[len(tp.acks)-1]
}

// RFC 2883 §4: a receiver that gets data a second time reports it in the
// first SACK block of its next ACK, a D-SACK block, once: below RCV.NXT
// (1) the duplicate alone; above it (2) the duplicate, then the block
// of queued data that holds it. The sender learns that a retransmission,
// or the wire, duplicated data (Linux as the sender undoes a needless
// cwnd reduction and widens its reordering window from them).
func TestDSACKReportsDuplicateRFC2883Sec4(t *testing.T) {
	tp := &sackTap{}
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64, Tap: tp.fn}, o, o)
	ca, cb := w.connect(7000)
	if !cb.sackOK {
		t.Fatal("set-up: SACK not negotiated")
	}
	start := ca.sndMax
	end := start + uint32(ca.Write([]byte("first record")))
	w.until(time.Second, "B to receive", func() bool { return cb.rcvNxt == end && ca.sndUna == end })

	// (1) The record again, below RCV.NXT.
	w.b.tick()
	w.b.input(segFrame(w, ca, start, cb.sndMax, flagACK, 1024, nil, []byte("first record")))
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := tp.last(t), (sackBlock{start, end}); len(got) != 1 || got[0] != want {
		t.Fatalf("ACK of a duplicate below RCV.NXT: SACK blocks %v, want [%v]", got, want)
	}
	if got := counterOf(t, w.b, "tcp_dsacks_sent"); got != 1 {
		t.Errorf("tcp_dsacks_sent %d, want 1", got)
	}

	// (2) Data above a hole, then part of it again.
	hole := cb.rcvNxt
	data := []byte("0123456789")
	w.b.input(segFrame(w, ca, hole+100, cb.sndMax, flagACK, 1024, nil, data))
	w.b.input(segFrame(w, ca, hole+100, cb.sndMax, flagACK, 1024, nil, data[:4]))
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	got := tp.last(t)
	want := []sackBlock{{hole + 100, hole + 104}, {hole + 100, hole + 110}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ACK of a duplicate above RCV.NXT: SACK blocks %v, want %v", got, want)
	}

	// Reported once: the next ACK has the queued block only.
	n := len(tp.acks)
	cb.Write([]byte("answer"))
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(tp.acks) == n {
		t.Fatal("B sent nothing")
	}
	if got := tp.last(t); len(got) != 1 || got[0] != want[1] {
		t.Errorf("next segment: SACK blocks %v, want [%v]", got, want[1])
	}
	if got := counterOf(t, w.b, "tcp_dsacks_sent"); got != 2 {
		t.Errorf("tcp_dsacks_sent %d, want 2", got)
	}
}

// RFC 3708 §2 with RFC 2883 §4's D-SACK: a D-SACK of data the last
// recovery retransmitted shows that retransmission spurious (the
// original only arrived late), counted in tcp_spurious_retransmits; a
// D-SACK of data sent once is the wire's duplicate and counted only in
// tcp_dsacks_received.
func TestDSACKSpuriousRetransmissionRFC3708Sec2(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 5)

	// Segments 1 to 3 SACKed: segment 0 is lost and goes again.
	ackB(w, ca, cb, una, sackBlock{una + mss, una + 4*mss})
	rtx := counterOf(t, w.b, "tcp_retransmits")
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if !cb.inRecovery || counterOf(t, w.b, "tcp_retransmits") != rtx+1 {
		t.Fatalf("set-up: recovery %v, %d retransmissions, want 1", cb.inRecovery, counterOf(t, w.b, "tcp_retransmits")-rtx)
	}

	// All five arrived; then segment 0 a second time.
	ackB(w, ca, cb, una+5*mss)
	ackB(w, ca, cb, una+5*mss, sackBlock{una, una + mss})
	if got := counterOf(t, w.b, "tcp_dsacks_received"); got != 1 {
		t.Errorf("tcp_dsacks_received %d, want 1", got)
	}
	if got := counterOf(t, w.b, "tcp_spurious_retransmits"); got != 1 {
		t.Errorf("tcp_spurious_retransmits %d, want 1", got)
	}
	// Segment 4, sent once, duplicated by the wire.
	ackB(w, ca, cb, una+5*mss, sackBlock{una + 4*mss, una + 5*mss})
	if got := counterOf(t, w.b, "tcp_dsacks_received"); got != 2 {
		t.Errorf("tcp_dsacks_received %d, want 2", got)
	}
	if got := counterOf(t, w.b, "tcp_spurious_retransmits"); got != 1 {
		t.Errorf("tcp_spurious_retransmits %d after a D-SACK of data sent once, want 1", got)
	}
	// A SACK block above the cumulative ACK, alone, is no D-SACK.
	ackB(w, ca, cb, una+5*mss, sackBlock{una + 6*mss, una + 7*mss})
	if got := counterOf(t, w.b, "tcp_dsacks_received"); got != 2 {
		t.Errorf("tcp_dsacks_received %d after a plain SACK block, want 2", got)
	}
}
