//go:build linux

package testhost

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestIPv6Pair: with Options.IPv6 each end has its address from
// 2001:2::/48 (RFC 5180) and a link-local one, both usable at once; the
// quiet settings hold on every device; UDP runs over IPv6 (the kernel
// resolving the neighbour by NDP) and IPv4 still works. TCP over IPv6:
// TestDialContext/IPv6.
func TestIPv6Pair(t *testing.T) {
	p := newT(t, Options{IPv6: true})
	for _, h := range []*Host{p.A, p.B} {
		if !BenchNet6.Contains(h.Addr6) || h.Prefix6.Addr() != h.Addr6 || h.Prefix6.Bits() != 64 {
			t.Errorf("%s: IPv6 address %s prefix %s", h.Iface, h.Addr6, h.Prefix6)
		}
		if !h.LinkLocal.IsLinkLocalUnicast() {
			t.Errorf("%s: link-local %s", h.Iface, h.LinkLocal)
		}
		got, err := h.Addrs6()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != h.Prefix6 {
			t.Errorf("%s: global IPv6 addresses %v, want [%s]", h.Iface, got, h.Prefix6)
		}
		err = h.Do(func() error {
			for _, dev := range []string{"all", "default", h.Iface} {
				for _, kv := range ipv6Quiet {
					b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + dev + "/" + kv[0])
					if err != nil {
						return err
					}
					if strings.TrimSpace(string(b)) != kv[1] {
						return fmt.Errorf("%s %s=%q, want %s", dev, kv[0], b, kv[1])
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", h.Iface, err)
		}
	}
	if p.A.Prefix6.Masked() != p.B.Prefix6.Masked() || p.A.Addr6 == p.B.Addr6 {
		t.Errorf("A %s and B %s not two addresses of one subnet", p.A.Prefix6, p.B.Prefix6)
	}
	if _, err := p.UDPRoundTrip6("hello over IPv6", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if mac, _, err := p.A.Neigh(p.B.Addr6); err != nil || !bytes.Equal(mac, p.B.MAC) {
		t.Errorf("A's neighbour entry for %s: %v %v, want %v", p.B.Addr6, mac, err, p.B.MAC)
	}
	roundTrip(t, p, "and over IPv4")
}

// snmp6 reads the kernel's IPv6 counters (/proc/thread-self/net/snmp6) of
// h's namespace.
func snmp6(t *testing.T, h *Host) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	err := h.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var k string
			var v uint64
			if _, err := fmt.Sscan(sc.Text(), &k, &v); err == nil {
				m[k] = v
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestIPv6Quiet: an idle IPv6 pair sends no router solicitation (RFC 4861
// §6.3.7, off) and no solicitation of its own (duplicate address
// detection, RFC 4862 §5.4, off): the only solicitations on the link are
// those a test's traffic causes. It waits past the kernel's first
// solicitation delay (1 s) before reading the counters.
func TestIPv6Quiet(t *testing.T) {
	p := newT(t, Options{IPv6: true})
	time.Sleep(1500 * time.Millisecond)
	for _, h := range []*Host{p.A, p.B} {
		c := snmp6(t, h)
		if _, ok := c["Icmp6OutRouterSolicits"]; !ok {
			t.Fatalf("%s: no Icmp6OutRouterSolicits in snmp6: %v", h.Iface, c)
		}
		if c["Icmp6OutRouterSolicits"] != 0 || c["Icmp6OutNeighborSolicits"] != 0 {
			t.Errorf("%s: idle, sent %d router and %d neighbour solicitations", h.Iface,
				c["Icmp6OutRouterSolicits"], c["Icmp6OutNeighborSolicits"])
		}
	}
}

// TestIPv6AddrDelAdd: DelAddr6 takes the IPv6 address off (the link-local
// one stays), AddAddr6 puts it back usable at once.
func TestIPv6AddrDelAdd(t *testing.T) {
	p := newT(t, Options{IPv6: true})
	if err := p.B.DelAddr6(); err != nil {
		t.Fatal(err)
	}
	if got, err := p.B.Addrs6(); err != nil || len(got) != 0 {
		t.Fatalf("after DelAddr6: %v %v", got, err)
	}
	nh, err := netlink.NewHandleAt(p.B.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	l, err := p.B.Link()
	if err != nil {
		t.Fatal(err)
	}
	list, err := nh.AddrList(l, netlink.FAMILY_V6)
	if err != nil || len(list) != 1 {
		t.Fatalf("after DelAddr6: %v %v, want the link-local address only", list, err)
	}
	if err := p.B.AddAddr6(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UDPRoundTrip6("back", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := newT(t, Options{}).A.DelAddr6(); err == nil {
		t.Error("DelAddr6 without Options.IPv6 succeeded")
	}
}
