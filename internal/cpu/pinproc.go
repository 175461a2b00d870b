//go:build linux

package cpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// PinProcess binds every thread of the process to cpu c, and so the
// threads made later (a thread inherits its maker's affinity), until
// restore. It is how a single-queue userspace TCP backend (tcp-xdp,
// tcp-dpdk) runs on Config.CPUs[0]: netstack's goroutines (segment
// processors, timers) then run on the poller's CPU, where the poll loop
// hands over to them with a runtime.Gosched on the same P. A poller locked
// to its thread instead (Pin) pays for every such yield with a hand-off of
// its P to another thread and back, two futex wake-ups (BENCHMARKS.md has
// the difference). The calling goroutine is not locked to its thread.
//
// It overrides every thread's own affinity, a thread that Pin bound
// included, so a process runs one such backend at a time, and nothing
// else in it needs another CPU meanwhile. restore gives each thread seen
// at the pin the affinity it had then, and every thread made since the
// allowed set (Allowed); only its first call acts, later ones return nil.
//
// A CPU outside Allowed is refused before any change, with an error
// matching ErrNotAllowed that lists the allowed CPUs. On any other error
// every thread already changed is given its affinity back.
func PinProcess(c int) (restore func() error, err error) {
	if allowedErr != nil {
		return nil, allowedErr
	}
	if c < 0 || c >= maxCPU || !allowed.IsSet(c) {
		return nil, fmt.Errorf("pin process to cpu %d: %w; allowed CPUs are %s (see taskset/cpuset)",
			c, ErrNotAllowed, FormatList(setToList(&allowed)))
	}
	p := &processPin{before: make(map[int]unix.CPUSet)}
	var one unix.CPUSet
	one.Set(c)
	if err := p.pin(&one); err != nil {
		return nil, errors.Join(err, p.restore())
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() { err = p.restore() })
		return err
	}, nil
}

// processPin remembers the affinity each thread had before PinProcess.
type processPin struct {
	before map[int]unix.CPUSet
}

// pin sets the affinity of every thread of the process to set, noting
// what each had. A thread made during the first pass by a thread not yet
// set would keep the old affinity: the second pass catches it. A thread
// first seen in the second pass was made during the pin: it gets the
// allowed set back on restore.
func (p *processPin) pin(set *unix.CPUSet) error {
	for pass := 0; pass < 2; pass++ {
		tids, err := threads()
		if err != nil {
			return err
		}
		for _, tid := range tids {
			if _, seen := p.before[tid]; !seen {
				old := allowed
				if pass == 0 {
					if err := unix.SchedGetaffinity(tid, &old); err != nil {
						if errors.Is(err, unix.ESRCH) {
							continue // it ended
						}
						return fmt.Errorf("sched_getaffinity thread %d: %w", tid, err)
					}
				}
				p.before[tid] = old
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sched_setaffinity thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// restore gives every thread its affinity from before the pin, and the
// allowed set to those made since, in two passes as pin does.
func (p *processPin) restore() error {
	var errs []error
	for pass := 0; pass < 2; pass++ {
		tids, err := threads()
		if err != nil {
			return err
		}
		for _, tid := range tids {
			set, ok := p.before[tid]
			if !ok {
				set = allowed
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("sched_setaffinity thread %d (restore): %w", tid, err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return nil
}

// threads lists the ids of the process's threads.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
