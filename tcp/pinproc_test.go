package tcp

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/cpu"
)

// threadCPUs returns the affinity of every thread of the process.
func threadCPUs(t *testing.T) map[int][]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]int{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		var s unix.CPUSet
		if unix.SchedGetaffinity(tid, &s) != nil {
			continue // exited
		}
		var l []int
		for c := 0; c < 1024; c++ {
			if s.IsSet(c) {
				l = append(l, c)
			}
		}
		out[tid] = l
	}
	return out
}

// TestPinProcess: pinProcess binds every thread, and a thread made after
// it, to the CPU; release gives them the allowed set back; a CPU outside
// the allowed set is refused with cpu.ErrNotAllowed.
func TestPinProcess(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Skip(err)
	}
	c := allowed[len(allowed)-1]
	p, err := pinProcess(c)
	if err != nil {
		t.Fatal(err)
	}
	// A goroutine locked to a thread of its own (the runtime may make one).
	got := make(chan []int)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine
		l, _ := cpu.Current()
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
	if err := p.release(); err != nil {
		t.Fatal(err)
	}
	for tid, l := range threadCPUs(t) {
		if !slices.Equal(l, allowed) {
			t.Errorf("after release thread %d on %v, want %v", tid, l, allowed)
		}
	}
	if _, err := pinProcess(4095); !errors.Is(err, cpu.ErrNotAllowed) {
		t.Errorf("CPU 4095: %v, want ErrNotAllowed", err)
	}
}
