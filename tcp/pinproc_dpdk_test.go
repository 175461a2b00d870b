//go:build dpdk

package tcp

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestDPDKPinsProcess: with Config.CPUs, tcp-dpdk binds the process's
// threads to CPUs[0] while it is open (netstack's goroutines must run on
// the poller's CPU), and Close gives every thread its affinity back (the
// allowed CPUs to those made meanwhile).
func TestDPDKPinsProcess(t *testing.T) {
	testutil.RequireRoot(t)
	allowed, err := cpu.Allowed()
	if err != nil {
		testutil.Skip(t, "cannot read this process's CPU affinity: "+err.Error())
	}
	c := allowed[len(allowed)-1]
	const driver = "net_af_xdp"
	p := dpdkTCPPrepare(t, driver)
	ln, wg := kernelEcho(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	defer ln.Close()
	// DPDK's own threads, from an EAL started by an earlier test, may have
	// an affinity of their own: each gets back what it had.
	before := threadCPUs(t)
	b, err := openTCPDPDK(t, p.A, driver, core.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
		Dests: []netip.Addr{p.B.Addr}, Port: 5000, CPUs: []int{c}})
	testutil.SkipIfNotSupported(t, err)
	// 100 records there and back, polling (DPDK cannot Wait).
	roundTrips(t, b, 100, 100, 16)
	for tid, l := range threadCPUs(t) {
		if !slices.Equal(l, []int{c}) {
			t.Errorf("while open: thread %d on %v, want [%d]", tid, l, c)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for tid, l := range threadCPUs(t) {
		want, ok := before[tid]
		if !ok {
			want = allowed // made while the backend was open
		}
		if !slices.Equal(l, want) {
			t.Errorf("after Close: thread %d on %v, want %v", tid, l, want)
		}
	}
	ln.Close()
	wg.Wait()
	dpdkTCPClean(t, p.A)
}
