//go:build linux

// Package cpu pins the calling goroutine's OS thread to one CPU, the way each
// poller of dgramio runs: locked to its thread (runtime.LockOSThread) and
// bound to its core (sched_setaffinity), so that the queue, its cache lines
// and its interrupts stay on one core.
package cpu

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowed is the affinity mask the process started with, read at package
// init before anything in this package could narrow a thread.
var allowed unix.CPUSet
var allowedErr error

func init() {
	allowedErr = unix.SchedGetaffinity(0, &allowed)
	if allowedErr != nil {
		allowedErr = fmt.Errorf("sched_getaffinity: %w", allowedErr)
	}
}

// maxCPU is the number of CPUs a unix.CPUSet can name.
const maxCPU = len(unix.CPUSet{}) * 64

// Allowed returns the CPUs the process may run on, ascending: the affinity
// mask it started with (taskset, cpuset cgroup), read once at package init,
// so that a thread narrowed by Pin does not narrow the answer. The slice is
// new on every call; the caller owns it.
func Allowed() ([]int, error) {
	if allowedErr != nil {
		return nil, allowedErr
	}
	return setToList(&allowed), nil
}

func setToList(s *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < maxCPU; c++ {
		if s.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// ErrNotAllowed is matched (errors.Is) by the error of Pin for a CPU outside
// the process's allowed set.
var ErrNotAllowed = errors.New("cpu not in the allowed set")

// Pin locks the calling goroutine to its OS thread (runtime.LockOSThread)
// and binds that thread to cpu with sched_setaffinity. The goroutine then
// runs only on that CPU until Unpin. A cpu outside Allowed is refused, before
// any change, with an error matching ErrNotAllowed that lists the allowed
// CPUs. On any error the goroutine is left unlocked and the thread's
// affinity unchanged.
//
// A goroutine that ends while pinned takes its thread with it (the Go runtime
// terminates a thread whose locked goroutine exits), so a pinned thread never
// returns to the pool.
func Pin(cpu int) error {
	if allowedErr != nil {
		return allowedErr
	}
	if cpu < 0 || cpu >= maxCPU || !allowed.IsSet(cpu) {
		return fmt.Errorf("pin to cpu %d: %w; allowed CPUs are %s (see taskset/cpuset)",
			cpu, ErrNotAllowed, FormatList(setToList(&allowed)))
	}
	runtime.LockOSThread()
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("sched_setaffinity cpu %d: %w", cpu, err)
	}
	return nil
}

// Unpin restores the calling thread's affinity to the allowed set and
// unlocks the goroutine from its thread. Call it on the goroutine that
// called Pin, once for each successful Pin. If the affinity cannot be
// restored, the goroutine stays locked (so the narrowed thread does not go
// back to the pool) and the error says so.
func Unpin() error {
	if allowedErr != nil {
		return allowedErr
	}
	if err := unix.SchedSetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("sched_setaffinity (restore): %w", err)
	}
	runtime.UnlockOSThread()
	return nil
}

// Current returns the affinity of the calling thread, ascending. It is the
// one CPU of the last Pin on a pinned goroutine.
func Current() ([]int, error) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	return setToList(&s), nil
}

// Thread is what Claim did to a goroutine's OS thread for a poller; Release
// undoes it. The zero Thread is one Claim left alone.
type Thread struct {
	tid    int         // the claimed thread, 0 when Claim did nothing
	pinned bool        // Claim pinned it: Release gives it before back
	before unix.CPUSet // the thread's affinity before Claim pinned it
}

// Claim prepares the calling goroutine's OS thread to run a poller, as
// dgramio.Config.CPUs asks: cpus[0] is the poller's CPU, and an empty cpus
// means no pinning. With a CPU, Claim pins the thread to it (Pin), unless
// the thread may run on that CPU only already (the caller pinned it
// itself): then it only locks the goroutine to the thread, and Release
// leaves the caller's pin alone. Without a CPU it locks the goroutine to
// its thread when lock is set (a backend whose kernel object belongs to one
// thread, such as a SINGLE_ISSUER io_uring), and does nothing otherwise.
// On error nothing is changed.
func Claim(cpus []int, lock bool) (Thread, error) {
	if len(cpus) == 0 {
		if !lock {
			return Thread{}, nil
		}
		runtime.LockOSThread()
		return Thread{tid: unix.Gettid()}, nil
	}
	c := cpus[0]
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // Pin takes a lock of its own
	if cur, err := Current(); err != nil || len(cur) != 1 || cur[0] != c {
		var before unix.CPUSet
		if err := unix.SchedGetaffinity(0, &before); err != nil {
			return Thread{}, fmt.Errorf("sched_getaffinity: %w", err)
		}
		if err := Pin(c); err != nil {
			return Thread{}, err
		}
		return Thread{tid: unix.Gettid(), pinned: true, before: before}, nil
	}
	runtime.LockOSThread() // kept: the deferred unlock leaves this one
	return Thread{tid: unix.Gettid()}, nil
}

// Tid returns the id of the claimed thread, or 0 when Claim did nothing.
func (t Thread) Tid() int { return t.tid }

// Mine reports whether the calling goroutine runs on the claimed thread. A
// goroutine locked to its thread has that thread to itself, so on the
// goroutine that called Claim (and kept its lock) it is true.
func (t Thread) Mine() bool { return t.tid != 0 && unix.Gettid() == t.tid }

// Release undoes Claim. The thread Claim pinned gets back the affinity it
// had before (not the process's whole set: a thread the caller had
// narrowed stays as the caller left it), from whichever goroutine Release
// runs on, so a backend closed elsewhere leaves no thread pinned. On the
// claimed thread Release also unlocks the goroutine from it; on any other
// it cannot (a lock belongs to its goroutine): the claimed goroutine stays
// locked to its thread, with its affinity back, until it ends or unlocks.
// A claimed thread that has ended is no error. Call it once.
func (t Thread) Release() error {
	if t.tid == 0 {
		return nil
	}
	mine := t.Mine()
	if t.pinned {
		tid := t.tid
		if mine {
			tid = 0
		}
		if err := unix.SchedSetaffinity(tid, &t.before); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sched_setaffinity thread %d (restore): %w", t.tid, err)
		}
	}
	if mine {
		runtime.UnlockOSThread()
	}
	return nil
}
