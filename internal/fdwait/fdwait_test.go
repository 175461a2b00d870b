//go:build linux

package fdwait

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pipeWaker opens a non-blocking pipe, its ends r and w, and a Waker for
// the Waits on r; all closed at cleanup.
func pipeWaker(t *testing.T) (r, w int, wk *Waker) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	wk, err := NewWaker()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wk.Close() })
	return p[0], p[1], wk
}

func TestWaitReadable(t *testing.T) {
	r, w, wk := pipeWaker(t)
	go func() {
		time.Sleep(10 * time.Millisecond)
		unix.Write(w, []byte{1})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Wait(ctx, r, wk, nil); err != nil {
		t.Fatalf("Wait on a pipe that became readable: %v", err)
	}
}

func TestWaitWoken(t *testing.T) {
	r, _, wk := pipeWaker(t)
	go func() {
		time.Sleep(10 * time.Millisecond)
		wk.Wake()
	}()
	if err := Wait(context.Background(), r, wk, nil); !errors.Is(err, ErrWoken) {
		t.Fatalf("got %v, want ErrWoken", err)
	}
	// The close waker stays signalled; Drain resets a reusable one.
	if err := Wait(context.Background(), r, wk, nil); !errors.Is(err, ErrWoken) {
		t.Fatalf("second Wait: got %v, want ErrWoken", err)
	}
	wk.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Wait(ctx, r, wk, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after Drain: got %v, want DeadlineExceeded", err)
	}
}

func TestWaitDeadlineDoesNotSpin(t *testing.T) {
	r, _, wk := pipeWaker(t)
	// A deadline in the past whose context is not yet cancelled (the timer
	// has not fired): Wait must return at once, not poll(0) in a loop.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	var calls uint64
	if err := Wait(ctx, r, wk, &calls); err == nil {
		t.Fatal("Wait with a past deadline returned nil")
	}
	if calls > 1 {
		t.Fatalf("%d poll calls for a deadline already past", calls)
	}
}

// WaitAtMost returns nil once its bound has passed, the fd never readable
// and ctx live; a readable fd or a wake-up still end it at once.
func TestWaitAtMost(t *testing.T) {
	r, w, wk := pipeWaker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const d = 20 * time.Millisecond
	t0 := time.Now()
	var calls uint64
	if err := WaitAtMost(ctx, r, wk, &calls, d); err != nil {
		t.Fatalf("WaitAtMost past its bound: %v", err)
	}
	if el := time.Since(t0); el < d {
		t.Fatalf("WaitAtMost returned after %v, before its bound %v", el, d)
	}
	if calls == 0 {
		t.Fatal("no poll counted")
	}
	unix.Write(w, []byte{1})
	if err := WaitAtMost(ctx, r, wk, nil, time.Hour); err != nil {
		t.Fatalf("WaitAtMost on a readable pipe: %v", err)
	}
	var b [1]byte
	unix.Read(r, b[:])
	wk.Wake()
	if err := WaitAtMost(ctx, r, wk, nil, time.Hour); !errors.Is(err, ErrWoken) {
		t.Fatalf("WaitAtMost woken: %v, want ErrWoken", err)
	}
}
