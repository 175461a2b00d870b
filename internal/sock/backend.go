package sock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/guard"
)

// Life is the open or closed state the kernel backends share: the
// guard.Guard their data-path methods enter, and the counters frozen at
// Close, which Stats returns from then on (the socket they were read from
// is gone). The zero Life is open.
type Life struct {
	guard.Guard
	mu    sync.Mutex // held by Close; a Stats after Shut waits on it
	final dgramio.Stats
}

// Stats returns snapshot() while the backend is open, called under the
// guard so that no data-path call runs meanwhile, and afterwards the
// counters Close froze (waiting for a Close in progress to freeze them).
// The result is the caller's: its Layers are never shared.
func (l *Life) Stats(snapshot func() dgramio.Stats) dgramio.Stats {
	if l.Enter() {
		s := snapshot()
		l.Exit()
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.final
	s.Layers = append([]dgramio.Counter(nil), s.Layers...)
	return s
}

// Close shuts the guard (guard.Guard.Shut with wake, so that a Wait in
// progress returns and no data-path call is left running), then calls
// shutdown, which releases what the backend holds and returns the counters
// to freeze and the error Close returns. A Close after the first returns
// nil without calling shutdown.
func (l *Life) Close(wake func(), shutdown func() (final dgramio.Stats, err error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.Shut(wake) {
		return nil
	}
	var err error
	l.final, err = shutdown()
	return err
}

// Wait is the sleep of a kernel backend's Wait, which has entered the
// guard (BeginWait; fd and w are read after it, so that Close cannot
// release them meanwhile): it sleeps in fdwait.Wait until fd is readable
// (nil), ctx is done (ctx.Err()) or Close wakes w (dgramio.ErrClosed), and
// adds the poll(2) calls it made to calls. It allocates nothing.
func Wait(ctx context.Context, fd int, w *fdwait.Waker, calls *atomic.Uint64) error {
	return WaitAtMost(ctx, fd, w, calls, 0)
}

// WaitAtMost is Wait that also returns nil once d has passed (d > 0; see
// fdwait.WaitAtMost).
func WaitAtMost(ctx context.Context, fd int, w *fdwait.Waker, calls *atomic.Uint64, d time.Duration) error {
	var n uint64
	err := fdwait.WaitAtMost(ctx, fd, w, &n, d)
	calls.Add(n)
	if errors.Is(err, fdwait.ErrWoken) {
		return dgramio.ErrClosed
	}
	return err
}
