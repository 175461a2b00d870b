package testutil

import (
	"runtime"
	"time"
)

// Eventually calls cond, yielding and sleeping a couple of milliseconds
// between calls, until it holds or d has passed, and reports whether it
// held. It is for waits with a generous deadline: it never asserts that
// something was fast.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
		time.Sleep(2 * time.Millisecond)
	}
	return true
}
