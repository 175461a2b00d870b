//go:build !linux

// Package cpu pins pollers to CPUs. Pinning needs Linux's
// sched_setaffinity: on other systems every call that would pin returns
// an error matching errors.ErrUnsupported, so that the packages built on
// it compile everywhere. (The root package imports this one, so this file
// cannot name errors.ErrUnsupported; the root turns the error into one.)
package cpu

import (
	"errors"
	"fmt"
	"runtime"
)

// ErrNotAllowed is matched (errors.Is) by the error of Pin for a CPU
// outside the process's allowed set.
var ErrNotAllowed = errors.New("cpu not in the allowed set")

func notSupported() error {
	return fmt.Errorf("CPU pinning (sched_setaffinity) exists only on Linux: %w", errors.ErrUnsupported)
}

// Allowed returns an error matching errors.ErrUnsupported.
func Allowed() ([]int, error) { return nil, notSupported() }

// Pin returns an error matching errors.ErrUnsupported and changes nothing.
func Pin(cpu int) error { return notSupported() }

// Unpin returns an error matching errors.ErrUnsupported.
func Unpin() error { return notSupported() }

// Current returns an error matching errors.ErrUnsupported.
func Current() ([]int, error) { return nil, notSupported() }

// PinProcess returns an error matching errors.ErrUnsupported and changes
// nothing.
func PinProcess(c int) (restore func() error, err error) { return nil, notSupported() }

// Thread is what Claim did to a goroutine's OS thread; Release undoes it.
type Thread struct {
	locked bool
}

// Claim locks the calling goroutine to its thread when lock is set and
// cpus is empty; with a CPU it returns an error matching
// errors.ErrUnsupported and changes nothing.
func Claim(cpus []int, lock bool) (Thread, error) {
	if len(cpus) > 0 {
		return Thread{}, notSupported()
	}
	if !lock {
		return Thread{}, nil
	}
	runtime.LockOSThread()
	return Thread{locked: true}, nil
}

// Tid returns 0: thread ids are Linux's.
func (t Thread) Tid() int { return 0 }

// Mine reports whether Claim locked a thread (it cannot tell which).
func (t Thread) Mine() bool { return t.locked }

// Release unlocks what Claim locked. Call it on the goroutine that
// called Claim, once.
func (t Thread) Release() error {
	if t.locked {
		runtime.UnlockOSThread()
	}
	return nil
}
