package stack

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// irqPort is a memio port whose Wait can be interrupted (an Interrupter).
type irqPort struct {
	*memio.Port
	mu      sync.Mutex
	cancel  context.CancelFunc
	pending bool
	n       int
}

func (p *irqPort) Wait(ctx context.Context) error {
	p.mu.Lock()
	if p.pending {
		p.pending = false
		p.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	p.mu.Unlock()
	err := p.Port.Wait(ctx)
	p.mu.Lock()
	p.cancel = nil
	interrupted := p.pending
	p.pending = false
	p.mu.Unlock()
	cancel()
	if interrupted {
		return nil
	}
	return err
}

func (p *irqPort) Interrupt() {
	p.mu.Lock()
	p.n++
	p.pending = true
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
}

// TestSleepInterrupt: Interrupt ends a Sleep in progress, and one that comes
// before the Sleep ends it at once; without either, Sleep lasts until ctx.
// Both for a FrameIO with Interrupt and for memio, which has none (Sleep
// then waits in slices).
func TestSleepInterrupt(t *testing.T) {
	for _, irq := range []bool{true, false} {
		pa, pb := memio.NewPair(memio.Options{})
		var ep *Endpoint
		var ip *irqPort
		if irq {
			ip = &irqPort{Port: pa}
			ep = NewEndpoint(ip)
		} else {
			ep = NewEndpoint(pa)
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
		if irq && ip.n == 0 {
			t.Fatalf("the FrameIO's Interrupt was not used")
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
