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
// others get the allowed set) and acts once; a CPU outside the allowed set
// is refused with ErrNotAllowed and changes nothing.
func TestPinProcess(t *testing.T) {
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	c := allowed[len(allowed)-1]
	// A poller pinned to the first CPU before, on a thread of its own.
	pinnedTid := make(chan int)
	release := make(chan struct{})
	pinnedDone := make(chan error)
	go func() {
		if err := Pin(allowed[0]); err != nil {
			pinnedTid <- 0
			pinnedDone <- err
			return
		}
		pinnedTid <- unix.Gettid()
		<-release
		cur, err := Current()
		if err == nil && !slices.Equal(cur, []int{allowed[0]}) {
			err = errors.New("the pinned thread lost its own CPU")
		}
		if uerr := Unpin(); uerr != nil {
			runtime.LockOSThread() // narrowed: let it end with the goroutine
			err = errors.Join(err, uerr)
		}
		pinnedDone <- err
	}()
	tid := <-pinnedTid
	if tid == 0 {
		t.Fatal(<-pinnedDone)
	}

	restore, err := PinProcess(c)
	if err != nil {
		close(release)
		<-pinnedDone
		t.Fatal(err)
	}
	// A goroutine locked to a thread of its own (the runtime may make one).
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
	close(release)
	if err := <-pinnedDone; err != nil {
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
