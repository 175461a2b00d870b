package monotime

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSinceFollowsTheClock reads a Clock beside time.Since for 60 ms
// (past the rate's measurement): every reading lies between the kernel
// clock's readings just before and just after it, give or take the
// interpolation's error, and none goes back.
func TestSinceFollowsTheClock(t *testing.T) {
	base := time.Now()
	c := New(base)
	t.Logf("counter in use: %v", c.Fast())
	var prev time.Duration
	const slack = 20 * time.Microsecond
	worst := time.Duration(0)
	for end := base.Add(60 * time.Millisecond); time.Now().Before(end); {
		before := time.Since(base)
		v := c.Since()
		after := time.Since(base)
		if v < prev {
			t.Fatalf("reading %v after %v: the clock went back", v, prev)
		}
		prev = v
		if v < before-slack || v > after+slack {
			t.Fatalf("reading %v outside [%v, %v] by more than %v", v, before, after, slack)
		}
		worst = max(worst, before-v, v-after)
		time.Sleep(time.Duration(v%7) * 10 * time.Microsecond) // varied gaps: some within an anchor's span, some past it
	}
	t.Logf("largest distance from the kernel's clock: %v", worst)
	if c.Fast() && c.mult == 0 {
		t.Error("60 ms on: the counter's rate is still unmeasured")
	}
}

// fakeCounter replaces the counter for one test: it returns *v.
func fakeCounter(t *testing.T, v *uint64) {
	old := counter
	counter = func() uint64 { return *v }
	t.Cleanup(func() { counter = old })
}

// TestCounterGoesBack: a counter that goes back (another CPU's, a
// migrated machine's) or leaps ahead makes the Clock re-anchor on the
// kernel's clock and measure its rate again; its readings still never go
// back.
func TestCounterGoesBack(t *testing.T) {
	var tsc uint64 = 1 << 40
	fakeCounter(t, &tsc)
	base := time.Now()
	c := &Clock{base: base, fast: true}
	c.anchor()
	// A counter at 1 count per ns, advanced with the kernel's clock.
	start := tsc
	step := func() time.Duration {
		tsc = start + uint64(time.Since(base))
		return c.Since()
	}
	for time.Since(base) < 2*calibrateMin {
		step()
	}
	if c.mult == 0 {
		t.Fatal("no rate after twice calibrateMin")
	}
	if got := float64(c.mult) / (1 << 32); got < 0.99 || got > 1.01 {
		t.Fatalf("rate %.4f ns per count, want 1", got)
	}
	before := c.Since()
	tsc -= 1 << 30 // back by a second of counts
	v := c.Since()
	if v < before {
		t.Fatalf("reading %v after %v when the counter went back", v, before)
	}
	if c.mult != 0 {
		t.Error("the rate survived a counter that went back")
	}
	if k := time.Since(base); v > k+time.Millisecond {
		t.Errorf("reading %v, the kernel's clock %v", v, k)
	}
	tsc += 1 << 50 // far ahead
	v = c.Since()
	if k := time.Since(base); v > k+time.Millisecond {
		t.Errorf("after a leap: reading %v, the kernel's clock %v", v, k)
	}
}

// TestNotFast: where the counter is unusable a Clock is time.Since.
func TestNotFast(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	c := &Clock{base: base}
	if v := c.Since(); v < time.Hour || v > time.Hour+time.Minute {
		t.Fatalf("Since %v, want an hour and a little", v)
	}
}

func BenchmarkSince(b *testing.B) {
	c := New(time.Now())
	for time.Since(c.base) < 2*calibrateMin {
		c.Since()
	}
	b.Run("monotime", func(b *testing.B) {
		var s time.Duration
		for b.Loop() {
			s += c.Since()
		}
		_ = s
	})
	b.Run("time.Since", func(b *testing.B) {
		var s time.Duration
		for b.Loop() {
			s += time.Since(c.base)
		}
		_ = s
	})
}

// TestLoosePairs: a pair of counter readings around the kernel clock's
// read that lie far apart (the goroutine descheduled between them) is not
// measured by: with one counter reading in five late, each rate the Clock
// measures over 40 ms of readings is right.
func TestLoosePairs(t *testing.T) {
	start := uint64(1 << 40)
	base := time.Now()
	r := rand.New(rand.NewPCG(3, 4))
	lastLate := false
	old := counter
	counter = func() uint64 {
		v := start + uint64(time.Since(base)) // one count per ns
		// A reading 6.5 ms late: the goroutine slept just before it, after
		// the clock read before it (never two in a row: a sleep before
		// the clock read too would delay all three readings alike).
		if late := !lastLate && r.IntN(5) == 0; late {
			v += 100 * pairMax
			lastLate = true
		} else {
			lastLate = false
		}
		return v
	}
	t.Cleanup(func() { counter = old })
	c := &Clock{base: base, fast: true}
	c.anchor()
	measured := 0
	for time.Since(base) < 4*calibrateMin {
		c.Since()
		if c.mult == 0 {
			continue
		}
		measured++
		if got := float64(c.mult) / (1 << 32); got < 0.99 || got > 1.01 {
			t.Fatalf("rate %.4f ns per count, want 1: a loose pair was measured by", got)
		}
	}
	if measured == 0 {
		t.Fatal("no rate measured")
	}
}

// TestCounterStops: a counter that stops (one the kernel gave up on after
// boot) holds the Clock still for anchorReads readings at most: it goes
// on following the kernel's clock.
func TestCounterStops(t *testing.T) {
	start := uint64(1 << 40)
	base := time.Now()
	stopped := false
	var at uint64
	old := counter
	counter = func() uint64 {
		if stopped {
			return at
		}
		return start + uint64(time.Since(base))
	}
	t.Cleanup(func() { counter = old })
	c := &Clock{base: base, fast: true}
	c.anchor()
	for time.Since(base) < 2*calibrateMin {
		c.Since()
	}
	if c.mult == 0 {
		t.Fatal("no rate measured")
	}
	at, stopped = counter(), true
	before := c.Since()
	time.Sleep(5 * time.Millisecond)
	var v time.Duration
	for range anchorReads + 1 {
		v = c.Since()
	}
	if v < before+5*time.Millisecond {
		t.Fatalf("reading %v, %v before a 5 ms sleep: the stopped counter held the clock", v, before)
	}
}
