//go:build linux

package testhost

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// BenchNet6 is the only IPv6 range test hosts take addresses from: the
// IPv6 benchmarking range of RFC 5180 §5.2, never routed on the Internet.
// Its addresses are put only on the veth ends inside the namespaces.
var BenchNet6 = netip.MustParsePrefix("2001:2::/48")

// minMTU6 is IPv6's minimum link MTU (RFC 8200 §5): below it the kernel
// removes a device's IPv6 settings.
const minMTU6 = 1280

// ipv6Quiet are the per-device settings (net.ipv6.conf.<dev>.<key>) written
// before IPv6 is turned on, so that what the kernel sends by itself on the
// test veth is only what neighbour discovery needs: no router
// solicitation, no duplicate address detection (the addresses are usable
// at once, no test waits out or races with DAD), no address from a router
// advertisement. MLD reports for the solicited-node groups are still sent
// when an address is added (Linux has no setting to stop them); they stay
// on the veth.
var ipv6Quiet = [...][2]string{
	{"accept_ra", "0"},
	{"autoconf", "0"},
	{"accept_dad", "0"},
	{"dad_transmits", "0"},
	{"router_solicitations", "0"},
	{"disable_ipv6", "0"},
}

// withIPv6Defaults checks o's IPv6 fields and fills in its IPv6 defaults
// (2001:2:0:sub::1/64 and ::2/64).
func (o *Options) withIPv6Defaults(sub uint32) error {
	if !o.IPv6 {
		if o.A6.IsValid() || o.B6.IsValid() {
			return fmt.Errorf("testhost: Options.A6/B6 set without Options.IPv6")
		}
		return nil
	}
	if o.MTU != 0 && o.MTU < minMTU6 {
		return fmt.Errorf("testhost: MTU=%d with IPv6: want %d or more (RFC 8200 §5)", o.MTU, minMTU6)
	}
	if !o.A6.IsValid() {
		o.A6 = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 0, 0, 0, byte(sub), 15: 1}), 64)
	}
	if !o.B6.IsValid() {
		o.B6 = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 0, 0, 0, byte(sub), 15: 2}), 64)
	}
	for _, c := range []struct {
		field string
		p     netip.Prefix
	}{{"A6", o.A6}, {"B6", o.B6}} {
		a := c.p.Addr()
		if !a.Is6() || a.Is4In6() || !BenchNet6.Contains(a) || c.p.Bits() < BenchNet6.Bits() || c.p.Bits() >= 128 {
			return fmt.Errorf("testhost: Options.%s=%s: want an IPv6 address with a prefix inside %s (/%d../127)",
				c.field, c.p, BenchNet6, BenchNet6.Bits())
		}
	}
	if o.A6.Addr() == o.B6.Addr() {
		return fmt.Errorf("testhost: A6 and B6 have the same address %s", o.A6.Addr())
	}
	return nil
}

// enableIPv6 writes ipv6Quiet into net.ipv6.conf.<dev> of the calling
// thread's namespace and reads each setting back. A kernel without IPv6 is
// an error matching os.ErrNotExist.
func enableIPv6(dev string) error {
	for _, kv := range ipv6Quiet {
		path := "/proc/sys/net/ipv6/conf/" + dev + "/" + kv[0]
		if err := os.WriteFile(path, []byte(kv[1]+"\n"), 0); err != nil {
			return fmt.Errorf("enable IPv6: %w", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("enable IPv6: %w", err)
		}
		if strings.TrimSpace(string(b)) != kv[1] {
			return fmt.Errorf("enable IPv6: %s reads back %q, want %s", path, b, kv[1])
		}
	}
	return nil
}

// waitIPv6 polls the veth end until its IPv6 address and its link-local
// address are there and usable (not tentative), and sets h.LinkLocal.
func (h *Host) waitIPv6(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := h.nl.AddrList(h.link(), netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("addr list dev %s: %w", h.Iface, err)
		}
		global, ll := false, netip.Addr{}
		for _, a := range list {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok || a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
				continue
			}
			switch {
			case ip == h.Addr6:
				global = true
			case ip.IsLinkLocalUnicast():
				ll = ip
			}
		}
		if global && ll.IsValid() {
			h.LinkLocal = ll
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testhost %s: IPv6 addresses not usable after %v (have %v)", h.Iface, timeout, list)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// family is the netlink family of ip.
func family(ip netip.Addr) int {
	if ip.Is4() || ip.Is4In6() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func (h *Host) addr6() *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(h.Addr6.AsSlice()), Mask: net.CIDRMask(h.Prefix6.Bits(), 128)},
		Flags: unix.IFA_F_NODAD}
}

// DelAddr6 takes the host's IPv6 address (Prefix6) off the veth end, so
// the kernel no longer answers neighbour solicitations for it (for raw
// paths that own the address). The link-local address stays.
func (h *Host) DelAddr6() error { return h.addr6Op("del", h.nl.AddrDel) }

// AddAddr6 puts the host's IPv6 address (Prefix6) back on the veth end,
// usable at once.
func (h *Host) AddAddr6() error { return h.addr6Op("add", h.nl.AddrAdd) }

func (h *Host) addr6Op(op string, fn func(netlink.Link, *netlink.Addr) error) error {
	if err := h.check(); err != nil {
		return err
	}
	if !h.Addr6.IsValid() {
		return errors.New("testhost: no IPv6 address (make the Pair with Options.IPv6)")
	}
	if err := fn(h.link(), h.addr6()); err != nil {
		return fmt.Errorf("addr %s %s dev %s: %w", op, h.Prefix6, h.Iface, err)
	}
	return nil
}

// Addrs6 lists the IPv6 addresses of global scope on the veth end (Prefix6,
// normally; none after DelAddr6 or without Options.IPv6). Link-local ones
// are left out.
func (h *Host) Addrs6() ([]netip.Prefix, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	list, err := h.nl.AddrList(h.link(), netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("addr list dev %s: %w", h.Iface, err)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if ok && !ip.IsLinkLocalUnicast() {
			out = append(out, netip.PrefixFrom(ip, ones))
		}
	}
	return out, nil
}
