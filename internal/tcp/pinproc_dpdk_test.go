//go:build dpdk

package tcp

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
)

// TestDPDKPinsProcess: with Config.CPUs, tcp-dpdk binds the process's
// threads to CPUs[0] while it is open (netstack's goroutines must run on
// the poller's CPU), and Close gives every thread its affinity back (the
// allowed CPUs to those made meanwhile). 100 records go there and back,
// polling (DPDK cannot Wait).
func TestDPDKPinsProcess(t *testing.T) {
	const driver = "net_af_xdp"
	p := dpdkTCPPrepare(t, driver)
	pinsProcess(t, p, func(cpus []int) (dgramio.Backend, error) {
		return openTCPDPDK(t, p.A, driver, dgramio.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
			Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000, CPUs: cpus})
	})
	peertest.Clean(t, p.A)
}

// TestDPDKNativePinsPoller: with Config.CPUs, tcp-dpdk on the native engine
// pins the calling thread to CPUs[0] before the EAL starts, as kind dpdk
// does, and no other thread of the process; Close on that thread unpins
// it.
func TestDPDKNativePinsPoller(t *testing.T) {
	const driver = "net_af_xdp"
	p := dpdkTCPPrepare(t, driver)
	pinsPoller(t, p.A, func(cpus []int) (dgramio.Backend, error) {
		dpdkTCPSeq++
		cfg := dgramio.Config{Kind: dgramio.KindTCPDPDK, Role: dgramio.RoleServer, Iface: p.A.Iface,
			LocalIP: p.A.Addr, Port: 5000, CPUs: cpus}
		cfg.TCP.Stack = dgramio.TCPStackNative
		cfg.DPDK.VDev = fmt.Sprintf("%s_t%d,iface=%s", driver, dpdkTCPSeq, p.A.Iface)
		return NewDPDK(cfg)
	})
}
