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
	for _, irq := range []bool{true, false} {
		pa, pb := memio.NewPair(memio.Options{})
		var ep *Endpoint
		if irq {
			ep = NewEndpoint(pa)
		} else {
			ep = NewEndpoint(noIrq{FrameIO: pa, w: pa})
		}
		if (ep.irq != nil) != irq {
			t.Fatalf("irq %v: the endpoint sees Interrupter %v", irq, ep.irq != nil)
		}
		// Nothing pending: Sleep lasts until ctx is done.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		start := time.Now()
		if err := ep.Sleep(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("irq %v: Sleep = %v, want DeadlineExceeded", irq, err)
		}
		cancel()
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Fatalf("irq %v: Sleep returned after %v, before its context", irq, d)
		}
		// Interrupt before Sleep: Sleep returns at once (nil).
		ep.Interrupt()
		if err := ep.Sleep(context.Background()); err != nil {
			t.Fatalf("irq %v: Sleep after Interrupt = %v", irq, err)
		}
		// Interrupt during Sleep.
		done := make(chan error, 1)
		go func() { done <- ep.Sleep(context.Background()) }()
		for !ep.sleeping.Load() {
			time.Sleep(time.Millisecond)
		}
		ep.Interrupt()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("irq %v: interrupted Sleep = %v", irq, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("irq %v: Interrupt did not end Sleep", irq)
		}
		if ep.wakeups.Load() == 0 {
			t.Fatalf("irq %v: the sleeping poll loop was not woken", irq)
		}
		// A frame ends Sleep too.
		go func() { done <- ep.Sleep(context.Background()) }()
		for !ep.sleeping.Load() {
			time.Sleep(time.Millisecond)
		}
		pb.TxFrame(make([]byte, 60))
		pb.Kick()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("irq %v: Sleep woken by a frame = %v", irq, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("irq %v: a frame did not end Sleep", irq)
		}
		pa.Close()
		pb.Close()
	}
}
