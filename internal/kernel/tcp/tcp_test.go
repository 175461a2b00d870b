package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	rec "github.com/dgramio/dgramio/internal/record"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

var (
	lo  = socktest.Loopback
	lo2 = netip.MustParseAddr("127.0.0.2")
)

// newServer opens a server on ip (on a free port unless base.Port is set).
func newServer(t testing.TB, base dgramio.Config, ip netip.Addr) *Backend {
	t.Helper()
	base.LocalIP = ip
	return socktest.Server(t, unix.SOCK_STREAM, base, New).(*Backend)
}

func newClient(t testing.TB, base dgramio.Config, port uint16, dests ...netip.Addr) *Backend {
	t.Helper()
	cc := base
	cc.Role, cc.Port = dgramio.RoleClient, port
	for _, d := range dests {
		cc.Dests = append(cc.Dests, netip.AddrPortFrom(d, port))
	}
	c, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*Backend)
}

func pair(t testing.TB, base dgramio.Config) (cli, srv *Backend) {
	srv = newServer(t, base, lo)
	cli = newClient(t, base, srv.LocalAddr().Port(), lo)
	return cli, srv
}

// until polls cond, driving nothing itself, for up to 20 s.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := dgramio.Config{Kind: dgramio.KindTCP, Dests: []netip.AddrPort{netip.AddrPortFrom(lo, 0)}, Port: 9}
	socktest.RefusesBadConfigs(t, ok, []socktest.BadConfig{
		{"Kind", func(c *dgramio.Config) { c.Kind = "udp" }},
		{"Dests", func(c *dgramio.Config) { c.Dests = nil }},
		{"Dests", func(c *dgramio.Config) {
			c.Dests = []netip.AddrPort{netip.AddrPortFrom(lo, 9), netip.AddrPortFrom(lo, 9)}
		}},
		{"Port", func(c *dgramio.Config) { c.Port = 0 }},
		{"MaxDatagram", func(c *dgramio.Config) { c.MaxDatagram = rec.MaxRecord + 1 }},
		{"TxQueue", func(c *dgramio.Config) { c.TxQueue = -1 }},
		{"RxBatch", func(c *dgramio.Config) { c.RxBatch = 2000 }},
		{"SockBuf", func(c *dgramio.Config) { c.SockBuf = 1 }},
		{"ConnectTimeout", func(c *dgramio.Config) { c.ConnectTimeout = -time.Second }},
	}, New)
}

func TestConnectErrors(t *testing.T) {
	port := socktest.FreePort(t, unix.SOCK_STREAM)
	_, err := New(dgramio.Config{Kind: dgramio.KindTCP, Dests: []netip.AddrPort{netip.AddrPortFrom(lo, port)}, Port: port})
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("connect to a closed port: %v, want ECONNREFUSED", err)
	}
}

// TestConnectTimeout connects, inside a test host, to an address of the
// pair's subnet that nobody holds: ARP gets no answer, and New must give
// up after ConnectTimeout with ETIMEDOUT.
func TestConnectTimeout(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	nobody := p.B.Addr.Next()
	start := time.Now()
	err := p.A.Do(func() error {
		b, err := New(dgramio.Config{Kind: dgramio.KindTCP, Dests: []netip.AddrPort{netip.AddrPortFrom(nobody, 9)}, Port: 9, ConnectTimeout: 200 * time.Millisecond})
		if err == nil {
			b.Close()
		}
		return err
	})
	if !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("connect to %v, which nobody holds: %v, want ETIMEDOUT", nobody, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("connect took %v with a 200ms timeout", took)
	}
}

func TestRoundTripLoopback(t *testing.T) { socktest.ForFamilies(t, testRoundTripLoopback) }

func testRoundTripLoopback(t *testing.T, fam socktest.Family) {
	srv := newServer(t, dgramio.Config{}, fam.Loopback)
	cli := newClient(t, dgramio.Config{}, srv.LocalAddr().Port(), fam.Loopback)
	socktest.RoundTrip(t, cli, srv, 10000, 256, func(i int) int { return 4 + i%1469 })
	cs, ss := cli.Stats(), srv.Stats()
	if cs.TxSent != 10000 || cs.RxDelivered != 10000 || ss.RxDelivered != 10000 || ss.TxSent != 10000 {
		t.Errorf("counters: client sent %d got %d, server got %d sent %d", cs.TxSent, cs.RxDelivered, ss.RxDelivered, ss.TxSent)
	}
	if cs.Lost() != 0 || ss.Lost() != 0 || cs.TxDropped != 0 {
		t.Errorf("losses counted: client %d server %d", cs.Lost(), ss.Lost())
	}
	if ss.Accepts != 1 || ss.Conns != 1 || cs.Conns != 1 {
		t.Errorf("accepts %d, conns server %d client %d", ss.Accepts, ss.Conns, cs.Conns)
	}
	if _, ok := cs.Counter("tcp", "retrans_segs"); !ok {
		t.Error("no TCP_INFO counters in Layers")
	}
	if cli.LocalAddr().Addr() != fam.Loopback || srv.LocalAddr().Addr() != fam.Loopback {
		t.Errorf("bound to %v and %v over %s", cli.LocalAddr(), srv.LocalAddr(), fam.Name)
	}
	t.Logf("client: %s; %d syscalls for 10000 records", cs.Mode, cs.Syscalls)
}

func TestLargeRecords(t *testing.T) {
	cli, srv := pair(t, dgramio.Config{MaxDatagram: rec.MaxRecord, TxQueue: 8})
	socktest.RoundTrip(t, cli, srv, 200, 8, func(i int) int { return rec.MaxRecord - i*37 })
}

func TestUnprivileged(t *testing.T) {
	if socktest.AsNobody(t) {
		return
	}
	cli, srv := pair(t, dgramio.Config{})
	socktest.RoundTrip(t, cli, srv, 1000, 64, func(i int) int { return 100 })
	if os.Geteuid() != 0 && cli.granted.BufForced {
		t.Error("buffers reported forced without privileges")
	}
	t.Logf("uid %d: %s", os.Geteuid(), cli.Stats().Mode)
}

// receive drains srv until it has n records (see socktest.Collect), calling
// drive (when set) before each Rx, and checks that they are messages want,
// want+1, ... in order. It returns the next message due.
func receive(t testing.TB, srv dgramio.Backend, want uint32, n int, drive func()) uint32 {
	t.Helper()
	got := 0
	socktest.Collect(t, srv, func() bool {
		if drive != nil {
			drive()
		}
		return got >= n
	}, func(p dgramio.Packet) {
		seq, err := socktest.Check(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("record %d arrived where %d was due: a record was lost, split or duplicated", seq, want)
		}
		want++
		got++
	})
	return want
}

// fillUntilRefused queues numbered records to b (flushing in between) until
// Queue has refused for a while, and returns how many it accepted.
func fillUntilRefused(t testing.TB, b dgramio.Backend, size int, start uint32) uint32 {
	t.Helper()
	p := make([]byte, size)
	seq := start
	refused := 0
	deadline := time.Now().Add(20 * time.Second)
	for refused < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("Queue never refused: %d records accepted", seq-start)
		}
		socktest.Payload(p, seq)
		if b.Queue(p) == nil {
			seq++
			refused = 0
		} else {
			refused++
			time.Sleep(50 * time.Microsecond)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return seq - start
}

// TestStopReadingBackpressure: a receiver that stops reading fills the
// kernel's buffers, then the staging buffer, and Queue refuses; when it
// reads again every accepted record arrives, whole and in order.
func TestStopReadingBackpressure(t *testing.T) {
	cli, srv := pair(t, dgramio.Config{SockBuf: 8192, TxQueue: 16, MaxDatagram: 1000})
	accepted := fillUntilRefused(t, cli, 777, 0)
	s := cli.Stats()
	if s.TxBackpressure == 0 || s.TxDropped != 0 {
		t.Fatalf("backpressure %d dropped %d", s.TxBackpressure, s.TxDropped)
	}
	t.Logf("%d records accepted before back-pressure (%d staged)", accepted, must3(staged(cli)))
	next := receive(t, srv, 0, int(accepted), func() { cli.Flush() })
	if next != accepted {
		t.Fatalf("received up to %d, accepted %d", next, accepted)
	}
	until(t, "the staging buffer to empty", func() bool { cli.Flush(); _, n, _ := staged(cli); return n == 0 })
	if cs := cli.Stats(); cs.TxSent != uint64(accepted) {
		t.Errorf("TxSent %d, accepted %d", cs.TxSent, accepted)
	}
	// It works again.
	p := make([]byte, 100)
	socktest.Payload(p, next)
	if cli.Queue(p) != nil {
		t.Fatal("Queue refused after the receiver caught up")
	}
	cli.Flush()
	receive(t, srv, next, 1, nil)
}

// TestAllOrNone: with two receivers, one reading and one not, Queue
// refuses a record for both as soon as it does not fit for one, so the
// reader gets exactly the records the slow one will get.
func TestAllOrNone(t *testing.T) {
	base := dgramio.Config{SockBuf: 8192, TxQueue: 16, MaxDatagram: 1000}
	fast := newServer(t, base, lo)
	port := fast.LocalAddr().Port()
	base.Port = port
	slow := newServer(t, base, lo2)
	cli := newClient(t, base, port, lo, lo2)

	// The fast receiver reads all along on its own goroutine.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var fastGot atomic.Uint32
	var fastErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		pkts := make([]dgramio.Packet, 64)
		for ctx.Err() == nil {
			k, err := fast.Rx(pkts)
			if err != nil {
				fastErr.Store(err)
				return
			}
			for _, p := range pkts[:k] {
				seq, err := socktest.Check(p.Data)
				if err != nil || seq != fastGot.Load() {
					fastErr.Store(fmt.Errorf("fast receiver: record %d where %d was due (%v)", seq, fastGot.Load(), err))
					return
				}
				fastGot.Add(1)
			}
			if k == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	accepted := fillUntilRefused(t, cli, 500, 0)
	// Everything accepted reaches the fast receiver, and nothing more:
	// what was refused went nowhere.
	until(t, "the fast receiver to get every accepted record", func() bool {
		cli.Flush()
		return fastErr.Load() != nil || fastGot.Load() >= accepted
	})
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
	if err := fastErr.Load(); err != nil {
		t.Fatal(err)
	}
	if fastGot.Load() != accepted {
		t.Fatalf("fast receiver got %d records, %d were accepted", fastGot.Load(), accepted)
	}
	// The slow one now reads and gets the very same records.
	next := receive(t, slow, 0, int(accepted), func() { cli.Flush() })
	if next != accepted {
		t.Fatalf("slow receiver got up to %d, %d accepted", next, accepted)
	}
	if s := cli.Stats(); s.TxQueued != 2*uint64(accepted) || s.TxDropped != 0 {
		t.Errorf("TxQueued %d (want %d), TxDropped %d", s.TxQueued, 2*accepted, s.TxDropped)
	}
}

// rawListener listens on 127.0.0.1 with a plain socket, for peers that
// misbehave on purpose.
func rawListener(t testing.TB) (fd int, port uint16) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: lo.As4()}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 8); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	return fd, uint16(sa.(*unix.SockaddrInet4).Port)
}

func resetConn(t testing.TB, fd int) {
	t.Helper()
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

// rxUntilEnd calls Rx until it delivers the end of a connection (b has
// Config.Events) or returns an error, collecting records: an
// EventPeerFIN comes back as a *dgramio.PeerError of Reset false, an
// EventReset as its Err.
func rxUntilEnd(t testing.TB, b dgramio.Backend) (recs []string, err error) {
	t.Helper()
	pkts := make([]dgramio.Packet, 8)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		n, err := b.Rx(pkts)
		for _, p := range pkts[:n] {
			switch p.Event {
			case dgramio.EventData:
				recs = append(recs, string(p.Data))
			case dgramio.EventPeerFIN:
				return recs, &dgramio.PeerError{Peer: p.From}
			case dgramio.EventReset:
				return recs, p.Err
			}
		}
		if err != nil {
			return recs, err
		}
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	t.Fatal("Rx never reported the peer")
	return nil, nil
}

func TestPeerReset(t *testing.T) {
	lfd, port := rawListener(t)
	cli := newClient(t, dgramio.Config{Events: true}, port, lo)
	afd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	// Stage a record the peer will never get.
	cli.Queue([]byte("lost"))
	resetConn(t, afd)
	recs, err := rxUntilEnd(t, cli)
	var pe *dgramio.PeerError
	if !errors.As(err, &pe) || !pe.Reset || !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("Rx after a reset: %v (records %q)", err, recs)
	}
	if pe.Peer.Port() != port {
		t.Errorf("PeerError names %v", pe.Peer)
	}
	s := cli.Stats()
	if s.Resets != 1 || s.PeerCloses != 0 || s.Conns != 0 {
		t.Errorf("resets %d closes %d conns %d", s.Resets, s.PeerCloses, s.Conns)
	}
	if s.TxDropped != 1 {
		t.Errorf("the staged record is not counted as dropped: TxDropped %d", s.TxDropped)
	}
	// Reported once (EventEnded follows); then the client has no
	// connection left.
	pkts := make([]dgramio.Packet, 4)
	if n, err := cli.Rx(pkts); err != nil || (n == 1 && pkts[0].Event != dgramio.EventEnded) || n > 1 {
		t.Errorf("second Rx: %d, %v, %+v", n, err, pkts[:n])
	}
	if n, err := cli.Rx(pkts); n != 0 || err != nil {
		t.Errorf("third Rx: %d, %v", n, err)
	}
	if err := cli.Flush(); err != nil {
		t.Errorf("Flush after the reset was reported: %v", err)
	}
	if err := cli.Queue([]byte("x")); err != dgramio.ErrNoRoute {
		t.Errorf("Queue with no connection: %v, want dgramio.ErrNoRoute", err)
	}
}

func TestPeerCloseDeliversFirst(t *testing.T) {
	lfd, port := rawListener(t)
	cli := newClient(t, dgramio.Config{Events: true}, port, lo)
	afd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	for _, s := range []string{"one", "two", "three"} {
		stream, _ = rec.AppendRecord(stream, []byte(s))
	}
	stream = append(stream, 0, 9, 'c', 'u', 't') // a record cut by the close
	if _, err := unix.Write(afd, stream); err != nil {
		t.Fatal(err)
	}
	unix.Close(afd)
	recs, err := rxUntilEnd(t, cli)
	var pe *dgramio.PeerError
	if !errors.As(err, &pe) || pe.Reset {
		t.Fatalf("Rx after an orderly close: %v", err)
	}
	if len(recs) != 3 || recs[0] != "one" || recs[2] != "three" { // no event among them: EventOpened came first
		t.Fatalf("records before the close: %q", recs)
	}
	s := cli.Stats()
	if s.PeerCloses != 1 || s.RxMalformed != 1 {
		t.Errorf("peer closes %d, malformed %d (the cut record)", s.PeerCloses, s.RxMalformed)
	}
}

// TestServerSurvivesClientReset: one client resets, the server reports it
// once (EventReset, no error) and keeps serving the other.
func TestServerSurvivesClientReset(t *testing.T) {
	srv := newServer(t, dgramio.Config{Events: true}, lo)
	good := newClient(t, dgramio.Config{}, srv.LocalAddr().Port(), lo)
	bad, err := net.Dial("tcp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	until(t, "two accepted clients", func() bool { srv.Rx(nil); return srv.Stats().Conns == 2 })
	bad.(*net.TCPConn).SetLinger(0)
	bad.Close()
	_, err = rxUntilEnd(t, srv)
	var pe *dgramio.PeerError
	if !errors.As(err, &pe) || !pe.Reset {
		t.Fatalf("server Rx: %v", err)
	}
	if s := srv.Stats(); s.Conns != 1 || s.Resets != 1 {
		t.Fatalf("conns %d resets %d", s.Conns, s.Resets)
	}
	socktest.RoundTrip(t, good, srv, 1000, 64, func(int) int { return 64 })
}

// The server answers each with QueueTo to the peer address accept gave.
func TestTwoClientsGetTheirOwnAnswers(t *testing.T) {
	socktest.ForFamilies(t, testTwoClientsGetTheirOwnAnswers)
}

func testTwoClientsGetTheirOwnAnswers(t *testing.T, fam socktest.Family) {
	srv := newServer(t, dgramio.Config{}, fam.Loopback)
	port := srv.LocalAddr().Port()
	c1 := newClient(t, dgramio.Config{}, port, fam.Loopback)
	c2 := newClient(t, dgramio.Config{}, port, fam.Loopback)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- socktest.Echo(ctx, srv) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var wg sync.WaitGroup
	for i, c := range []*Backend{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 20)
			pkts := make([]dgramio.Packet, 32)
			got := uint32(0)
			base := uint32(i) << 24
			deadline := time.Now().Add(20 * time.Second)
			for sent := uint32(0); got < 1000 && time.Now().Before(deadline); {
				if sent < 1000 && sent-got < 50 {
					socktest.Payload(p, base+sent)
					if c.Queue(p) == nil {
						sent++
					}
				}
				c.Flush()
				n, err := c.Rx(pkts)
				if err != nil {
					t.Error(err)
					return
				}
				for _, pk := range pkts[:n] {
					seq, err := socktest.Check(pk.Data)
					if err != nil || seq != base+got {
						t.Errorf("client %d: got %d, want %d (%v)", i, seq, base+got, err)
						return
					}
					got++
				}
			}
			if got != 1000 {
				t.Errorf("client %d got %d of 1000", i, got)
			}
		}()
	}
	wg.Wait()
}

func TestOversizeRecordSkipped(t *testing.T) {
	srv := newServer(t, dgramio.Config{MaxDatagram: 100}, lo)
	c, err := net.Dial("tcp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var stream []byte
	for _, n := range []int{100, 101, 5, 60000, rec.MaxRecord, 100} {
		stream, _ = rec.AppendRecord(stream, make([]byte, n))
	}
	if _, err := c.Write(stream); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	pkts := make([]dgramio.Packet, 8)
	until(t, "three records", func() bool {
		n, err := srv.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:n] {
			sizes = append(sizes, len(p.Data))
		}
		return len(sizes) >= 3
	})
	if len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 5 || sizes[2] != 100 {
		t.Errorf("sizes %v", sizes)
	}
	if s := srv.Stats(); s.RxTruncated != 3 {
		t.Errorf("RxTruncated %d, want 3", s.RxTruncated)
	}
}

func TestWaitWakesOnAcceptAndData(t *testing.T) {
	srv := newServer(t, dgramio.Config{}, lo)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		time.Sleep(20 * time.Millisecond)
		c, err := net.Dial("tcp", srv.LocalAddr().String())
		if err == nil {
			b, _ := rec.AppendRecord(nil, []byte("hi"))
			c.Write(b)
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	if err := srv.Wait(ctx); err != nil {
		t.Fatalf("Wait for a client: %v", err)
	}
	recs := 0
	until(t, "the record", func() bool {
		n, _ := srv.Rx(make([]dgramio.Packet, 4))
		recs += n
		if recs == 0 {
			srv.Wait(ctx)
		}
		return recs > 0
	})
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := srv.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with nothing to do: %v", err)
	}
}

func TestCloseDuringRx(t *testing.T) {
	port := socktest.FreePort(t, unix.SOCK_STREAM)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		// A client that keeps (re)connecting and sending records.
		defer wg.Done()
		msg, _ := rec.AppendRecord(nil, make([]byte, 300))
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(lo, port).String(), time.Second)
			if err != nil {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			for {
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				if _, err := c.Write(msg); err != nil {
					break
				}
				select {
				case <-stop:
					c.Close()
					return
				default:
				}
			}
			c.Close()
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	socktest.CloseDuringRx(t, 200, func() dgramio.Backend {
		b, err := New(dgramio.Config{Kind: dgramio.KindTCP, Role: dgramio.RoleServer, LocalIP: lo, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestNoAllocs(t *testing.T) { socktest.ForFamilies(t, testNoAllocs) }

func testNoAllocs(t *testing.T, fam socktest.Family) {
	srv := newServer(t, dgramio.Config{}, fam.Loopback)
	cli := newClient(t, dgramio.Config{}, srv.LocalAddr().Port(), fam.Loopback)
	pkts := make([]dgramio.Packet, 32)
	until(t, "the server to accept", func() bool { srv.Rx(pkts); return srv.Stats().Conns == 1 })
	p := make([]byte, 100)
	const per = 16
	received := 0
	if a := testing.AllocsPerRun(200, func() {
		for i := 0; i < per; i++ {
			cli.Queue(p)
		}
		cli.Flush()
		for k := 0; k < 4; k++ {
			n, _ := srv.Rx(pkts)
			received += n
		}
	}); a != 0 {
		t.Errorf("Queue+Flush+Rx of %d records: %v allocations", per, a)
	}
	if received == 0 {
		t.Fatal("nothing received while measuring")
	}
	until(t, "the rest", func() bool { n, _ := srv.Rx(pkts); received += n; return received == 201*per })
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
	// Rx with nothing to read.
	for n, _ := cli.Rx(pkts); n > 0; n, _ = cli.Rx(pkts) {
	}
	if a := testing.AllocsPerRun(200, func() { cli.Rx(pkts) }); a != 0 {
		t.Errorf("empty Rx: %v allocations", a)
	}
}

// Over a veth pair between two namespaces.

// vethPair opens a server on B and a client on A connected to it, over
// fam.
func vethPair(t *testing.T, fam socktest.Family, base dgramio.Config) (cli, srv dgramio.Backend, p *testhost.Pair) {
	p = hosttest.New(t, testhost.Options{IPv6: fam.V6})
	base.Port = 5401
	b := fam.Pick(p.B.Addr, p.B.Addr6)
	if err := p.B.Do(func() (err error) {
		sc := base
		sc.Role, sc.LocalIP = dgramio.RoleServer, b
		srv, err = New(sc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := p.A.Do(func() (err error) {
		cc := base
		cc.Dests = []netip.AddrPort{netip.AddrPortFrom(b, cc.Port)}
		cli, err = New(cc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, srv, p
}

func TestRoundTripVeth(t *testing.T) { socktest.ForFamilies(t, testRoundTripVeth) }

func testRoundTripVeth(t *testing.T, fam socktest.Family) {
	cli, srv, _ := vethPair(t, fam, dgramio.Config{})
	socktest.RoundTrip(t, cli, srv, 10000, 256, func(i int) int { return 4 + (i*97)%1469 })
	if cs := cli.Stats(); cs.TxDropped != 0 || cs.Lost() != 0 {
		t.Errorf("client: dropped %d lost %d", cs.TxDropped, cs.Lost())
	}
}

func TestStopReadingVeth(t *testing.T) { socktest.ForFamilies(t, testStopReadingVeth) }

func testStopReadingVeth(t *testing.T, fam socktest.Family) {
	cli, srv, _ := vethPair(t, fam, dgramio.Config{SockBuf: 8192, TxQueue: 16, MaxDatagram: 1400})
	accepted := fillUntilRefused(t, cli, 1400, 0)
	next := receive(t, srv, 0, int(accepted), func() { cli.Flush() })
	if next != accepted {
		t.Fatalf("received %d, accepted %d", next, accepted)
	}
}

func TestPeerResetVeth(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	var lfd int
	if err := p.B.Do(func() (err error) {
		lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: p.B.Addr.As4(), Port: 5402}); err != nil {
			return err
		}
		return unix.Listen(lfd, 4)
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	var cli dgramio.Backend
	if err := p.A.Do(func() (err error) {
		cli, err = New(dgramio.Config{Kind: dgramio.KindTCP, Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5402)}, Port: 5402, Events: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	afd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	resetConn(t, afd)
	_, err = rxUntilEnd(t, cli)
	var pe *dgramio.PeerError
	if !errors.As(err, &pe) || !pe.Reset || pe.Peer != netip.AddrPortFrom(p.B.Addr, 5402) {
		t.Fatalf("Rx after a reset over veth: %v", err)
	}
}

// staged returns b's first connection's released, staged bytes and
// staged records (stream.Layer.Staged).
func staged(b *Backend) (released, bytes, records int) { return b.s.Staged(0) }

func must3(_, _, records int) int { return records }

// TestIdleConnsCostOneSyscall: a server's Rx among 64 idle connections
// asks epoll once instead of reading each socket, and still delivers
// the record one of them sends.
func TestIdleConnsCostOneSyscall(t *testing.T) {
	srv := newServer(t, dgramio.Config{}, lo)
	const n = 64
	peers := make([]net.Conn, n)
	for i := range peers {
		c, err := net.Dial("tcp", srv.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		peers[i] = c
	}
	pkts := make([]dgramio.Packet, 16)
	until(t, "accepts", func() bool {
		if _, err := srv.Rx(pkts); err != nil {
			t.Fatal(err)
		}
		return srv.s.Len() == n
	})
	for range 10 { // every new connection is read once
		srv.Rx(pkts)
	}
	const rounds = 1000
	before := srv.Stats().Syscalls
	for range rounds {
		if k, err := srv.Rx(pkts); k != 0 || err != nil {
			t.Fatalf("idle Rx: %d, %v", k, err)
		}
	}
	// One epoll_wait per Rx, and an accept4 every millisecond at most.
	if got := srv.Stats().Syscalls - before; got > rounds+rounds/10 {
		t.Fatalf("%d idle Rx among %d connections made %d system calls, want about one each", rounds, n, got)
	}
	r, err := rec.AppendRecord(nil, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peers[17].Write(r); err != nil {
		t.Fatal(err)
	}
	from := netip.MustParseAddrPort(peers[17].LocalAddr().String())
	var got []dgramio.Packet
	until(t, "the record", func() bool {
		k, err := srv.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pkts[:k]...)
		return len(got) > 0
	})
	if len(got) != 1 || string(got[0].Data) != "hello" || got[0].From != from {
		t.Fatalf("got %d records, first %q from %v; want hello from %v", len(got), got[0].Data, got[0].From, from)
	}
}

// TestStatsReadsABoundedShare: with 200 connections a Stats reads the
// TCP_INFO of 64 (the poll loop waits while it does), in turn, so that
// four calls have read them all; the sums never go back, and then match
// a reading of every connection.
func TestStatsReadsABoundedShare(t *testing.T) {
	srv := newServer(t, dgramio.Config{}, lo)
	const n = 200
	r, err := rec.AppendRecord(nil, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		c, err := net.Dial("tcp", srv.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	pkts := make([]dgramio.Packet, 16)
	got := 0
	until(t, "every record", func() bool {
		k, err := srv.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		got += k
		return got == n
	})
	time.Sleep(50 * time.Millisecond) // the clients' ACKs of our ACKs, if any
	segsIn := func(s dgramio.Stats) uint64 { v, _ := s.Counter("tcp", "segs_in"); return v }
	last := uint64(0)
	for range (n + statsRefresh - 1) / statsRefresh {
		before := srv.infoReads
		v := segsIn(srv.Stats())
		if reads := srv.infoReads - before; reads != statsRefresh {
			t.Fatalf("a Stats read %d connections' TCP_INFO, want %d", reads, statsRefresh)
		}
		if v < last {
			t.Fatalf("segs_in went back from %d to %d", last, v)
		}
		last = v
	}
	var want sock.TCPCounters
	want.Add(srv.closedInfo)
	for i := range srv.s.Len() {
		ti, err := sock.ReadTCPInfo(srv.s.Conn(i).(*conn).fd)
		if err != nil {
			t.Fatal(err)
		}
		want.Add(ti)
	}
	if last != want.SegsIn || last < 3*n {
		t.Fatalf("segs_in %d after every connection was read, a full reading %d (at least %d)", last, want.SegsIn, 3*n)
	}
}

// TestWaitReturnsForDecodedRecords: records that one read brought in and
// an Rx did not return (more than its batch) make Wait return at once:
// the socket is empty and epoll would sleep on them until the peer sent
// again.
func TestWaitReturnsForDecodedRecords(t *testing.T) {
	srv := newServer(t, dgramio.Config{}, lo)
	c, err := net.Dial("tcp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b []byte
	for _, s := range []string{"a", "b", "c"} {
		if b, err = rec.AppendRecord(b, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	got := socktest.WaitOneByOne(t, srv, 3, nil)
	if fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("records %q", got)
	}
}
