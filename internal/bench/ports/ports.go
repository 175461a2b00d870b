// Package ports prepares two real network ports cabled to each other for a
// measurement (for instance the two ports of one card): port A
// stays in its namespace (the one netbench runs in), port B is moved into
// a network namespace of its own, so that traffic between their addresses
// crosses the cable instead of the kernel's local delivery. For the run it
// sets the ports' queue count (ethtool channels), interrupt coalescing
// (rx-usecs) and the CPUs their interrupts go to, and Close restores every
// one of them, moves B back and gives both their addresses, routes and
// state again.
//
// Everything here needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for the
// namespace) and Linux. A process killed with SIGKILL cannot restore
// anything: the kernel then returns B to the initial namespace when its
// namespace dies, without its addresses, and the ethtool and IRQ settings
// stay as set for the run; Ports.Setup lists the original values.
package ports

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	"github.com/dgramio/dgramio/internal/benchnet"
	"github.com/dgramio/dgramio/internal/cleanup"
)

// NIC is the ethtool access Ports needs; *ethtool.Ethtool implements it.
// Tests pass a fake through Options.NewNIC.
type NIC interface {
	GetChannels(iface string) (ethtool.Channels, error)
	SetChannels(iface string, c ethtool.Channels) (ethtool.Channels, error)
	GetCoalesce(iface string) (ethtool.Coalesce, error)
	SetCoalesce(iface string, c ethtool.Coalesce) (ethtool.Coalesce, error)
	Features(iface string) (map[string]bool, error)
	Close()
}

// Options say which ports to use and what to set for the run.
type Options struct {
	// IfaceA and IfaceB are the two ports, cabled to each other, both in
	// Home's namespace now. A stays there (the load generator's side); B
	// is moved into a namespace of its own (the echo's side).
	IfaceA, IfaceB string
	// A and B are the addresses given to the ports for the run, in
	// 198.18.0.0/15. Default 198.18.254.1/24 and 198.18.254.2/24.
	A, B netip.Prefix
	// Queues, when positive, sets each port's channel count (combined,
	// or rx and tx for a driver without combined channels) for the run.
	Queues int
	// RxUsecs, when not negative, sets each port's rx-usecs (interrupt
	// coalescing) for the run and turns adaptive RX coalescing off.
	RxUsecs int
	// IRQCPUsA and IRQCPUsB, when not empty, are the CPUs every interrupt
	// of port A, resp. B, is steered to for the run (smp_affinity_list).
	IRQCPUsA, IRQCPUsB []int
	// Home is the namespace both ports are in; 0 means the calling
	// thread's.
	Home netns.NsHandle
	// CarrierTimeout bounds the wait for carrier on both ports after they
	// are up. Default 10 s.
	CarrierTimeout time.Duration
	// NewNIC opens the ethtool access on the calling thread (its
	// namespace). Default ethtool.NewEthtool.
	NewNIC func() (NIC, error)
	// System is where IRQs are looked up and steered. Default preflight.Host
	// (/sys and /proc).
	System preflight.System
}

// Defaults of Options.A and Options.B.
var (
	DefaultA = netip.MustParsePrefix("198.18.254.1/24")
	DefaultB = netip.MustParsePrefix("198.18.254.2/24")
)

// Ports is the pair of ports set up for a run. Close restores them.
type Ports struct {
	// A stays in the home namespace; B is in a namespace of its own.
	A, B *Host
	o    Options
	// setup says what was changed, with the original values.
	setup []string
	undo  cleanup.Stack // what Close runs, last first
}

// Setup lists what was set for the run, each with its original value:
// what Close restores, and what a person restores after a SIGKILL.
func (p *Ports) Setup() []string { return append([]string(nil), p.setup...) }

// Host is one port in its namespace. Methods are safe for concurrent use.
type Host struct {
	// Iface is the port's name; Index its interface index in its
	// namespace (it may change when the port moves).
	Iface string
	Index int
	// Addr and Prefix are its address for the run.
	Addr   netip.Addr
	Prefix netip.Prefix
	// MAC is its hardware address.
	MAC net.HardwareAddr
	// NUMANode and IRQs are the port's device's node (-1: none) and
	// interrupts, read before any move.
	NUMANode int
	IRQs     []preflight.IRQ
	t        *thread
	newNIC   func() (NIC, error)
}

// Do runs fn on the port's namespace thread.
func (h *Host) Do(fn func() error) error { return h.t.do(fn) }

// Command returns a command to start with Start: it runs in the port's
// namespace.
func (h *Host) Command(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// Start starts cmd inside the port's namespace, with SIGKILL when the
// namespace's thread ends (Close).
func (h *Host) Start(cmd *exec.Cmd) error { return h.t.start(cmd) }

// Link returns the port as netlink sees it now (flags, counters).
func (h *Host) Link() (netlink.Link, error) {
	var l netlink.Link
	err := h.Do(func() error {
		var err error
		l, err = netlink.LinkByName(h.Iface)
		return err
	})
	return l, err
}

// withNIC runs f on the port's namespace thread with a NIC opened for it,
// closed when f returns.
func (h *Host) withNIC(f func(nic NIC) error) error {
	return h.Do(func() error {
		nic, err := h.newNIC()
		if err != nil {
			return err
		}
		defer nic.Close()
		return f(nic)
	})
}

// Offloads returns the port's TX checksum, segmentation and receive
// offload features (ethtool), feature name → active.
func (h *Host) Offloads() (map[string]bool, error) {
	out := map[string]bool{}
	err := h.withNIC(func(nic NIC) error {
		fs, err := nic.Features(h.Iface)
		if err != nil {
			return fmt.Errorf("features of %s: %w", h.Iface, err)
		}
		for k, v := range fs {
			if strings.HasPrefix(k, "tx-checksum") || strings.HasSuffix(k, "segmentation") ||
				k == "rx-gro" || k == "rx-lro" || k == "rx-checksum" || k == "rx-gro-hw" {
				out[k] = v
			}
		}
		return nil
	})
	return out, err
}

// RxUsecs reads the port's rx-usecs now.
func (h *Host) RxUsecs() (uint32, error) {
	var us uint32
	err := h.withNIC(func(nic NIC) error {
		c, err := nic.GetCoalesce(h.Iface)
		us = c.RxCoalesceUsecs
		return err
	})
	return us, err
}

// linkState is what Close puts back on a port.
type linkState struct {
	up     bool
	mtu    int
	addrs  []netlink.Addr
	routes []netlink.Route
}

func saveLink(nl *netlink.Handle, l netlink.Link) (linkState, error) {
	s := linkState{up: l.Attrs().Flags&net.FlagUp != 0, mtu: l.Attrs().MTU}
	var err error
	if s.addrs, err = nl.AddrList(l, netlink.FAMILY_V4); err != nil {
		return s, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
	}
	rs, err := nl.RouteList(l, netlink.FAMILY_V4)
	if err != nil {
		return s, fmt.Errorf("routes of %s: %w", l.Attrs().Name, err)
	}
	for _, r := range rs {
		// Routes the kernel makes for an address come back with it.
		if r.Protocol != unix.RTPROT_KERNEL {
			s.routes = append(s.routes, r)
		}
	}
	return s, nil
}

// restoreLink gives l its addresses, routes, MTU and state again (after a
// move, which flushed them).
func restoreLink(nl *netlink.Handle, l netlink.Link, s linkState) error {
	var errs []error
	if l.Attrs().MTU != s.mtu {
		if err := nl.LinkSetMTU(l, s.mtu); err != nil {
			errs = append(errs, fmt.Errorf("MTU of %s: %w", l.Attrs().Name, err))
		}
	}
	if s.up {
		if err := nl.LinkSetUp(l); err != nil {
			errs = append(errs, fmt.Errorf("set %s up: %w", l.Attrs().Name, err))
		}
	} else if err := nl.LinkSetDown(l); err != nil {
		errs = append(errs, fmt.Errorf("set %s down: %w", l.Attrs().Name, err))
	}
	have, _ := nl.AddrList(l, netlink.FAMILY_V4)
	for _, a := range s.addrs {
		a := a
		found := false
		for _, h := range have {
			if h.IPNet.String() == a.IPNet.String() {
				found = true
			}
		}
		if found {
			continue
		}
		a.LinkIndex = l.Attrs().Index
		if err := nl.AddrAdd(l, &a); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("address %s on %s: %w", a.IPNet, l.Attrs().Name, err))
		}
	}
	for _, r := range s.routes {
		r := r
		r.LinkIndex = l.Attrs().Index
		if err := nl.RouteReplace(&r); err != nil {
			errs = append(errs, fmt.Errorf("route %s on %s: %w", r.Dst, l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

// Open prepares the ports as o says and returns them; on error everything
// it did is undone. The caller must Close them.
func Open(o Options) (p *Ports, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return nil, err
	}
	home := o.Home
	if home == 0 {
		cur, err := netns.Get()
		if err != nil {
			return nil, fmt.Errorf("ports: own namespace: %w", err)
		}
		defer cur.Close()
		home = cur
	}

	p = &Ports{o: o}
	defer func() {
		if err != nil {
			if cerr := p.Close(); cerr != nil {
				err = fmt.Errorf("%w (and undoing: %v)", err, cerr)
			}
			p = nil
		}
	}()
	tA, err := startThread(enterNS(home))
	if err != nil {
		return p, privileged(err)
	}
	p.undo.Do(tA.stop)
	p.A = &Host{Iface: o.IfaceA, Addr: o.A.Addr(), Prefix: o.A, t: tA, newNIC: o.NewNIC}

	// What the ports are now, read in the home namespace.
	stA, stB, macB, err := p.readPorts(tA)
	if err != nil {
		return p, err
	}
	p.B = &Host{Iface: o.IfaceB, Addr: o.B.Addr(), Prefix: o.B, MAC: macB, newNIC: o.NewNIC}
	for _, h := range []*Host{p.A, p.B} {
		// Sysfs and /proc/interrupts of the root namespace: before the move.
		h.NUMANode, _ = o.System.NICNode(h.Iface)
		h.IRQs, _ = o.System.FindIRQs(h.Iface)
	}

	// Ethtool settings, while both ports are in the home namespace.
	for _, h := range []*Host{p.A, p.B} {
		if err := tA.do(func() error { return p.setNIC(h.Iface) }); err != nil {
			return p, err
		}
	}
	// Interrupts.
	p.steerIRQs(p.A, o.IRQCPUsA)
	p.steerIRQs(p.B, o.IRQCPUsB)

	// B into its own namespace.
	tB, err := startThread(newNS)
	if err != nil {
		return p, privileged(err)
	}
	p.B.t = tB
	p.undo.Do(tB.stop)
	err = p.moveB(tA, tB)
	if err != nil {
		return p, privileged(err)
	}
	p.setup = append(p.setup, fmt.Sprintf("%s moved into a network namespace of its own (the echo's), back on exit with its %d address(es) and %d route(s)", o.IfaceB, len(stB.addrs), len(stB.routes)))
	p.undo.Add(func() error { return p.moveBack(home, stB) })

	// Addresses and links up.
	err = p.upB(tB)
	if err != nil {
		return p, err
	}
	added, err := p.upA(tA)
	p.undo.Add(func() error { return p.restoreA(added, stA) })
	if err != nil {
		return p, err
	}
	if added {
		p.setup = append(p.setup, fmt.Sprintf("%s given %s (the load generator's), taken off on exit", o.IfaceA, o.A))
	}
	for _, h := range []*Host{p.A, p.B} {
		if err := h.waitCarrier(o.CarrierTimeout); err != nil {
			return p, err
		}
	}
	return p, nil
}

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.IfaceA == "" || o.IfaceB == "" || o.IfaceA == o.IfaceB {
		return o, &dgramio.ConfigError{Field: "iface-a/iface-b", Value: o.IfaceA + "," + o.IfaceB, Reason: "name two different ports"}
	}
	if !o.A.IsValid() {
		o.A = DefaultA
	}
	if !o.B.IsValid() {
		o.B = DefaultB
	}
	for name, pf := range map[string]netip.Prefix{"A": o.A, "B": o.B} {
		if err := benchnet.CheckBenchAddr("ports."+name, pf.Addr()); err != nil || !pf.Addr().Is4() || pf.Addr().IsLoopback() {
			return o, &dgramio.ConfigError{Field: "ports." + name, Value: pf, Reason: "an IPv4 prefix in 198.18.0.0/15"}
		}
	}
	if o.A.Addr() == o.B.Addr() || !o.A.Masked().Contains(o.B.Addr()) {
		return o, &dgramio.ConfigError{Field: "ports.B", Value: o.B, Reason: "A and B need two different addresses of one subnet"}
	}
	if o.CarrierTimeout == 0 {
		o.CarrierTimeout = 10 * time.Second
	}
	if o.NewNIC == nil {
		o.NewNIC = func() (NIC, error) {
			e, err := ethtool.NewEthtool()
			if err != nil {
				return nil, fmt.Errorf("ethtool socket: %w", err)
			}
			return e, nil
		}
	}
	if o.System == (preflight.System{}) {
		o.System = preflight.Host
	}
	return o, nil
}

// withNetlink runs f, through run (a thread's do, a Host's Do: in that
// namespace), with a netlink handle of the namespace, closed when f
// returns.
func withNetlink(run func(func() error) error, f func(nl *netlink.Handle) error) error {
	return run(func() error {
		nl, err := netlink.NewHandle()
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		defer nl.Close()
		return f(nl)
	})
}

// readPorts reads, on tA (in the home namespace), what both ports are now:
// their links' state (addresses, routes, MTU), A's index and MAC, B's
// MAC. A port that carries the default route is refused.
func (p *Ports) readPorts(tA *thread) (stA, stB linkState, macB net.HardwareAddr, err error) {
	o := &p.o
	err = withNetlink(tA.do, func(nl *netlink.Handle) error {
		la, err := nl.LinkByName(o.IfaceA)
		if err != nil {
			return fmt.Errorf("port %s: %w", o.IfaceA, err)
		}
		lb, err := nl.LinkByName(o.IfaceB)
		if err != nil {
			return fmt.Errorf("port %s: %w", o.IfaceB, err)
		}
		p.A.Index, p.A.MAC = la.Attrs().Index, la.Attrs().HardwareAddr
		macB = lb.Attrs().HardwareAddr
		if stA, err = saveLink(nl, la); err != nil {
			return err
		}
		if stB, err = saveLink(nl, lb); err != nil {
			return err
		}
		// A port that carries the default route is how this host is
		// reached: moving it, or adding to it, could cut it off.
		for _, x := range []struct {
			name string
			st   linkState
		}{{o.IfaceA, stA}, {o.IfaceB, stB}} {
			for _, r := range x.st.routes {
				if r.Dst == nil || r.Dst.IP.IsUnspecified() {
					return &dgramio.ConfigError{Field: "iface-a/iface-b", Value: x.name,
						Reason: "carries the default route (this host's way out): use two ports dedicated to the measurement"}
				}
			}
		}
		return nil
	})
	return stA, stB, macB, err
}

// moveB moves port B, from tA's namespace, into tB's.
func (p *Ports) moveB(tA, tB *thread) error {
	o := &p.o
	return withNetlink(tA.do, func(nl *netlink.Handle) error {
		l, err := nl.LinkByName(o.IfaceB)
		if err != nil {
			return fmt.Errorf("port %s: %w", o.IfaceB, err)
		}
		if err := nl.LinkSetNsFd(l, int(tB.ns)); err != nil {
			return fmt.Errorf("move %s into its namespace: %w", o.IfaceB, err)
		}
		return nil
	})
}

// upB gives port B its address in tB's namespace and sets it (and lo) up.
func (p *Ports) upB(tB *thread) error {
	o := &p.o
	return withNetlink(tB.do, func(nl *netlink.Handle) error {
		if lo, err := nl.LinkByName("lo"); err == nil {
			_ = nl.LinkSetUp(lo)
		}
		l, err := nl.LinkByName(o.IfaceB)
		if err != nil {
			return fmt.Errorf("port %s in its namespace: %w", o.IfaceB, err)
		}
		p.B.Index = l.Attrs().Index
		if err := nl.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(o.B)}); err != nil {
			return fmt.Errorf("address %s on %s: %w", o.B, o.IfaceB, err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", o.IfaceB, err)
		}
		return nil
	})
}

// upA gives port A its address, unless it has it (added says whether it
// was added), and sets it up.
func (p *Ports) upA(tA *thread) (added bool, err error) {
	o := &p.o
	err = withNetlink(tA.do, func(nl *netlink.Handle) error {
		l, err := nl.LinkByName(o.IfaceA)
		if err != nil {
			return fmt.Errorf("port %s: %w", o.IfaceA, err)
		}
		err = nl.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(o.A)})
		switch {
		case err == nil:
			added = true
		case errors.Is(err, unix.EEXIST):
		default:
			return fmt.Errorf("address %s on %s: %w", o.A, o.IfaceA, err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", o.IfaceA, err)
		}
		return nil
	})
	return added, err
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// privileged turns EPERM into a *dgramio.PrivilegeError.
func privileged(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission) {
		return &dgramio.PrivilegeError{Op: "prepare the ports", Capability: "CAP_NET_ADMIN and CAP_SYS_ADMIN (run as root)", Err: err}
	}
	return err
}

// waitCarrier waits until the port has carrier (operstate up).
func (h *Host) waitCarrier(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.Link()
		if err != nil {
			return err
		}
		a := l.Attrs()
		if a.OperState == netlink.OperUp || (a.OperState == netlink.OperUnknown && a.RawFlags&unix.IFF_LOWER_UP != 0) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %s: no carrier after %v (operstate %s): check the cable between the two ports", h.Iface, timeout, a.OperState)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setNIC sets channels and coalescing of iface as the options say, on the
// calling (home) thread, and records how to undo them.
func (p *Ports) setNIC(iface string) error {
	o := p.o
	if o.Queues <= 0 && o.RxUsecs < 0 {
		return nil
	}
	nic, err := o.NewNIC()
	if err != nil {
		return err
	}
	defer nic.Close()
	if o.Queues > 0 {
		old, err := nic.GetChannels(iface)
		switch {
		case err != nil:
			p.setup = append(p.setup, fmt.Sprintf("%s channels: not readable (%v), left as they are", iface, err))
		default:
			want := old
			if old.MaxCombined > 0 {
				want.CombinedCount = uint32(o.Queues)
				if old.MaxRx > 0 && old.RxCount > 0 || old.MaxTx > 0 && old.TxCount > 0 {
					want.RxCount, want.TxCount = 0, 0
				}
			} else {
				want.RxCount, want.TxCount = uint32(o.Queues), uint32(o.Queues)
			}
			if want == old {
				p.setup = append(p.setup, fmt.Sprintf("%s channels: %s already", iface, fmtChannels(old)))
				break
			}
			if _, err := nic.SetChannels(iface, want); err != nil {
				p.setup = append(p.setup, fmt.Sprintf("%s channels: could not set %d queue(s) (%v), left at %s", iface, o.Queues, err, fmtChannels(old)))
				break
			}
			p.setup = append(p.setup, fmt.Sprintf("%s channels: %s for the run (was %s)", iface, fmtChannels(want), fmtChannels(old)))
			p.undoOnNIC(func(nic NIC) error {
				if _, err := nic.SetChannels(iface, old); err != nil {
					return fmt.Errorf("restore channels of %s to %s: %w", iface, fmtChannels(old), err)
				}
				return nil
			})
		}
	}
	if o.RxUsecs >= 0 {
		old, err := nic.GetCoalesce(iface)
		switch {
		case err != nil:
			p.setup = append(p.setup, fmt.Sprintf("%s coalescing: not supported by the driver (%v), left as it is", iface, err))
		default:
			want := old
			want.RxCoalesceUsecs = uint32(o.RxUsecs)
			want.UseAdaptiveRxCoalesce = 0
			if want == old {
				p.setup = append(p.setup, fmt.Sprintf("%s coalescing: rx-usecs %d already", iface, old.RxCoalesceUsecs))
				break
			}
			if _, err := nic.SetCoalesce(iface, want); err != nil {
				p.setup = append(p.setup, fmt.Sprintf("%s coalescing: could not set rx-usecs %d (%v), left at %d", iface, o.RxUsecs, err, old.RxCoalesceUsecs))
				break
			}
			p.setup = append(p.setup, fmt.Sprintf("%s coalescing: rx-usecs %d, adaptive-rx off for the run (was rx-usecs %d, adaptive-rx %s)",
				iface, o.RxUsecs, old.RxCoalesceUsecs, onOff(old.UseAdaptiveRxCoalesce != 0)))
			p.undoOnNIC(func(nic NIC) error {
				if _, err := nic.SetCoalesce(iface, old); err != nil {
					return fmt.Errorf("restore coalescing of %s (rx-usecs %d): %w", iface, old.RxCoalesceUsecs, err)
				}
				return nil
			})
		}
	}
	return nil
}

// undoOnNIC adds to the undo list a step that runs f on A's namespace
// thread with a NIC opened for it (A.withNIC).
func (p *Ports) undoOnNIC(f func(nic NIC) error) {
	p.undo.Add(func() error { return p.A.withNIC(f) })
}

func fmtChannels(c ethtool.Channels) string {
	if c.MaxCombined > 0 && c.RxCount == 0 && c.TxCount == 0 {
		return fmt.Sprintf("combined %d", c.CombinedCount)
	}
	return fmt.Sprintf("rx %d tx %d combined %d", c.RxCount, c.TxCount, c.CombinedCount)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// steerIRQs points every interrupt of h at cpus and records the old
// affinities. An interrupt the kernel manages itself (EIO) or one that
// cannot be written is noted and left.
func (p *Ports) steerIRQs(h *Host, cpus []int) {
	if len(cpus) == 0 {
		return
	}
	if len(h.IRQs) == 0 {
		p.setup = append(p.setup, fmt.Sprintf("%s: no interrupts found, nothing to steer", h.Iface))
		return
	}
	list := formatList(cpus)
	var moved, failed []string
	for _, q := range h.IRQs {
		path := filepath.Join(p.o.System.Proc, "irq", strconv.Itoa(q.N), "smp_affinity_list")
		b, err := os.ReadFile(path)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%d (%v)", q.N, err))
			continue
		}
		old := strings.TrimSpace(string(b))
		if old == list {
			continue
		}
		if err := os.WriteFile(path, []byte(list), 0o644); err != nil {
			failed = append(failed, fmt.Sprintf("%d (%v)", q.N, err))
			continue
		}
		moved = append(moved, fmt.Sprintf("%d (was %s)", q.N, old))
		p.undo.Add(func() error {
			if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
				return fmt.Errorf("restore the affinity of IRQ %d to %s: %w", q.N, old, err)
			}
			return nil
		})
	}
	if len(moved) > 0 {
		p.setup = append(p.setup, fmt.Sprintf("%s: IRQs %s steered to CPUs %s for the run", h.Iface, strings.Join(moved, ", "), list))
	}
	if len(failed) > 0 {
		p.setup = append(p.setup, fmt.Sprintf("%s: IRQs %s could not be steered (managed by the kernel?), left as they are", h.Iface, strings.Join(failed, ", ")))
	}
}

func formatList(c []int) string {
	s := make([]string, len(c))
	for i, v := range c {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// moveBack moves B from its namespace to home and gives it its state.
func (p *Ports) moveBack(home netns.NsHandle, st linkState) error {
	err := withNetlink(p.B.Do, func(nl *netlink.Handle) error {
		l, err := nl.LinkByName(p.o.IfaceB)
		if err != nil {
			return fmt.Errorf("port %s in its namespace: %w", p.o.IfaceB, err)
		}
		_ = nl.LinkSetDown(l)
		if err := nl.LinkSetNsFd(l, int(home)); err != nil {
			return fmt.Errorf("move %s back: %w", p.o.IfaceB, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return withNetlink(p.A.Do, func(nl *netlink.Handle) error {
		l, err := nl.LinkByName(p.o.IfaceB)
		if err != nil {
			return fmt.Errorf("port %s after the move back: %w", p.o.IfaceB, err)
		}
		return restoreLink(nl, l, st)
	})
}

// restoreA takes the run's address off A (if it was added) and restores
// its state.
func (p *Ports) restoreA(added bool, st linkState) error {
	return withNetlink(p.A.Do, func(nl *netlink.Handle) error {
		l, err := nl.LinkByName(p.o.IfaceA)
		if err != nil {
			return fmt.Errorf("port %s: %w", p.o.IfaceA, err)
		}
		var errs []error
		if added {
			if err := nl.AddrDel(l, &netlink.Addr{IPNet: prefixNet(p.o.A)}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				errs = append(errs, fmt.Errorf("take %s off %s: %w", p.o.A, p.o.IfaceA, err))
			}
		}
		errs = append(errs, restoreLink(nl, l, st))
		return errors.Join(errs...)
	})
}

// Close undoes everything Open did, last first: A's address and state, B
// back home with its addresses and routes, the IRQ affinities, the
// coalescing and channels, then the namespace threads (processes started
// in B's namespace get SIGKILL). It goes on after an error and returns
// them all. Safe to call more than once.
func (p *Ports) Close() error {
	if err := p.undo.Undo(); err != nil {
		return fmt.Errorf("ports: restore: %w", err)
	}
	return nil
}
