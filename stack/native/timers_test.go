package native

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestEarliest: a connection's heap key is its first armed deadline of
// the five, whichever that is, and 0 (none) only when none is armed.
func TestEarliest(t *testing.T) {
	var c Conn
	if got := c.earliest(); got != 0 {
		t.Fatalf("no timer armed: earliest %d, want 0", got)
	}
	timers := []*int64{&c.tRTO, &c.tDelack, &c.tPersist, &c.tKeep, &c.tWait}
	for i, p := range timers {
		*p = 100
		for j, q := range timers {
			if j != i {
				*q = 0
			}
		}
		if got := c.earliest(); got != 100 {
			t.Fatalf("timer %d alone at 100: earliest %d", i, got)
		}
		for j, q := range timers { // every other one later, then earlier
			if j != i {
				*q = 200 + int64(j)
			}
		}
		if got := c.earliest(); got != 100 {
			t.Fatalf("timer %d at 100, the rest later: earliest %d", i, got)
		}
		*timers[(i+1)%len(timers)] = 1
		if got := c.earliest(); got != 1 {
			t.Fatalf("timer %d at 1: earliest %d", (i+1)%len(timers), got)
		}
	}
}

// TestWrap: a ring position plus a length within the ring comes back
// into it.
func TestWrap(t *testing.T) {
	for _, n := range []int{1, 7, 4096} {
		for i := 0; i < 2*n; i++ {
			if got := wrap(i, n); got != i%n {
				t.Fatalf("wrap(%d, %d) = %d, want %d", i, n, got, i%n)
			}
		}
	}
}

// TestRingCopies: toRing and fromRing put bytes at every position of a
// ring, wrapping at its end, and take them back in order, for every
// length that fits.
func TestRingCopies(t *testing.T) {
	const n = 7
	for at := 0; at < n; at++ {
		for l := 0; l <= n; l++ {
			ring, p := make([]byte, n), make([]byte, l)
			for i := range p {
				p[i] = byte(i + 1)
			}
			toRing(ring, at, p)
			for i := range p {
				if ring[(at+i)%n] != p[i] {
					t.Fatalf("toRing at %d, %d bytes: ring % x", at, l, ring)
				}
			}
			back := make([]byte, l)
			fromRing(back, ring, at)
			if !bytes.Equal(back, p) {
				t.Fatalf("fromRing at %d, %d bytes: % x, want % x", at, l, back, p)
			}
		}
	}
}

// TestNegativeDelayedACKRefused: a negative DelayedACK would arm a
// deadline before the engine's start, which earliest reads as none; New
// says so instead.
func TestNegativeDelayedACKRefused(t *testing.T) {
	pa, _ := memio.NewPair(memio.Options{})
	defer pa.Close()
	_, err := New(pa, Options{Addr: addrA, DelayedACK: -time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "DelayedACK") {
		t.Fatalf("New with DelayedACK -1ms: %v, want an error naming DelayedACK", err)
	}
}
