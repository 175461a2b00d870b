//go:build dpdk

package tcp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/dpdk"
	"github.com/dgramio/dgramio/internal/framequeue"
	"github.com/dgramio/dgramio/internal/ifaddr"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/queues"
	"github.com/dgramio/dgramio/internal/stack"
)

// NewDPDK opens the tcp-dpdk kind: the userspace TCP (NewOverFrameIO: the
// native engine, or gVisor netstack with Config.TCP.Stack) over a DPDK port (package frameio/dpdk; built only with the build
// tag dpdk and libdpdk 22.11). The device is cfg.DPDK.PCI, cfg.DPDK.VDev, or
// by default a net_af_xdp vdev on cfg.Iface; the EAL starts with the first
// DPDK backend of the process. The engine answers ARP for cfg.LocalIP
// itself; on a PCI port the native engine reaches off-link peers through
// cfg.DPDK.Gateway (with cfg.DPDK.PrefixLen).
//
// On a net_af_packet vdev the kernel sees every segment too. If cfg.LocalIP
// is also an address of the kernel's interface, the kernel answers our
// peers' segments with RSTs (no kernel socket has the connection) and kills
// every connection; NewDPDK therefore refuses that with a *dgramio.ConfigError
// on LocalIP: take the address off the kernel's interface (ip addr del; the
// kernel then drops what is not its own, and the engine answers ARP), or use
// net_af_xdp, whose XDP program takes every frame of the queue away from the
// kernel.
//
// Config.CPUs pins the poller (native) or the whole process (netstack) to
// CPUs[0] until Close, as NewXDP says. The pin comes first, so when this
// backend starts the EAL, DPDK's main lcore is that CPU too.
//
// A vdev on an interface must be opened from a thread inside the
// interface's network namespace (testhost.Host.Do). DPDK cannot sleep on a
// vdev's queue: Wait returns an error matching dgramio.ErrNotSupported, and the
// application polls. Errors are dpdk.Open's, NewOverFrameIO's (a connect
// that times out, a bad tuning) or the ConfigError above; everything is
// undone on error.
func NewDPDK(cfg dgramio.Config) (dgramio.Backend, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindTCPDPDK)
	if err != nil {
		return nil, err
	}
	unpin, err := claimCPU(cfg)
	if err != nil {
		return nil, err
	}
	port, err := dpdk.Open(dpdk.OptionsFrom(cfg))
	if err != nil {
		unpin()
		return nil, err
	}
	info := port.Info()
	if err := CheckDPDKAddr(info, cfg.LocalIP); err != nil {
		port.Close()
		unpin()
		return nil, err
	}
	fio, mode, err := framequeue.Capture(port, cfg.Pcap, engineName(cfg)+" over dpdk "+info.Driver)
	if err != nil {
		port.Close()
		unpin()
		return nil, err
	}
	opts := Options{
		Mode:      mode,
		PrefixLen: cfg.DPDK.PrefixLen,
		Gateway:   cfg.DPDK.Gateway,
		Close: func() error {
			return errors.Join(fio.Close(), unpin())
		},
	}
	// NewOverFrameIO releases the port (opts.Close) itself on error.
	b, err := NewOverFrameIO(cfg, fio, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// CheckDPDKAddr refuses, with a *dgramio.ConfigError on LocalIP, a local
// address that the kernel also holds on the interface under a
// net_af_packet vdev: the kernel sees every segment there and answers our
// peers with RSTs. Other devices pass (net_af_xdp takes the frames away
// from the kernel; a PCI device has no kernel interface).
func CheckDPDKAddr(info dpdk.Info, local netip.Addr) error {
	if info.Driver != "net_af_packet" || info.Iface == "" {
		return nil
	}
	owns, err := ifaddr.KernelHas(info.Iface, local)
	if err != nil {
		return fmt.Errorf("tcp: dpdk: %w", err)
	}
	if owns {
		return &dgramio.ConfigError{Field: "LocalIP", Value: local, Reason: fmt.Sprintf(
			"on net_af_packet the kernel sees every segment, and with %v also on its interface %s it answers our peers with RSTs: take the address off the kernel's interface, or use net_af_xdp",
			local, info.Iface)}
	}
	return nil
}

// dpdkGroup is kind tcp-dpdk with several queues.
type dpdkGroup struct {
	*queues.DPDK // the port, its queues' slots, BaseMode, AppendCounters, Close

	rss stack.RSS // the kernel interface's, under a net_af_xdp vdev
	arp ARPShare  // the queues' engines share ARP replies
}

var _ dgramio.QueueGroup = (*dpdkGroup)(nil)

// NewDPDKGroup opens kind tcp-dpdk with cfg.Queues queues, sharing nothing
// on the data path, as NewXDPGroup does for tcp-xdp: one DPDK port with
// Queues RX/TX queue pairs (dpdk.Options.Queues; RSS where the device
// offers it), and on each queue a netstack of its own (NewOverFrameIO)
// holding cfg.LocalIP, polled by the goroutine that calls OpenQueue(q)
// (pinned to CPUs[q] when set), which is also the only one that sends on
// that queue. A server's queues all listen on cfg.Port; a client queue
// connects from its own share of the ephemeral ports (port % Queues == q),
// and, under a net_af_xdp vdev on an interface with RSS, from those whose
// answers the interface hashes to its queue (stack.SourcePorts with the
// interface's Toeplitz key and table). On a PCI device the port's own RSS
// table is not read: steer each queue's ports with a flow rule, or use
// server queues only. NewXDPGroup's doc says how connections stay on their
// queue on veth (pinned pollers on both ends). The EAL starts on the
// calling thread; a vdev must be opened inside its interface's network
// namespace. DPDK cannot sleep: Wait returns an error matching
// dgramio.ErrNotSupported, and a yielding poller sleeps briefly instead.
func NewDPDKGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	cfg, err := kindcfg.PrepareGroup(cfg, dgramio.KindTCPDPDK)
	if err != nil {
		return nil, err
	}
	d, err := queues.OpenDPDK(cfg)
	if err != nil {
		return nil, err
	}
	g := &dpdkGroup{DPDK: d}
	if err := checkGroup6(cfg); err != nil {
		g.Close()
		return nil, err
	}
	info := g.Port.Info()
	if err := CheckDPDKAddr(info, cfg.LocalIP); err != nil {
		g.Close()
		return nil, err
	}
	if info.Driver == "net_af_xdp" && info.Iface != "" {
		g.rss, _ = stack.ReadRSS(info.Iface) // none on veth: ports by share only
	}
	return g, nil
}

// OpenQueue opens queue q. See dgramio.QueueGroup.
func (g *dpdkGroup) OpenQueue(q int) (dgramio.Backend, error) {
	dp, qc, err := g.Take("tcp: dpdk", q)
	if err != nil {
		return nil, err
	}
	if g.Cfg.LocalPort != 0 {
		p := int(g.Cfg.LocalPort) + q
		if p > 65535 {
			dp.Close()
			return nil, &dgramio.ConfigError{Field: "LocalPort", Value: g.Cfg.LocalPort, Reason: fmt.Sprintf("queue %d would use port %d", q, p)}
		}
		qc.LocalPort = uint16(p)
	}
	fio, th, mode, err := framequeue.ClaimQueue(dp, qc.CPUs, qc.Pcap, engineName(qc)+" over dpdk "+dp.Info().Driver)
	if err != nil {
		return nil, err
	}
	opts := Options{
		Mode:       fmt.Sprintf("%s, queue %d of %d", mode, q, g.Cfg.Queues),
		Close:      func() error { return errors.Join(fio.Close(), th.Release()) },
		OwnerKicks: true,
		ARPShare:   &g.arp,
		PrefixLen:  qc.DPDK.PrefixLen,
		Gateway:    qc.DPDK.Gateway,
	}
	if qc.LocalPort == 0 {
		n, local, rss := g.Cfg.Queues, g.Cfg.LocalIP, g.rss
		opts.SourcePorts = func(peer netip.AddrPort) []uint16 {
			return stack.SourcePorts(rss, local, peer, q, n, q, 64)
		}
	}
	// NewOverFrameIO releases the queue (opts.Close) itself on error.
	b, err := NewOverFrameIO(qc, fio, opts)
	if err != nil {
		return nil, err
	}
	g.Slots.Opened(q, mode)
	return b, nil
}

// Mode says how frames reach the queues and how clients pick ports.
func (g *dpdkGroup) Mode() string {
	info := g.Port.Info()
	m := "one " + engineName(g.Cfg) + " engine per queue, "
	switch {
	case info.RSS != 0:
		m += fmt.Sprintf("rss %#x", info.RSS)
	case len(g.rss.Indir) > 0:
		m += "source ports by the interface's Toeplitz RSS"
	case info.Driver == "net_af_packet":
		m += "PACKET_FANOUT hash over the queues' sockets"
	default:
		m += "no RSS table: queue by the sender's CPU"
	}
	return m
}
