//go:build dpdk

package tcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"


	"github.com/dgramio/dgramio/frameio/dpdk"
	"github.com/dgramio/dgramio/frameio/pcapio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
)

// NewDPDK opens the tcp-dpdk kind: the userspace TCP (NewOverFrameIO, gVisor
// netstack) over a DPDK port (package frameio/dpdk; built only with the build
// tag dpdk and libdpdk 22.11). The device is cfg.DPDK.PCI, cfg.DPDK.VDev, or
// by default a net_af_xdp vdev on cfg.Iface; the EAL starts with the first
// DPDK backend of the process. Netstack answers ARP for cfg.LocalIP itself.
//
// On a net_af_packet vdev the kernel sees every segment too. If cfg.LocalIP
// is also an address of the kernel's interface, the kernel answers our
// peers' segments with RSTs (no kernel socket has the connection) and kills
// every connection; NewDPDK therefore refuses that with a *core.ConfigError
// on LocalIP: take the address off the kernel's interface (ip addr del; the
// kernel then drops what is not its own, and netstack answers ARP), or use
// net_af_xdp, whose XDP program takes every frame of the queue away from the
// kernel.
//
// With cfg.CPUs set, NewDPDK pins the calling goroutine's thread to
// CPUs[0] before the EAL starts, so DPDK's main lcore is that CPU (call it
// on the goroutine that will poll); Close unpins it when called on that
// thread. A vdev on an interface must be opened from a thread inside the
// interface's network namespace (testhost.Host.Do). DPDK cannot sleep on a
// vdev's queue: Wait returns an error matching core.ErrNotSupported, and the
// application polls. Errors are dpdk.Open's, NewOverFrameIO's (a connect
// that times out, a bad tuning) or the ConfigError above; everything is
// undone on error.
func NewDPDK(cfg core.Config) (core.Backend, error) {
	if cfg.Kind == "" {
		cfg.Kind = core.KindTCPDPDK
	}
	cfg = cfg.WithDefaults()
	if cfg.Kind != core.KindTCPDPDK {
		return nil, &core.ConfigError{Field: "Kind", Value: cfg.Kind, Reason: "tcp.NewDPDK opens kind tcp-dpdk only"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Queues > 1 {
		return nil, core.NotSupported("tcp-dpdk with several queues", "", "only one queue is implemented; set Queues to 1", nil)
	}
	// Pin to CPUs[0], leaving a pin the caller made itself alone. Release
	// acts only on the claimed thread: Close may come from another
	// goroutine, which must not be touched.
	th, err := cpu.Claim(cfg.CPUs, false)
	if err != nil {
		return nil, err
	}
	unpin := th.Release
	port, err := dpdk.Open(dpdk.OptionsFrom(cfg))
	if err != nil {
		unpin()
		return nil, err
	}
	info := port.Info()
	if info.Driver == "net_af_packet" && info.Iface != "" {
		owns, err := kernelHasAddr(info.Iface, cfg.LocalIP)
		if err == nil && owns {
			err = &core.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: fmt.Sprintf(
				"on net_af_packet the kernel sees every segment, and with %v also on its interface %s it answers our peers with RSTs: take the address off the kernel's interface, or use net_af_xdp",
				cfg.LocalIP, info.Iface)}
		}
		if err != nil {
			port.Close()
			unpin()
			return nil, err
		}
	}
	// Config.Pcap: capture every frame (Wrap returns port itself when unset).
	fio, err := pcapio.Wrap(port, cfg.Pcap)
	if err != nil {
		port.Close()
		unpin()
		return nil, err
	}
	mode := "netstack over dpdk " + info.Driver
	if cfg.Pcap != "" {
		mode += " +pcap"
	}
	opts := Options{
		Mode: mode,
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

// kernelHasAddr reports whether addr is an address of the kernel
// interface iface, in the calling thread's network namespace.
func kernelHasAddr(iface string, addr netip.Addr) (bool, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return false, fmt.Errorf("tcp: dpdk: interface %s: %w", iface, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return false, fmt.Errorf("tcp: dpdk: addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				return true, nil
			}
		}
	}
	return false, nil
}
