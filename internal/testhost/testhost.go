//go:build linux

package testhost

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/benchnet"
	"github.com/dgramio/dgramio/internal/cpu"
)

// IfacePrefix starts the name of every veth end this package makes:
// "dg" + pid (hex) + "-" + pair number (hex) + "a" or "b".
const IfacePrefix = "dg"

// MaxQueues bounds Options.Queues.
const MaxQueues = 256

// Options shapes a Pair. The zero value is one queue, default addresses,
// offloads off.
type Options struct {
	// Queues is the number of TX and RX queues of both veth ends (the same on
	// both, or driver-mode XDP does not attach). 0 means 1.
	Queues int
	// A and B are the addresses with prefix length of the two ends. Zero:
	// 198.18.n.1/24 and 198.18.n.2/24, n chosen per Pair. Both must lie in
	// 198.18.0.0/15 (prefix included) and differ.
	A, B netip.Prefix
	// KeepOffloads leaves TX checksum offload, TSO and GSO as the kernel
	// sets them (on). By default they are turned off and verified off.
	KeepOffloads bool
	// XPSCPUs maps TX queue i to CPU XPSCPUs[i % len(XPSCPUs)] in the XPS
	// masks (xps_cpus) written on both ends when Queues > 1. Empty: the
	// allowed CPUs of the process, in order.
	XPSCPUs []int
	// MTU of both ends. 0: the kernel's default (1500).
	MTU int
	// CarrierTimeout bounds the wait for carrier on both ends. Default 10 s.
	CarrierTimeout time.Duration
	// IPv6 turns IPv6 on in both namespaces (it is off by default): each
	// end gets A6 or B6 and its link-local address, both usable at once
	// (duplicate address detection off), with router advertisements,
	// autoconfiguration and router solicitations off. See docs/ipv6.md.
	IPv6 bool
	// A6 and B6 are the IPv6 addresses with prefix length of the two ends
	// when IPv6 is set. Zero: 2001:2:0:n::1/64 and 2001:2:0:n::2/64, n
	// chosen per Pair. Both must lie in BenchNet6 (prefix included) and
	// differ.
	A6, B6 netip.Prefix
}

// Pair is two network namespaces joined by a veth pair. A and B are its two
// ends. Close removes everything.
type Pair struct {
	A, B *Host
}

var pairs atomic.Uint32

// New makes a Pair: two anonymous network namespaces, a veth pair between
// them, addresses, links up, IPv6 off (unless Options.IPv6), offloads off (unless KeepOffloads),
// XPS masks when Queues > 1, and waits for carrier on both ends. On error
// nothing is left behind. It needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); a
// missing privilege is a *dgramio.PrivilegeError.
func New(o Options) (*Pair, error) {
	n := pairs.Add(1)
	pid := os.Getpid()
	o, xps, err := o.withDefaults(1 + (uint32(pid)+n)%254)
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("%s%x-%x", IfacePrefix, pid, n&0xffff)

	p := &Pair{}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	if p.A, err = newHost(); err != nil {
		return nil, err
	}
	if p.B, err = newHost(); err != nil {
		return nil, err
	}
	p.A.Iface, p.B.Iface = base+"a", base+"b"
	p.A.Prefix, p.B.Prefix = o.A, o.B
	p.A.Addr, p.B.Addr = o.A.Addr(), o.B.Addr()
	p.A.Queues, p.B.Queues = o.Queues, o.Queues
	if o.IPv6 {
		p.A.Prefix6, p.B.Prefix6 = o.A6, o.B6
		p.A.Addr6, p.B.Addr6 = o.A6.Addr(), o.B6.Addr()
	}

	for _, h := range []*Host{p.A, p.B} {
		if err := h.onHome(func() error { return h.prepareNS(o.IPv6) }); err != nil {
			return nil, err
		}
	}
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: p.A.Iface, NumTxQueues: o.Queues, NumRxQueues: o.Queues,
			MTU: o.MTU, TxQLen: -1},
		PeerName:      p.B.Iface,
		PeerNamespace: netlink.NsFd(int(p.B.NS)),
		PeerTxQLen:    -1,
	}
	if err := p.A.onHome(func() error { return p.A.nl.LinkAdd(veth) }); err != nil {
		return nil, privileged("create veth pair", "CAP_NET_ADMIN", fmt.Errorf("add veth %s/%s: %w", p.A.Iface, p.B.Iface, err))
	}
	for _, h := range []*Host{p.A, p.B} {
		if err := h.onHome(func() error { return h.configure(o.KeepOffloads, o.IPv6) }); err != nil {
			return nil, err
		}
	}
	for _, h := range []*Host{p.A, p.B} {
		if err := h.waitCarrier(o.CarrierTimeout); err != nil {
			return nil, err
		}
		if o.IPv6 {
			if err := h.waitIPv6(o.CarrierTimeout); err != nil {
				return nil, err
			}
		}
	}
	if o.Queues > 1 {
		for _, h := range []*Host{p.A, p.B} {
			if err := h.setXPS(xps); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	return p, nil
}

func checkPrefix(field string, p netip.Prefix) error {
	if err := benchnet.CheckBenchAddr("testhost.Options."+field, p.Addr()); err != nil {
		return err
	}
	if !p.Addr().Is4() || !benchnet.BenchNet.Contains(p.Addr()) || p.Bits() < benchnet.BenchNet.Bits() || p.Bits() >= 32 {
		return fmt.Errorf("testhost: Options.%s=%s: want an IPv4 address with a prefix inside %s (/%d../31)",
			field, p, benchnet.BenchNet, benchnet.BenchNet.Bits())
	}
	return nil
}

// withDefaults checks o, fills in its defaults (the addresses in subnet
// 198.18.sub.0/24) and returns the CPUs of the XPS masks.
func (o Options) withDefaults(sub uint32) (Options, []int, error) {
	if o.Queues == 0 {
		o.Queues = 1
	}
	if o.Queues < 0 || o.Queues > MaxQueues {
		return o, nil, fmt.Errorf("testhost: Queues=%d: want 1..%d", o.Queues, MaxQueues)
	}
	if o.MTU != 0 && (o.MTU < 68 || o.MTU > 65535) {
		return o, nil, fmt.Errorf("testhost: MTU=%d: want 68..65535 or 0 for the default", o.MTU)
	}
	if o.CarrierTimeout <= 0 {
		o.CarrierTimeout = 10 * time.Second
	}
	if !o.A.IsValid() {
		o.A = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(sub), 1}), 24)
	}
	if !o.B.IsValid() {
		o.B = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(sub), 2}), 24)
	}
	if err := checkPrefix("A", o.A); err != nil {
		return o, nil, err
	}
	if err := checkPrefix("B", o.B); err != nil {
		return o, nil, err
	}
	if o.A.Addr() == o.B.Addr() {
		return o, nil, fmt.Errorf("testhost: A and B have the same address %s", o.A.Addr())
	}
	if err := o.withIPv6Defaults(sub); err != nil {
		return o, nil, err
	}
	for _, c := range o.XPSCPUs {
		if c < 0 {
			return o, nil, fmt.Errorf("testhost: XPSCPUs has CPU %d", c)
		}
	}
	var xps []int
	if o.Queues > 1 {
		xps = o.XPSCPUs
		if len(xps) == 0 {
			var err error
			if xps, err = cpu.Allowed(); err != nil {
				return o, nil, err
			}
		}
	}
	return o, xps, nil
}

// Close deletes the veth pair, ends the namespaces' threads (killing the
// processes started there with Start) and closes their descriptors; the
// kernel then destroys the namespaces. It is safe to call more than once
// and on a partly made Pair. A socket made inside a namespace and still
// open keeps that namespace alive (not its veth) until it is closed.
func (p *Pair) Close() error {
	var errs []error
	if p.A != nil && p.A.Index != 0 && p.A.check() == nil {
		if err := p.A.nl.LinkDel(p.A.link()); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("delete veth %s: %w", p.A.Iface, err))
		}
	}
	for _, h := range []*Host{p.A, p.B} {
		if h != nil {
			if err := h.close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// prepareNS runs on the home thread of a fresh namespace: IPv6 off for every
// present and future interface (before the veth exists, so it never gets an
// IPv6 address), or on and quiet (enableIPv6) when ipv6 is set, and lo up.
func (h *Host) prepareNS(ipv6 bool) error {
	for _, dev := range []string{"all", "default"} {
		set := disableIPv6
		if ipv6 {
			set = enableIPv6
		}
		if err := set(dev); err != nil {
			return err
		}
	}
	lo, err := h.nl.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("link lo: %w", err)
	}
	if err := h.nl.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// disableIPv6 writes 1 to net.ipv6.conf.<dev>.disable_ipv6 of the calling
// thread's namespace (/proc/sys/net follows the thread's namespace) and
// reads it back. A kernel without IPv6 has nothing to disable, and neither
// has a device whose MTU is below IPv6's minimum (1280): the kernel removes
// its IPv6 settings altogether.
func disableIPv6(dev string) error {
	path := "/proc/sys/net/ipv6/conf/" + dev + "/disable_ipv6"
	if _, err := os.Stat("/proc/sys/net/ipv6"); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(path, []byte("1\n"), 0); err != nil {
		if errors.Is(err, os.ErrNotExist) && dev != "all" && dev != "default" {
			return nil
		}
		return fmt.Errorf("disable IPv6: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("disable IPv6: %w", err)
	}
	if strings.TrimSpace(string(b)) != "1" {
		return fmt.Errorf("disable IPv6: %s reads back %q", path, b)
	}
	return nil
}

// configure runs on the home thread once the veth end exists in the
// namespace: IPv6 off on it (on and quiet when ipv6 is set), offloads off,
// addresses, link up.
func (h *Host) configure(keepOffloads, ipv6 bool) error {
	l, err := h.nl.LinkByName(h.Iface)
	if err != nil {
		return fmt.Errorf("link %s: %w", h.Iface, err)
	}
	h.Index = l.Attrs().Index
	h.MAC = l.Attrs().HardwareAddr
	set := disableIPv6
	if ipv6 {
		set = enableIPv6
	}
	if err := set(h.Iface); err != nil {
		return err
	}
	if !keepOffloads {
		left, err := setOffloads(h.Iface, false)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("testhost %s: offloads the driver would not turn off: %s (use Options.KeepOffloads to accept them)",
				h.Iface, strings.Join(left, ", "))
		}
	}
	if err := h.nl.AddrAdd(l, h.addr()); err != nil {
		return fmt.Errorf("addr add %s dev %s: %w", h.Prefix, h.Iface, err)
	}
	if ipv6 {
		if err := h.nl.AddrAdd(l, h.addr6()); err != nil {
			return fmt.Errorf("addr add %s dev %s: %w", h.Prefix6, h.Iface, err)
		}
	}
	if err := h.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", h.Iface, err)
	}
	return nil
}

// waitCarrier polls the veth end until it has carrier (operstate up), or
// the timeout passes.
func (h *Host) waitCarrier(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.nl.LinkByIndex(h.Index)
		if err != nil {
			return fmt.Errorf("link %s: %w", h.Iface, err)
		}
		a := l.Attrs()
		if a.OperState == netlink.OperUp && a.RawFlags&unix.IFF_LOWER_UP != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testhost %s: no carrier after %v (operstate %s)", h.Iface, timeout, a.OperState)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Other returns the other end of the pair.
func (p *Pair) Other(h *Host) *Host {
	if h == p.A {
		return p.B
	}
	return p.A
}
