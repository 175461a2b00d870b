package afxdp

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
	"github.com/dgramio/dgramio/internal/cleanup"
)

// Program is one XDP program attached to an interface through a bpf_link,
// with the XSKMAP that the AF_XDP sockets of several queues register into
// (Options.Shared): the program redirects each frame to the socket at its
// rx_queue_index, so queue q's socket receives what the device received on
// queue q. It is attached once, before any socket binds, and detached by
// Close, after every socket is closed (a socket closed later finds its map
// entry gone already; one left open is fed nothing more). Between the two,
// a frame of a queue whose socket is not registered yet goes to the kernel
// (the redirect's fallback, counted as xdpprog.PassNoSocket).
//
// Its methods are safe for concurrent use: each queue's socket registers
// from its own poller.
type Program struct {
	opts     ProgramOptions
	ifindex  int
	objs     *xdpprog.Objects
	mode     string
	fallback error

	mu     sync.Mutex
	closed bool
	undo   cleanup.Stack
}

// AttachProgram loads the program o describes, with an XSKMAP of
// FirstQueue+Queues entries, and attaches it to o.Iface (looked up in the
// calling thread's network namespace) through a bpf_link (Linux >= 5.9):
// driver mode first, then SKB mode as a reported fallback (Mode, Fallback)
// unless o.Mode forces one. Errors are Open's for the same steps
// (*dgramio.ConfigError, *dgramio.PrivilegeError, errors matching
// dgramio.ErrNotSupported); on error nothing is left attached.
func AttachProgram(o ProgramOptions) (*Program, error) {
	if o.Queues == 0 {
		o.Queues = 1
	}
	switch {
	case o.Iface == "":
		return nil, dgramio.BadField("Iface", o.Iface, "the network interface to attach to is required")
	case o.Port == 0:
		return nil, dgramio.BadField("Port", o.Port, "the port the XDP program matches is required")
	case o.Ports < 0 || int(o.Port)+max(o.Ports, 1) > 65536:
		return nil, dgramio.BadField("Ports", o.Ports, "%d ports from %d run past 65535", o.Ports, o.Port)
	case o.FirstQueue < 0 || o.Queues < 1 || o.FirstQueue+o.Queues > 1<<16:
		return nil, dgramio.BadField("QueueID", o.FirstQueue, "queues %d..%d: want queue indexes 0..65535", o.FirstQueue, o.FirstQueue+o.Queues-1)
	case !o.Program.Valid():
		return nil, dgramio.BadField("Program", o.Program, "use xdpprog.UDP, xdpprog.UDPARP or xdpprog.TCP")
	}
	switch o.Mode {
	case "", "driver", "skb":
	default:
		return nil, dgramio.BadField("Mode", o.Mode, `use "", "driver" or "skb"`)
	}
	p := &Program{opts: o}
	ok := false
	defer func() {
		if !ok {
			_ = p.undo.Undo()
		}
	}()
	a, err := linkAttrs(o.Iface, o.FirstQueue, o.FirstQueue+o.Queues-1)
	if err != nil {
		return nil, err
	}
	p.ifindex = a.Index
	if p.objs, err = xdpprog.Load(xdpprog.Spec{Variant: o.Program, Queues: o.FirstQueue + o.Queues}); err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	p.undo.Add(p.objs.Close)
	if err := p.objs.SetPorts(o.Port, uint16(max(o.Ports, 1))); err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	if o.IPv6 {
		if err := p.objs.SetIPv6(true); err != nil {
			return nil, fmt.Errorf("afxdp: %w", err)
		}
	}
	if o.Program == xdpprog.UDPARP {
		if err := setNeighHost(p.objs, o.Host); err != nil {
			return nil, dgramio.BadField("Host", o.Host, "%v", err)
		}
	} else if o.Host.Is6() {
		// An IPv6 host address: every IPv6 frame to it, and the
		// solicitations for it; IPv4 then matches the port.
		if err := p.objs.SetHost6(o.Host); err != nil {
			return nil, dgramio.BadField("Host", o.Host, "%v", err)
		}
		if err := p.objs.SetSYNLimit(o.SYNRate, o.SYNBurst); err != nil {
			return nil, dgramio.BadField("SYNRate", o.SYNRate, "%v", err)
		}
	} else if o.Host.IsValid() {
		if err := p.objs.SetHost(o.Host); err != nil {
			return nil, dgramio.BadField("Host", o.Host, "%v", err)
		}
		if o.Host6.IsValid() {
			if err := p.objs.SetHost6(o.Host6); err != nil {
				return nil, dgramio.BadField("Host6", o.Host6, "%v", err)
			}
		}
		if err := p.objs.SetSYNLimit(o.SYNRate, o.SYNBurst); err != nil {
			return nil, dgramio.BadField("SYNRate", o.SYNRate, "%v", err)
		}
	}
	lk, mode, fallback, err := attach(p.objs, p.ifindex, o.Iface, o.Mode)
	if err != nil {
		return nil, err
	}
	p.undo.Add(lk.Close)
	p.mode, p.fallback = mode, fallback
	ok = true
	return p, nil
}

// objects returns the program's maps, nil for a nil Program.
func (p *Program) objects() *xdpprog.Objects {
	if p == nil {
		return nil
	}
	return p.objs
}

// attachMode returns "driver" or "skb", "" for a nil Program.
func (p *Program) attachMode() string {
	if p == nil {
		return ""
	}
	return p.mode
}

// check refuses a socket that cannot register: another interface, or a
// queue outside the map.
func (p *Program) check(o Options) error {
	if o.Iface != p.opts.Iface {
		return dgramio.BadField("Iface", o.Iface, "the shared program is attached to %s", p.opts.Iface)
	}
	if o.QueueID < p.opts.FirstQueue || o.QueueID >= p.opts.FirstQueue+p.opts.Queues {
		return dgramio.BadField("QueueID", o.QueueID, "the shared program's socket map holds queues %d..%d",
			p.opts.FirstQueue, p.opts.FirstQueue+p.opts.Queues-1)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("afxdp: shared program on %s: %w", p.opts.Iface, dgramio.ErrClosed)
	}
	return nil
}

// Mode returns "driver" or "skb", with " (driver mode refused)" after a
// fallback.
func (p *Program) Mode() string {
	if p.fallback != nil {
		return p.mode + " (driver mode refused)"
	}
	return p.mode
}

// Fallback returns why driver mode was refused when AttachProgram fell
// back to SKB mode, or nil.
func (p *Program) Fallback() error { return p.fallback }

// Options returns the options the program was attached with (Queues 0
// made 1).
func (p *Program) Options() ProgramOptions { return p.opts }

// Counters reads the program's counters, summed over CPUs: every queue's
// frames. It allocates; it is meant for Stats.
func (p *Program) Counters() (xdpprog.Counts, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return xdpprog.Counts{}, dgramio.ErrClosed
	}
	return p.objs.ReadCounters()
}

// Close detaches the program (closes its bpf_link) and frees it and its
// maps. Close the sockets first. Safe to call more than once.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.undo.Undo(); err != nil {
		return fmt.Errorf("afxdp: close shared program: %w", err)
	}
	return nil
}

// setNeighHost gives variant UDPARP the address whose neighbour discovery
// it redirects (none: every neighbour frame).
func setNeighHost(objs *xdpprog.Objects, a netip.Addr) error {
	switch {
	case !a.IsValid():
		return nil
	case a.Is4() || a.Is4In6():
		return objs.SetHost(a.Unmap())
	default:
		return objs.SetHost6(a)
	}
}
