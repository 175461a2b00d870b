//go:build dpdk

package udp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/dpdk"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// openDPDK opens kind dpdk with a vdev of driver on h's veth end, inside
// h's namespace.
func openDPDK(t *testing.T, h *testhost.Host, driver string, cfg dgramio.Config) dgramio.Backend {
	t.Helper()
	testutil.RequireRoot(t)
	cfg.Kind = dgramio.KindDPDK
	cfg.DPDK.VDev = fmt.Sprintf("%s_u%d,iface=%s", driver, dpdkSeq(), h.Iface)
	return openIn(t, h, NewDPDK, cfg)
}

var dpdkN int

func dpdkSeq() int { dpdkN++; return dpdkN }

// icmpStat reads a counter of the Icmp line of /proc/net/snmp in h's
// namespace.
func icmpStat(t *testing.T, h *testhost.Host, name string) uint64 {
	t.Helper()
	var v uint64
	err := h.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		var head []string
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) == 0 || fields[0] != "Icmp:" {
				continue
			}
			if head == nil {
				head = fields
				continue
			}
			for i, h := range head {
				if h == name && i < len(fields) {
					v, err = strconv.ParseUint(fields[i], 10, 64)
					return err
				}
			}
		}
		return fmt.Errorf("no Icmp %s in snmp", name)
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// icmp6Stat reads a counter of /proc/net/snmp6 ("Icmp6InDestUnreachs")
// in h's namespace.
func icmp6Stat(t *testing.T, h *testhost.Host, name string) uint64 {
	t.Helper()
	var v uint64
	err := h.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == name {
				v, err = strconv.ParseUint(fields[1], 10, 64)
				return err
			}
		}
		return fmt.Errorf("no %s in snmp6", name)
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// unreachables reads B's count of ICMP (ICMPv6) destination unreachable
// received.
func (f vethFamily) unreachables(t *testing.T, h *testhost.Host) uint64 {
	if f.v6 {
		return icmp6Stat(t, h, "Icmp6InDestUnreachs")
	}
	return icmpStat(t, h, "InDestUnreachs")
}

// neighbourFrames sums the counters of layer (arp or ndp) that count the
// frames the handler took: each such frame is counted once in one of them.
func neighbourFrames(s dgramio.Stats, layer string) uint64 {
	var n uint64
	for _, c := range s.Layers {
		if c.Layer != layer {
			continue
		}
		switch {
		case c.Name == "requests_in", c.Name == "replies_in", c.Name == "solicits_in", c.Name == "adverts_in",
			c.Name == "ignored", c.Name == "dup_addr", c.Name == "malformed", strings.HasPrefix(c.Name, "malformed_"):
			n += c.Value
		}
	}
	return n
}

// TestDPDKEchoKernelPeer: 10k messages from the dpdk kind on A to a kernel
// UDP echo server on B and back, over net_af_xdp and net_af_packet, over
// IPv4 and IPv6. Address resolution goes both ways through arp/ (ndp/ for
// IPv6, RFC 4861 §7.2.2 and §7.2.4): A resolves B with its own request,
// and B's kernel, made to forget A, asks for A and gets our answer. On
// net_af_packet A's kernel keeps the address and sees every datagram: the
// sink socket keeps it from answering with ICMP port unreachable.
func TestDPDKEchoKernelPeer(t *testing.T) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		for _, f := range vethFamilies {
			t.Run(driver+"/"+f.name, func(t *testing.T) { testDPDKEchoKernelPeer(t, driver, f) })
		}
	}
}

func testDPDKEchoKernelPeer(t *testing.T, driver string, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	aAddr, bAddr := f.addr(p.A), f.addr(p.B)
	kernelEchoAt(t, p.B, bAddr, 5000)
	if err := p.B.DelNeigh(aAddr); err != nil {
		t.Fatal(err)
	}
	// A's kernel must not know B either: ndp/ asks the kernel's table
	// of a vdev's interface first.
	if err := p.A.DelNeigh(bAddr); err != nil {
		t.Fatal(err)
	}
	unreachBefore := f.unreachables(t, p.B)
	b := openDPDK(t, p.A, driver, dgramio.Config{Iface: p.A.Iface, LocalIP: aAddr,
		Dests: []netip.AddrPort{netip.AddrPortFrom(bAddr, 5000)}, Port: 5000})
	s := b.Stats()
	if !strings.HasPrefix(s.Mode, "dpdk "+driver) {
		t.Fatalf("mode %q", s.Mode)
	}
	layer, names := f.neighbours()
	wantLayer(t, s, layer, names[0], names[1]) // A resolved B
	// B's kernel learnt A from our request; make it forget, so
	// its echoes need a request that arp/ (ndp/) answers.
	if err := p.B.DelNeigh(aAddr); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	got := echoRun(t, b, n, 100, 64)
	s = b.Stats()
	t.Logf("mode %q, echoed %d, stats %+v", s.Mode, got, s)
	if got != n {
		t.Fatalf("%d of %d echoes", got, n)
	}
	// Every datagram made the round trip: pathLost leaves out the
	// kernel's own frames that its interface dropped.
	if s.TxSent != n || s.RxDelivered != n || pathLost(s) != 0 || s.TxDropped != 0 {
		t.Fatalf("TxSent %d RxDelivered %d Lost %d (of the path %d) TxDropped %d", s.TxSent, s.RxDelivered, s.Lost(), pathLost(s), s.TxDropped)
	}
	wantLayer(t, s, layer, names[2], names[3]) // B's kernel asked for A
	if mac, _, err := p.B.Neigh(aAddr); err != nil || !bytes.Equal(mac, p.A.MAC) {
		t.Fatalf("B's kernel holds %v for A (%v), want %v", mac, err, p.A.MAC)
	}
	// Every frame the port delivered was a datagram of ours, a
	// neighbour protocol frame, or counted as filtered.
	rx, _ := s.Counter("frameio", "rx_frames")
	nb := neighbourFrames(s, layer)
	if rx != s.RxDelivered+s.RxFiltered+s.RxMalformed+s.RxBadChecksum+nb {
		t.Errorf("rx_frames %d != delivered %d + filtered %d + malformed %d + bad checksum %d + %s %d",
			rx, s.RxDelivered, s.RxFiltered, s.RxMalformed, s.RxBadChecksum, layer, nb)
	}
	if u := f.unreachables(t, p.B) - unreachBefore; u != 0 {
		t.Errorf("B got %d ICMP destination unreachable from A's kernel", u)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Rx(make([]dgramio.Packet, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Rx after Close: %v", err)
	}
	l, err := p.A.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Fatal("XDP program left on the interface after Close")
	}
	if on, _ := p.A.Promisc(); on {
		t.Fatal("interface left promiscuous")
	}
	if dir := dpdk.RuntimeDir(); dir != "" {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left behind", dir)
		}
	}
}

// TestDPDKServerFiltersOtherPorts: a dpdk server answers on its port; a
// datagram to another port is counted as filtered, not delivered.
func TestDPDKServerFiltersOtherPorts(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	if err := p.A.DelAddr(); err != nil { // arp/ alone owns A's address
		t.Fatal(err)
	}
	b := openDPDK(t, p.A, "net_af_xdp", dgramio.Config{Role: dgramio.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 5000})
	var c *net.UDPConn
	if err := p.B.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.B.Addr.AsSlice()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := netip.AddrPortFrom(p.A.Addr, 5000)
	other := netip.AddrPortFrom(p.A.Addr, 5001)
	pkts := make([]dgramio.Packet, 16)
	delivered := 0
	for i := 0; i < 200 && delivered < 10; i++ {
		c.WriteToUDPAddrPort([]byte("to 5001"), other)
		c.WriteToUDPAddrPort([]byte("to 5000"), to)
		for try := 0; try < 100; try++ {
			k, err := b.Rx(pkts)
			if err != nil {
				t.Fatal(err)
			}
			for _, pk := range pkts[:k] {
				if string(pk.Data) != "to 5000" {
					t.Fatalf("delivered %q", pk.Data)
				}
				b.QueueTo(pk.Data, pk.From)
				delivered++
			}
			b.Flush()
			if k > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if delivered < 10 {
		t.Fatalf("only %d datagrams delivered; stats %+v", delivered, b.Stats())
	}
	s := b.Stats()
	if s.RxFiltered < 1 {
		t.Fatalf("datagrams to port 5001 not counted as filtered: %+v", s)
	}
	if v, _ := s.Counter("arp", "replies_out"); v < 1 {
		t.Fatalf("B's kernel reached A without arp/ answering: %v", s.Layers)
	}
	t.Logf("delivered %d, filtered %d", delivered, s.RxFiltered)
}

// TestDPDKServerSendsFirst: a dpdk server answers nobody yet; its first
// datagram goes to a kernel peer it resolves with ARP on the poll loop,
// without waiting in QueueTo (RFC 826: request broadcast, reply learnt).
//
// Over IPv6 ndp/ solicits B on the poll loop (RFC 4861 §7.2.2) and B's
// advertisement gives its MAC.
func TestDPDKServerSendsFirst(t *testing.T) { forVethFamilies(t, testDPDKServerSendsFirst) }

func testDPDKServerSendsFirst(t *testing.T, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	if err := p.A.DelNeigh(f.addr(p.B)); err != nil { // not from the kernel's table
		t.Fatal(err)
	}
	b := openDPDK(t, p.A, "net_af_xdp", dgramio.Config{Iface: p.A.Iface, LocalIP: f.addr(p.A),
		Role: dgramio.RoleServer, Port: 5000})
	serverSendsFirst(t, b, p.B, f.addr(p.B))
	layer, names := f.neighbours()
	if s := b.Stats(); counter(t, s, layer, names[1]) != 1 {
		t.Fatalf("%s %s %v", layer, names[1], s.Layers)
	}
}

// TestDPDKServerSendsFirstBehindRouter: a peer behind a router is reached
// through the router's MAC, which ARP resolves (the kernel's route on the
// vdev's interface names the gateway), not through an ARP for the peer
// that nobody on the link would answer.
func TestDPDKServerSendsFirstBehindRouter(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	far := behindB(t, p)
	b := openDPDK(t, p.A, "net_af_xdp", dgramio.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
		Role: dgramio.RoleServer, Port: 5000})
	serverSendsFirst(t, b, p.B, far)
}

// TestDPDKClientDestBehindRouter: a client's Dest behind a router is
// resolved at construction through the gateway (RFC 1122 3.3.1.2), and
// what it sends arrives: the gateway of the kernel's route on the vdev's
// interface, or with the route gone (as on a PCI port, which has no
// kernel side) DPDK.PrefixLen and DPDK.Gateway.
func TestDPDKClientDestBehindRouter(t *testing.T) {
	testutil.RequireRoot(t)
	for _, fromConfig := range []bool{false, true} {
		t.Run(fmt.Sprintf("gateway from config %v", fromConfig), func(t *testing.T) {
			p := hosttest.New(t, testhost.Options{})
			far := behindB(t, p)
			cfg := dgramio.Config{Iface: p.A.Iface, LocalIP: p.A.Addr, Dests: []netip.AddrPort{netip.AddrPortFrom(far, 6000)}, Port: 6000}
			if fromConfig {
				delRoutes(t, p.A)
				cfg.DPDK.PrefixLen, cfg.DPDK.Gateway = p.A.Prefix.Bits(), p.B.Addr
			}
			var conn *net.UDPConn
			if err := p.B.Do(func() error {
				var err error
				conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: far.AsSlice(), Port: 6000})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			b := openDPDK(t, p.A, "net_af_xdp", cfg)
			if b.Queue([]byte("over the router")) != nil {
				t.Fatal("Queue refused")
			}
			if err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 100)
			n, _, err := conn.ReadFromUDP(buf)
			if err != nil || string(buf[:n]) != "over the router" {
				t.Fatalf("got %q, %v", buf[:n], err)
			}
		})
	}
}

// delRoutes removes the routes through a gateway from h's interface (what
// behindB added), so that only the Config can name the next hop.
func delRoutes(t *testing.T, h *testhost.Host) {
	t.Helper()
	nl, err := netlink.NewHandleAt(h.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByIndex(h.Index)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := nl.RouteList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Gw != nil {
			if err := nl.RouteDel(&r); err != nil {
				t.Fatal(err)
			}
		}
	}
}
