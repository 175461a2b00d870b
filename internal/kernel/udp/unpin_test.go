//go:build linux

package udp

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

// With Config.CPUs, New pins the calling goroutine's thread; Close from
// another goroutine (a server shut down by its signal handler) gives that
// thread its affinity back, so the pin does not outlive the backend.
func TestCloseElsewhereUnpins(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	c := allowed[len(allowed)-1]
	port := socktest.FreePort(t, unix.SOCK_DGRAM)
	type opened struct {
		b   dgramio.Backend
		tid int
		err error
	}
	got := make(chan opened)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // the poller's thread stays this goroutine's
		defer runtime.UnlockOSThread()
		b, err := New(dgramio.Config{Kind: dgramio.KindUDP, Role: dgramio.RoleServer, LocalIP: netip.MustParseAddr("127.0.0.1"), Port: port, CPUs: []int{c}})
		got <- opened{b, unix.Gettid(), err}
		<-done
	}()
	o := <-got
	defer close(done)
	if o.err != nil {
		t.Fatal(o.err)
	}
	affinity := func() []int {
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(o.tid, &s); err != nil {
			t.Fatal(err)
		}
		var l []int
		for i := 0; i < len(s)*64; i++ {
			if s.IsSet(i) {
				l = append(l, i)
			}
		}
		return l
	}
	if a := affinity(); !slices.Equal(a, []int{c}) {
		t.Fatalf("after New with CPUs [%d]: the poller's thread runs on %v", c, a)
	}
	if err := o.b.Close(); err != nil { // on the test's goroutine, not the poller's
		t.Fatal(err)
	}
	if a := affinity(); !slices.Equal(a, allowed) {
		t.Fatalf("after Close on another goroutine: the poller's thread runs on %v, want %v", a, allowed)
	}
}
