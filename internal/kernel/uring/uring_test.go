//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package uring

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/kernel/iouring"
)

var loopback = socktest.Loopback

// freePort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) uint16 { return socktest.FreePort(t, unix.SOCK_DGRAM) }

// roundTrips sends n messages from c, each of size(i) bytes, at most window
// of them unanswered, to an echo server, and checks that each comes back
// whole, exactly once. (socktest.RoundTrip would run the echo loop on a
// goroutine of its own, which a uring server, bound to the thread that
// created it, cannot allow: echoServer runs it.)
func roundTrips(t *testing.T, c dgramio.Backend, n, window int, size func(i int) int) {
	t.Helper()
	if err := socktest.Exchange(c, n, window, size); err != nil {
		t.Fatalf("%v; client stats %+v", err, c.Stats())
	}
}

// openT opens a backend on the calling goroutine and closes it at the end of
// the test (t.Cleanup runs on the test's goroutine, the ring's thread).
func openT(t testing.TB, cfg dgramio.Config) *Backend {
	t.Helper()
	if err := iouring.Check(); err != nil {
		testutil.SkipIfNotSupported(t, err)
	}
	cfg.Kind = dgramio.KindURing
	b, err := New(cfg)
	if err != nil {
		testutil.SkipIfNotSupported(t, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b.(*Backend)
}

// echoServer runs a uring echo server on 127.0.0.1 (see serveEcho). It
// returns the server's address and a function that stops it and returns
// its Stats.
func echoServer(t *testing.T, cfg dgramio.Config) (netip.AddrPort, func() dgramio.Stats) {
	t.Helper()
	cfg.Kind, cfg.Role = dgramio.KindURing, dgramio.RoleServer
	if !cfg.LocalIP.IsValid() {
		cfg.LocalIP = loopback
	}
	if cfg.Port == 0 {
		cfg.Port = freePort(t)
	}
	_, stop := serveEcho(t, func() (*Backend, error) {
		b, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return b.(*Backend), nil
	})
	return netip.AddrPortFrom(cfg.LocalIP, cfg.Port), stop
}

// serveEcho runs socktest.Echo on a uring server on a goroutine of its own:
// open makes the server there, since the ring belongs to the goroutine
// that polls it, and the server is closed there too. It returns the server
// and a function that stops it (also run by t.Cleanup) and returns its
// Stats. A server that cannot be made skips the test when that is not
// supported here, and fails it otherwise.
func serveEcho(t *testing.T, open func() (*Backend, error)) (*Backend, func() dgramio.Stats) {
	t.Helper()
	ready := make(chan error, 1)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var srv *Backend
	go func() {
		var err error
		srv, err = open()
		ready <- err
		if err != nil {
			return
		}
		err = socktest.Echo(ctx, srv)
		srv.Close() // on the ring's own thread
		done <- err
	}()
	if err := <-ready; err != nil {
		cancel()
		testutil.SkipIfNotSupported(t, err)
	}
	var st dgramio.Stats
	stopped := false
	stop := func() dgramio.Stats {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("echo server: %v", err)
			}
			st = srv.Stats()
		}
		return st
	}
	t.Cleanup(func() { stop() })
	return srv, stop
}

func fixed(n int) func(int) int { return func(int) int { return n } }

func TestEchoLoopback(t *testing.T) { socktest.ForFamilies(t, testEchoLoopback) }

func testEchoLoopback(t *testing.T, fam socktest.Family) {
	srvAddr, stop := echoServer(t, dgramio.Config{LocalIP: fam.Loopback})
	c := openT(t, dgramio.Config{Dests: []netip.AddrPort{srvAddr}})
	const n, size = 2000, 100
	roundTrips(t, c, n, 64, fixed(size))
	cs := c.Stats()
	ss := stop()
	if cs.TxSent != n || cs.RxDelivered != n || cs.Lost() != 0 {
		t.Errorf("client: sent %d delivered %d lost %d, want %d, %d, 0", cs.TxSent, cs.RxDelivered, cs.Lost(), n, n)
	}
	if ss.RxDelivered != n || ss.TxSent != n || ss.Lost() != 0 {
		t.Errorf("server: delivered %d sent %d lost %d, want %d, %d, 0", ss.RxDelivered, ss.TxSent, ss.Lost(), n, n)
	}
	if cs.Syscalls == 0 || !strings.Contains(cs.Mode, "multishot") {
		t.Errorf("client stats: syscalls %d, mode %q", cs.Syscalls, cs.Mode)
	}
	if c.LocalAddr().Addr().Is6() != fam.V6 {
		t.Errorf("client bound to %v over %s", c.LocalAddr(), fam.Name)
	}
	t.Logf("client: %d syscalls for %d messages sent and %d received (%.2f per message); mode %s",
		cs.Syscalls, cs.TxSent, cs.RxDelivered, float64(cs.Syscalls)/float64(cs.TxSent+cs.RxDelivered), cs.Mode)
}

// URing.Interrupts sets the ring up without COOP_TASKRUN (completions
// interrupt the ring's thread), says so in Stats.Mode, and echoes as the
// default ring does; the default ring has COOP_TASKRUN.
func TestInterrupts(t *testing.T) {
	srvAddr, stop := echoServer(t, dgramio.Config{URing: dgramio.URingOptions{Interrupts: true}})
	c := openT(t, dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, srvAddr.Port())}, URing: dgramio.URingOptions{Interrupts: true}})
	if c.ring.Flags()&iouring.SetupCoopTaskrun != 0 || !strings.Contains(c.Stats().Mode, "completions by interrupt") {
		t.Errorf("Interrupts: ring flags %#x, mode %q; want no COOP_TASKRUN and the mode saying so", c.ring.Flags(), c.Stats().Mode)
	}
	const n = 200
	roundTrips(t, c, n, 16, fixed(100))
	if cs, ss := c.Stats(), stop(); cs.RxDelivered != n || ss.RxDelivered != n || cs.Lost()+ss.Lost() != 0 {
		t.Errorf("Interrupts: client delivered %d, server %d, lost %d; want %d, %d, 0", cs.RxDelivered, ss.RxDelivered, cs.Lost()+ss.Lost(), n, n)
	}
	d := openT(t, dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, srvAddr.Port())}})
	if d.ring.Flags()&iouring.SetupCoopTaskrun == 0 || strings.Contains(d.Stats().Mode, "interrupt") {
		t.Errorf("default: ring flags %#x, mode %q; want COOP_TASKRUN", d.ring.Flags(), d.Stats().Mode)
	}
}

// TestQueueRefusals: per family, an address of the other family, none, or
// port 0 is refused and counted; the family's own is queued.
func TestQueueRefusals(t *testing.T) { socktest.ForFamilies(t, testQueueRefusals) }

func testQueueRefusals(t *testing.T, fam socktest.Family) {
	b := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: fam.Loopback, Port: freePort(t), MaxDatagram: 100, TxQueue: 2})
	if b.Queue([]byte("x")) != dgramio.ErrNoRoute {
		t.Error("Queue on a server without Dests accepted a message")
	}
	other := socktest.Families[0].Loopback
	if !fam.V6 {
		other = socktest.Families[1].Loopback
	}
	for _, to := range []netip.AddrPort{{}, netip.AddrPortFrom(other, 9), netip.AddrPortFrom(fam.Loopback, 0)} {
		if b.QueueTo([]byte("x"), to) != dgramio.ErrNoRoute {
			t.Errorf("QueueTo(%v) accepted a message", to)
		}
	}
	dst := netip.AddrPortFrom(fam.Loopback, 9)
	if b.QueueTo(make([]byte, 101), dst) != dgramio.ErrTooLarge {
		t.Error("QueueTo accepted 101 bytes with MaxDatagram 100")
	}
	if b.QueueTo([]byte("a"), dst) != nil || b.QueueTo([]byte("b"), dst) != nil || b.QueueTo([]byte("c"), dst) != dgramio.ErrBackPressure {
		t.Error("TxQueue 2: want two accepted, the third refused")
	}
	st := b.Stats()
	noDest, _ := st.Counter("uring", "queue_no_dest")
	badDest, _ := st.Counter("uring", "queue_bad_dest")
	if noDest != 1 || badDest != 3 || st.TxOversize != 1 || st.TxBackpressure != 1 || st.TxQueued != 2 {
		t.Fatalf("no_dest %d bad_dest %d oversize %d backpressure %d queued %d; want 1 3 1 1 2",
			noDest, badDest, st.TxOversize, st.TxBackpressure, st.TxQueued)
	}
}

// TestEmptyRxNoSyscall: an Rx that finds nothing reads the CQ tail only.
func TestEmptyRxNoSyscall(t *testing.T) {
	b := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: loopback, Port: freePort(t)})
	pkts := make([]dgramio.Packet, 8)
	before := b.Stats().Syscalls
	for i := 0; i < 1000; i++ {
		if n, err := b.Rx(pkts); n != 0 || err != nil {
			t.Fatalf("Rx on an idle socket: %d, %v", n, err)
		}
	}
	if after := b.Stats().Syscalls; after != before {
		t.Fatalf("1000 empty Rx made %d system calls, want 0", after-before)
	}
}

// TestTinyBufferRing: with four buffers, a burst of 1000 datagrams ends the
// multishot receive with ENOBUFS again and again, and each time the next Rx
// arms it again; nothing is lost, since the datagrams wait in the socket.
func TestTinyBufferRing(t *testing.T) { socktest.ForFamilies(t, testTinyBufferRing) }

func testTinyBufferRing(t *testing.T, fam socktest.Family) {
	port := freePort(t)
	srv := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: fam.Loopback, Port: port,
		URing: dgramio.URingOptions{RxBuffers: 4}})
	if srv.granted.RcvBuf < 1000*1024 {
		testutil.Skip(t, fmt.Sprintf("socket receive buffer %d bytes is too small to hold the burst (net.dgramio.rmem_max; run as root)", srv.granted.RcvBuf))
	}
	// The sender is a plain socket, so the burst is in the server's socket
	// buffer before the server reads anything.
	tx, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(fam.Loopback, port)))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	const n, size = 1000, 64
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		socktest.Payload(buf, uint32(i))
		if _, err := tx.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	pkts := make([]dgramio.Packet, 3)
	next := uint32(0)
	deadline := time.Now().Add(20 * time.Second)
	for next < n && time.Now().Before(deadline) {
		k, err := srv.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:k] {
			seq, err := socktest.Check(p.Data)
			if err != nil {
				t.Fatal(err)
			}
			if seq != next {
				t.Fatalf("got message %d, want %d (lost or reordered)", seq, next)
			}
			if p.From != netip.AddrPort(tx.LocalAddr().(*net.UDPAddr).AddrPort()) {
				t.Fatalf("message %d from %v, want %v", seq, p.From, tx.LocalAddr())
			}
			next++
		}
		if k == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			srv.Wait(ctx)
			cancel()
		}
	}
	st := srv.Stats()
	rearm, _ := st.Counter("uring", "rearm")
	drops, _ := st.Counter("socket", "drops")
	if next != n || st.RxDelivered != n || st.Lost() != 0 || drops != 0 {
		t.Fatalf("received %d of %d (delivered %d, lost %d, socket drops %d)", next, n, st.RxDelivered, st.Lost(), drops)
	}
	if rearm == 0 {
		t.Fatal("re-arm counter is 0: the four buffers never ran out")
	}
	t.Logf("1000 datagrams through 4 buffers: %d re-arms, %d syscalls", rearm, st.Syscalls)
}

func TestTruncated(t *testing.T) { socktest.ForFamilies(t, testTruncated) }

func testTruncated(t *testing.T, fam socktest.Family) {
	srvPort := freePort(t)
	srv := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: fam.Loopback, Port: srvPort, MaxDatagram: 100})
	tx, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(fam.Loopback, srvPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for _, size := range []int{101, 1400, 100, 1} {
		if _, err := tx.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	var sizes []int
	socktest.Collect(t, srv, func() bool { return len(sizes) >= 2 }, func(p dgramio.Packet) { sizes = append(sizes, len(p.Data)) })
	st := srv.Stats()
	if fmt.Sprint(sizes) != "[100 1]" || st.RxTruncated != 2 {
		t.Fatalf("delivered sizes %v and %d truncated; want [100 1] and 2", sizes, st.RxTruncated)
	}
}

func TestSQPollRefusedWithoutCPU(t *testing.T) {
	_, err := New(dgramio.Config{Kind: dgramio.KindURing, Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, 9)}, Port: 9,
		URing: dgramio.URingOptions{SQPoll: true}})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "URing.SQCPU" || !strings.Contains(ce.Reason, "SQ_AFF") {
		t.Fatalf("SQPOLL without a CPU: %v; want a ConfigError on URing.SQCPU", err)
	}
	cpu0 := 0
	_, err = New(dgramio.Config{Kind: dgramio.KindURing, Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, 9)}, Port: 9, CPUs: []int{0},
		URing: dgramio.URingOptions{SQPoll: true, SQCPU: &cpu0}})
	if !errors.As(err, &ce) || ce.Field != "URing.SQCPU" {
		t.Fatalf("SQPOLL on the poller's CPU: %v; want a ConfigError on URing.SQCPU", err)
	}
}

func TestSQPollCPUOutsideSet(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	bad := allowed[len(allowed)-1] + 1
	_, err = New(dgramio.Config{Kind: dgramio.KindURing, Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, 9)}, Port: 9,
		URing: dgramio.URingOptions{SQPoll: true, SQCPU: &bad}})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "allowed CPUs are "+cpu.FormatList(allowed)) {
		t.Fatalf("SQ CPU %d outside %v: %v; want a ConfigError naming the allowed CPUs", bad, allowed, err)
	}
}

func TestSQPollWithCPU(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testutil.Skip(t, "SQPOLL needs two CPUs: one for the poller, one for the SQ thread")
	}
	srvAddr, _ := echoServer(t, dgramio.Config{})
	sq := allowed[1]
	c := openT(t, dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, srvAddr.Port())}, CPUs: []int{allowed[0]},
		URing: dgramio.URingOptions{SQPoll: true, SQCPU: &sq}})
	if !strings.Contains(c.Stats().Mode, fmt.Sprintf("sqpoll cpu %d", sq)) {
		t.Fatalf("mode %q does not say sqpoll", c.Stats().Mode)
	}
	if got, err := cpu.Current(); err != nil || len(got) != 1 || got[0] != allowed[0] {
		t.Fatalf("poller thread affinity %v (%v), want [%d]", got, err, allowed[0])
	}
	roundTrips(t, c, 300, 32, fixed(200))
	st := c.Stats()
	if st.TxSent != 300 || st.RxDelivered != 300 {
		t.Fatalf("sent %d received %d, want 300 each", st.TxSent, st.RxDelivered)
	}
	t.Logf("sqpoll: %d syscalls for 300 round trips", st.Syscalls)
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// mapped reports whether addr lies in one of the process's mappings, and
// counts the io_uring mappings.
func mappings(t *testing.T, addrs []uint64) (hit []bool, uringMaps int) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hit = make([]bool, len(addrs))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "io_uring") {
			uringMaps++
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil {
			continue
		}
		for i, a := range addrs {
			if a >= lo && a < hi {
				hit[i] = true
			}
		}
	}
	return hit, uringMaps
}

// TestCloseLeaksNothing closes a backend with sends in flight (a full
// queue flushed and not reaped) and checks that no file descriptor and no
// mapping is left: the socket, ring, eventfd; the rings, buffers and slots.
func TestCloseLeaksNothing(t *testing.T) {
	// The server in this process makes no reply sockets, whose fds
	// (open while its peer is active, by design) would count here.
	srvAddr, _ := echoServer(t, dgramio.Config{ReplySockets: -1})
	fds := countFDs(t)
	_, uringMaps := mappings(t, nil)
	for round := 0; round < 5; round++ {
		b, err := New(dgramio.Config{Kind: dgramio.KindURing, Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, srvAddr.Port())}, MaxDatagram: 1472})
		if err != nil {
			testutil.SkipIfNotSupported(t, err)
		}
		u := b.(*Backend)
		addrs := []uint64{u.mem.Addr(0), u.bufs.Addr(0)}
		payload := make([]byte, 1472)
		for b.Queue(payload) == nil {
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		st := b.Stats()
		inflight, _ := st.Counter("uring", "tx_inflight")
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		final := b.Stats()
		if final.TxQueued != final.TxSent+final.TxDropped {
			t.Errorf("queued %d != sent %d + dropped %d after Close", final.TxQueued, final.TxSent, final.TxDropped)
		}
		hit, maps := mappings(t, addrs)
		if hit[0] || hit[1] {
			t.Fatalf("round %d: send slots mapped %v, buffers mapped %v after Close", round, hit[0], hit[1])
		}
		if maps != uringMaps {
			t.Fatalf("round %d: %d io_uring mappings after Close, %d before", round, maps, uringMaps)
		}
		if n := countFDs(t); n != fds {
			t.Fatalf("round %d: %d fds after Close, %d before", round, n, fds)
		}
		t.Logf("round %d: closed with %d of %d sends in flight, %d sent, %d dropped", round, inflight, final.TxQueued, final.TxSent, final.TxDropped)
	}
}

// TestCloseDuringRxWait closes the backend from another goroutine while its
// own goroutine loops on Rx and Wait: they must return net.ErrClosed, never
// crash, and Close must not hang.
func TestCloseDuringRxWait(t *testing.T) {
	for round := 0; round < 20; round++ {
		port := freePort(t)
		ready := make(chan dgramio.Backend)
		errc := make(chan error, 1)
		go func() {
			b, err := New(dgramio.Config{Kind: dgramio.KindURing, Role: dgramio.RoleServer, LocalIP: loopback, Port: port})
			if err != nil {
				errc <- err
				close(ready)
				return
			}
			ready <- b
			pkts := make([]dgramio.Packet, 8)
			for i := 0; ; i++ {
				var err error
				if i%2 == 0 {
					_, err = b.Rx(pkts)
				} else {
					err = b.Wait(context.Background())
				}
				if errors.Is(err, net.ErrClosed) {
					errc <- nil
					return
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
		b, ok := <-ready
		if !ok {
			testutil.SkipIfNotSupported(t, <-errc)
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		closed := make(chan error)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Close hangs", round)
		}
		if err := <-errc; err != nil {
			t.Fatalf("round %d: poll loop: %v", round, err)
		}
		if _, err := b.Rx(make([]dgramio.Packet, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Rx after Close: %v", err)
		}
		if err := b.Wait(context.Background()); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Wait after Close: %v", err)
		}
		if b.Queue([]byte("x")) != dgramio.ErrClosed || b.Flush() == nil {
			t.Fatal("Queue or Flush works after Close")
		}
	}
}

func TestWaitContext(t *testing.T) {
	b := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: loopback, Port: freePort(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an idle socket: %v, want DeadlineExceeded", err)
	}
}

func TestAllocs(t *testing.T) { socktest.ForFamilies(t, testAllocs) }

func testAllocs(t *testing.T, fam socktest.Family) {
	srvAddr, _ := echoServer(t, dgramio.Config{LocalIP: fam.Loopback})
	c := openT(t, dgramio.Config{Dests: []netip.AddrPort{srvAddr}})
	payload := make([]byte, 100)
	pkts := make([]dgramio.Packet, 32)
	drain := func() {
		for i := 0; i < 100; i++ {
			if n, _ := c.Rx(pkts); n == 0 {
				break
			}
		}
	}
	// Warm up: every path once (re-arm, reap, delivery).
	for i := 0; i < 100; i++ {
		c.Queue(payload)
		c.Flush()
		drain()
	}
	if a := testing.AllocsPerRun(200, func() {
		c.Queue(payload)
		c.Flush()
	}); a != 0 {
		t.Errorf("Queue+Flush: %v allocations per message", a)
	}
	time.Sleep(50 * time.Millisecond) // let the echoes come back
	if a := testing.AllocsPerRun(200, func() {
		c.Queue(payload)
		c.Flush()
		c.Rx(pkts)
	}); a != 0 {
		t.Errorf("Queue+Flush+Rx: %v allocations per message", a)
	}
	if a := testing.AllocsPerRun(200, func() { c.Rx(pkts) }); a != 0 {
		t.Errorf("Rx: %v allocations", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	c.Queue(payload)
	c.Flush()
	if a := testing.AllocsPerRun(20, func() {
		c.Queue(payload)
		c.Flush()
		c.Wait(ctx)
		c.Rx(pkts)
	}); a != 0 {
		t.Errorf("Wait: %v allocations", a)
	}
	if st := c.Stats(); st.RxDelivered == 0 {
		t.Fatal("no echo came back during the allocation runs")
	}
}

// TestUnprivileged runs an echo, with Wait and re-arms, as uid 65534
// (nobody) in a copy of the test binary: io_uring, buffer rings, SQPOLL,
// NAPI registration and the socket need no privilege.
func TestUnprivileged(t *testing.T) {
	if socktest.AsNobody(t) {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatal("the body runs as root")
	}
	srvAddr, stop := echoServer(t, dgramio.Config{URing: dgramio.URingOptions{RxBuffers: 4}})
	cfg := dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(loopback, srvAddr.Port())}}
	if allowed, err := cpu.Allowed(); err == nil && len(allowed) >= 2 {
		cfg.CPUs = []int{allowed[0]}
		cfg.URing = dgramio.URingOptions{SQPoll: true, SQCPU: &allowed[1], NAPI: true}
	}
	c := openT(t, cfg)
	roundTrips(t, c, 1000, 32, fixed(500))
	ss := stop()
	rearm, _ := ss.Counter("uring", "rearm")
	t.Logf("uid %d: 1000 round trips, server re-armed %d times; %s", os.Geteuid(), rearm, c.Stats().Mode)
}

// TestWrongThread: a re-arm from a goroutine other than New's is refused by
// the kernel, and Rx says why.
func TestWrongThread(t *testing.T) {
	port := freePort(t)
	b := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: loopback, Port: port, URing: dgramio.URingOptions{RxBuffers: 2}})
	tx, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for i := 0; i < 4; i++ { // two buffers: the receive ends with ENOBUFS
		tx.Write([]byte("x"))
	}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pkts := make([]dgramio.Packet, 4)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := b.Rx(pkts); err != nil {
				errc <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
		errc <- nil
	}()
	err = <-errc
	if err == nil || !strings.Contains(err.Error(), "goroutine that called New") {
		t.Fatalf("Rx from another thread: %v; want the SINGLE_ISSUER explanation", err)
	}
}

// TestOpenFailureLeaksNothing: a New that fails (the port is taken) undoes
// what it did.
func TestOpenFailureLeaksNothing(t *testing.T) {
	taken, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := uint16(taken.LocalAddr().(*net.UDPAddr).Port)
	fds := countFDs(t)
	_, maps := mappings(t, nil)
	for i := 0; i < 10; i++ {
		if _, err := New(dgramio.Config{Kind: dgramio.KindURing, Role: dgramio.RoleServer, LocalIP: loopback, Port: port}); !errors.Is(err, unix.EADDRINUSE) {
			t.Fatalf("New on a taken port: %v, want EADDRINUSE", err)
		}
	}
	if n := countFDs(t); n != fds {
		t.Fatalf("%d fds after failed opens, %d before", n, fds)
	}
	if _, m := mappings(t, nil); m != maps {
		t.Fatalf("%d io_uring mappings after failed opens, %d before", m, maps)
	}
}

// TestPinning: with Config.CPUs, New pins its thread and Close restores it;
// a thread the caller pinned already stays pinned after Close.
func TestPinning(t *testing.T) {
	socktest.Pinning(t, func(cpus []int) (dgramio.Backend, error) {
		return New(dgramio.Config{Kind: dgramio.KindURing, Role: dgramio.RoleServer, LocalIP: loopback, Port: freePort(t), CPUs: cpus})
	})
}

// TestCloseWhileLoopReadsData: Close from another goroutine right after an
// Rx delivered, while the poll loop still reads the Packets' Data (which
// point into the buffer ring): the loop reads them whole, never a fault,
// and its next Rx returns net.ErrClosed and unmaps the buffers.
func TestCloseWhileLoopReadsData(t *testing.T) {
	port := freePort(t)
	type opened struct {
		b   *Backend
		err error
	}
	ready := make(chan opened)
	delivered := make(chan struct{})
	closed := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		b, err := New(dgramio.Config{Kind: dgramio.KindURing, Role: dgramio.RoleServer, LocalIP: loopback, Port: port})
		if err != nil {
			ready <- opened{nil, err}
			return
		}
		u := b.(*Backend)
		ready <- opened{u, nil}
		pkts := make([]dgramio.Packet, 8)
		n := 0
		for n == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := b.Wait(ctx)
			cancel()
			if err != nil {
				errc <- err
				return
			}
			if n, err = b.Rx(pkts); err != nil {
				errc <- err
				return
			}
		}
		close(delivered)
		<-closed
		for _, p := range pkts[:n] { // after Close: still mapped
			if string(p.Data) != "hello, ring" {
				errc <- fmt.Errorf("Data after Close: %q", p.Data)
				return
			}
		}
		addr := u.bufs.Addr(0)
		if hit, _ := mappings(t, []uint64{addr}); !hit[0] {
			errc <- errors.New("buffers unmapped while the loop holds a batch")
			return
		}
		if _, err := b.Rx(pkts); !errors.Is(err, net.ErrClosed) {
			errc <- fmt.Errorf("Rx after Close: %v", err)
			return
		}
		if hit, _ := mappings(t, []uint64{addr}); hit[0] {
			errc <- errors.New("buffers still mapped after the loop's Rx saw the Close")
			return
		}
		errc <- nil
	}()
	o := <-ready
	if o.err != nil {
		testutil.SkipIfNotSupported(t, o.err)
	}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello, ring")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-delivered:
	case err := <-errc:
		t.Fatal(err)
	}
	if err := o.b.Close(); err != nil { // from the test's goroutine, not the ring's
		t.Fatal(err)
	}
	close(closed)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestUnreadCountedAtClose: datagrams that arrived and that Rx never took
// (in the buffer ring, or still in the socket's queue) are counted at
// Close (uring.rx_unread_at_close, a loss), not lost with the socket.
func TestUnreadCountedAtClose(t *testing.T) { socktest.ForFamilies(t, testUnreadCountedAtClose) }

func testUnreadCountedAtClose(t *testing.T, fam socktest.Family) {
	srvPort := freePort(t)
	srv := openT(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: fam.Loopback, Port: srvPort})
	tx, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(fam.Loopback, srvPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	// More than the buffer ring holds, so that some stay in the socket.
	n := srv.cfg.URing.RxBuffers + 100
	for i := 0; i < n; i++ {
		if _, err := tx.Write([]byte("never read")); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	st := srv.Stats()
	if got, _ := st.Counter("uring", "rx_unread_at_close"); got != uint64(n) || st.Lost() != uint64(n) {
		t.Errorf("rx_unread_at_close %d, Lost %d; want %d each", got, st.Lost(), n)
	}
}
