package udp

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/kernel/sock/socktest"
)

// TestPinsToCPU: with Config.CPUs, New pins the calling goroutine's thread
// and Close on that goroutine unpins it.
func TestPinsToCPU(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	want := allowed[len(allowed)-1]
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			b, err := New(core.Config{Dests: []netip.Addr{lo}, Port: socktest.FreePort(t, unix.SOCK_DGRAM), CPUs: []int{want}})
			if err != nil {
				return err
			}
			cur, err := cpu.Current()
			if err != nil || !slices.Equal(cur, []int{want}) {
				b.Close()
				return fmt.Errorf("after New with CPUs [%d]: running on %v (%v)", want, cur, err)
			}
			if err := b.Close(); err != nil {
				return err
			}
			if cur, err := cpu.Current(); err != nil || !slices.Equal(cur, allowed) {
				return fmt.Errorf("after Close: running on %v, want %v (%v)", cur, allowed, err)
			}
			return nil
		}()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
