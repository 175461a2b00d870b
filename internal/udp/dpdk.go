//go:build dpdk

package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/dpdk"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/framequeue"
	"github.com/dgramio/dgramio/internal/ifaddr"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/ndp"
	"github.com/dgramio/dgramio/internal/queues"
)

// NewDPDK opens the dpdk kind: a Raw over a DPDK port (package
// frameio/dpdk; built only with the build tag dpdk and libdpdk 22.11). The
// device is cfg.DPDK.PCI, cfg.DPDK.VDev, or by default a net_af_xdp vdev on
// cfg.Iface; the EAL starts with the first DPDK backend of the process.
//
// No kernel owns the address on a DPDK port, so package arp answers ARP for
// cfg.LocalIP (without it a peer with an IP stack asks who has our
// address, gets no answer and never sends) and resolves the peers' next
// hops: a peer behind a router resolves to the router, cfg.DPDK.Gateway
// for an address outside LocalIP/cfg.DPDK.PrefixLen when those are set
// (as a PCI device needs: it has no kernel routes), the gateway of the
// kernel's route on a vdev otherwise. Frames to other ports, protocols or
// addresses are counted as filtered.
//
// On a net_af_packet vdev the kernel still sees every frame: it answers ARP
// too (with the same MAC, which is harmless) and, for datagrams to a port
// where it has no socket, sends ICMP port unreachable, which makes a
// connected peer's socket fail with ECONNREFUSED. When cfg.LocalIP is an
// address of the kernel's interface, NewDPDK therefore binds a kernel UDP
// socket to LocalIP and our port that is never read (a receive buffer of the
// kernel's minimum): the kernel drops the datagrams it sees into it instead
// of answering them. Taking the address off the kernel's interface does the
// same more cheaply. On net_af_xdp the PMD's XDP program takes every frame
// of the queue away from the kernel, and none of this arises.
//
// With cfg.CPUs set, NewDPDK pins the calling goroutine's thread to
// CPUs[0] before the EAL starts, so DPDK's main lcore is that CPU (call it
// on the goroutine that will poll); Close unpins it when called on that
// thread. A vdev on an interface must be opened from a thread inside the
// interface's network namespace (testhost.Host.Do); the Backend may then
// be driven from any goroutine. Errors are dpdk.Open's (*dgramio.ConfigError,
// *dgramio.PrivilegeError, errors matching dgramio.ErrNotSupported, DPDK's
// failures with its reason), NewRaw's, or a failed ARP resolution of a
// destination. Everything is undone on error.
func NewDPDK(cfg dgramio.Config) (dgramio.Backend, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindDPDK)
	if err != nil {
		return nil, err
	}
	// Set-up undoes itself, last step first, on every error path.
	var undo setup
	defer undo.undo()
	th, err := undo.claim(cfg.CPUs)
	if err != nil {
		return nil, err
	}
	dp, err := dpdk.Open(dpdk.OptionsFrom(cfg))
	if err != nil {
		return nil, err
	}
	info := dp.Info()
	port, mode, err := framequeue.Capture(dp, cfg.Pcap, "dpdk "+info.Driver)
	if err != nil {
		dp.Close()
		return nil, err
	}
	ownPort := true // until NewRaw owns it
	undo = append(undo, func() {
		if ownPort {
			port.Close()
		}
	})
	name := info.Iface
	if name == "" {
		name = info.Name
	}
	var sink *net.UDPConn
	if info.Driver == "net_af_packet" && info.Iface != "" {
		owns, err := ifaddr.KernelHas(info.Iface, cfg.LocalIP)
		if err != nil {
			return nil, err
		}
		if owns {
			sink, err = openSink(cfg)
			if err != nil {
				return nil, err
			}
			undo = append(undo, func() { sink.Close() })
			mode += " (kernel sink socket)"
		}
	}
	nbARP, nbNDP, nbClose, err := dpdkNeighbours(port, cfg, name, info.Iface)
	if err != nil {
		return nil, err
	}
	undo = append(undo, nbClose)
	nl, hop, err := dpdkNextHop(cfg, info.Iface)
	if err != nil {
		return nil, err
	}
	if nl != nil {
		undo = append(undo, nl.Close)
	}
	opts := RawOptions{
		Mode:    mode,
		ARP:     nbARP,
		NDP:     nbNDP,
		NextHop: hop,
		OnClose: func() error {
			var errs []error
			nbClose()
			if sink != nil {
				errs = append(errs, sink.Close())
			}
			if nl != nil {
				nl.Close()
			}
			// Only on the claimed thread: Close may come from another
			// goroutine, which must not be touched.
			errs = append(errs, th.Release())
			return errors.Join(errs...)
		},
	}
	ownPort = false // NewRaw closes the port itself on error
	r, err := NewRaw(cfg, port, opts)
	if err != nil {
		return nil, noRouteHint(err, hop)
	}
	undo = nil
	return r, nil
}

// dpdkNeighbours returns the handler that owns neighbour resolution on a
// DPDK port for cfg: package arp for IPv4, package ndp for IPv6 (which
// answers solicitations for LocalIP and our link-local address). On a
// vdev (iface set) the ndp handler first consults the kernel's IPv6
// neighbour table of the interface, through a netlink handle that close
// releases (close is never nil).
func dpdkNeighbours(port frameio.FrameIO, cfg dgramio.Config, name, iface string) (*arp.Handler, *ndp.Handler, func(), error) {
	if !cfg.IPv6() {
		h, err := arp.New(port, arp.Config{MAC: port.MAC(), Addr: cfg.LocalIP, Iface: name})
		return h, nil, func() {}, err
	}
	nc := ndp.Config{MAC: port.MAC(), Addr: cfg.LocalIP, Iface: name}
	closeFn := func() {}
	if iface != "" {
		if ifc, err := net.InterfaceByName(iface); err == nil {
			if nl, err := netlink.NewHandle(unix.NETLINK_ROUTE); err == nil {
				var once sync.Once
				var mu sync.Mutex
				closeFn = func() { once.Do(func() { mu.Lock(); nl.Close(); nl = nil; mu.Unlock() }) }
				nc.Kernel = func(addr netip.Addr) ([6]byte, bool) {
					mu.Lock()
					defer mu.Unlock()
					if nl == nil {
						return [6]byte{}, false
					}
					return kernelNeigh(nl, ifc.Index, addr)
				}
			}
		}
	}
	h, err := ndp.New(port, nc)
	if err != nil {
		closeFn()
	}
	return nil, h, closeFn, err
}

// dpdkNextHop returns the RawOptions.NextHop of a DPDK port: from
// cfg.DPDK.PrefixLen and Gateway when set (gatewayNextHop), else on a vdev
// (iface set) the kernel's routes of the interface through a netlink
// handle the caller closes, else nil (every address on the link; Validate
// refused an off-link Dest).
func dpdkNextHop(cfg dgramio.Config, iface string) (*netlink.Handle, func(netip.Addr) netip.Addr, error) {
	if hop := gatewayNextHop(cfg); hop != nil || iface == "" {
		return nil, hop, nil
	}
	return routeLookup(iface)
}

// openSink binds the kernel UDP socket that keeps the kernel from
// answering our datagrams with ICMP port unreachable (see NewDPDK). It is
// never read; its receive buffer is the kernel's minimum.
func openSink(cfg dgramio.Config) (*net.UDPConn, error) {
	port := cfg.Port
	if cfg.Role == dgramio.RoleClient && cfg.LocalPort != 0 {
		port = cfg.LocalPort
	}
	network := "udp4"
	if cfg.IPv6() {
		network = "udp6"
	}
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.LocalIP, port)))
	if err != nil {
		return nil, fmt.Errorf("udp: dpdk: kernel sink socket on %v:%d (net_af_packet with the address on the kernel's interface; take the address off, or free the port): %w", cfg.LocalIP, port, err)
	}
	_ = c.SetReadBuffer(1) // the kernel rounds up to its minimum
	return c, nil
}

// dpdkGroup is kind dpdk with several queues.
type dpdkGroup struct {
	*queues.DPDK // the port, its queues' slots, BaseMode, AppendCounters

	nl  *netlink.Handle
	hop func(netip.Addr) netip.Addr // the queues' RawOptions.NextHop
}

var _ dgramio.QueueGroup = (*dpdkGroup)(nil)

// NewDPDKGroup opens kind dpdk with cfg.Queues queues: one DPDK port
// configured with Queues RX/TX queue pairs, each with its own mempool
// (dpdk.Options.Queues), and RSS over IPv4, TCP and UDP where the device
// offers it; on the default net_af_xdp vdev (queue_count=Queues) the
// kernel's steering of the interface's queues decides (on veth: the
// sender's CPU, through XPS). OpenQueue(q) runs a Raw over queue q, with an
// ARP handler of its own for cfg.LocalIP, on the calling goroutine (pinned
// to CPUs[q] when set), which receives and transmits on queue q only. A
// client's queue q sends from port LocalPort+q (LocalPort defaults to
// Port). The EAL starts on the thread that calls NewDPDKGroup (its main
// lcore is that thread's CPU), which must be inside the interface's network
// namespace for a vdev. Use net_af_xdp or a PCI device: the net_af_packet
// sink socket of NewDPDK is not made here.
func NewDPDKGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	cfg, err := kindcfg.PrepareGroup(cfg, dgramio.KindDPDK)
	if err != nil {
		return nil, err
	}
	if cfg.Role == dgramio.RoleClient && int(cfg.LocalPort)+cfg.Queues > 65536 {
		return nil, &dgramio.ConfigError{Field: "LocalPort", Value: cfg.LocalPort, Reason: fmt.Sprintf("queue q sends from LocalPort+q: %d queues from %d run past 65535", cfg.Queues, cfg.LocalPort)}
	}
	d, err := queues.OpenDPDK(cfg)
	if err != nil {
		return nil, err
	}
	g := &dpdkGroup{DPDK: d}
	if g.nl, g.hop, err = dpdkNextHop(cfg, g.Port.Info().Iface); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// OpenQueue opens queue q. See dgramio.QueueGroup.
func (g *dpdkGroup) OpenQueue(q int) (dgramio.Backend, error) {
	dp, qc, err := g.Take("udp: dpdk", q)
	if err != nil {
		return nil, err
	}
	if g.Cfg.Role == dgramio.RoleClient {
		qc.LocalPort = g.Cfg.LocalPort + uint16(q)
	}
	info := dp.Info()
	port, th, mode, err := framequeue.ClaimQueue(dp, qc.CPUs, qc.Pcap, "dpdk "+info.Driver)
	if err != nil {
		return nil, err
	}
	name := info.Iface
	if name == "" {
		name = info.Name
	}
	nbARP, nbNDP, nbClose, err := dpdkNeighbours(port, qc, name, info.Iface)
	if err != nil {
		port.Close()
		th.Release()
		return nil, err
	}
	base := mode
	mode += fmt.Sprintf(", queue %d of %d", q, g.Cfg.Queues)
	// NewRaw closes the port itself on error.
	r, err := NewRaw(qc, port, RawOptions{Mode: mode, ARP: nbARP, NDP: nbNDP, NextHop: g.hop,
		OnClose: func() error { nbClose(); return th.Release() }})
	if err != nil {
		nbClose()
		th.Release()
		return nil, noRouteHint(err, g.hop)
	}
	g.Slots.Opened(q, base)
	return r, nil
}

// Mode says how frames reach the queues.
func (g *dpdkGroup) Mode() string { return DPDKSteering(g.Port.Info()) }

// DPDKSteering describes how a DPDK port spreads flows over its queues:
// "rss" with the hash types, or what feeds a vdev's queues.
func DPDKSteering(info dpdk.Info) string {
	if info.RSS != 0 {
		return fmt.Sprintf("rss %#x", info.RSS)
	}
	switch {
	case strings.HasPrefix(info.Driver, "net_af_xdp"):
		return "no rss: the kernel steers the interface's queues"
	case strings.HasPrefix(info.Driver, "net_af_packet"):
		return "no rss: PACKET_FANOUT hash over the queues' sockets"
	}
	return "no rss"
}

// Close closes the queues never opened; the device goes with the last
// queue closed. Close the opened queues' backends first.
func (g *dpdkGroup) Close() error {
	err := g.DPDK.Close()
	if g.nl != nil {
		g.nl.Close()
		g.nl = nil
	}
	return err
}
