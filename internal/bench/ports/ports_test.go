package ports

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/bench/preflight"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// childEnv makes the test binary print its network namespace and exit.
const childEnv = "DGRAMIO_PORTS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ns, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(ns)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// standIn makes a veth pair (internal/testhost) and moves its B end into
// A's namespace, so that the namespace holds two "ports" cabled to each
// other, as a host with a two-port card does. Cleanup moves B back so the
// pair is removed as it was made.
func standIn(t *testing.T, queues int) *testhost.Pair {
	t.Helper()
	// The pair's own addresses stay out of DefaultA's and DefaultB's
	// subnet (and addOwnAddr's): a test host drawn there gave A
	// DefaultA already, and Open then found nothing to add.
	p := hosttest.New(t, testhost.Options{Queues: queues,
		A: netip.MustParsePrefix("198.18.251.1/24"), B: netip.MustParsePrefix("198.18.251.2/24")})
	err := p.B.Do(func() error {
		l, err := netlink.LinkByName(p.B.Iface)
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(l, int(p.A.NS))
	})
	if err != nil {
		t.Fatalf("move B into A's namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = p.A.Do(func() error {
			l, err := netlink.LinkByName(p.B.Iface)
			if err != nil {
				return err
			}
			return netlink.LinkSetNsFd(l, int(p.B.NS))
		})
	})
	return p
}

// state is what the test compares before and after.
type state struct {
	addrs    map[string][]string
	routes   []string
	up       map[string]bool
	channels map[string]ethtool.Channels
}

func snapshot(t *testing.T, h *testhost.Host, ifaces ...string) state {
	t.Helper()
	s := state{addrs: map[string][]string{}, up: map[string]bool{}, channels: map[string]ethtool.Channels{}}
	err := h.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		for _, n := range ifaces {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			as, err := netlink.AddrList(l, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, a := range as {
				s.addrs[n] = append(s.addrs[n], a.IPNet.String())
			}
			rs, err := netlink.RouteList(l, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, r := range rs {
				s.routes = append(s.routes, fmt.Sprintf("%s dev %s proto %d", r.Dst, n, r.Protocol))
			}
			s.up[n] = l.Attrs().Flags&net.FlagUp != 0
			if c, err := e.GetChannels(n); err == nil {
				c.Cmd = 0
				s.channels[n] = c
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeIRQs makes a /sys and /proc in which port name has interrupt 77,
// affine to CPU list old.
func fakeIRQs(t *testing.T, name, old string) (preflight.System, string) {
	t.Helper()
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	for p, v := range map[string]string{
		filepath.Join(sys, "class/net", name, "device/msi_irqs/77"): "msix",
		filepath.Join(sys, "class/net", name, "device/numa_node"):   "-1",
		filepath.Join(proc, "interrupts"):                           "    CPU0 CPU1\n 77: 1 2 PCI-MSIX 0-edge " + name + "-TxRx-0\n",
		filepath.Join(proc, "irq/77/smp_affinity_list"):             old + "\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return preflight.System{Sys: sys, Proc: proc}, filepath.Join(proc, "irq/77/smp_affinity_list")
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Two ports stand in by a veth pair: Open moves B into its own namespace,
// sets the queue count and the IRQ affinity for the run, the two ports
// talk over the "cable", a process started in B's namespace is there; Close
// gives back every address, route, state, channel count and affinity.
func TestMoveAndRestoreOnVeth(t *testing.T) {
	p := standIn(t, 2)
	a, b := p.A.Iface, p.B.Iface
	addOwnAddr(t, p.A, b)
	before := snapshot(t, p.A, a, b)
	if before.channels[a].RxCount != 2 {
		t.Fatalf("the stand-in has %+v channels, want 2", before.channels[a])
	}
	sys, irqFile := fakeIRQs(t, a, "1")

	ps, err := Open(Options{IfaceA: a, IfaceB: b, Home: p.A.NS, Queues: 1, RxUsecs: 0, IRQCPUsA: []int{0}, System: sys})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			ps.Close()
		}
	}()
	setup := strings.Join(ps.Setup(), "\n")
	t.Logf("setup:\n%s", setup)
	for _, want := range []string{
		b + " moved into a network namespace of its own", "back on exit with its 1 address(es) and 1 route(s)",
		a + " channels: rx 1 tx 1 combined 0 for the run (was rx 2 tx 2 combined 0)",
		a + " coalescing: not supported by the driver", // veth: no interrupt moderation
		a + ": IRQs 77 (was 1) steered to CPUs 0 for the run",
		a + " given " + DefaultA.String(),
	} {
		if !strings.Contains(setup, want) {
			t.Errorf("setup lacks %q", want)
		}
	}
	if got := readTrim(t, irqFile); got != "0" {
		t.Errorf("IRQ 77 affinity %q during the run, want 0", got)
	}
	if len(ps.A.IRQs) != 1 || ps.A.IRQs[0].N != 77 {
		t.Errorf("IRQs of A %+v", ps.A.IRQs)
	}
	during := snapshot(t, p.A, a)
	if during.channels[a].RxCount != 1 || during.channels[a].TxCount != 1 {
		t.Errorf("channels during the run %+v", during.channels[a])
	}
	checkMoved(t, p.A, ps, b)
	srv, cli := pingAcross(t, ps)
	checkChildInB(t, ps)
	srv.Close()
	cli.Close()
	if err := ps.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	after := snapshot(t, p.A, a, b)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("not restored:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := readTrim(t, irqFile); got != "1" {
		t.Errorf("IRQ 77 affinity %q after the run, want 1 back", got)
	}
	if err := ps.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// addOwnAddr gives port b (in h's namespace) something of its own to
// restore: an address and a route of another subnet, which the move to
// another namespace flushes.
func addOwnAddr(t *testing.T, h *testhost.Host, b string) {
	t.Helper()
	err := h.Do(func() error {
		l, err := netlink.LinkByName(b)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(netip.MustParsePrefix("198.18.253.7/24"))}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("198.18.252.0/24")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkMoved checks that port b left home's namespace for ps.B's, with
// B's address only, and that its offloads and A's coalescing read as a
// veth's.
func checkMoved(t *testing.T, home *testhost.Host, ps *Ports, b string) {
	t.Helper()
	if err := home.Do(func() error { _, err := netlink.LinkByName(b); return err }); err == nil {
		t.Fatal("B is still in the home namespace")
	}
	var bAddrs []string
	err := ps.B.Do(func() error {
		l, err := netlink.LinkByName(b)
		if err != nil {
			return err
		}
		as, _ := netlink.AddrList(l, netlink.FAMILY_V4)
		for _, x := range as {
			bAddrs = append(bAddrs, x.IPNet.String())
		}
		return nil
	})
	if err != nil || len(bAddrs) != 1 || bAddrs[0] != DefaultB.String() {
		t.Fatalf("B in its namespace: %v, addresses %v", err, bAddrs)
	}
	if off, err := ps.B.Offloads(); err != nil || len(off) == 0 {
		t.Errorf("offloads of B: %v %v", off, err)
	}
	if _, err := ps.A.RxUsecs(); err == nil {
		t.Error("veth reported coalescing")
	}

}

// pingAcross sends a datagram from A's namespace to B's address over the
// "cable" and waits for the answer; it returns both sockets, which the
// caller closes.
func pingAcross(t *testing.T, ps *Ports) (srv, cli *net.UDPConn) {
	t.Helper()
	if err := ps.B.Do(func() error {
		var err error
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: ps.B.Addr.AsSlice(), Port: 5599})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	testutil.EchoUDP(srv)
	if err := ps.A.Do(func() error {
		var err error
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: ps.B.Addr.AsSlice(), Port: 5599})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	got := ""
	buf := make([]byte, 64)
	for deadline := time.Now().Add(30 * time.Second); got != "ping" && time.Now().Before(deadline); {
		cli.Write([]byte("ping"))
		cli.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if n, err := cli.Read(buf); err == nil {
			got = string(buf[:n])
		}
	}
	if got != "ping" {
		t.Fatal("no answer across the ports")
	}

	return srv, cli
}

// checkChildInB checks that a process started in B's namespace runs there.
func checkChildInB(t *testing.T, ps *Ports) {
	t.Helper()
	var want string
	var err error
	ps.B.Do(func() error { want, err = os.Readlink("/proc/thread-self/ns/net"); return err })
	cmd := ps.B.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.B.Start(cmd); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Wait()
	if strings.TrimSpace(line) != want || want == "" {
		t.Fatalf("child in namespace %q, B's is %q", strings.TrimSpace(line), want)
	}

}

// An error midway (a port that cannot move: lo) undoes what was done
// before it.
func TestOpenUndoesOnError(t *testing.T) {
	p := standIn(t, 2)
	a := p.A.Iface
	before := snapshot(t, p.A, a)
	sys, irqFile := fakeIRQs(t, a, "1")
	_, err := Open(Options{IfaceA: a, IfaceB: "lo", Home: p.A.NS, Queues: 1, RxUsecs: -1, IRQCPUsA: []int{0}, System: sys})
	if err == nil {
		t.Fatal("lo moved into another namespace?")
	}
	t.Logf("error: %v", err)
	if after := snapshot(t, p.A, a); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("not restored:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := readTrim(t, irqFile); got != "1" {
		t.Errorf("IRQ affinity %q, want 1 back", got)
	}
	// A port that carries the default route is refused, untouched.
	b := p.B.Iface
	if err := p.A.Do(func() error {
		l, err := netlink.LinkByName(b)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(netip.MustParsePrefix("198.18.253.7/24"))}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP("198.18.253.1")})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{IfaceA: a, IfaceB: b, Home: p.A.NS}); err == nil || !strings.Contains(err.Error(), "default route") {
		t.Fatalf("a port with the default route: %v", err)
	}
	if err := p.A.Do(func() error { _, err := netlink.LinkByName(b); return err }); err != nil {
		t.Fatalf("the refused port moved: %v", err)
	}
	// A port that does not exist fails before anything changes.
	if _, err := Open(Options{IfaceA: a, IfaceB: "dgnosuch0", Home: p.A.NS}); err == nil {
		t.Fatal("no error for a missing port")
	}
	for _, bad := range []Options{{IfaceA: a}, {IfaceA: a, IfaceB: a}, {IfaceA: a, IfaceB: "x", A: netip.MustParsePrefix("10.0.0.1/24")}} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%+v) accepted", bad)
		}
	}
}

// fakeNIC records calls; its coalescing and channels are in memory.
type fakeNIC struct {
	ch   map[string]ethtool.Channels
	co   map[string]ethtool.Coalesce
	fail map[string]bool
}

func (f *fakeNIC) GetChannels(i string) (ethtool.Channels, error) { return f.ch[i], nil }
func (f *fakeNIC) SetChannels(i string, c ethtool.Channels) (ethtool.Channels, error) {
	if f.fail["channels"] {
		return c, unix.EINVAL
	}
	f.ch[i] = c
	return c, nil
}
func (f *fakeNIC) GetCoalesce(i string) (ethtool.Coalesce, error) { return f.co[i], nil }
func (f *fakeNIC) SetCoalesce(i string, c ethtool.Coalesce) (ethtool.Coalesce, error) {
	f.co[i] = c
	return c, nil
}
func (f *fakeNIC) Features(string) (map[string]bool, error) {
	return map[string]bool{"tx-checksum-ipv4": true}, nil
}
func (f *fakeNIC) Close() {}

// Coalescing and combined channels, which veth does not have, through a
// fake NIC: set for the run (adaptive RX off), restored by Close.
func TestCoalescingRestoredFakeNIC(t *testing.T) {
	p := standIn(t, 1)
	a, b := p.A.Iface, p.B.Iface
	nic := &fakeNIC{
		ch: map[string]ethtool.Channels{a: {MaxCombined: 8, CombinedCount: 8}, b: {MaxCombined: 8, CombinedCount: 1}},
		co: map[string]ethtool.Coalesce{a: {RxCoalesceUsecs: 50, UseAdaptiveRxCoalesce: 1}, b: {RxCoalesceUsecs: 0}},
	}
	orig := fmt.Sprint(nic.ch, nic.co)
	ps, err := Open(Options{IfaceA: a, IfaceB: b, Home: p.A.NS, Queues: 1, RxUsecs: 0,
		NewNIC: func() (NIC, error) { return nic, nil }})
	if err != nil {
		t.Fatal(err)
	}
	setup := strings.Join(ps.Setup(), "\n")
	for _, want := range []string{
		a + " channels: combined 1 for the run (was combined 8)", b + " channels: combined 1 already",
		a + " coalescing: rx-usecs 0, adaptive-rx off for the run (was rx-usecs 50, adaptive-rx on)", b + " coalescing: rx-usecs 0 already",
	} {
		if !strings.Contains(setup, want) {
			t.Errorf("setup lacks %q:\n%s", want, setup)
		}
	}
	if c := nic.co[a]; c.RxCoalesceUsecs != 0 || c.UseAdaptiveRxCoalesce != 0 || nic.ch[a].CombinedCount != 1 {
		t.Fatalf("during the run: %+v %+v", c, nic.ch[a])
	}
	if us, err := ps.A.RxUsecs(); err != nil || us != 0 {
		t.Fatalf("RxUsecs %d %v", us, err)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(nic.ch, nic.co); got != orig {
		t.Fatalf("not restored:\n got %s\nwant %s", got, orig)
	}
}
