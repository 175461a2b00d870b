//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package uring

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/kernel/iouring"
)

// openIn opens a backend whose socket lives in h's namespace, on the
// calling goroutine's thread (which then owns the ring): the thread joins
// the namespace for New and goes back to its own afterwards. testhost's
// Host.Do would not do here: its thread ends when Do returns, and with it
// the ring's requests.
func openIn(h *testhost.Host, cfg dgramio.Config) (*Backend, error) {
	if err := iouring.Check(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // New holds its own lock
	orig, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	if err := netns.Set(h.NS); err != nil {
		return nil, fmt.Errorf("setns: %w", err)
	}
	cfg.Kind = dgramio.KindURing
	b, err := New(cfg)
	if serr := netns.Set(orig); serr != nil {
		// The thread is stuck in the other namespace: keep it locked so
		// it never returns to the pool, and fail.
		runtime.LockOSThread()
		if err == nil {
			b.Close()
		}
		return nil, fmt.Errorf("setns back: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	return b.(*Backend), nil
}

// vethEchoServer runs a uring echo server in p.B (see serveEcho), on
// cfg.LocalIP, or p.B.Addr when it is unset.
func vethEchoServer(t *testing.T, p *testhost.Pair, cfg dgramio.Config) (*Backend, func() dgramio.Stats) {
	t.Helper()
	cfg.Role = dgramio.RoleServer
	if !cfg.LocalIP.IsValid() {
		cfg.LocalIP = p.B.Addr
	}
	return serveEcho(t, func() (*Backend, error) { return openIn(p.B, cfg) })
}

// TestRoundTripVeth: 10,000 messages of 4..MaxDatagram (1472, 1452 over IPv6) bytes through a veth pair
// between two namespaces, echoed by a uring server to a uring client, every
// one checked.
func TestRoundTripVeth(t *testing.T) { socktest.ForFamilies(t, testRoundTripVeth) }

func testRoundTripVeth(t *testing.T, fam socktest.Family) {
	p := hosttest.New(t, testhost.Options{IPv6: fam.V6})
	const port = 5401
	a, b := fam.Pick(p.A.Addr, p.A.Addr6), fam.Pick(p.B.Addr, p.B.Addr6)
	_, stop := vethEchoServer(t, p, dgramio.Config{Port: port, LocalIP: b})
	cli, err := openIn(p.A, dgramio.Config{LocalIP: a, Dests: []netip.AddrPort{netip.AddrPortFrom(b, port)}, Port: port})
	testutil.SkipIfNotSupported(t, err)
	defer cli.Close()
	roundTrips(t, cli, 10000, 256, func(i int) int { return 4 + (i*97)%(fam.MaxDatagram-3) })
	cs := cli.Stats()
	ss := stop()
	if cs.Lost() != 0 || ss.Lost() != 0 {
		t.Errorf("losses: client %d server %d", cs.Lost(), ss.Lost())
	}
	if cs.RxDelivered != 10000 || ss.RxDelivered != 10000 {
		t.Errorf("delivered: client %d server %d, want 10000 each", cs.RxDelivered, ss.RxDelivered)
	}
	t.Logf("client: %.3f syscalls per message (%d for %d sent + %d received)",
		float64(cs.Syscalls)/float64(cs.TxSent+cs.RxDelivered), cs.Syscalls, cs.TxSent, cs.RxDelivered)
	t.Logf("server: %.3f syscalls per message (%d for %d received + %d sent)",
		float64(ss.Syscalls)/float64(ss.TxSent+ss.RxDelivered), ss.Syscalls, ss.RxDelivered, ss.TxSent)
}

// TestFanOutVeth: a client with two destinations (unconnected socket) sends
// every message to both; both servers see all of them, from the client.
func TestFanOutVeth(t *testing.T) { socktest.ForFamilies(t, testFanOutVeth) }

func testFanOutVeth(t *testing.T, fam socktest.Family) {
	a := hosttest.New(t, testhost.Options{IPv6: fam.V6})
	const port = 5402
	addrA, addrB := fam.Pick(a.A.Addr, a.A.Addr6), fam.Pick(a.B.Addr, a.B.Addr6)
	// The two destinations are B's address and A's own (a server in the
	// client's namespace), both on the same port.
	var servers [2]*Backend
	for i, h := range []*testhost.Host{a.B, a.A} {
		b, err := openIn(h, dgramio.Config{Role: dgramio.RoleServer, LocalIP: fam.Pick(h.Addr, h.Addr6), Port: port})
		testutil.SkipIfNotSupported(t, err)
		defer b.Close()
		servers[i] = b
	}
	cli, err := openIn(a.A, dgramio.Config{Dests: []netip.AddrPort{netip.AddrPortFrom(addrB, port), netip.AddrPortFrom(addrA, port)}, Port: port, LocalIP: addrA})
	testutil.SkipIfNotSupported(t, err)
	defer cli.Close()
	const n = 500
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		socktest.Payload(buf, uint32(i))
		for cli.Queue(buf) != nil {
			if err := cli.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if i%16 == 15 {
			if err := cli.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		next := uint32(0)
		socktest.Collect(t, s, func() bool { return next == n }, func(pk dgramio.Packet) {
			seq, err := socktest.Check(pk.Data)
			if err != nil || seq != next {
				t.Fatalf("server %d: message %d (%v), want %d", i, seq, err, next)
			}
			if pk.From.Addr() != addrA || pk.From.Port() != cli.LocalAddr().Port() {
				t.Fatalf("server %d: from %v, want %v", i, pk.From, cli.LocalAddr())
			}
			next++
		})
	}
	if st := cli.Stats(); st.TxQueued != 2*n {
		t.Fatalf("client queued %d, want %d (one per destination)", st.TxQueued, 2*n)
	}
}

// TestCloseWithSendsInFlightVeth closes a client whose sends really are in
// flight: they go to an address on the link that nobody has, so the first
// datagrams wait in the neighbour queue for ARP, they hold the tiny send
// buffer, and the rest wait inside io_uring for room. Close must cancel
// them, account for every message, and leave no descriptor or mapping.
func TestCloseWithSendsInFlightVeth(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	nobody := p.B.Addr.As4()
	nobody[3] = 99
	fds := countFDs(t)
	_, uringMaps := mappings(t, nil)
	for round := 0; round < 4; round++ {
		cli, err := openIn(p.A, dgramio.Config{LocalIP: p.A.Addr, Dests: []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4(nobody), 5403)}, Port: 5403, SockBuf: 4096})
		testutil.SkipIfNotSupported(t, err)
		addrs := []uint64{cli.mem.Addr(0), cli.bufs.Addr(0)}
		payload := make([]byte, 1400)
		for i := 0; i < 64 && cli.Queue(payload) == nil; i++ {
		}
		if err := cli.Flush(); err != nil {
			t.Fatal(err)
		}
		// Let the kernel take what it can, then reap the completions.
		deadline := time.Now().Add(5 * time.Second)
		var inflight uint64
		for time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			cli.Rx(make([]dgramio.Packet, 1))
			st := cli.Stats()
			inflight, _ = st.Counter("uring", "tx_inflight")
			if st.TxSent > 0 && inflight > 0 {
				break
			}
		}
		if inflight == 0 {
			t.Fatal("no send stayed in flight; the test did not test anything")
		}
		// Odd rounds close from another thread, which cannot submit to the
		// ring (SINGLE_ISSUER) and relies on the eventfd-triggered cancel.
		if round%2 == 0 {
			err = cli.Close()
		} else {
			errc := make(chan error)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				errc <- cli.Close()
			}()
			err = <-errc
		}
		if err != nil {
			t.Fatal(err)
		}
		st := cli.Stats()
		cancelled, _ := st.Counter("uring", "send_cancelled")
		if st.TxQueued != st.TxSent+st.TxDropped || cancelled == 0 {
			t.Fatalf("after Close: queued %d, sent %d, dropped %d (cancelled %d)", st.TxQueued, st.TxSent, st.TxDropped, cancelled)
		}
		hit, maps := mappings(t, addrs)
		if hit[0] || hit[1] || maps != uringMaps {
			t.Fatalf("after Close: slots mapped %v, buffers mapped %v, %d io_uring mappings (%d before)", hit[0], hit[1], maps, uringMaps)
		}
		if n := countFDs(t); n != fds {
			t.Fatalf("%d fds after Close, %d before", n, fds)
		}
		t.Logf("round %d (close on the ring's thread: %v): %d sends in flight at Close; sent %d, dropped %d (%d cancelled)", round, round%2 == 0, inflight, st.TxSent, st.TxDropped, cancelled)
	}
}
