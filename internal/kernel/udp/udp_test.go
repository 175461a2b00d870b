package udp

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

var lo = socktest.Loopback

// pair opens a server on base.LocalIP, 127.0.0.1 when unset (on a free
// port unless base.Port is set), and a client sending to it, both from
// base (the client without a LocalIP: its family is its destination's).
func pair(t testing.TB, base dgramio.Config) (cli, srv *Backend) {
	t.Helper()
	sc := base
	if !sc.LocalIP.IsValid() {
		sc.LocalIP = lo
	}
	srv = socktest.Server(t, unix.SOCK_DGRAM, sc, New).(*Backend)
	cc := base
	cc.Role, cc.Dests, cc.LocalIP = dgramio.RoleClient, []netip.AddrPort{srv.LocalAddr()}, netip.Addr{}
	c, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*Backend), srv
}

func TestConfigValidation(t *testing.T) {
	ok := dgramio.Config{Kind: dgramio.KindUDP, Dests: []netip.AddrPort{netip.AddrPortFrom(lo, 0)}, Port: 9}
	socktest.RefusesBadConfigs(t, ok, []socktest.BadConfig{
		{"Kind", func(c *dgramio.Config) { c.Kind = "tcp" }},
		{"Kind", func(c *dgramio.Config) { c.Kind = "bogus" }},
		{"Dests", func(c *dgramio.Config) { c.Dests = nil }},
		{"Dests", func(c *dgramio.Config) {
			c.Dests = []netip.AddrPort{netip.AddrPortFrom(lo, 9), netip.AddrPortFrom(lo, 9)}
		}},
		{"Dests", func(c *dgramio.Config) { c.Dests = append(c.Dests, netip.MustParseAddrPort("[::1]:9")) }}, // two families
		{"Port", func(c *dgramio.Config) { c.Port = 0 }},
		{"Dests", func(c *dgramio.Config) { c.LocalIP = netip.MustParseAddr("::1") }}, // two families
		{"MaxDatagram", func(c *dgramio.Config) { c.MaxDatagram = 9000 }},
		{"MaxDatagram", func(c *dgramio.Config) { c.MaxDatagram = -1 }},
		{"TxQueue", func(c *dgramio.Config) { c.TxQueue = -1 }},
		{"TxBatch", func(c *dgramio.Config) { c.TxBatch = 1025 }},
		{"RxBatch", func(c *dgramio.Config) { c.RxBatch = -5 }},
		{"SockBuf", func(c *dgramio.Config) { c.SockBuf = 100 }},
		{"ReplySockets", func(c *dgramio.Config) { c.ReplySockets = dgramio.MaxReplySockets + 1 }},
		{"Role", func(c *dgramio.Config) { c.Role = 7 }},
	}, New)
	b, err := New(ok)
	if err != nil {
		t.Fatalf("a good config: %v", err)
	}
	b.Close()
}

func TestRoundTripLoopback(t *testing.T) { socktest.ForFamilies(t, testRoundTripLoopback) }

func testRoundTripLoopback(t *testing.T, fam socktest.Family) {
	cli, srv := pair(t, dgramio.Config{LocalIP: fam.Loopback})
	socktest.RoundTrip(t, cli, srv, 10000, 256, func(i int) int { return 4 + i%(fam.MaxDatagram-3) })
	cs, ss := cli.Stats(), srv.Stats()
	if cs.TxSent != 10000 || cs.RxDelivered != 10000 || ss.RxDelivered != 10000 || ss.TxSent != 10000 {
		t.Errorf("counters: client sent %d got %d, server got %d sent %d", cs.TxSent, cs.RxDelivered, ss.RxDelivered, ss.TxSent)
	}
	if cs.Lost() != 0 || ss.Lost() != 0 {
		t.Errorf("losses counted: client %d server %d", cs.Lost(), ss.Lost())
	}
	if cs.Syscalls == 0 || cs.Syscalls >= 3*10000 {
		t.Errorf("client made %d syscalls for 10000 messages", cs.Syscalls)
	}
	if cs.Kind != dgramio.KindUDP || cs.Mode == "" || cs.SockRcvBuf == 0 || cs.SockSndBuf == 0 {
		t.Errorf("kind %q mode %q buffers %d/%d", cs.Kind, cs.Mode, cs.SockRcvBuf, cs.SockSndBuf)
	}
	if _, ok := cs.Counter("socket", "drops"); !ok {
		t.Error("no socket drops counter")
	}
	if cli.LocalAddr().Addr().Is6() != fam.V6 || srv.LocalAddr().Addr() != fam.Loopback {
		t.Errorf("bound to %v and %v over %s", cli.LocalAddr(), srv.LocalAddr(), fam.Name)
	}
	t.Logf("client: %s, %d syscalls", cs.Mode, cs.Syscalls)
}

// TestUnprivileged runs a round trip as user nobody: the udp kind needs no
// privileges, and reports the capped buffers it got.
func TestUnprivileged(t *testing.T) {
	if socktest.AsNobody(t) {
		return
	}
	cli, srv := pair(t, dgramio.Config{})
	socktest.RoundTrip(t, cli, srv, 1000, 64, func(i int) int { return 100 })
	s := cli.Stats()
	if os.Geteuid() != 0 && cli.granted.BufForced {
		t.Error("buffers reported forced without privileges")
	}
	t.Logf("uid %d: %s (rcvbuf %d)", os.Geteuid(), s.Mode, s.SockRcvBuf)
}

func TestTruncatedCounted(t *testing.T) { socktest.ForFamilies(t, testTruncatedCounted) }

func testTruncatedCounted(t *testing.T, fam socktest.Family) {
	cli, srv := pair(t, dgramio.Config{MaxDatagram: 100, LocalIP: fam.Loopback})
	// The client sends with a plain socket so it is not bound by its own
	// MaxDatagram.
	fd, err := sock.Socket(cli.cfg, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	to := sock.Sockaddr(srv.LocalAddr())
	sizes := []int{100, 101, 50, 1000, 100, 1472}
	for _, n := range sizes {
		for {
			err := unix.Sendto(fd, make([]byte, n), 0, to)
			if err == unix.EAGAIN {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	var got []int
	socktest.Collect(t, srv, func() bool { return len(got)+int(srv.Stats().RxTruncated) >= len(sizes) },
		func(p dgramio.Packet) { got = append(got, len(p.Data)) })
	if len(got) != 3 || got[0] != 100 || got[1] != 50 || got[2] != 100 {
		t.Errorf("delivered sizes %v, want [100 50 100]", got)
	}
	if s := srv.Stats(); s.RxTruncated != 3 || s.RxDelivered != 3 {
		t.Errorf("RxTruncated %d RxDelivered %d, want 3 and 3", s.RxTruncated, s.RxDelivered)
	}
	// And Queue refuses what is over MaxDatagram.
	if cli.Queue(make([]byte, 101)) != dgramio.ErrTooLarge || cli.Stats().TxOversize != 1 {
		t.Error("Queue accepted an oversize payload")
	}
}

func TestBackpressureAndBatches(t *testing.T) {
	cli, srv := pair(t, dgramio.Config{TxQueue: 10, TxBatch: 4})
	p := make([]byte, 10)
	for i := 0; i < 10; i++ {
		if cli.Queue(p) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if cli.Queue(p) != dgramio.ErrBackPressure || cli.QueueTo(p, srv.LocalAddr()) != dgramio.ErrBackPressure {
		t.Fatal("Queue accepted an 11th message with TxQueue 10")
	}
	if s := cli.Stats(); s.TxBackpressure != 2 || s.TxQueued != 10 {
		t.Fatalf("TxBackpressure %d TxQueued %d", s.TxBackpressure, s.TxQueued)
	}
	before := cli.Stats().Syscalls
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	s := cli.Stats()
	if s.TxSent != 10 || s.TxBytes != 100 {
		t.Errorf("TxSent %d TxBytes %d", s.TxSent, s.TxBytes)
	}
	if calls := s.Syscalls - before; calls != 3 {
		t.Errorf("10 messages in batches of 4 took %d sendmmsg calls, want 3", calls)
	}
	if cli.Queue(p) != nil {
		t.Error("Queue refused after Flush")
	}
	// A server without Dests has no one to Queue to.
	if srv.Queue(p) != dgramio.ErrNoRoute {
		t.Error("a server without Dests accepted Queue")
	}
	ss := srv.Stats()
	if v, _ := ss.Counter("udp", "queue_no_dest"); v != 1 {
		t.Errorf("queue_no_dest %d", v)
	}
}

// TestSendErrorCountedAndFlushGoesOn sends to a port nobody listens on: the
// ICMP port unreachable makes the kernel refuse the next datagram on the
// connected socket; Flush counts it and sends the rest.
func TestSendErrorCountedAndFlushGoesOn(t *testing.T) {
	port := socktest.FreePort(t, unix.SOCK_DGRAM)
	c, err := New(dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(lo, port)}, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := make([]byte, 10)
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i := 0; i < 5; i++ {
			c.Queue(p)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		if s.TxDropped > 0 {
			if s.TxSent+s.TxDropped != s.TxQueued {
				t.Fatalf("sent %d + dropped %d != queued %d", s.TxSent, s.TxDropped, s.TxQueued)
			}
			if v, _ := s.Counter("udp", "send_refused"); v != s.TxDropped {
				t.Errorf("send_refused %d, TxDropped %d", v, s.TxDropped)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no send error after %d datagrams to a closed port", s.TxSent)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFanOut(t *testing.T) {
	port := socktest.FreePort(t, unix.SOCK_DGRAM)
	lo2 := netip.MustParseAddr("127.0.0.2")
	var srvs []*Backend
	for _, a := range []netip.Addr{lo, lo2} {
		s, err := New(dgramio.Config{Role: dgramio.RoleServer, LocalIP: a, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		srvs = append(srvs, s.(*Backend))
	}
	c, err := New(dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(lo, port), netip.AddrPortFrom(lo2, port)}, Port: port, TxQueue: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := make([]byte, 64)
	for i := 0; i < 50; i++ {
		socktest.Payload(p, uint32(i))
		if c.Queue(p) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.TxQueued != 100 || s.TxSent != 100 {
		t.Fatalf("fan-out to 2: queued %d sent %d, want 100 each", s.TxQueued, s.TxSent)
	}
	for _, s := range srvs {
		seen := map[uint32]bool{}
		socktest.Collect(t, s, func() bool { return len(seen) == 50 }, func(pk dgramio.Packet) {
			seq, err := socktest.Check(pk.Data)
			if err != nil {
				t.Fatal(err)
			}
			if seq >= 50 {
				t.Fatalf("server %v: message %d was never sent", s.LocalAddr(), seq)
			}
			seen[seq] = true
			if pk.From.Addr() != lo && pk.From.Addr() != lo2 {
				t.Errorf("from %v", pk.From)
			}
		})
	}
}

func TestWait(t *testing.T) {
	cli, srv := pair(t, dgramio.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := srv.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with nothing to read: %v", err)
	}
	cli.Queue([]byte("wake"))
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := srv.Wait(ctx2); err != nil {
		t.Fatalf("Wait with a datagram queued: %v", err)
	}
	// Close wakes a Wait in progress.
	done := make(chan error, 1)
	go func() { done <- cli.Wait(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	cli.Close()
	select {
	case err := <-done:
		if !errors.Is(err, dgramio.ErrClosed) {
			t.Fatalf("Wait ended by Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake Wait")
	}
}

func TestCloseDuringRx(t *testing.T) {
	port := socktest.FreePort(t, unix.SOCK_DGRAM)
	// A sender keeps the socket busy so Rx has work when Close comes.
	tx, err := New(dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(lo, port)}, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	stop := make(chan struct{})
	go func() {
		p := make([]byte, 200)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := 0; i < 16; i++ {
				tx.Queue(p)
			}
			tx.Flush()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	defer close(stop)
	socktest.CloseDuringRx(t, 200, func() dgramio.Backend {
		b, err := New(dgramio.Config{Role: dgramio.RoleServer, LocalIP: lo, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestStatsAfterClose(t *testing.T) {
	cli, _ := pair(t, dgramio.Config{})
	cli.Queue([]byte("a"))
	cli.Queue([]byte("b"))
	cli.Close()
	s := cli.Stats()
	if s.TxQueued != 2 || s.TxDropped != 2 {
		t.Errorf("after Close with 2 queued: queued %d dropped %d", s.TxQueued, s.TxDropped)
	}
	if err := cli.Flush(); !errors.Is(err, dgramio.ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
}

func TestSocketDropsInStats(t *testing.T) { socktest.ForFamilies(t, testSocketDropsInStats) }

func testSocketDropsInStats(t *testing.T, fam socktest.Family) {
	cli, srv := pair(t, dgramio.Config{SockBuf: 4096, LocalIP: fam.Loopback})
	p := make([]byte, 1000)
	for r := 0; r < 20; r++ {
		for i := 0; i < 16; i++ {
			cli.Queue(p)
		}
		cli.Flush()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := srv.Stats()
		if d, _ := s.Counter("socket", "drops"); d > 0 {
			if s.Lost() < d {
				t.Errorf("Lost() %d does not include socket drops %d", s.Lost(), d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket drops after overflowing a %d-byte receive buffer: %+v", s.SockRcvBuf, s)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNoAllocs(t *testing.T) { socktest.ForFamilies(t, testNoAllocs) }

func testNoAllocs(t *testing.T, fam socktest.Family) {
	cli, srv := pair(t, dgramio.Config{LocalIP: fam.Loopback})
	p := make([]byte, 100)
	pkts := make([]dgramio.Packet, 32)
	drain := func() {
		for i := 0; i < 1000; i++ {
			if n, _ := srv.Rx(pkts); n == 0 {
				return
			}
		}
	}
	const per = 16
	if a := testing.AllocsPerRun(200, func() {
		for i := 0; i < per; i++ {
			cli.Queue(p)
		}
		cli.Flush()
	}); a != 0 {
		t.Errorf("Queue+Flush of %d messages: %v allocations", per, a)
	}
	drain()
	// Rx with datagrams waiting and with none.
	received := uint64(0)
	if a := testing.AllocsPerRun(200, func() {
		for i := 0; i < per; i++ {
			cli.QueueTo(p, srv.LocalAddr())
		}
		cli.Flush()
		for k := 0; k < 4; k++ {
			n, _ := srv.Rx(pkts)
			received += uint64(n)
		}
	}); a != 0 {
		t.Errorf("Rx: %v allocations per round", a)
	}
	if received == 0 {
		t.Error("Rx received nothing while measuring")
	}
	// The server answers with QueueTo to the client's address, the From of
	// what it received.
	from := cli.LocalAddr()
	if a := testing.AllocsPerRun(200, func() {
		for i := 0; i < per; i++ {
			srv.QueueTo(p, from)
		}
		srv.Flush()
		cli.Rx(pkts)
	}); a != 0 {
		t.Errorf("QueueTo+Flush+Rx: %v allocations", a)
	}
}

// Over a veth pair between two namespaces: the path the benchmarks use.

func TestRoundTripVeth(t *testing.T) { socktest.ForFamilies(t, testRoundTripVeth) }

func testRoundTripVeth(t *testing.T, fam socktest.Family) {
	p := hosttest.New(t, testhost.Options{IPv6: fam.V6})
	const port = 5301
	a, b := fam.Pick(p.A.Addr, p.A.Addr6), fam.Pick(p.B.Addr, p.B.Addr6)
	var srv, cli dgramio.Backend
	if err := p.B.Do(func() (err error) {
		srv, err = New(dgramio.Config{Role: dgramio.RoleServer, LocalIP: b, Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := p.A.Do(func() (err error) {
		cli, err = New(dgramio.Config{LocalIP: a, Dests: []netip.AddrPort{netip.AddrPortFrom(b, port)}, Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	socktest.RoundTrip(t, cli, srv, 10000, 256, func(i int) int { return 4 + (i*97)%(fam.MaxDatagram-3) })
	cs, ss := cli.Stats(), srv.Stats()
	if cs.Lost() != 0 || ss.Lost() != 0 {
		t.Errorf("losses: client %d server %d", cs.Lost(), ss.Lost())
	}
}

func TestTruncatedVeth(t *testing.T) { socktest.ForFamilies(t, testTruncatedVeth) }

func testTruncatedVeth(t *testing.T, fam socktest.Family) {
	p := hosttest.New(t, testhost.Options{IPv6: fam.V6})
	const port = 5302
	// The server binds every address of its family: 0.0.0.0, or [::].
	var any netip.Addr
	if fam.V6 {
		any = netip.IPv6Unspecified()
	}
	var srv, cli dgramio.Backend
	if err := p.B.Do(func() (err error) {
		srv, err = New(dgramio.Config{Role: dgramio.RoleServer, LocalIP: any, Port: port, MaxDatagram: 500})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := p.A.Do(func() (err error) {
		cli, err = New(dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(fam.Pick(p.B.Addr, p.B.Addr6), port)}, Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; i < 100; i++ {
		cli.Queue(make([]byte, 400+i*2)) // 400..598: 51 fit, 49 do not
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	delivered := 0
	socktest.Collect(t, srv, func() bool { return delivered+int(srv.Stats().RxTruncated) >= 100 }, func(pk dgramio.Packet) {
		if len(pk.Data) > 500 {
			t.Fatalf("delivered %d bytes with MaxDatagram 500", len(pk.Data))
		}
		if want := fam.Pick(p.A.Addr, p.A.Addr6); pk.From.Addr() != want {
			t.Fatalf("from %v, want %v", pk.From, want)
		}
		delivered++
	})
	if s := srv.Stats(); delivered != 51 || s.RxTruncated != 49 {
		t.Fatalf("delivered %d truncated %d, want 51 and 49", delivered, s.RxTruncated)
	}
}

// TestUnreadCountedAtClose: datagrams the kernel queued on the socket that
// Rx never took are counted at Close (udp.rx_unread_at_close, a loss),
// not lost with the socket (Linux counts a datagram in InDatagrams only
// when it is read, so no counter of the kernel's holds them either).
func TestUnreadCountedAtClose(t *testing.T) { socktest.ForFamilies(t, testUnreadCountedAtClose) }

func testUnreadCountedAtClose(t *testing.T, fam socktest.Family) {
	cli, srv := pair(t, dgramio.Config{LocalIP: fam.Loopback})
	const n = 300
	for i := 0; i < n; i++ {
		if err := cli.Queue([]byte("never read")); err != nil {
			t.Fatal(err)
		}
		if i%32 == 31 || i == n-1 {
			if err := cli.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cs := cli.Stats(); cs.TxSent != n {
		t.Fatalf("sent %d of %d", cs.TxSent, n)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	ss := srv.Stats()
	if got, _ := ss.Counter("udp", "rx_unread_at_close"); got != n || ss.Lost() != n {
		t.Errorf("rx_unread_at_close %d, Lost %d; want %d each", got, ss.Lost(), n)
	}
}
