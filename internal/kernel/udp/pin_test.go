package udp

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

// TestPinning: with Config.CPUs, New pins the calling goroutine's thread
// and Close on that goroutine unpins it; a caller's own pin stays.
func TestPinning(t *testing.T) {
	socktest.Pinning(t, func(cpus []int) (dgramio.Backend, error) {
		return New(dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(lo, socktest.FreePort(t, unix.SOCK_DGRAM))}, CPUs: cpus})
	})
}
