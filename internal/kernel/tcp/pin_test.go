package tcp

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

// TestPinning: with Config.CPUs, New pins the calling goroutine's thread
// and Close on that goroutine unpins it; a caller's own pin stays.
func TestPinning(t *testing.T) {
	socktest.Pinning(t, func(cpus []int) (dgramio.Backend, error) {
		return New(dgramio.Config{Kind: dgramio.KindTCP, Role: dgramio.RoleServer, LocalIP: lo, Port: socktest.FreePort(t, unix.SOCK_STREAM), CPUs: cpus})
	})
}
