//go:build linux

package udp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"

	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// kernelEcho starts a kernel UDP echo server on h at port, and returns a
// function that stops it and reports how many datagrams it echoed.
func kernelEcho(t *testing.T, h *testhost.Host, port int) func() int {
	t.Helper()
	return kernelEchoAt(t, h, h.Addr, port)
}

// vethFamily is one column of the veth tests that run over both
// families: the pair's options and which of a host's addresses serves.
type vethFamily struct {
	name string
	v6   bool
}

var vethFamilies = []vethFamily{{"IPv4", false}, {"IPv6", true}}

// forVethFamilies runs fn as a subtest per family.
func forVethFamilies(t *testing.T, fn func(t *testing.T, f vethFamily)) {
	for _, f := range vethFamilies {
		t.Run(f.name, func(t *testing.T) { fn(t, f) })
	}
}

// pair makes a veth pair with IPv6 on for the IPv6 column.
func (f vethFamily) pair(t *testing.T) *testhost.Pair {
	return hosttest.New(t, testhost.Options{IPv6: f.v6})
}

// addr returns h's address of the family.
func (f vethFamily) addr(h *testhost.Host) netip.Addr {
	if f.v6 {
		return h.Addr6
	}
	return h.Addr
}

// delAddr takes h's address of the family off its veth end.
func (f vethFamily) delAddr(h *testhost.Host) error {
	if f.v6 {
		return h.DelAddr6()
	}
	return h.DelAddr()
}

// neighbours are the layer and counters of the family's neighbour
// protocol: a resolution made (out, in) and one answered (in, out).
func (f vethFamily) neighbours() (string, [4]string) {
	if f.v6 {
		return "ndp", [4]string{"solicits_out", "adverts_in", "solicits_in", "adverts_out"}
	}
	return "arp", [4]string{"requests_out", "replies_in", "requests_in", "replies_out"}
}

// pathLost is s.Lost() less the transmit drops of a DPDK vdev's kernel
// interface (iface.tx_dropped, a loss on net_af_xdp), for a test that saw
// every message it sent arrive: those drops were then the kernel's own
// frames (with IPv6 on, Linux's MLD reports and neighbour discovery, also
// while the PMD's bind resets the link), not the path's.
func pathLost(s dgramio.Stats) uint64 {
	n := s.Lost()
	for _, c := range s.Layers {
		if c.Layer == "iface" && c.Name == "tx_dropped" && c.Loss {
			n -= c.Value
		}
	}
	return n
}

// kernelEchoAt is kernelEcho on addr (either family).
func kernelEchoAt(t *testing.T, h *testhost.Host, addr netip.Addr, port int) func() int {
	t.Helper()
	var conn *net.UDPConn
	err := h.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port))))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			k, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if _, err := conn.WriteToUDPAddrPort(buf[:k], from); err != nil {
				return
			}
			n++
		}
	}()
	stop := func() int { conn.Close(); <-done; return n }
	t.Cleanup(func() { stop() })
	return stop
}

// openXDP opens kind xdp inside h's namespace (openIn).
func openXDP(t *testing.T, h *testhost.Host, cfg dgramio.Config) dgramio.Backend {
	t.Helper()
	return openIn(t, h, NewXDP, cfg)
}

// openIn opens a backend with open(cfg) inside h's namespace, skipping
// (failing in CI) when the kernel lacks what it needs; it is closed at
// cleanup.
func openIn(t *testing.T, h *testhost.Host, open func(dgramio.Config) (dgramio.Backend, error), cfg dgramio.Config) dgramio.Backend {
	t.Helper()
	var b dgramio.Backend
	err := h.Do(func() error {
		var err error
		b, err = open(cfg)
		return err
	})
	testutil.SkipIfNotSupported(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// kernelClient is a kernel UDP socket inside h connected to addr; closed
// at cleanup.
func kernelClient(t *testing.T, h *testhost.Host, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() error {
		var err error
		network := "udp4"
		if addr.Addr().Is6() {
			network = "udp6"
		}
		c, err = net.DialUDP(network, nil, net.UDPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// kernelAnswers sends a datagram from a kernel socket in h to a kernel
// echo at addr until it comes back (21 tries, 500 ms each), and returns
// the last error when it never does.
func kernelAnswers(t *testing.T, h *testhost.Host, addr netip.AddrPort) error {
	t.Helper()
	c := kernelClient(t, h, addr)
	buf := make([]byte, 100)
	for i := 0; ; i++ {
		c.Write([]byte("kernel, are you there?"))
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		k, err := c.Read(buf)
		if err == nil {
			if string(buf[:k]) != "kernel, are you there?" {
				t.Fatalf("answer %q", buf[:k])
			}
			return nil
		}
		if i == 20 {
			return err
		}
	}
}

func xdpAttached(t *testing.T, h *testhost.Host) bool {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	return x != nil && (x.Attached || x.ProgId != 0)
}

// echoRun sends n numbered messages of size bytes through b to its
// destination, at most window outstanding, and waits for every echo. It
// returns the number of echoes received.
func echoRun(t *testing.T, b dgramio.Backend, n, size, window int) int {
	t.Helper()
	seen := make([]bool, n)
	got, sent := 0, 0
	pkts := make([]dgramio.Packet, 64)
	payload := make([]byte, size)
	deadline := time.Now().Add(60 * time.Second)
	lastProgress := time.Now()
	for got < n && time.Now().Before(deadline) {
		for sent < n && sent-got < window {
			binary.BigEndian.PutUint32(payload, uint32(sent))
			if b.Queue(payload) != nil {
				break
			}
			sent++
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		k, err := b.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:k] {
			i := int(binary.BigEndian.Uint32(p.Data))
			if i >= n || len(p.Data) != size || seen[i] {
				t.Fatalf("echo %d: %d bytes, seen before %v", i, len(p.Data), i < n && seen[i])
			}
			seen[i] = true
			got++
			lastProgress = time.Now()
		}
		if k == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			b.Wait(ctx)
			cancel()
			// A lost message would stall the window for good: after a quiet
			// second, count what is missing as lost and move on.
			if time.Since(lastProgress) > time.Second && sent-got >= window {
				break
			}
		}
	}
	return got
}

// TestXDPEchoKernelPeer: 10k messages from the xdp kind to a kernel UDP
// echo server and back. The kernel keeps the address; the peer's MAC comes
// from the kernel's neighbour table, resolved on demand.
//
// Over IPv6 the program's IPv6 steering is on, the frames are IPv6/UDP
// with the mandatory checksum (RFC 8200 §8.1), and the kernel resolves B
// with its own neighbour solicitation (RFC 4861 §7.2.2), asked through
// netlink.
func TestXDPEchoKernelPeer(t *testing.T) { forVethFamilies(t, testXDPEchoKernelPeer) }

func testXDPEchoKernelPeer(t *testing.T, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	echoed := kernelEchoAt(t, p.B, f.addr(p.B), 5000)
	if err := p.A.DelNeigh(f.addr(p.B)); err != nil {
		t.Fatal(err)
	}
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Iface: p.A.Iface, LocalIP: f.addr(p.A),
		Dests: []netip.AddrPort{netip.AddrPortFrom(f.addr(p.B), 5000)}, Port: 5000})
	if !xdpAttached(t, p.A) {
		t.Fatal("no XDP program on the interface while xdp runs")
	}
	const n = 10000
	got := echoRun(t, b, n, 100, 64)
	s := b.Stats()
	t.Logf("mode %q, echoed %d, stats %+v", s.Mode, got, s)
	if got != n {
		t.Fatalf("%d of %d echoes (kernel echoed %d)", got, n, echoed())
	}
	if !strings.HasPrefix(s.Mode, "xdp ") || s.TxSent != n || s.RxDelivered != n || s.Lost() != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if xdpAttached(t, p.A) {
		t.Fatal("XDP program left on the interface after Close")
	}
	if _, err := b.Rx(make([]dgramio.Packet, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Rx after Close: %v", err)
	}
}

// TestXDPStatsAfterCloseCountUnread: datagrams that reached the socket but
// were never read when the backend closed are lost, and Stats after Close
// says so (xsk rx_unread_at_close, a loss), with the kernel's counters as
// Close read them.
func TestXDPStatsAfterCloseCountUnread(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Role: dgramio.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 5000})
	c := kernelClient(t, p.B, netip.AddrPortFrom(p.A.Addr, 5000))
	const n = 10
	for i := 0; i < n; i++ {
		if _, err := c.Write([]byte("never read")); err != nil {
			t.Fatal(err)
		}
	}
	redirected := func() uint64 { s := b.Stats(); v, _ := s.Counter("xdp-prog", "redirected"); return v }
	for deadline := time.Now().Add(20 * time.Second); redirected() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d datagrams reached the socket", redirected(), n)
		}
	}
	before := b.Stats()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	unread, ok := s.Counter("xsk", "rx_unread_at_close")
	redir, _ := s.Counter("xdp-prog", "redirected")
	t.Logf("before Close: lost %d; after: rx_unread_at_close %d, redirected %d, lost %d", before.Lost(), unread, redir, s.Lost())
	if !ok || unread != redir || redir < n {
		t.Errorf("after Close: rx_unread_at_close %d (%v), redirected %d, want %d or more, equal", unread, ok, redir, n)
	}
	if s.Lost() < before.Lost()+unread {
		t.Errorf("after Close: Lost() %d does not count the %d unread", s.Lost(), unread)
	}
}

// TestXDPKernelAnswersOtherPort: while xdp holds port 5000 on A, the
// kernel on A still serves another port and answers ARP.
func TestXDPKernelAnswersOtherPort(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	kernelEcho(t, p.B, 5000)
	kernelEcho(t, p.A, 6000)
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Iface: p.A.Iface, LocalIP: p.A.Addr,
		Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000})
	// B's kernel forgets A, so it has to ask A's kernel by ARP again.
	if err := p.B.DelNeigh(p.A.Addr); err != nil {
		t.Fatal(err)
	}
	if err := kernelAnswers(t, p.B, netip.AddrPortFrom(p.A.Addr, 6000)); err != nil {
		t.Fatalf("the kernel on A did not answer on port 6000 while xdp ran: %v", err)
	}
	// And xdp still works beside it.
	if got := echoRun(t, b, 100, 64, 16); got != 100 {
		t.Fatalf("%d of 100 echoes", got)
	}
}

// TestXDPOwnARP: A's address is taken off the kernel, and arp/ answers
// and resolves for it. A resolves B by ARP (B's kernel answers); then B's
// kernel, made to forget A, asks for A by ARP to send its echoes, and
// arp/ answers.
//
// Over IPv6 the program takes the neighbour solicitations and
// advertisements about A (variant UDPARP with IPv6 steering) and ndp/
// resolves B (RFC 4861 §7.2.2) and answers B's kernel (§7.2.4).
func TestXDPOwnARP(t *testing.T) { forVethFamilies(t, testXDPOwnARP) }

func testXDPOwnARP(t *testing.T, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	a, bAddr := f.addr(p.A), f.addr(p.B)
	kernelEchoAt(t, p.B, bAddr, 5000)
	if err := f.delAddr(p.A); err != nil {
		t.Fatal(err)
	}
	if err := p.B.DelNeigh(a); err != nil {
		t.Fatal(err)
	}
	// Nor may A's kernel know B (ndp/ asks the kernel's table first).
	if err := p.A.DelNeigh(bAddr); err != nil {
		t.Fatal(err)
	}
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Iface: p.A.Iface, LocalIP: a,
		Dests: []netip.AddrPort{netip.AddrPortFrom(bAddr, 5000)}, Port: 5000, XDP: dgramio.XDPOptions{OwnARP: true}})
	layer, names := f.neighbours()
	s := b.Stats()
	wantLayer(t, s, layer, names[0], names[1]) // A resolved B
	// B's kernel learnt A from our request; make it forget, so its echo
	// needs a request that only arp/ (ndp/) can answer.
	if err := p.B.DelNeigh(a); err != nil {
		t.Fatal(err)
	}
	if got := echoRun(t, b, 200, 100, 16); got != 200 {
		s := b.Stats()
		t.Fatalf("%d of 200 echoes; stats %+v", got, s)
	}
	s = b.Stats()
	wantLayer(t, s, layer, names[2], names[3]) // B's kernel asked for A
	mac, state, err := p.B.Neigh(a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mac, p.A.MAC) {
		t.Fatalf("B's kernel holds %v (state %#x) for A, want %v", mac, state, p.A.MAC)
	}
	t.Logf("%s counters: %v", layer, s.Layers)
}

// TestXDPUnheldAddress: kind xdp on an address the kernel does not hold
// (A's kernel keeps its own address on the same veth) answers and
// resolves it itself without being told (Config.XDP.OwnARP): B's kernel
// asks for it by ARP (IPv6: a neighbour solicitation, RFC 4861 §7.2.3)
// and every echo comes back. Meanwhile A's kernel still answers for its
// own address on that veth: the program takes only the neighbour frames
// about ours.
func TestXDPUnheldAddress(t *testing.T) { forVethFamilies(t, testXDPUnheldAddress) }

func testXDPUnheldAddress(t *testing.T, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	aKernel, bAddr := f.addr(p.A), f.addr(p.B)
	ours := aKernel.As16()
	ours[15] = 0x40 // in the subnet, neither end's address
	a := netip.AddrFrom16(ours)
	if !f.v6 {
		a = a.Unmap()
	}
	kernelEchoAt(t, p.B, bAddr, 5000)
	kernelEchoAt(t, p.A, aKernel, 6000)
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Iface: p.A.Iface, LocalIP: a,
		Dests: []netip.AddrPort{netip.AddrPortFrom(bAddr, 5000)}, Port: 5000})
	// B's kernel learnt us from our own request for B; make it forget,
	// so that its echoes need a request only we answer.
	if err := p.B.DelNeigh(a); err != nil {
		t.Fatal(err)
	}
	if got := echoRun(t, b, 200, 100, 16); got != 200 {
		t.Fatalf("%d of 200 echoes from %v; stats %+v", got, a, b.Stats())
	}
	layer, names := f.neighbours()
	s := b.Stats()
	wantLayer(t, s, layer, names[2], names[3]) // B's kernel asked for us
	// B's kernel forgets A's own address: A's kernel must answer for it
	// again while the xdp backend runs.
	if err := p.B.DelNeigh(aKernel); err != nil {
		t.Fatal(err)
	}
	if err := kernelAnswers(t, p.B, netip.AddrPortFrom(aKernel, 6000)); err != nil {
		t.Fatalf("A's kernel did not answer for its own address %v while xdp owned %v: %v; stats %+v", aKernel, a, err, b.Stats())
	}
	if s = b.Stats(); counter(t, s, "xdp-prog", "pass_other_host") == 0 {
		t.Error("xdp-prog pass_other_host 0: the neighbour frames about A's own address did not pass to its kernel")
	}
}

// TestXDPOversizedMaxDatagram: a MaxDatagram that does not fit one RX
// buffer is refused, and nothing is left attached.
func TestXDPOversizedMaxDatagram(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	for _, md := range []int{1473, 4000} {
		var err error
		p.A.Do(func() error {
			var b dgramio.Backend
			b, err = NewXDP(dgramio.Config{Kind: dgramio.KindXDP, Iface: p.A.Iface, LocalIP: p.A.Addr,
				Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000, DstMAC: p.B.MAC, MaxDatagram: md})
			if err == nil {
				b.Close()
			}
			return nil
		})
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) {
			testutil.SkipIfNotSupported(t, err)
			t.Fatalf("MaxDatagram %d: %v, want a *dgramio.ConfigError", md, err)
		}
		t.Logf("MaxDatagram %d: %v", md, err)
		if xdpAttached(t, p.A) {
			t.Fatal("XDP program left after a refused open")
		}
	}
}

// TestNeighbourResolver: an address missing from the table is resolved by
// the kernel on request (ARP, or for IPv6 the kernel's neighbour
// solicitation, RFC 4861 §7.2.2); one behind a router resolves to the
// router's MAC; one nobody has ends in an error naming it.
func TestNeighbourResolver(t *testing.T) { forVethFamilies(t, testNeighbourResolver) }

func testNeighbourResolver(t *testing.T, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	bAddr := f.addr(p.B)
	var nl *netlink.Handle
	if err := p.A.Do(func() error {
		var err error
		nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := p.A.DelNeigh(bAddr); err != nil {
		t.Fatal(err)
	}
	r := NeighbourResolver(nl, p.A.Index, p.A.Iface)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mac, err := r(ctx, bAddr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mac[:], p.B.MAC) {
		t.Fatalf("resolved %x, want %v", mac, p.B.MAC)
	}
	// An address behind a router resolves to the router's MAC: the next
	// hop of the kernel's route (RFC 1122 3.3.1.2: off-link datagrams go
	// to a gateway; RFC 4861 §5.2 for IPv6), here B. The route goes with
	// the namespace.
	far, prefix := netip.MustParsePrefix("198.19.254.0/24"), p.B.Prefix
	if f.v6 {
		far, prefix = netip.MustParsePrefix("2001:2:0:fe::/64"), p.B.Prefix6
	}
	gw := &netlink.Route{LinkIndex: p.A.Index, Dst: &net.IPNet{IP: far.Addr().AsSlice(), Mask: net.CIDRMask(far.Bits(), far.Addr().BitLen())}, Gw: bAddr.AsSlice()}
	if err := nl.RouteAdd(gw); err != nil {
		t.Fatal(err)
	}
	if err := p.A.DelNeigh(bAddr); err != nil {
		t.Fatal(err)
	}
	mac, err = r(ctx, far.Addr().Next().Next().Next()) // ::3 or .3 behind B
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mac[:], p.B.MAC) {
		t.Fatalf("off-link peer resolved to %x, want the router's %v", mac, p.B.MAC)
	}
	nobody := prefix.Masked().Addr().Next().Next().Next().Next() // .4 (::4) in B's prefix
	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	_, err = r(ctx2, nobody)
	if err == nil || !strings.Contains(err.Error(), nobody.String()) || !strings.Contains(err.Error(), p.A.Iface) {
		t.Fatalf("resolving an absent peer: %v", err)
	}
}

// TestXDPPinsWithCPUs: with Config.CPUs, NewXDP pins the calling thread,
// and Close on that thread unpins it.
func TestXDPPinsWithCPUs(t *testing.T) {
	testutil.RequireRoot(t)
	allowed, err := cpu.Allowed()
	if err != nil || len(allowed) < 2 {
		testutil.Skip(t, "needs two allowed CPUs")
	}
	p := hosttest.New(t, testhost.Options{})
	want := allowed[len(allowed)-1]
	var pinned, after []int
	err = p.A.Do(func() error {
		b, err := NewXDP(dgramio.Config{Kind: dgramio.KindXDP, Iface: p.A.Iface, LocalIP: p.A.Addr,
			Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000, DstMAC: p.B.MAC, CPUs: []int{want}})
		if err != nil {
			return err
		}
		pinned, _ = cpu.Current()
		b.Close()
		after, _ = cpu.Current()
		return nil
	})
	testutil.SkipIfNotSupported(t, err)
	if len(pinned) != 1 || pinned[0] != want {
		t.Fatalf("pinned to %v, want [%d]", pinned, want)
	}
	if len(after) != len(allowed) {
		t.Fatalf("after Close the thread runs on %v, want all of %v", after, allowed)
	}
}
