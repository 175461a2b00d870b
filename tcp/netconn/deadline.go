package netconn

import (
	"sync"
	"sync/atomic"
	"time"
)

// deadline is one direction's deadline of a Conn (or a Listener's). Waiters
// take its channel with wait and select on it: the channel is closed when
// the deadline passes and also whenever the deadline is changed, so that a
// waiter looks again and picks up the new one (a deadline moved earlier
// applies to an operation already waiting, as the standard library's does).
type deadline struct {
	mu    sync.Mutex
	at    time.Time     // zero: none
	fired bool          // the timer for at has run
	gen   uint64        // counts set calls; a stale timer finds it changed
	ch    chan struct{} // nil until a waiter asks; closed at expiry or change
	timer *time.Timer
	// active: a deadline is set (at nonzero), so that passed can say no
	// without the lock while none is.
	active atomic.Bool
	// kick, when set (a native Conn's rdCh or wrCh, capacity 1), is
	// signalled instead of ch: its one waiter selects on it anyway, and
	// wait allocates no channel per blocked call.
	kick chan struct{}
	// wake, when set, is called after kick is signalled (a native Read
	// that waits in the netpoller: see nativeSvc.lead).
	wake func()
}

// set changes the deadline to t (zero: none), waking every waiter.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.ch != nil {
		close(d.ch)
		d.ch = nil
	}
	if d.kick != nil {
		signal(d.kick)
		if d.wake != nil {
			d.wake()
		}
	}
	d.at, d.fired = t, false
	d.active.Store(!t.IsZero())
	d.gen++
	gen := d.gen
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		d.fired = true
		return
	}
	d.timer = time.AfterFunc(dur, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen != gen || d.fired {
			return // changed since; set stopped us too late
		}
		d.fired = true
		if d.ch != nil {
			close(d.ch)
			d.ch = nil
		}
		if d.kick != nil {
			signal(d.kick)
			if d.wake != nil {
				d.wake()
			}
		}
	})
}

// wait returns the channel to select on while blocked, or expired true when
// the deadline has passed (the operation must fail with a timeout). With
// kick set the channel is nil: kick says when to look again.
func (d *deadline) wait() (ch <-chan struct{}, expired bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired || (!d.at.IsZero() && !time.Now().Before(d.at)) {
		return nil, true
	}
	if d.kick != nil {
		return nil, false
	}
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch, false
}

// passed reports whether the deadline has passed; without a deadline it
// takes no lock.
func (d *deadline) passed() bool {
	if !d.active.Load() {
		return false
	}
	_, expired := d.wait()
	return expired
}

// stop releases the timer.
func (d *deadline) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.mu.Unlock()
}
