package testutil

import (
	"testing"
	"time"
)

func TestEventually(t *testing.T) {
	calls := 0
	if !Eventually(time.Minute, func() bool { calls++; return calls == 3 }) {
		t.Fatal("a condition that holds at the third call: false")
	}
	if calls != 3 {
		t.Errorf("cond called %d times after it held at the third, want 3", calls)
	}
	calls = 0
	if Eventually(10*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("a condition that never holds: true")
	}
	if calls < 2 {
		t.Errorf("cond called %d times in the wait, want it called again after the first", calls)
	}
}
