package stack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// noIrq hides memio's Interrupt: a FrameIO that can wait but not be
// interrupted, which Sleep waits on in slices.
type noIrq struct {
	frameio.FrameIO
	w frameio.Waiter
}

func (n noIrq) Wait(ctx context.Context) error { return n.w.Wait(ctx) }

// TestSleepInterrupt: Interrupt ends a Sleep in progress, and one that comes
// before the Sleep ends it at once; without either, Sleep lasts until ctx.
// Both for memio, whose Interrupt ends its Wait, and for a FrameIO without
// Interrupt (Sleep then waits in slices).
func TestSleepInterrupt(t *testing.T) {
	t.Run("memio", func(t *testing.T) {
		pa, pb := memio.NewPair(memio.Options{})
		sleepInterrupt(t, NewEndpoint(pa), pb, true)
	})
	t.Run("no Interrupt", func(t *testing.T) {
		pa, pb := memio.NewPair(memio.Options{})
		sleepInterrupt(t, NewEndpoint(noIrq{FrameIO: pa, w: pa}), pb, false)
	})
}

// sleepInterrupt is TestSleepInterrupt on ep, whose FrameIO is a memio
// port with peer pb, and which has an Interrupter if irq; it closes both
// ports.
func sleepInterrupt(t *testing.T, ep *Endpoint, pb *memio.Port, irq bool) {
	defer pb.Close()
	defer ep.fio.Close()
	if (ep.irq != nil) != irq {
		t.Fatalf("the endpoint sees Interrupter %v, want %v", ep.irq != nil, irq)
	}
	// Nothing pending: Sleep lasts until ctx is done. The clock starts
	// before the context's does: a start taken after it made a Sleep that
	// ended on time read short by the gap between the two (29.98 ms).
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	if err := ep.Sleep(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sleep = %v, want DeadlineExceeded", err)
	}
	cancel()
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("Sleep returned after %v, before its context", d)
	}
	// Interrupt before Sleep: Sleep returns at once (nil).
	ep.Interrupt()
	if err := ep.Sleep(context.Background()); err != nil {
		t.Fatalf("Sleep after Interrupt = %v", err)
	}
	// Interrupt during Sleep.
	sleepEndsBy(t, ep, "Interrupt", ep.Interrupt)
	if ep.wakeups.Load() == 0 {
		t.Fatal("the sleeping poll loop was not woken")
	}
	// A frame ends Sleep too.
	sleepEndsBy(t, ep, "a frame", func() {
		pb.TxFrame(make([]byte, 60))
		pb.Kick()
	})
}

// sleepEndsBy starts a Sleep of ep, waits until it sleeps, runs wake (what
// names it), and checks that the Sleep then returns nil within 10 s.
func sleepEndsBy(t *testing.T, ep *Endpoint, what string, wake func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- ep.Sleep(context.Background()) }()
	for !ep.sleeping.Load() {
		time.Sleep(time.Millisecond)
	}
	wake()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Sleep ended by %s = %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not end Sleep", what)
	}
}
