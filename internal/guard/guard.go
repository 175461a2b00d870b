// Package guard makes a backend's Close safe against its own poll loop.
package guard

import (
	"sync"
	"sync/atomic"
)

// Guard makes Close safe against a concurrent poll loop. The data-path
// methods bracket their work with Enter and Exit (an uncontended mutex, a
// few nanoseconds); Close calls Shut, which waits for the call in progress
// to finish, so memory the loop is touching (rings, UMEM, mbufs) is never
// freed under it. Blocking waits must not hold the guard: they use
// BeginWait/EndWait, which Shut also waits for after waking them.
type Guard struct {
	mu     sync.Mutex
	wait   sync.RWMutex
	closed atomic.Bool
}

// Enter begins a data-path call. It returns false, holding nothing, when the
// backend is closed.
func (g *Guard) Enter() bool {
	g.mu.Lock()
	if g.closed.Load() {
		g.mu.Unlock()
		return false
	}
	return true
}

// Exit ends a data-path call begun by a successful Enter.
func (g *Guard) Exit() { g.mu.Unlock() }

// BeginWait begins a blocking wait. It returns false, holding nothing, when
// the backend is closed; otherwise the caller must call EndWait.
func (g *Guard) BeginWait() bool {
	g.wait.RLock()
	if g.closed.Load() {
		g.wait.RUnlock()
		return false
	}
	return true
}

// EndWait ends a wait begun by a successful BeginWait.
func (g *Guard) EndWait() { g.wait.RUnlock() }

// Closed reports whether Shut was called.
func (g *Guard) Closed() bool { return g.closed.Load() }

// Shut marks the backend closed, calls wake (which must make any blocking
// wait return, e.g. by signalling an eventfd), then waits until no data-path
// call or wait is in progress. It returns false if it was already shut; the
// caller then has nothing to release. After a true return, the caller owns
// everything and releases it: every later Enter or BeginWait returns false
// without touching it.
func (g *Guard) Shut(wake func()) bool {
	if g.closed.Swap(true) {
		return false
	}
	if wake != nil {
		wake()
	}
	// A call that got past its check holds a lock; wait for it to finish.
	// Calls that start later see closed and touch nothing.
	g.wait.Lock()
	g.wait.Unlock()
	g.mu.Lock()
	g.mu.Unlock()
	return true
}
