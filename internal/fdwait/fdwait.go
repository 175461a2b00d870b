//go:build linux

package fdwait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// slice bounds one poll(2) so that a context without a deadline is noticed.
const slice = 50 * time.Millisecond

// Waker is an eventfd that ends a Wait in progress.
type Waker struct{ fd int }

// NewWaker creates the eventfd.
func NewWaker() (*Waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &Waker{fd: fd}, nil
}

// Wake makes the current and the next Wait return. Safe from any goroutine.
func (w *Waker) Wake() {
	var one = [8]byte{1}
	_, _ = unix.Write(w.fd, one[:])
}

// Close closes the eventfd. No Wait may be in progress.
func (w *Waker) Close() error { return unix.Close(w.fd) }

// ErrWoken is returned by Wait when the Waker was signalled.
var ErrWoken = errors.New("fdwait: woken")

// Wait blocks until fd is readable (nil), w is woken (ErrWoken), or ctx is
// done (ctx.Err()). syscalls, when not nil, is incremented once per poll(2).
// It allocates nothing.
func Wait(ctx context.Context, fd int, w *Waker, syscalls *uint64) error {
	return WaitAtMost(ctx, fd, w, syscalls, 0)
}

// WaitAtMost is Wait that also returns nil once d has passed (d > 0; 0
// is no bound): for a poll loop that has work of its own to do by then
// (a backend's sweep of idle sockets), which takes the return as "call
// Rx". It allocates nothing.
func WaitAtMost(ctx context.Context, fd int, w *Waker, syscalls *uint64, d time.Duration) error {
	fds := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(w.fd), Events: unix.POLLIN}}
	var end time.Time
	if d > 0 {
		end = time.Now().Add(d)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ms := int(slice / time.Millisecond)
		if d > 0 {
			left := time.Until(end)
			if left <= 0 {
				return nil
			}
			if left < slice {
				ms = int((left + time.Millisecond - 1) / time.Millisecond)
			}
		}
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				// The deadline has passed but the context's timer may not
				// have fired yet: wait for it rather than spin on poll(0).
				return Expired(ctx)
			}
			if lm := int((left + time.Millisecond - 1) / time.Millisecond); lm < ms {
				ms = lm
			}
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		n, err := unix.Poll(fds[:], ms)
		if syscalls != nil {
			*syscalls++
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			continue
		}
		if fds[1].Revents != 0 {
			return ErrWoken
		}
		if fds[0].Revents != 0 {
			return nil
		}
	}
}

// Drain resets the eventfd after a wake-up, for wakers used more than once
// (not for the close waker, which stays signalled for good).
func (w *Waker) Drain() {
	var b [8]byte
	_, _ = unix.Read(w.fd, b[:])
}

// FD returns the eventfd, for callers that poll several descriptors.
func (w *Waker) FD() int { return w.fd }
