//go:build linux

package testhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/benchnet"
	"github.com/dgramio/dgramio/internal/testutil"
)

// roundTrip checks that p carries a UDP datagram both ways (see
// Pair.UDPRoundTrip).
func roundTrip(t *testing.T, p *Pair, msg string) {
	t.Helper()
	if _, err := p.UDPRoundTrip(msg, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestPairUDPRoundTrip(t *testing.T) {
	p := newT(t, Options{})
	for _, h := range []*Host{p.A, p.B} {
		if !benchnet.BenchNet.Contains(h.Addr) || h.Prefix.Addr() != h.Addr || h.Prefix.Bits() != 24 {
			t.Errorf("%s: address %s prefix %s", h.Iface, h.Addr, h.Prefix)
		}
		if h.Index == 0 || len(h.MAC) != 6 || !strings.HasPrefix(h.Iface, IfacePrefix) || !h.NS.IsOpen() {
			t.Errorf("host fields not filled: %+v", h)
		}
		l, err := h.Link()
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().OperState != netlink.OperUp || l.Type() != "veth" {
			t.Errorf("%s: operstate %s type %s", h.Iface, l.Attrs().OperState, l.Type())
		}
	}
	if p.A.Prefix.Masked() != p.B.Prefix.Masked() {
		t.Errorf("A %s and B %s not on one subnet", p.A.Prefix, p.B.Prefix)
	}
	roundTrip(t, p, "hello over veth")
}

// TestDialContext: a kernel TCP client that DialContext makes in A's
// namespace reaches a listener in B's, from A's address, over each
// family (IPv6: the kernel resolving B by NDP).
func TestDialContext(t *testing.T) {
	for _, c := range []struct {
		name    string
		o       Options
		network string
		listen  func(h *Host) (*net.TCPListener, error)
		addr    func(h *Host) netip.Addr
	}{
		{"IPv4", Options{}, "tcp4", func(h *Host) (*net.TCPListener, error) { return h.ListenTCP(5001) }, func(h *Host) netip.Addr { return h.Addr }},
		{"IPv6", Options{IPv6: true}, "tcp6", func(h *Host) (*net.TCPListener, error) { return h.ListenTCP6(0) }, func(h *Host) netip.Addr { return h.Addr6 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newT(t, c.o)
			ln, err := c.listen(p.B)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			conn, err := p.A.DialContext(ctx, c.network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if from := s.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); from != c.addr(p.A) {
				t.Errorf("connection from %v, want A's %v", from, c.addr(p.A))
			}
		})
	}
}

func TestOffloadsOff(t *testing.T) {
	p := newT(t, Options{})
	for _, h := range []*Host{p.A, p.B} {
		f, err := h.Offloads()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation"} {
			if on, ok := f[name]; !ok || on {
				t.Errorf("%s: %s present=%v on=%v, want present and off (all: %v)", h.Iface, name, ok, on, f)
			}
		}
		for name, on := range f {
			if on {
				t.Errorf("%s: %s still on", h.Iface, name)
			}
		}
	}
	k := newT(t, Options{KeepOffloads: true})
	f, err := k.A.Offloads()
	if err != nil {
		t.Fatal(err)
	}
	if !f["tx-checksum-ip-generic"] || !f["tx-tcp-segmentation"] {
		t.Errorf("KeepOffloads: offloads not left on: %v", f)
	}
}

func TestIPv6Disabled(t *testing.T) {
	p := newT(t, Options{})
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		testutil.Skip(t, "kernel without IPv6 (/proc/sys/net/ipv6): nothing to disable")
	}
	for _, h := range []*Host{p.A, p.B} {
		nh, err := netlink.NewHandleAt(h.NS)
		if err != nil {
			t.Fatal(err)
		}
		links, err := nh.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		if len(links) != 2 {
			t.Errorf("%s: %d links in the namespace, want lo and the veth end", h.Iface, len(links))
		}
		for _, l := range links {
			addrs, err := nh.AddrList(l, netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			if len(addrs) != 0 {
				t.Errorf("%s: link %s has IPv6 addresses %v", h.Iface, l.Attrs().Name, addrs)
			}
		}
		nh.Close()
		err = h.Do(func() error {
			for _, dev := range []string{"all", "default", h.Iface} {
				b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + dev + "/disable_ipv6")
				if err != nil {
					return err
				}
				if strings.TrimSpace(string(b)) != "1" {
					return fmt.Errorf("%s disable_ipv6=%q", dev, b)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", h.Iface, err)
		}
	}
}

func TestTwoPairsDoNotCollide(t *testing.T) {
	var wg sync.WaitGroup
	ps := make([]*Pair, 2)
	errs := make([]error, 2)
	for i := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i], errs[i] = New(Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, p := range ps {
				if p != nil {
					p.Close()
				}
			}
			requireRootOrFatal(t, err, i)
		}
	}
	for _, p := range ps {
		t.Cleanup(func() { p.Close() })
	}
	if ps[0].A.Iface == ps[1].A.Iface || ps[0].A.Prefix == ps[1].A.Prefix {
		t.Errorf("pairs share names or subnets: %s %s, %s %s", ps[0].A.Iface, ps[0].A.Prefix, ps[1].A.Iface, ps[1].A.Prefix)
	}
	roundTrip(t, ps[0], "first")
	roundTrip(t, ps[1], "second")
	// Isolation: pair 0's A has no route to pair 1's B.
	err := ps[0].A.Do(func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ps[1].B.Addr, 9)))
		if err == nil {
			c.Close()
			return errors.New("a socket in pair 0 could reach pair 1's subnet")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// requireRootOrFatal is for tests that call New directly.
func requireRootOrFatal(t *testing.T, err error, i int) {
	t.Helper()
	var pe *dgramio.PrivilegeError
	if os.Geteuid() != 0 || errors.As(err, &pe) {
		testutil.Skip(t, "needs root: "+err.Error())
	}
	t.Fatalf("pair %d: %v", i, err)
}

// TestOptionsRefused: addresses outside the benchmarking ranges
// (198.18.0.0/15, 2001:2::/48), equal ones, IPv6 addresses without IPv6,
// IPv6 on a link below 1280 bytes, and queue, MTU and XPS settings out of
// range are refused before anything is made.
func TestOptionsRefused(t *testing.T) {
	// Refused before any syscall: no root needed.
	cases := []struct {
		o    Options
		want string
	}{
		{Options{A: netip.MustParsePrefix("10.0.0.1/24")}, "Options.A=10.0.0.1: test hosts and tools use only 198.18.0.0/15"},
		{Options{B: netip.MustParsePrefix("192.168.1.2/24")}, "Options.B=192.168.1.2: test hosts"},
		{Options{A: netip.MustParsePrefix("127.0.0.1/8")}, "Options.A=127.0.0.1/8: want an IPv4 address with a prefix inside 198.18.0.0/15"},
		{Options{A: netip.MustParsePrefix("198.18.0.1/8")}, "Options.A=198.18.0.1/8: want"},
		{Options{B: netip.MustParsePrefix("198.19.0.1/32")}, "Options.B=198.19.0.1/32: want"},
		{Options{A: netip.MustParsePrefix("198.18.0.1/24"), B: netip.MustParsePrefix("198.18.0.1/24")}, "same address 198.18.0.1"},
		{Options{Queues: -1}, "Queues=-1"},
		{Options{Queues: MaxQueues + 1}, "Queues=257"},
		{Options{MTU: -1}, "MTU=-1"},
		{Options{MTU: 67}, "MTU=67: want 68..65535"},
		{Options{Queues: 2, XPSCPUs: []int{0, -1}}, "XPSCPUs has CPU -1"},
		{Options{IPv6: true, A6: netip.MustParsePrefix("2001:db8::1/64")}, "Options.A6=2001:db8::1/64: want an IPv6 address with a prefix inside 2001:2::/48"},
		{Options{IPv6: true, B6: netip.MustParsePrefix("2001:2::2/32")}, "Options.B6=2001:2::2/32"},
		{Options{IPv6: true, A6: netip.MustParsePrefix("::ffff:198.18.0.1/128")}, "Options.A6"},
		{Options{IPv6: true, A6: netip.MustParsePrefix("2001:2::1/64"), B6: netip.MustParsePrefix("2001:2::1/64")}, "same address 2001:2::1"},
		{Options{A6: netip.MustParsePrefix("2001:2::1/64")}, "without Options.IPv6"},
		{Options{IPv6: true, MTU: 1279}, "MTU=1279 with IPv6"},
	}
	for _, tc := range cases {
		p, err := New(tc.o)
		if err == nil {
			p.Close()
			t.Errorf("New(%+v) accepted", tc.o)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v; want it to say %q", tc.o, err, tc.want)
		}
	}
}

// netnsRefs lists the descriptors and threads of this process that refer to
// a network namespace other than the main thread's.
func netnsRefs() map[string]string {
	root, _ := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", os.Getpid()))
	refs := map[string]string{}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
	for _, f := range append(fds, tasks...) {
		if l, _ := os.Readlink(f); strings.HasPrefix(l, "net:[") && l != root {
			refs[f] = l
		}
	}
	return refs
}

func TestFailedNewLeavesNothing(t *testing.T) {
	p := newT(t, Options{}) // skips unless root; also proves New works here
	p.Close()
	before := netnsRefs()
	// CPU 4095 does not exist here: writing its XPS mask fails after the
	// namespaces, the veth and the addresses are made.
	h, err := New(Options{Queues: 2, XPSCPUs: []int{0, 4095}})
	if err == nil {
		h.Close()
		testutil.Skip(t, "this host has a CPU 4095, so the XPS step cannot be made to fail")
	}
	if !strings.Contains(err.Error(), "set XPS") {
		t.Fatalf("New failed early, not at its last step: %v", err)
	}
	var extra map[string]string
	if !testutil.Eventually(30*time.Second, func() bool {
		extra = map[string]string{}
		for f, l := range netnsRefs() {
			if before[f] != l {
				extra[f] = l
			}
		}
		return len(extra) == 0
	}) {
		t.Errorf("a failed New left references to namespaces: %v", extra)
	}
	noRootLinks(t)
}

func TestMTU(t *testing.T) { testMTU(t, 9000, strings.Repeat("j", 8000)) }

// TestSmallMTU: below IPv6's minimum MTU (1280) the kernel drops the
// device's IPv6 settings; there is nothing to disable, and New works.
func TestSmallMTU(t *testing.T) { testMTU(t, 576, strings.Repeat("s", 500)) }

// testMTU makes a pair with Options.MTU mtu, checks that both ends have
// it, and sends payload across.
func testMTU(t *testing.T, mtu int, payload string) {
	t.Helper()
	p := newT(t, Options{MTU: mtu})
	for _, h := range []*Host{p.A, p.B} {
		l, err := h.Link()
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MTU != mtu {
			t.Errorf("%s: MTU %d, want %d", h.Iface, l.Attrs().MTU, mtu)
		}
	}
	roundTrip(t, p, payload)
}
