//go:build dpdk

package tcp

import (
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/tcp/internal/peertest"
)

// TestDPDKPinsProcess: with Config.CPUs, tcp-dpdk binds the process's
// threads to CPUs[0] while it is open (netstack's goroutines must run on
// the poller's CPU), and Close gives every thread its affinity back (the
// allowed CPUs to those made meanwhile). 100 records go there and back,
// polling (DPDK cannot Wait).
func TestDPDKPinsProcess(t *testing.T) {
	const driver = "net_af_xdp"
	p := dpdkTCPPrepare(t, driver)
	pinsProcess(t, p, func(cpus []int) (core.Backend, error) {
		return openTCPDPDK(t, p.A, driver, core.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
			Dests: []netip.Addr{p.B.Addr}, Port: 5000, CPUs: cpus})
	})
	peertest.Clean(t, p.A)
}
