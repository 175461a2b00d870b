// Package monotime reads the monotonic clock in fewer nanoseconds than
// time.Since, for a poll loop that reads it on every call.
//
// Where the CPU's time-stamp counter is the kernel's clocksource (amd64,
// /sys/devices/system/clocksource/clocksource0/current_clocksource says
// "tsc": the kernel found the counter invariant and in step on every CPU),
// a Clock reads the counter (RDTSC, about a third of a vDSO
// clock_gettime, and no shared page to miss in the cache) and scales it by
// a rate it measures against time.Since, read between two counter
// readings (a pair whose readings lie far apart, the goroutine descheduled
// in between, is not measured by). It re-anchors on time.Since once
// a millisecond of counts or 4096 readings have passed, and whenever the
// counter went back or leapt (a migrated virtual machine), so that a
// reading is never more than that interpolation away from the kernel's
// clock, and a counter that stopped cannot hold the clock still.
// Anywhere else a Clock is time.Since.
package monotime

import (
	"math/bits"
	"os"
	"strings"
	"sync"
	"time"
)

// Clock is a monotonic clock read as the time since its base. A Clock is
// not safe for concurrent use: it belongs to one poll loop.
type Clock struct {
	// What Since reads, first: one cache line (the padding at the end
	// makes a Clock two whole lines, so that an allocated one starts a
	// line).
	fast bool   // the counter is usable
	a    uint64 // the counter at the anchor
	n    int64  // the clock at the anchor, ns since base
	mult uint64 // ns per count, 32.32 fixed point; 0 until measured
	span uint64 // counts past the anchor after which Since re-anchors
	left int    // readings until Since re-anchors whatever the counter says
	last int64  // the latest reading, which the next never falls below

	base time.Time
	ca   uint64 // the counter where the rate is measured from
	cn   int64  // and the clock there
	ct   bool   // that pair was tight (see pair)
	_    [24]byte
}

// Rate measurement: over at least calibrateMin, from an origin that moves
// up to the latest anchor once it is calibrateMax old (so the rate follows
// a counter whose rate changed, after a migration); anchors every
// anchorEvery.
const (
	calibrateMin = 10 * time.Millisecond
	calibrateMax = time.Second
	anchorEvery  = time.Millisecond
)

// anchorReads bounds the readings between anchors, so that a counter that
// stopped (the kernel may give up on it after boot) holds a Clock still
// for that many readings at most, not for ever.
const anchorReads = 4096

// counter reads the time-stamp counter; tests replace it.
var counter = readCounter

// usable reports, once per process, whether the counter can stand in for
// the kernel's clock.
var usable = sync.OnceValue(func() bool {
	if !haveCounter {
		return false
	}
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
})

// New returns a Clock whose readings are the time since base.
func New(base time.Time) *Clock {
	c := &Clock{base: base, fast: usable()}
	if c.fast {
		c.anchor()
	}
	return c
}

// Fast reports whether c reads the counter (false: it is time.Since).
func (c *Clock) Fast() bool { return c.fast }

// Since returns the time since c's base. Readings never go back.
func (c *Clock) Since() time.Duration {
	if !c.fast {
		return time.Since(c.base)
	}
	d := counter() - c.a // a counter that went back wraps: far past span
	c.left--
	if c.mult == 0 || d >= c.span || c.left <= 0 {
		return time.Duration(c.anchor())
	}
	hi, lo := bits.Mul64(d, c.mult)
	v := c.n + int64(hi<<32|lo>>32)
	if v < c.last {
		v = c.last
	}
	c.last = v
	return time.Duration(v)
}

// pairMax is the most counts two counter readings around one read of the
// kernel's clock may lie apart for the pair to measure the rate (tens of
// microseconds at the counter's gigahertz rates): wider, the goroutine
// was likely descheduled between the reads, and the pair is off by as
// long.
const pairMax = 1 << 16

// pair reads the kernel's clock between two readings of the counter and
// returns it with the counter's midpoint, trying again (three times at
// most) when the readings lie more than pairMax apart; tight reports
// whether they did not.
func (c *Clock) pair() (t uint64, n int64, tight bool) {
	for try := 0; ; try++ {
		t1 := counter()
		n = int64(time.Since(c.base))
		t2 := counter()
		if t2 >= t1 && t2-t1 <= pairMax {
			return t1 + (t2-t1)/2, n, true
		}
		if try == 3 {
			return t2, n, false
		}
	}
}

// anchor reads the kernel's clock beside the counter, measures the rate
// when the origin is far enough back (and the pair tight), and returns
// the reading.
func (c *Clock) anchor() int64 {
	t, n, tight := c.pair()
	c.a, c.n, c.left = t, n, anchorReads
	switch dn := n - c.cn; {
	case c.ca == 0 || t < c.ca || dn < 0:
		// The first anchor, or the counter (or the clock) went back:
		// measure afresh from here.
		c.ca, c.cn, c.ct, c.mult = t, n, tight, 0
	case !tight:
		// Too loose to measure by.
	case !c.ct:
		// The origin was loose: measure from this pair instead.
		c.ca, c.cn, c.ct = t, n, true
	case dn >= int64(calibrateMin) && t > c.ca:
		// ns per count in 32.32: dn << 32 / (t - ca); dn < 2^63 and
		// t - ca >= 1, so the quotient of the 96-bit dividend fits
		// unless counts are slower than ns by 2^32.
		dc := t - c.ca
		hi, lo := uint64(dn)>>32, uint64(dn)<<32
		if hi < dc {
			c.mult, _ = bits.Div64(hi, lo, dc)
			c.span = spanOf(c.mult)
		}
		if dn >= int64(calibrateMax) {
			c.ca, c.cn = t, n
		}
	}
	if c.mult == 0 || c.span == 0 {
		c.mult = 0 // until measured, every reading anchors
	}
	if n < c.last {
		n = c.last
	}
	c.last = n
	return n
}

// spanOf is the counts in anchorEvery at mult ns per count (32.32).
func spanOf(mult uint64) uint64 {
	if mult == 0 {
		return 0
	}
	hi, lo := uint64(anchorEvery)>>32, uint64(anchorEvery)<<32
	if hi >= mult {
		return 0
	}
	s, _ := bits.Div64(hi, lo, mult)
	return s
}
