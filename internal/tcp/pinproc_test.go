package tcp

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPUs returns the affinity of every thread of the process, for the
// tests of the backends that pin it (cpu.PinProcess, tested in
// internal/cpu).
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
