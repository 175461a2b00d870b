package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// RFC 5681 §2 "DUPLICATE ACKNOWLEDGMENT" (d): a duplicate ACK carries
// the greatest acknowledgment received, SND.UNA before it arrived. A pure
// ACK that moves SND.UNA on is cumulative, whatever is still in flight
// and whatever its window: the count of duplicates starts again from
// zero (RFC 6675 §5), and fast retransmit waits for three real ones
// (§3.2 step 2), not two after it.
func TestCumulativeACKIsNotDuplicateRFC5681Sec2(t *testing.T) {
	// Without SACK: with it, only ACKs with new SACK information count
	// (RFC 6675 §2, TestSACKDupAckNeedsNewSACKRFC6675Sec2).
	o := Options{MaxConns: 4, MinRTO: time.Second, NoSACK: true}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	una, mss := inFlight(t, w, cb, 6)

	ackB(w, ca, cb, una) // the window changes: a window update, not counted
	ackB(w, ca, cb, una+mss)
	if cb.sndUna != una+mss {
		t.Fatalf("SND.UNA %d, want %d", cb.sndUna, una+mss)
	}
	if cb.dupacks != 0 {
		t.Fatalf("dupacks %d after a cumulative ACK with the same window, want 0", cb.dupacks)
	}
	for i := 1; i <= 2; i++ {
		ackB(w, ca, cb, una+mss)
		if cb.dupacks != i || cb.inRecovery {
			t.Fatalf("after duplicate %d: dupacks %d, in recovery %v", i, cb.dupacks, cb.inRecovery)
		}
	}
	ackB(w, ca, cb, una+mss)
	if !cb.inRecovery {
		t.Fatalf("the third duplicate ACK did not start fast retransmit (dupacks %d)", cb.dupacks)
	}
}

// RFC 6582 §3.2 step 3, partial acknowledgments: in NewReno recovery
// (no SACK) an ACK of some of the data in flight deflates cwnd by the
// bytes it acknowledged and adds one segment back, once. It is not also
// a duplicate ACK, which would inflate cwnd by another segment (step 4).
func TestPartialACKDeflatesOnceRFC6582Sec3_2(t *testing.T) {
	o := Options{MaxConns: 4, MinRTO: time.Second, NoSACK: true}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	una, mss := inFlight(t, w, cb, 10)

	ackB(w, ca, cb, una) // a window update
	for range dupThresh {
		ackB(w, ca, cb, una)
	}
	if !cb.inRecovery {
		t.Fatalf("three duplicate ACKs did not start recovery (dupacks %d)", cb.dupacks)
	}
	for range 4 { // inflation (step 4) to well above ssthresh
		ackB(w, ca, cb, una)
	}
	before, acked := cb.cwnd, 2*mss
	ackB(w, ca, cb, una+acked)
	if !cb.inRecovery {
		t.Fatal("a partial ACK ended recovery")
	}
	want := max(before-acked+mss, cb.ssthresh)
	if cb.cwnd != want {
		t.Errorf("cwnd %d after a partial ACK of %d bytes from %d, want %d (ssthresh %d, SMSS %d)",
			cb.cwnd, acked, before, want, cb.ssthresh, mss)
	}
}
