package fdwait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Cause: ctx's own error once ctx is done or its deadline has passed (the
// latter waits for the context's timer), nil for an inner context that
// ended while ctx goes on, and any other error as it is.
func TestCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	for time.Until(func() time.Time { d, _ := ctx.Deadline(); return d }()) > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	if err := Cause(ctx, context.DeadlineExceeded); err == nil || !errors.Is(err, ctx.Err()) {
		t.Fatalf("deadline passed: Cause %v, ctx.Err() %v", err, ctx.Err())
	}
	live, stop := context.WithCancel(context.Background())
	defer stop()
	inner, cancelInner := context.WithTimeout(live, time.Millisecond)
	<-inner.Done()
	cancelInner()
	if err := Cause(live, inner.Err()); err != nil {
		t.Fatalf("inner context ended, ctx live: Cause %v, want nil", err)
	}
	other := errors.New("other")
	if err := Cause(live, other); err != other {
		t.Fatalf("Cause(other) = %v", err)
	}
}
