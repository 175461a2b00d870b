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
	"strconv"
	"strings"

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

// FormatList writes cpus (ascending) as a Linux CPU list: "0-3,6,8-9".
// An empty list is "none".
func FormatList(cpus []int) string {
	if len(cpus) == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// FormatMask writes cpus as a Linux hexadecimal CPU mask, the format of
// /sys/class/net/<if>/queues/tx-<n>/xps_cpus and of rps_cpus: 32-bit words
// from the highest to the lowest, comma-separated, the lower words padded to
// 8 digits ("1", "3", "1,00000000" for CPU 32). Negative CPUs are ignored;
// an empty list is "0".
func FormatMask(cpus []int) string {
	hi := -1
	for _, c := range cpus {
		if c > hi {
			hi = c
		}
	}
	if hi < 0 {
		return "0"
	}
	words := make([]uint32, hi/32+1)
	for _, c := range cpus {
		if c >= 0 {
			words[c/32] |= 1 << (c % 32)
		}
	}
	var b strings.Builder
	for i := len(words) - 1; i >= 0; i-- {
		if i == len(words)-1 {
			b.WriteString(strconv.FormatUint(uint64(words[i]), 16))
			continue
		}
		s := strconv.FormatUint(uint64(words[i]), 16)
		b.WriteByte(',')
		b.WriteString(strings.Repeat("0", 8-len(s)))
		b.WriteString(s)
	}
	return b.String()
}

// maxMaskWords bounds ParseMask (8192 CPUs, the kernel's NR_CPUS limit).
const maxMaskWords = 256

// ParseMask reads a Linux hexadecimal CPU mask ("00000003",
// "1,00000000", with or without a trailing newline) and returns its CPUs,
// ascending. Each comma-separated word holds 32 bits (at most 8 hex digits).
func ParseMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("cpu mask: empty")
	}
	words := strings.Split(s, ",")
	if len(words) > maxMaskWords {
		return nil, fmt.Errorf("cpu mask: %d words, at most %d", len(words), maxMaskWords)
	}
	var cpus []int
	for i := len(words) - 1; i >= 0; i-- {
		w := words[i]
		if w == "" || len(w) > 8 {
			return nil, fmt.Errorf("cpu mask %q: word %q is not 1 to 8 hex digits", s, w)
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: %w", s, err)
		}
		base := (len(words) - 1 - i) * 32
		for bit := 0; bit < 32; bit++ {
			if v&(1<<bit) != 0 {
				cpus = append(cpus, base+bit)
			}
		}
	}
	return cpus, nil
}
