package netconn

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/stack"
)

// irqPort is a memio port with an Interrupt (stack.Interrupter), as a
// FrameIO whose sleep can be ended without slicing it into contexts (which
// stack.Endpoint.Sleep allocates per slice): each Wait uses one long-lived
// context, replaced only after an Interrupt ended it. The caller's ctx is
// not honoured (a Service sleeps with context.Background).
type irqPort struct {
	*memio.Port
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

var _ stack.Interrupter = (*irqPort)(nil)

func newIrqPort(p *memio.Port) *irqPort {
	w := &irqPort{Port: p}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

// Wait implements frameio.Waiter.
func (w *irqPort) Wait(context.Context) error {
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	err := w.Port.Wait(ctx)
	if ctx.Err() != nil {
		w.mu.Lock()
		w.ctx, w.cancel = context.WithCancel(context.Background())
		w.mu.Unlock()
		return nil
	}
	return err
}

// Interrupt implements stack.Interrupter.
func (w *irqPort) Interrupt() {
	w.mu.Lock()
	w.cancel()
	w.mu.Unlock()
}

// TestNoAllocPerMessage: once warm, a 100-byte Write and the ReadFull of
// its echo allocate nothing on average, through both Services, netstack
// and their pollers, which sleep between messages on a FrameIO with
// Interrupt. (Over one without Interrupt, as memio and AF_XDP today,
// stack.Endpoint.Sleep allocates a context for each sleep: a handful of
// allocations per idle period, not per message while the poller spins.)
func TestNoAllocPerMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race")
	}
	pa, pb := memio.NewPair(memio.Options{})
	a, err := NewOverFrameIO(core.Config{LocalIP: ipA}, newIrqPort(pa), Options{Poll: PollSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewOverFrameIO(core.Config{LocalIP: ipB}, newIrqPort(pb), Options{Poll: PollSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ln, err := b.Listen(testPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.AcceptConn()
		if err != nil {
			return
		}
		buf := make([]byte, 100)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				c.Close()
				return
			}
			if _, err := c.Write(buf); err != nil {
				c.Close()
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := a.Dial(ctx, fmt.Sprintf("%s:%d", ipB, testPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg, back := make([]byte, 100), make([]byte, 100)
	rt := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		rt()
	}
	n := testing.AllocsPerRun(500, rt)
	st := a.Stats()
	t.Logf("%.2f allocations per round trip; A's poller slept %d times", n, counter(st, "netconn", "sleeps"))
	if n > 0.5 {
		t.Errorf("%.2f allocations per round trip, want none", n)
	}
}
