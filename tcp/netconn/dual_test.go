package netconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// newDualPair is newPair with Services of both families on the native
// engine: A (198.18.0.1, 2001:2::1) and B (198.18.0.2, 2001:2::2).
func newDualPair(t testing.TB) *pair {
	t.Helper()
	pa, pb := memio.NewPair(memio.Options{})
	cfg := dgramio.Config{ConnectTimeout: 20 * time.Second}
	ca, cb := cfg, cfg
	ca.LocalIP, cb.LocalIP = ipA, ipB
	a, err := NewOverFrameIO(ca, pa, Options{LocalIP6: ip6A})
	if err != nil {
		t.Fatalf("service A: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := NewOverFrameIO(cb, pb, Options{LocalIP6: ip6B})
	if err != nil {
		t.Fatalf("service B: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return &pair{A: a, B: b, pa: pa, pb: pb}
}

// TestDualStackMemio: a Service with an IPv4 LocalIP and Options.LocalIP6
// runs one native engine with both addresses, and one listener takes
// connections of both families (RFC 8200 and RFC 791 on one link, each
// resolved by its own protocol: ARP, RFC 826; neighbour discovery, RFC
// 4861). x/net's nettest.TestConn runs over each family through the same
// listener; each connection's addresses are of its family and mirror the
// other end's; "tcp4" and "tcp6" both dial.
func TestDualStackMemio(t *testing.T) {
	p := newDualPair(t)
	ln := listen(t, p.B, testPort)
	if a6 := p.B.Addr6(); !a6.Equal(net.IP(ip6B.AsSlice())) {
		t.Fatalf("Addr6 %v", a6)
	}
	for _, c := range []struct {
		network string
		peer    netip.Addr
		local   netip.Addr
	}{
		{"tcp4", ipB, ipA},
		{"tcp6", ip6B, ip6A},
	} {
		t.Run(c.network, func(t *testing.T) {
			target := netip.AddrPortFrom(c.peer, testPort).String()
			nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
				return p.A.DialContext(ctx, c.network, target)
			}))
			mp := acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
				return p.A.DialContext(ctx, "tcp", target)
			})
			d, a, stop, err := mp()
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			dl, dr := d.LocalAddr().(*net.TCPAddr), d.RemoteAddr().(*net.TCPAddr)
			al, ar := a.LocalAddr().(*net.TCPAddr), a.RemoteAddr().(*net.TCPAddr)
			if dl.AddrPort().Addr() != c.local || dr.AddrPort() != netip.AddrPortFrom(c.peer, testPort) ||
				dl.String() != ar.String() || dr.String() != al.String() {
				t.Errorf("dialled %v->%v, accepted %v->%v", dl, dr, al, ar)
			}
		})
	}
	if st := p.B.Stats(); counter(st, "native", "arp_replies_sent") == 0 || counter(st, "native", "ndp_na_sent") == 0 {
		t.Errorf("B answered ARP %d times and neighbour solicitations %d times, want both",
			counter(st, "native", "arp_replies_sent"), counter(st, "native", "ndp_na_sent"))
	}
}

// Options.LocalIP6 is refused, as a *dgramio.ConfigError naming it, on
// netstack, beside an IPv6 LocalIP, and when it is not a global IPv6
// unicast address; nothing is left open.
func TestDualStackRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  dgramio.Config
		a6   string
	}{
		{"netstack", dgramio.Config{LocalIP: ipA, TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}}, "2001:2::1"},
		{"IPv6 LocalIP", dgramio.Config{LocalIP: ip6A}, "2001:2::3"},
		{"link-local", dgramio.Config{LocalIP: ipA}, "fe80::1"},
		{"IPv4-mapped", dgramio.Config{LocalIP: ipA}, "::ffff:198.18.0.9"},
		{"IPv4", dgramio.Config{LocalIP: ipA}, "198.18.0.9"},
		{"multicast", dgramio.Config{LocalIP: ipA}, "ff02::1"},
		{"zone", dgramio.Config{LocalIP: ipA}, "2001:2::1%eth0"},
	} {
		pa, pb := memio.NewPair(memio.Options{})
		s, err := NewOverFrameIO(c.cfg, pa, Options{LocalIP6: netip.MustParseAddr(c.a6)})
		var ce *dgramio.ConfigError
		if err == nil {
			s.Close()
		}
		if !errors.As(err, &ce) || ce.Field != "netconn.Options.LocalIP6" {
			t.Errorf("%s: %v, want a ConfigError on netconn.Options.LocalIP6", c.name, err)
		}
		pb.Close()
	}
}

// TestDualStackVeth: a tcp-xdp Service of both families on A (the native
// engine, an IPv4 and an IPv6 address the kernel does not hold): the XDP
// program hands it the frames to either address (and ARP, and the
// neighbour solicitations for its IPv6 address), so B's kernel clients
// reach one listener over "tcp4" and "tcp6", and the Service dials B's
// kernel listeners over both.
func TestDualStackVeth(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{IPv6: true})
	v4, v6 := peertest.Addr(p.A, 3), addr6(p.A, 3)
	s := openVeth(t, p.A, dgramio.Config{LocalIP: v4, Port: testPort}, Options{LocalIP6: v6})
	ln := listen(t, s, testPort)
	dial := peertest.Dialer(p.B)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	echo := func(t *testing.T, c net.Conn, msg string) {
		t.Helper()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
			t.Fatalf("%q %v", buf, err)
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	for _, c := range []struct {
		network string
		to      netip.Addr
	}{{"tcp4", v4}, {"tcp6", v6}} {
		kc, err := dial(ctx, c.network, netip.AddrPortFrom(c.to, testPort).String())
		if err != nil {
			t.Fatalf("B's kernel dials %s over %s: %v", c.to, c.network, err)
		}
		echo(t, kc, "hello over "+c.network)
		if got := kc.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != c.to {
			t.Fatalf("%s: connected to %v", c.network, got)
		}
		kc.Close()
	}

	// The Service dials B's kernel over each family (tcp-xdp: the
	// peer's port is any, the program takes every frame to our
	// addresses).
	k4 := peertest.Listen(t, p.B, netip.AddrPortFrom(p.B.Addr, 7001))
	k6, err := p.B.ListenTCP6(7001)
	if err != nil {
		t.Fatal(err)
	}
	defer k6.Close()
	for _, c := range []struct {
		network string
		ln      net.Listener
		to      netip.Addr
		from    netip.Addr
	}{{"tcp4", k4, p.B.Addr, v4}, {"tcp6", k6, p.B.Addr6, v6}} {
		accepted := make(chan net.Conn, 1)
		go func() {
			kc, _ := c.ln.Accept()
			accepted <- kc
		}()
		sc, err := s.DialContext(ctx, c.network, netip.AddrPortFrom(c.to, 7001).String())
		if err != nil {
			t.Fatalf("%s: %v", c.network, err)
		}
		kc := <-accepted
		if kc == nil {
			t.Fatalf("%s: B accepted nothing", c.network)
		}
		if got := kc.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != c.from {
			t.Fatalf("%s: B saw %v, want %v", c.network, got, c.from)
		}
		if got := sc.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != c.from {
			t.Fatalf("%s: LocalAddr %v, want %v", c.network, got, c.from)
		}
		go io.Copy(kc, kc)
		echo(t, sc, fmt.Sprintf("dialled over %s", c.network))
		sc.Close()
		kc.Close()
	}
}

// TestQueuesDualStack: two two-queue Services of both families (the
// native engine, Options.LocalIP6) over a two-queue veth pair whose XPS
// masks send CPU q's frames on queue q: dials over tcp4 and tcp6 take the
// queues in turn, each from a port of its queue's share, and the answers
// come back to it (the queues share ARP replies and neighbour
// advertisements, RFC 4861 §7.2.5, whichever queue they reach); data is
// echoed byte-exact on every connection and no segment reaches a queue
// without its connection (no reset).
func TestQueuesDualStack(t *testing.T) {
	testutil.RequireRoot(t)
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testutil.Skip(t, fmt.Sprintf("two queues on two CPUs: this process may use %v", allowed))
	}
	cpus := allowed[:2]
	p := hosttest.New(t, testhost.Options{Queues: 2, XPSCPUs: cpus, IPv6: true})
	open := func(h *testhost.Host, last byte) *Service {
		return openVeth(t, h, dgramio.Config{LocalIP: peertest.Addr(h, last), Port: testPort, Queues: 2, CPUs: cpus},
			Options{LocalIP6: addr6(h, last)})
	}
	a, b := open(p.A, 3), open(p.B, 4)
	ln := listen(t, a, testPort)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	const conns, each = 8, 256 << 10
	dialled := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		network, to := "tcp4", peertest.Addr(p.A, 3)
		if i%4 >= 2 {
			network, to = "tcp6", addr6(p.A, 3)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := b.DialContext(ctx, network, netip.AddrPortFrom(to, testPort).String())
		cancel()
		if err != nil {
			t.Fatalf("dial %d over %s: %v", i, network, err)
		}
		q := queueOf(c)
		dialled[fmt.Sprintf("%s/%d", network, q)]++
		if port := c.LocalAddr().(*net.TCPAddr).Port; port%2 != q {
			t.Errorf("dial %d on queue %d from port %d: not the queue's share", i, q, port)
		}
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			defer c.Close()
			errs <- echoCheck(c, uint64(i), each)
		}(i, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, k := range []string{"tcp4/0", "tcp4/1", "tcp6/0", "tcp6/1"} {
		if dialled[k] != 2 {
			t.Errorf("dials by family/queue %v, want 2 of each", dialled)
			break
		}
	}
	for _, s := range []*Service{a, b} {
		if v := counter(s.Stats(), "native", "tcp_resets_sent"); v != 0 {
			t.Errorf("%s: %d resets sent: a connection left its queue", s.Addr(), v)
		}
	}
}
