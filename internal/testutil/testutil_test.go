package testutil

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
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

// fakeTB records what a helper did to the test; Skip and Fatal end the
// goroutine, as testing's do.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skip(...any)           { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Fatal(...any)          { f.failed = true; runtime.Goexit() }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true; runtime.Goexit() }

// on runs fn with f on a goroutine of its own and waits for it.
func (f *fakeTB) on(fn func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
}

// TestSkipIfUnavailable: a privilege or a feature this host lacks skips
// (fails when CI=true), another error fails, nil does nothing.
func TestSkipIfUnavailable(t *testing.T) {
	for _, c := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"nil", nil, false},
		{"privilege", &dgramio.PrivilegeError{Op: "make a namespace", Capability: "CAP_SYS_ADMIN", Err: os.ErrPermission}, true},
		{"not supported", dgramio.NotSupported("a feature", "9.9", "", nil), true},
		{"other", errors.New("broken"), false},
	} {
		f := &fakeTB{}
		f.on(func(t testing.TB) { SkipIfUnavailable(t, c.err) })
		wantSkip := c.unavailable && !InCI()
		wantFail := c.err != nil && !wantSkip
		if f.skipped != wantSkip || f.failed != wantFail {
			t.Errorf("%s: skipped %v failed %v, want %v %v (CI=%v)", c.name, f.skipped, f.failed, wantSkip, wantFail, InCI())
		}
	}
}
