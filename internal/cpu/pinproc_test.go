//go:build linux

package cpu

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPUs returns the affinity of every thread of the process.
func threadCPUs(t *testing.T) map[int][]int {
	t.Helper()
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]int{}
	for _, tid := range tids {
		var s unix.CPUSet
		if unix.SchedGetaffinity(tid, &s) != nil {
			continue // it ended
		}
		out[tid] = setToList(&s)
	}
	return out
}

// TestPinProcess: PinProcess binds every thread, and a thread made after
// it, to the CPU, without locking the caller; restore gives each thread
// its affinity back (a thread Pin bound before keeps its own CPU, the
// others get the allowed set) and acts once.
func TestPinProcess(t *testing.T) {
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	c := allowed[len(allowed)-1]
	tid, pinnedDone := pinnedPoller(t, allowed[0])
	restore, err := PinProcess(c)
	if err != nil {
		pinnedDone()
		t.Fatal(err)
	}
	allOn(t, c)
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	for id, l := range threadCPUs(t) {
		want := allowed
		if id == tid {
			want = []int{allowed[0]}
		}
		if !slices.Equal(l, want) {
			t.Errorf("after restore thread %d on %v, want %v", id, l, want)
		}
	}
	if err := pinnedDone(); err != nil {
		t.Error(err)
	}
	// A second restore does nothing: a thread pinned since stays so.
	if err := onThread(func() error {
		if err := Pin(c); err != nil {
			return err
		}
		if err := restore(); err != nil {
			return err
		}
		cur, err := Current()
		if err == nil && !slices.Equal(cur, []int{c}) {
			err = errors.New("a second restore unpinned a thread")
		}
		return errors.Join(err, Unpin())
	}); err != nil {
		t.Error(err)
	}
}

// TestPinProcessRefuses: a CPU outside the allowed set is refused with
// ErrNotAllowed and changes no thread.
func TestPinProcessRefuses(t *testing.T) {
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	before := threadCPUs(t)
	for _, bad := range []int{-1, maxCPU, allowed[len(allowed)-1] + 1} {
		if r, err := PinProcess(bad); !errors.Is(err, ErrNotAllowed) {
			if r != nil {
				r()
			}
			t.Errorf("PinProcess(%d): %v, want ErrNotAllowed", bad, err)
		}
	}
	for id, l := range threadCPUs(t) {
		if b, ok := before[id]; ok && !slices.Equal(b, l) {
			t.Errorf("a refused PinProcess changed thread %d: %v -> %v", id, b, l)
		}
	}
}

// pinnedPoller starts a poller pinned to CPU c on a thread of its own
// (Pin) and returns that thread's id. done lets the poller end, after it
// checks that it still runs on c, and returns what went wrong.
func pinnedPoller(t *testing.T, c int) (tid int, done func() error) {
	t.Helper()
	tids := make(chan int)
	release := make(chan struct{})
	ended := make(chan error)
	go func() {
		if err := Pin(c); err != nil {
			tids <- 0
			ended <- err
			return
		}
		tids <- unix.Gettid()
		<-release
		cur, err := Current()
		if err == nil && !slices.Equal(cur, []int{c}) {
			err = errors.New("the pinned thread lost its own CPU")
		}
		if uerr := Unpin(); uerr != nil {
			runtime.LockOSThread() // narrowed: let it end with the goroutine
			err = errors.Join(err, uerr)
		}
		ended <- err
	}()
	if tid = <-tids; tid == 0 {
		t.Fatal(<-ended)
	}
	return tid, func() error { close(release); return <-ended }
}

// allOn checks that every thread of the process runs on CPU c, a thread
// made now (a goroutine locked to a thread of its own, which the runtime
// may make) too.
func allOn(t *testing.T, c int) {
	t.Helper()
	got := make(chan []int)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine
		l, _ := Current()
		got <- l
	}()
	if l := <-got; !slices.Equal(l, []int{c}) {
		t.Errorf("a thread of the pinned process runs on %v, want [%d]", l, c)
	}
	for tid, l := range threadCPUs(t) {
		if !slices.Equal(l, []int{c}) {
			t.Errorf("thread %d on %v, want [%d]", tid, l, c)
		}
	}
}
