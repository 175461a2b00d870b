//go:build linux

package uring

import (
	"runtime"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/kernel/iouring"
)

// A server that restarts in place: New on the same port right after
// Close succeeds, 100 times in a row, with Close on the ring's own
// goroutine and on another one. Close returns once the kernel has let go
// of the socket (the ring's registered file held it until the ring's
// asynchronous teardown, 20-30 ms later, and New failed with EADDRINUSE).
func TestCloseReleasesPort(t *testing.T) { socktest.ForFamilies(t, testCloseReleasesPort) }

func testCloseReleasesPort(t *testing.T, fam socktest.Family) {
	if err := iouring.Check(); err != nil {
		testutil.SkipIfNotSupported(t, err)
	}
	loopback := fam.Loopback
	port := freePort(t)
	for _, elsewhere := range []bool{false, true} {
		for i := range 100 {
			runtime.LockOSThread() // New locks too; Close on this thread undoes it
			b, err := New(dgramio.Config{Kind: dgramio.KindURing, Role: dgramio.RoleServer, LocalIP: loopback, Port: port})
			if err != nil {
				testutil.SkipIfNotSupported(t, err)
				t.Fatalf("close elsewhere %v, round %d: New on the port just closed: %v", elsewhere, i, err)
			}
			if elsewhere {
				done := make(chan error)
				go func() { done <- b.Close() }()
				err = <-done
			} else {
				err = b.Close()
			}
			runtime.UnlockOSThread()
			if err != nil {
				t.Fatalf("close elsewhere %v, round %d: %v", elsewhere, i, err)
			}
		}
	}
}
