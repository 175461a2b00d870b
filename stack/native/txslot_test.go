package native

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// slotCounter counts how A's frames leave: copied by TxFrame or built in
// a slot and committed (frameio.SlotWriter).
type slotCounter struct {
	*memio.Port
	copied, committed int
}

func (s *slotCounter) TxFrame(f []byte) bool { s.copied++; return s.Port.TxFrame(f) }
func (s *slotCounter) TxCommit(n int) bool {
	ok := s.Port.TxCommit(n)
	if ok {
		s.committed++
	}
	return ok
}

// noSlots hides the port's slots: the engine copies every frame.
type noSlots struct{ frameio.FrameIO }

// TestSegmentsBuiltInTxSlots: over a FrameIO with transmit slots every
// TCP segment is built in a slot and committed, none copied by TxFrame
// (ARP still is); over one without, all are copied; both carry the same
// bytes, the whole stream in order.
func TestSegmentsBuiltInTxSlots(t *testing.T) {
	for _, slots := range []bool{true, false} {
		w := newWorld(t, memio.Options{}, Options{}, Options{})
		sc := &slotCounter{Port: w.pa}
		var fio frameio.FrameIO = sc
		if !slots {
			fio = noSlots{sc}
		}
		o := Options{Addr: addrA, Clock: w.clk}
		a, err := New(fio, o)
		if err != nil {
			t.Fatal(err)
		}
		w.a.Close()
		w.a = a
		t.Cleanup(func() { a.Close() })
		ca, cb := w.connect(7000)
		p := newPipe(ca, cb, randBytes(5, 200<<10))
		w.until(10*time.Second, "transfer", func() bool { p.pump(t); return p.done() })
		if !bytes.Equal(p.got.Bytes(), p.data) {
			t.Fatalf("slots %v: data differs", slots)
		}
		segs := int(counterOf(t, a, "tcp_segments_out"))
		switch {
		case slots && (sc.committed != segs || sc.copied > 2):
			t.Errorf("with slots: %d segments, %d committed, %d copied (ARP only)", segs, sc.committed, sc.copied)
		case !slots && (sc.committed != 0 || sc.copied < segs):
			t.Errorf("without slots: %d segments, %d committed, %d copied", segs, sc.committed, sc.copied)
		}
	}
}

// untilPort records the deadlines the engine sleeps until.
type untilPort struct {
	*memio.Port
	deadlines []time.Time
}

func (u *untilPort) WaitUntil(ctx context.Context, deadline time.Time) error {
	u.deadlines = append(u.deadlines, deadline)
	return nil
}

// TestWaitSleepsUntilNextTimer: on the real clock, Engine.Wait over a
// FrameIO that can sleep until a time (frameio.DeadlineWaiter) sleeps
// until the next timer (here the SYN's retransmission, RFC 6298 §5.1)
// without a context made for it.
func TestWaitSleepsUntilNextTimer(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	u := &untilPort{Port: pa}
	e, err := New(u, Options{Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Dial(netip.AddrPortFrom(addrB, 7000), 0); err != nil {
		t.Fatal(err)
	}
	e.Flush()
	before := time.Now()
	if err := e.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, ok := e.NextTimer()
	if !ok || len(u.deadlines) != 1 {
		t.Fatalf("timer armed %v, %d WaitUntil calls, want 1", ok, len(u.deadlines))
	}
	if d := u.deadlines[0]; d.Before(before) || d.Sub(at) > time.Second || at.Sub(d) > time.Second {
		t.Errorf("slept until %v, the next timer is at %v", d, at)
	}
}
