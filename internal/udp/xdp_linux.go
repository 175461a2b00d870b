//go:build linux

package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/afxdp"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/framequeue"
	"github.com/dgramio/dgramio/internal/ifaddr"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/ndp"
	"github.com/dgramio/dgramio/internal/queues"
)

// NewXDP opens the xdp kind: a Raw over an AF_XDP socket on cfg.Iface,
// queue cfg.XDP.QueueID, with the UDP program steering our port into it
// (package frameio/afxdp; Linux >= 5.9 for the bpf_link that detaches the
// program when the process dies).
//
// By default the address stays on the kernel's interface: the kernel
// answers ARP and ICMP, and peers' MACs come from the kernel's neighbour
// table (RTM_GETNEIGH). An address the table lacks is resolved by the
// kernel itself, asked through netlink (RTM_NEWNEIGH with NTF_USE, as
// "ip neigh replace ... use" does): its ARP request goes to the peer's
// address only, and no datagram is sent to provoke it.
//
// With cfg.XDP.OwnARP the program redirects the ARP frames about
// cfg.LocalIP (and announcements) too, and package arp answers for it
// and resolves peers; take the address off the kernel's interface, or
// both answer. An address the kernel holds on no interface is owned so
// without asking: no one else would answer for it. An IPv6 Config works
// the same way: the program's IPv6 steering is on (afxdp.Options.IPv6),
// the kernel's IPv6 neighbour table gives the peers' MACs (its neighbour
// solicitations resolve the others), and with OwnARP the program takes
// the neighbour solicitations and advertisements about cfg.LocalIP and
// package ndp answers for it. The kernel keeps the ARP and neighbour
// discovery of its own addresses on the interface.
//
// With cfg.CPUs set, NewXDP pins the calling goroutine's thread to
// CPUs[0] (call it on the goroutine that will poll); Close unpins it when
// called on that thread, and leaves it pinned otherwise.
//
// The socket and netlink handle belong to the network namespace of the
// calling thread (call NewXDP inside testhost.Host.Do to open it in a
// namespace); the Backend may then be driven from any goroutine. Errors
// are afxdp.Open's (*dgramio.ConfigError, *dgramio.PrivilegeError, errors
// matching dgramio.ErrNotSupported or afxdp.ErrNoCarrier), NewRaw's (an
// oversized MaxDatagram is a *dgramio.ConfigError) or a failed resolution.
// Everything is undone on error.
func NewXDP(cfg dgramio.Config) (dgramio.Backend, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindXDP)
	if err != nil {
		return nil, err
	}
	if cfg, err = ownUnheldAddr(cfg); err != nil {
		return nil, err
	}
	return openXDPQueue(cfg, nil, "")
}

// ownUnheldAddr sets cfg.XDP.OwnARP when the kernel holds cfg.LocalIP on
// no interface of the calling thread's namespace: no one else would
// answer ARP (or neighbour solicitations) for it, and no peer could
// reach us. The program then takes only the neighbour frames about
// LocalIP, so the kernel's own addresses on the interface keep theirs.
func ownUnheldAddr(cfg dgramio.Config) (dgramio.Config, error) {
	if cfg.XDP.OwnARP || !cfg.LocalIP.IsValid() {
		return cfg, nil
	}
	held, err := ifaddr.KernelHoldsAnywhere(cfg.LocalIP)
	if err != nil {
		return cfg, fmt.Errorf("udp: xdp: %w", err)
	}
	cfg.XDP.OwnARP = !held
	return cfg, nil
}

// openXDPQueue opens one queue of kind xdp: cfg is the queue's, prog the
// program its socket registers into (nil: one of its own), note ends
// Stats.Mode.
func openXDPQueue(cfg dgramio.Config, prog *afxdp.Program, note string) (dgramio.Backend, error) {
	ifc, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return nil, fmt.Errorf("udp: xdp: interface %s: %w", cfg.Iface, err)
	}
	// Set-up undoes itself, last step first, on every error path.
	var undo setup
	defer undo.undo()
	th, err := undo.claim(cfg.CPUs)
	if err != nil {
		return nil, err
	}
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("udp: xdp: netlink: %w", err)
	}
	undo = append(undo, nl.Close)
	o := afxdp.OptionsFromConfig(cfg)
	o.Shared = prog
	x, err := afxdp.Open(o)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { x.Close() })
	fio, mode, err := framequeue.Capture(x, cfg.Pcap, "xdp "+x.Mode())
	if err != nil {
		return nil, err
	}
	undo[len(undo)-1] = func() { fio.Close() }
	if note != "" {
		mode += ", " + note
	}
	opts := RawOptions{
		Mode: mode,
		OnClose: func() error {
			nl.Close()
			// Only on the claimed thread: Close may come from another
			// goroutine, which must not be touched.
			return th.Release()
		},
	}
	switch {
	case cfg.XDP.OwnARP && cfg.IPv6():
		// The program takes neighbour discovery (variant UDPARP with IPv6
		// steering on); ndp answers for LocalIP and our link-local address.
		// The kernel's table is asked first: the interface has a kernel
		// side (its link-local address still resolves neighbours). Query
		// runs on the poll loop, as NextHop does: nl is not shared.
		idx := ifc.Index
		h, err := ndp.New(fio, ndp.Config{MAC: x.MAC(), Addr: cfg.LocalIP, Iface: cfg.Iface,
			Kernel: func(a netip.Addr) ([6]byte, bool) { return kernelNeigh(nl, idx, a) }})
		if err != nil {
			return nil, err
		}
		opts.NDP = h
		opts.NextHop = kernelNextHop(nl, ifc.Index, cfg.Iface)
	case cfg.XDP.OwnARP:
		h, err := arp.New(fio, arp.Config{MAC: x.MAC(), Addr: cfg.LocalIP, Iface: cfg.Iface})
		if err != nil {
			return nil, err
		}
		opts.ARP = h
		opts.NextHop = kernelNextHop(nl, ifc.Index, cfg.Iface)
	default:
		opts.Resolve = NeighbourResolver(nl, ifc.Index, cfg.Iface)
	}
	// NewRaw closes fio (and x with it) itself on error.
	undo = undo[:len(undo)-1]
	r, err := NewRaw(cfg, fio, opts)
	if err != nil {
		return nil, err
	}
	undo = nil
	return r, nil
}

// xdpGroup is kind xdp with several queues.
type xdpGroup struct {
	cfg  dgramio.Config
	prog *afxdp.Program

	slots *queues.Slots
}

var _ dgramio.QueueGroup = (*xdpGroup)(nil)

// NewXDPGroup opens kind xdp with cfg.Queues queues: it attaches one XDP
// program to cfg.Iface (afxdp.AttachProgram), whose socket map holds
// interface queues XDP.QueueID .. XDP.QueueID+Queues-1, and OpenQueue(q)
// binds an AF_XDP socket to interface queue XDP.QueueID+q, registers it
// there, and runs a Raw over it, as NewXDP does for one queue. The program
// redirects each frame by the queue the device received it on
// (rx_queue_index), so a queue receives what the device's RSS (on veth:
// the sender's TX queue, which XPS picks by the sender's CPU) puts on its
// interface queue, and transmits on that same interface queue.
//
// A server's queues all serve Config.Port. A client's queue q sends from
// port LocalPort+q (LocalPort defaults to Port), a flow of its own, and
// the program takes the answers to all of those ports; each queue takes
// only the answers to its own (one that lands on another queue is
// counted there as filtered, "udp" other_port). On a NIC, answers to port
// LocalPort+q reach queue q only if a flow rule steers them there
// (ethtool -N <iface> flow-type udp4 dst-port <LocalPort+q> action <q>):
// RSS alone hashes them anywhere.
//
// Call NewXDPGroup and every OpenQueue inside the interface's network
// namespace; OpenQueue on the goroutine that will poll queue q (pinned to
// CPUs[q] when set). Linux >= 5.9 (bpf_link), as NewXDP.
func NewXDPGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	cfg, err := kindcfg.PrepareGroup(cfg, dgramio.KindXDP)
	if err != nil {
		return nil, err
	}
	if cfg, err = ownUnheldAddr(cfg); err != nil {
		return nil, err
	}
	o := afxdp.OptionsFromConfig(cfg)
	po := afxdp.ProgramOptions{Iface: cfg.Iface, Program: o.Program, Port: o.Port, Host: o.NeighHost,
		FirstQueue: cfg.XDP.QueueID, Queues: cfg.Queues, Mode: cfg.XDP.Mode, IPv6: o.IPv6}
	if cfg.Role == dgramio.RoleClient {
		po.Ports = cfg.Queues
		if int(o.Port)+cfg.Queues > 65536 {
			return nil, &dgramio.ConfigError{Field: "LocalPort", Value: o.Port, Reason: fmt.Sprintf("queue q sends from LocalPort+q: %d queues from %d run past 65535", cfg.Queues, o.Port)}
		}
	}
	prog, err := afxdp.AttachProgram(po)
	if err != nil {
		return nil, err
	}
	return &xdpGroup{cfg: cfg, prog: prog, slots: queues.NewSlots(cfg.Queues)}, nil
}

// OpenQueue opens queue q. See dgramio.QueueGroup.
func (g *xdpGroup) OpenQueue(q int) (dgramio.Backend, error) {
	if err := g.slots.Take("udp: xdp", q); err != nil {
		return nil, err
	}
	qc := kindcfg.ForQueue(g.cfg, q)
	if g.cfg.Role == dgramio.RoleClient {
		qc.LocalPort = g.cfg.LocalPort + uint16(q)
	}
	note := fmt.Sprintf("queue %d of %d", q, g.cfg.Queues)
	b, err := openXDPQueue(qc, g.prog, note)
	if err != nil {
		return nil, err
	}
	g.slots.Opened(q, strings.TrimSuffix(b.Stats().Mode, ", "+note))
	return b, nil
}

// BaseMode is queue 0's Stats.Mode without its note. See dgramio.QueueGroup.
func (g *xdpGroup) BaseMode() string { return g.slots.BaseMode() }

// Mode says how frames reach the queues.
func (g *xdpGroup) Mode() string { return "xdp program " + g.prog.Mode() + " by rx_queue_index" }

// AppendCounters appends the shared program's counters ("xdp-prog"),
// counted once for all queues.
func (g *xdpGroup) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	c, err := g.prog.Counters()
	if err != nil {
		return dst
	}
	return append(dst, c.Layers()...)
}

// Close detaches the program. Close the queues first.
func (g *xdpGroup) Close() error { return g.prog.Close() }

// neighValid are the NUD states whose hardware address may be used.
const neighValid = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE |
	netlink.NUD_PERMANENT | netlink.NUD_NOARP

// neighRetrigger is how long NeighbourResolver leaves the kernel to
// resolve before asking again (the kernel itself sends 3 probes, 1 s
// apart, then marks the entry failed).
const neighRetrigger = 3500 * time.Millisecond

// NeighbourResolver returns a Resolver that finds the next hop towards
// addr in the kernel's routing table (addr itself on the link, else its
// gateway), reads the kernel's neighbour table of interface ifindex for it
// (of addr's family) through nl and, when it has no usable entry, asks the
// kernel to resolve it (RTM_NEWNEIGH with NTF_USE: the kernel sends its
// own ARP request, or its neighbour solicitation for IPv6) and
// polls the table until an entry is usable or ctx is done. iface names the
// interface in errors. The Resolver may be called from several goroutines
// at once; it serializes its use of nl.
func NeighbourResolver(nl *netlink.Handle, ifindex int, iface string) Resolver {
	var mu sync.Mutex
	return func(ctx context.Context, addr netip.Addr) ([6]byte, error) {
		fam := netlink.FAMILY_V4
		if !addr.Is4() {
			fam = netlink.FAMILY_V6
		}
		mu.Lock()
		hop, err := nextHop(nl, addr, ifindex, iface)
		mu.Unlock()
		if err != nil {
			return [6]byte{}, err
		}
		addr = hop
		var asked time.Time
		state := -1
		for {
			mu.Lock()
			list, err := nl.NeighList(ifindex, fam)
			mu.Unlock()
			if err != nil {
				return [6]byte{}, fmt.Errorf("udp: neighbour table of %s: %w", iface, err)
			}
			state = -1
			for _, n := range list {
				if a, ok := netip.AddrFromSlice(n.IP); !ok || a.Unmap() != addr {
					continue
				}
				state = n.State
				if n.State&neighValid != 0 && len(n.HardwareAddr) == 6 {
					return [6]byte(n.HardwareAddr), nil
				}
			}
			if asked.IsZero() || time.Since(asked) > neighRetrigger || state == netlink.NUD_FAILED {
				mu.Lock()
				err := nl.NeighSet(&netlink.Neigh{LinkIndex: ifindex, Family: fam,
					IP: addr.AsSlice(), Flags: netlink.NTF_USE})
				mu.Unlock()
				if err != nil {
					if errors.Is(err, unix.EPERM) {
						return [6]byte{}, &dgramio.PrivilegeError{Op: "ask the kernel to resolve " + addr.String(), Capability: "CAP_NET_ADMIN", Err: err}
					}
					return [6]byte{}, fmt.Errorf("udp: ask the kernel to resolve %s on %s: %w", addr, iface, err)
				}
				asked = time.Now()
			}
			select {
			case <-ctx.Done():
				return [6]byte{}, fmt.Errorf("udp: the kernel did not resolve %s on %s (neighbour state %s): %w; check that the peer is up and on this link, or set Config.DstMAC",
					addr, iface, neighState(state), ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// kernelNeigh looks addr up in the kernel's neighbour table of interface
// ifindex through nl: its MAC when the entry is usable (neighValid). It
// does not wait for the network.
func kernelNeigh(nl *netlink.Handle, ifindex int, addr netip.Addr) ([6]byte, bool) {
	fam := netlink.FAMILY_V4
	if !addr.Is4() {
		fam = netlink.FAMILY_V6
	}
	list, err := nl.NeighList(ifindex, fam)
	if err != nil {
		return [6]byte{}, false
	}
	for _, n := range list {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == addr && n.State&neighValid != 0 && len(n.HardwareAddr) == 6 {
			return [6]byte(n.HardwareAddr), true
		}
	}
	return [6]byte{}, false
}

// nextHop returns the address whose MAC frames to addr carry: addr on the
// link, the gateway of the kernel's route towards it otherwise
// (RTM_GETROUTE). A route through another interface is an error: frames
// leave through ifindex only.
func nextHop(nl *netlink.Handle, addr netip.Addr, ifindex int, iface string) (netip.Addr, error) {
	routes, err := nl.RouteGet(addr.AsSlice())
	if err != nil {
		return addr, fmt.Errorf("udp: route to %s: %w; add a route through %s, or set Config.DstMAC", addr, err, iface)
	}
	if len(routes) == 0 {
		return addr, nil
	}
	r := routes[0]
	if r.LinkIndex != 0 && r.LinkIndex != ifindex {
		return addr, fmt.Errorf("udp: the kernel routes %s through interface index %d, not %s; add a route through %s, or set Config.DstMAC", addr, r.LinkIndex, iface, iface)
	}
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && r.Gw != nil {
		if gw = gw.Unmap(); gw.Is4() == addr.Is4() && !gw.IsUnspecified() {
			return gw, nil
		}
	}
	return addr, nil
}

// kernelNextHop is a RawOptions.NextHop from the kernel's routing table
// through nl: the gateway towards addr, or addr itself when it is on the
// link or the kernel has no route for it through ifindex (then ARP asks
// for addr on the link, as without a routing table).
// Several poll loops may share it (it serializes its use of nl).
func kernelNextHop(nl *netlink.Handle, ifindex int, iface string) func(netip.Addr) netip.Addr {
	var mu sync.Mutex
	return func(addr netip.Addr) netip.Addr {
		mu.Lock()
		hop, err := nextHop(nl, addr, ifindex, iface)
		mu.Unlock()
		if err == nil {
			return hop
		}
		return addr
	}
}

// routeLookup opens a netlink handle in the calling thread's network
// namespace and returns it with kernelNextHop for interface iface: for a
// DPDK port on a kernel interface (a vdev). The caller closes the handle.
func routeLookup(iface string) (*netlink.Handle, func(netip.Addr) netip.Addr, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, nil, fmt.Errorf("udp: interface %s: %w", iface, err)
	}
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nil, fmt.Errorf("udp: netlink: %w", err)
	}
	return nl, kernelNextHop(nl, ifc.Index, iface), nil
}

func neighState(s int) string {
	switch s {
	case -1:
		return "none"
	case netlink.NUD_INCOMPLETE:
		return "incomplete"
	case netlink.NUD_FAILED:
		return "failed"
	case netlink.NUD_NONE:
		return "none"
	default:
		return fmt.Sprintf("%#x", s)
	}
}
