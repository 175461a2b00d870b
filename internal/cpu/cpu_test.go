//go:build linux

package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAllowed(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	// The runtime sizes GOMAXPROCS from the same affinity mask at start.
	if len(cpus) != runtime.NumCPU() {
		t.Errorf("Allowed() = %v (%d CPUs), runtime.NumCPU() = %d", cpus, len(cpus), runtime.NumCPU())
	}
	if !slices.IsSorted(cpus) {
		t.Errorf("Allowed() = %v, not ascending", cpus)
	}
	cpus[0] = -5 // the caller owns the slice
	again, _ := Allowed()
	if again[0] == -5 {
		t.Error("Allowed returns a shared slice")
	}
}

func TestPinEachAllowedCPU(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, c := range cpus {
			if err := Pin(c); err != nil {
				t.Errorf("Pin(%d): %v", c, err)
				continue
			}
			cur, err := Current()
			if err != nil || !slices.Equal(cur, []int{c}) {
				t.Errorf("after Pin(%d): affinity %v, %v", c, cur, err)
			}
			runtime.Gosched() // the thread may move only to c
			if cur, _ := Current(); !slices.Equal(cur, []int{c}) {
				t.Errorf("after Pin(%d) and a yield: affinity %v", c, cur)
			}
			if err := Unpin(); err != nil {
				t.Errorf("Unpin: %v", err)
				return
			}
			cur, err = Current()
			if err != nil || !slices.Equal(cur, cpus) {
				t.Errorf("after Unpin: affinity %v, want %v (%v)", cur, cpus, err)
			}
		}
	}()
	<-done
}

func TestPinRefusesCPUOutsideSet(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	outside := []int{-1, cpus[len(cpus)-1] + 1, maxCPU, 1 << 20}
	for c := 0; c < cpus[len(cpus)-1]; c++ {
		if !slices.Contains(cpus, c) {
			outside = append(outside, c) // a hole in the allowed set
		}
	}
	before, _ := Current()
	for _, c := range outside {
		err := Pin(c)
		if err == nil {
			Unpin()
			t.Errorf("Pin(%d) accepted; allowed %v", c, cpus)
			continue
		}
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), FormatList(cpus)) {
			t.Errorf("Pin(%d): %v; want ErrNotAllowed naming %s", c, err, FormatList(cpus))
		}
	}
	if after, _ := Current(); !slices.Equal(before, after) {
		t.Errorf("a refused Pin changed the affinity: %v -> %v", before, after)
	}
}

// onThread runs fn on a goroutine of its own, which ends (and takes its
// thread with it, if fn leaves it locked) when fn returns.
func onThread(fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return <-done
}

// TestClaim: Claim pins to cpus[0] and Release restores the allowed set;
// without CPUs it does nothing, or only locks; a refused CPU changes
// nothing; a thread its caller pinned stays pinned after Release; Release
// on another goroutine touches nothing.
func TestClaim(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	c := cpus[len(cpus)-1]
	affinity := func(want []int, when string) error {
		if cur, err := Current(); err != nil || !slices.Equal(cur, want) {
			return fmt.Errorf("%s: affinity %v (%v), want %v", when, cur, err, want)
		}
		return nil
	}
	err = onThread(func() error {
		th, err := Claim([]int{c}, false)
		if err != nil {
			return err
		}
		if !th.Mine() || th.Tid() == 0 {
			return fmt.Errorf("claimed thread %d not the caller's", th.Tid())
		}
		if err := affinity([]int{c}, "after Claim"); err != nil {
			return err
		}
		// Release on another goroutine (a backend closed elsewhere): the
		// claimed thread gets its affinity back all the same; the claimed
		// goroutine stays locked to it.
		if err := onThread(func() error {
			if th.Mine() {
				return fmt.Errorf("Mine on another goroutine")
			}
			return th.Release()
		}); err != nil {
			return err
		}
		if err := affinity(cpus, "after Release on another goroutine"); err != nil {
			return err
		}
		if !th.Mine() {
			return fmt.Errorf("the claimed goroutine left its thread")
		}
		if err := th.Release(); err != nil { // on the claimed one: unlocks
			return err
		}
		if err := affinity(cpus, "after Release"); err != nil {
			return err
		}
		for _, lock := range []bool{false, true} {
			th, err := Claim(nil, lock)
			if err != nil {
				return err
			}
			if th.Mine() != lock {
				return fmt.Errorf("Claim(nil, %v): claimed a thread: %v", lock, th.Mine())
			}
			if err := th.Release(); err != nil {
				return err
			}
			if err := affinity(cpus, fmt.Sprintf("after Claim(nil, %v)", lock)); err != nil {
				return err
			}
		}
		if _, err := Claim([]int{cpus[len(cpus)-1] + 1}, true); !errors.Is(err, ErrNotAllowed) {
			return fmt.Errorf("Claim of a CPU outside the set: %v, want ErrNotAllowed", err)
		}
		if err := affinity(cpus, "after a refused Claim"); err != nil {
			return err
		}
		// A thread the caller narrowed (not pinned to c): Release gives
		// back the caller's affinity, not the process's whole set.
		if len(cpus) >= 2 {
			var narrow unix.CPUSet
			narrow.Set(cpus[0])
			if err := unix.SchedSetaffinity(0, &narrow); err != nil {
				return err
			}
			th, err := Claim([]int{c}, false)
			if err != nil {
				return err
			}
			if err := affinity([]int{c}, "after Claim of a narrowed thread"); err != nil {
				return err
			}
			if err := th.Release(); err != nil {
				return err
			}
			if err := affinity([]int{cpus[0]}, "the caller's narrowed affinity after Release"); err != nil {
				return err
			}
			if err := unix.SchedSetaffinity(0, &allowed); err != nil {
				return err
			}
		}
		// Pinned by the caller: Release leaves the pin.
		if err := Pin(c); err != nil {
			return err
		}
		defer Unpin()
		if th, err = Claim([]int{c}, false); err != nil {
			return err
		}
		if err := th.Release(); err != nil {
			return err
		}
		return affinity([]int{c}, "the caller's pin after Release")
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFormatList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, "none"},
		{[]int{0}, "0"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 1, 2, 3, 6, 8, 9}, "0-3,6,8-9"},
		{[]int{5, 7, 9}, "5,7,9"},
	} {
		if got := FormatList(tc.in); got != tc.want {
			t.Errorf("FormatList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, "0"},
		{[]int{0}, "1"},
		{[]int{0, 1}, "3"},
		{[]int{4}, "10"},
		{[]int{31}, "80000000"},
		{[]int{32}, "1,00000000"},
		{[]int{0, 33, 64}, "1,00000002,00000001"},
	} {
		got := FormatMask(tc.in)
		if got != tc.want {
			t.Errorf("FormatMask(%v) = %q, want %q", tc.in, got, tc.want)
		}
		back, err := ParseMask(got + "\n")
		if err != nil || !slices.Equal(back, tc.in) {
			t.Errorf("ParseMask(%q) = %v, %v; want %v", got, back, err, tc.in)
		}
	}
	// What the kernel prints: zero-padded words.
	for in, want := range map[string][]int{
		"00000003\n":          {0, 1},
		"00000000,00000002":   {1},
		"00000000,00000000\n": nil,
	} {
		if got, err := ParseMask(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseMask(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "\n", "g", "1,", ",1", "123456789", "1,,2", "-1", "+1", "0x1"} {
		if got, err := ParseMask(bad); err == nil {
			t.Errorf("ParseMask(%q) = %v, want an error", bad, got)
		}
	}
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"0", "3", "00000003\n", "1,00000000", "ffffffff,ffffffff", "g", ",", "1,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseMask(s)
		if err != nil {
			return
		}
		if !slices.IsSorted(cpus) {
			t.Fatalf("ParseMask(%q) = %v, not ascending", s, cpus)
		}
		back, err := ParseMask(FormatMask(cpus))
		if err != nil || !slices.Equal(back, cpus) {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, cpus, FormatMask(cpus), back, err)
		}
	})
}
