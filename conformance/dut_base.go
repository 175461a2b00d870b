package conformance

import (
	"context"
	"sync"
	"time"
)

// dutBase is what the DUTs that run a stack of ours on a FrameIO share
// (oursDUT, nativeDUT): the transport's part, which their factory fills
// in, and the poll loop that drives the stack, on a fake clock.
type dutBase struct {
	// The transport's part.
	info      Info
	link      Link
	closeWire func() error
	// settle waits until the DUT's end took every frame the bench's end
	// sent; nil when the transport cannot tell.
	settle func(time.Duration)

	cancel context.CancelFunc
	done   chan struct{}
	// mu guards err; nativeDUT also holds it around every use of its
	// engine.
	mu   sync.Mutex
	err  error // what ended the poll loop; the wire's error at Close replaces it
	once sync.Once
}

// Info implements DUT.
func (d *dutBase) Info() Info { return d.info }

// Link implements DUT: the bench's end of the wire.
func (d *dutBase) Link() Link { return d.link }

// Fake implements Clock: the stacks run on fake clocks that only the bench
// moves.
func (d *dutBase) Fake() bool { return true }

// startPollLoop runs the DUT's poll loop until Close: round polls and
// flushes and says how many frames it took; after a round that took none,
// wait sleeps until frames may come (or its context ends). The first error
// of either, while the loop runs, is kept (loopErr) and ends the loop.
func (d *dutBase) startPollLoop(round func() (int, error), wait func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		for ctx.Err() == nil {
			n, err := round()
			if err != nil {
				d.setErr(err)
				return
			}
			if n == 0 {
				if err := wait(ctx); err != nil && ctx.Err() == nil {
					d.setErr(err)
					return
				}
			}
		}
	}()
}

func (d *dutBase) setErr(err error) {
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
}

// loopErr returns the error that ended the poll loop, or the wire's on
// Close; nil when there was none.
func (d *dutBase) loopErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// close stops the poll loop, then the stack (stop), then the wire, once,
// and returns loopErr.
func (d *dutBase) close(stop func()) error {
	d.once.Do(func() {
		d.cancel()
		<-d.done
		stop()
		if err := d.closeWire(); err != nil {
			d.setErr(err)
		}
	})
	return d.loopErr()
}
