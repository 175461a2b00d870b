package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// oooWorld connects A to B and returns B's end and a tap of the SACK
// blocks of what B sends, with RCV.NXT of B (the hole the test leaves).
func oooWorld(t *testing.T, o Options) (w *world, ca, cb *Conn, tp *sackTap) {
	tp = &sackTap{}
	w = newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256, Tap: tp.fn}, o, o)
	ca, cb = w.connect(7000)
	w.b.tick()
	return w, ca, cb, tp
}

// oooSeg has B take the 100 bytes at seq, out of order, and flush; it
// returns how many segments B sent.
func oooSeg(t *testing.T, w *world, ca, cb *Conn, tp *sackTap, seq uint32) int {
	t.Helper()
	n := len(tp.acks)
	w.b.input(segFrame(w, ca, seq, cb.sndMax, flagACK, 1024, nil, make([]byte, 100)))
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	return len(tp.acks) - n
}

// RFC 5681 §4.2: an out-of-order segment is answered by an immediate
// duplicate ACK, so that the sender counts DupThresh of them (§3.2) and
// retransmits. Past the third at one RCV.NXT each further ACK would only
// repeat the SACK blocks grown by a segment: as Linux compresses them
// (net.ipv4.tcp_comp_sack_nr 44, tcp_comp_sack_delay_ns 1 ms, at most a
// twentieth of the RTT), the ACK is held, and one ACK reports them all
// within oooDelayMax, or at once after oooHeldMax segments.
func TestOutOfOrderACKsRFC5681Sec4_2(t *testing.T) {
	w, ca, cb, tp := oooWorld(t, Options{MaxConns: 4})
	if !cb.sackOK || !cb.tsOK {
		t.Fatal("set-up: SACK and timestamps not negotiated")
	}
	hole := cb.rcvNxt
	at := hole + 100
	for i := 1; i <= oooAcksNow; i++ {
		if n := oooSeg(t, w, ca, cb, tp, at); n != 1 {
			t.Fatalf("out-of-order segment %d: %d ACKs, want 1 at once", i, n)
		}
		at += 100
	}
	for i := 0; i < 5; i++ {
		if n := oooSeg(t, w, ca, cb, tp, at); n != 0 {
			t.Fatalf("out-of-order segment %d past DupThresh: %d ACKs, want it held", oooAcksNow+1+i, n)
		}
		at += 100
	}
	if deadline, ok := w.b.NextTimer(); !ok || deadline.Sub(w.clk.Now()) > time.Duration(oooDelayMax) {
		t.Fatalf("held ACK: timer %v, %v; want one within %v", deadline.Sub(w.clk.Now()), ok, time.Duration(oooDelayMax))
	}
	n := len(tp.acks)
	w.clk.Advance(time.Duration(oooDelayMax))
	w.b.Poll(16)
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(tp.acks) != n+1 {
		t.Fatalf("%d ACKs when the held one was due, want 1", len(tp.acks)-n)
	}
	if got, want := tp.last(t), (sackBlock{hole + 100, at}); len(got) != 1 || got[0] != want {
		t.Fatalf("held ACK's SACK blocks %v, want [%v]: every segment it stood for", got, want)
	}

	// At most oooHeldMax segments share one ACK.
	sent := 0
	for i := 0; i <= oooHeldMax; i++ {
		sent += oooSeg(t, w, ca, cb, tp, at)
		at += 100
		if i < oooHeldMax && sent != 0 {
			t.Fatalf("an ACK after %d held segments, want none before %d", i+1, oooHeldMax+1)
		}
	}
	if sent != 1 {
		t.Fatalf("%d ACKs for %d out-of-order segments, want 1", sent, oooHeldMax+1)
	}
	if got := tp.last(t); len(got) != 1 || got[0].end != at {
		t.Fatalf("SACK blocks %v, want one ending at %d", got, at)
	}

	// The hole filled: the ACK leaves at once (RFC 5681 §4.2) and covers
	// everything.
	if n := len(tp.acks); true {
		w.b.input(segFrame(w, ca, hole, cb.sndMax, flagACK, 1024, nil, make([]byte, 100)))
		if err := w.b.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(tp.acks) != n+1 || cb.rcvNxt != at {
			t.Fatalf("hole filled: %d ACKs, RCV.NXT %d; want 1 ACK and RCV.NXT %d", len(tp.acks)-n, cb.rcvNxt, at)
		}
	}
}

// What a held ACK must not hide leaves at once: a duplicate's D-SACK
// (RFC 2883 §4: the sender learns that a retransmission was spurious),
// and the growth of a block that a segment starting another block would
// push from first place (RFC 2018 §4: the first block is the latest;
// a block whose growth no ACK reported is one the sender retransmits).
func TestHeldACKReportsWhatItMustRFC2018Sec4(t *testing.T) {
	w, ca, cb, tp := oooWorld(t, Options{MaxConns: 4})
	hole := cb.rcvNxt
	at := hole + 100
	for i := 0; i < oooAcksNow+2; i++ { // the last two held
		oooSeg(t, w, ca, cb, tp, at)
		at += 100
	}
	if n := oooSeg(t, w, ca, cb, tp, hole+200); n != 1 {
		t.Fatalf("duplicate above RCV.NXT: %d ACKs, want 1 at once (with the held one's news)", n)
	}
	if got := tp.last(t); len(got) < 1 || got[0] != (sackBlock{hole + 200, hole + 300}) {
		t.Fatalf("SACK blocks %v, want the D-SACK of [%d, %d) first", got, hole+200, hole+300)
	}

	// Growth held again; then a segment past a second hole, another
	// block, which the next ACK would report first: the held ACK, which
	// reports the grown block first, leaves before it.
	for i := 0; i < 2; i++ {
		if n := oooSeg(t, w, ca, cb, tp, at); n != 0 {
			t.Fatalf("%d ACKs for the growth of the block, want the ACK held", n)
		}
		at += 100
	}
	n := len(tp.acks)
	oooSeg(t, w, ca, cb, tp, at+1000)
	if len(tp.acks) != n+1 {
		t.Fatalf("%d ACKs for a segment that starts another block, want the held one", len(tp.acks)-n)
	}
	if got := tp.acks[n]; len(got) < 1 || got[0] != (sackBlock{hole + 100, at}) {
		t.Fatalf("held ACK's SACK blocks %v, want [%d, %d) first: the grown block", got, hole+100, at)
	}
}

// Without SACK the sender counts duplicate ACKs and nothing else: every
// out-of-order segment is answered at once (RFC 5681 §4.2).
func TestOutOfOrderACKsWithoutSACKRFC5681Sec4_2(t *testing.T) {
	w, ca, cb, tp := oooWorld(t, Options{MaxConns: 4, NoSACK: true})
	if cb.sackOK {
		t.Fatal("set-up: SACK negotiated")
	}
	at := cb.rcvNxt + 100
	for i := 1; i <= 10; i++ {
		if n := oooSeg(t, w, ca, cb, tp, at); n != 1 {
			t.Fatalf("out-of-order segment %d: %d ACKs, want 1", i, n)
		}
		at += 100
	}
}

// RFC 2018 §4: after the block of the segment that triggered it, an ACK
// repeats the most recently reported blocks, so that a lost ACK, or one
// held, does not hide a block's growth for good; the blocks that grew
// longest ago are the ones left out. In sequence order the lowest blocks
// crowded out the latest: in a seeded 3%-loss, 10 ms run that sent 480 to
// 680 segments the receiver already had (D-SACKs), 210 to 230 now.
func TestSACKBlocksMostRecentFirstRFC2018Sec4(t *testing.T) {
	w, ca, cb, tp := oooWorld(t, Options{MaxConns: 4})
	if !cb.tsOK {
		t.Fatal("set-up: timestamps not negotiated (the test counts on 3 blocks an ACK)")
	}
	h := cb.rcvNxt
	for _, off := range []uint32{100, 400, 700, 1000} { // blocks A, B, C, D in turn
		oooSeg(t, w, ca, cb, tp, h+off)
	}
	oooSeg(t, w, ca, cb, tp, h+200) // A grows
	w.clk.Advance(time.Duration(oooDelayMax))
	w.b.Poll(16)
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []sackBlock{{h + 100, h + 300}, {h + 1000, h + 1100}, {h + 700, h + 800}}
	got := tp.last(t)
	if len(got) != len(want) {
		t.Fatalf("SACK blocks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("SACK blocks %v, want %v: the grown block, then D and C, which grew last", got, want)
		}
	}
}
