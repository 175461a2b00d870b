package tcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/afxdp"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
)

// NewXDP opens the tcp-xdp kind: the userspace TCP (NewOverFrameIO, gVisor
// netstack) over an AF_XDP socket on cfg.Iface, queue cfg.XDP.QueueID
// (package frameio/afxdp), with the TCP variant of the XDP program.
//
// What the kernel still sees. The program redirects into the socket every
// TCP segment whose source or destination port is cfg.Port (a client's own
// port is ephemeral; the server's answers come from Port) and every ARP
// frame; everything else goes on to the kernel. Netstack answers ARP for
// cfg.LocalIP and resolves its peers itself, so while the socket is open
// the kernel on that interface sees no ARP at all: it neither answers for
// its own addresses nor resolves neighbours there (entries it has go stale
// and are not refreshed). Do not run tcp-xdp on an interface the host needs
// for anything else. Close detaches the program and the kernel gets ARP
// back.
//
// The address. cfg.LocalIP must not be an address of the kernel's
// interface: NewXDP refuses that with a *core.ConfigError on LocalIP. The
// kernel owning it would answer with a RST any segment of our connections
// that reaches it instead of the socket, and kill the connection: a frame
// that arrives on another queue of a multi-queue NIC (the program redirects
// only to the socket of its own queue; others pass), an IP fragment or a
// packet with IP options (the program passes those), or anything in the
// instants the program is attached without the socket in its map. An
// address the kernel does not have makes the kernel drop such frames
// silently, and TCP retransmits. Use an address of the same subnet that the
// kernel does not hold (the peer's kernel resolves it by ARP, which
// netstack answers), or take it off the kernel's interface first
// (ip addr del; testhost.Host.DelAddr).
//
// Queues: one (cfg.Queues > 1 is not supported). On a NIC with several
// receive queues, steer the flow to cfg.XDP.QueueID (ethtool -N ... action
// QueueID) or most segments miss the socket.
//
// The socket belongs to the network namespace of the calling thread
// (inside testhost.Host.Do for tests). With cfg.CPUs set, NewXDP pins the
// calling goroutine's thread to CPUs[0] (call it on the goroutine that will
// poll); Close unpins it when called on that thread. Errors: a
// *core.ConfigError for a bad field, afxdp.Open's (privileges, kernel
// features, carrier), or NewOverFrameIO's (a connect that fails or times
// out); everything is undone on error.
func NewXDP(cfg core.Config) (core.Backend, error) {
	cfg, err := xdpConfig(cfg)
	if err != nil {
		return nil, err
	}
	pinnedTid := 0
	unpin := func() error {
		if pinnedTid != 0 && unix.Gettid() == pinnedTid {
			pinnedTid = 0
			return cpu.Unpin()
		}
		return nil
	}
	if len(cfg.CPUs) > 0 {
		if err := cpu.Pin(cfg.CPUs[0]); err != nil {
			return nil, err
		}
		pinnedTid = unix.Gettid()
	}
	fio, opts, err := OpenXDP(cfg)
	if err != nil {
		unpin()
		return nil, err
	}
	closeXSK := opts.Close
	opts.Close = func() error { return errors.Join(closeXSK(), unpin()) }
	// NewOverFrameIO releases the socket (opts.Close) itself on error.
	b, err := NewOverFrameIO(cfg, fio, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// OpenXDP opens what NewXDP runs the userspace TCP on, without the stack:
// the AF_XDP socket on cfg.Iface, queue cfg.XDP.QueueID, with the TCP
// variant of the XDP program redirecting cfg.Port's segments and ARP. It
// checks, as NewXDP does, that the kernel does not hold cfg.LocalIP on
// cfg.Iface (a *core.ConfigError otherwise), and pins nothing (cfg.CPUs is
// for whoever polls). It applies cfg's defaults and makes NewXDP's checks
// (Kind tcp-xdp or empty, Validate, one queue). Package tcp/netconn uses it
// to run netstack from a poller of its own.
//
// The returned Options carry Mode and Close (which closes the socket and
// detaches the program); the FrameIO is the caller's from then on: pass
// both to NewOverFrameIO, or call Options.Close. Like NewXDP, it must run on
// a thread inside the interface's network namespace.
func OpenXDP(cfg core.Config) (frameio.FrameIO, Options, error) {
	cfg, err := xdpConfig(cfg)
	if err != nil {
		return nil, Options{}, err
	}
	owns, err := KernelHasAddr(cfg.Iface, cfg.LocalIP)
	if err != nil {
		return nil, Options{}, err
	}
	if owns {
		return nil, Options{}, &core.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: fmt.Sprintf(
			"the kernel holds %v on %s and would reset our connections with every segment that misses the AF_XDP socket: use an address the kernel does not have (same subnet is fine; netstack answers ARP), or take it off %s",
			cfg.LocalIP, cfg.Iface, cfg.Iface)}
	}
	o := afxdp.OptionsFromConfig(cfg)
	o.Program = xdpprog.TCP
	o.Port = cfg.Port
	x, err := afxdp.Open(o)
	if err != nil {
		return nil, Options{}, err
	}
	return x, Options{Mode: "netstack over xdp " + x.Mode(), Close: x.Close}, nil
}

// xdpConfig applies cfg's defaults and checks it for kind tcp-xdp.
func xdpConfig(cfg core.Config) (core.Config, error) {
	if cfg.Kind == "" {
		cfg.Kind = core.KindTCPXDP
	}
	cfg = cfg.WithDefaults()
	if cfg.Kind != core.KindTCPXDP {
		return cfg, &core.ConfigError{Field: "Kind", Value: cfg.Kind, Reason: "tcp.NewXDP opens kind tcp-xdp only"}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Queues > 1 {
		return cfg, core.NotSupported("tcp-xdp with several queues", "", "only one queue is implemented; set Queues to 1", nil)
	}
	return cfg, nil
}

// KernelHasAddr reports whether addr is an address of the kernel interface
// iface, in the calling thread's network namespace: the check by which
// OpenXDP refuses a LocalIP the kernel holds.
func KernelHasAddr(iface string, addr netip.Addr) (bool, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return false, fmt.Errorf("tcp: interface %s: %w", iface, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return false, fmt.Errorf("tcp: addresses of %s: %w", iface, err)
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
