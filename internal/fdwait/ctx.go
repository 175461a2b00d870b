// Package fdwait sleeps until a file descriptor is readable, a context is
// done, or another goroutine wakes the sleeper: the Wait of every backend
// that has a file descriptor to poll.
package fdwait

import (
	"context"
	"errors"
	"time"
)

// Expired is the return of a Wait whose ctx's deadline has passed: the
// context's timer fires at or just after the deadline, so it waits for
// ctx.Done and returns ctx.Err(). A Wait that returns because of its
// context thus returns what ctx.Err() says at that moment, never a
// context.DeadlineExceeded of its own while ctx.Err() is still nil.
func Expired(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// Cause is the last step of a Wait that slept on an inner context derived
// from ctx (a slice, or the next timer): when err is a context error, it
// returns ctx.Err() if ctx is done or its deadline has passed (see
// Expired), and nil otherwise (the inner context ended: a wake-up, which
// a poll loop takes as "call Rx"). Any other err is returned as it is.
func Cause(ctx context.Context, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	if e := ctx.Err(); e != nil {
		return e
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return Expired(ctx)
	}
	return nil
}
