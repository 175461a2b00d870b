package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"

	"golang.org/x/sys/unix"
)

// The fixture of the tcp-xdp and tcp-dpdk tests against a kernel TCP peer
// in the other namespace of a testhost pair (package peertest has the
// kernel's side).

// idle waits up to d for b to have something to read; on a kind that
// cannot wait (tcp-dpdk: Wait says ErrNotSupported) it sleeps 20 µs
// instead, so that the caller's next poll yields the CPU. It returns
// Wait's errors other than its timeout and ErrNotSupported.
func idle(ctx context.Context, b dgramio.Backend, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := b.Wait(wctx)
	switch {
	case errors.Is(err, dgramio.ErrNotSupported):
		time.Sleep(20 * time.Microsecond)
		return nil
	case wctx.Err() != nil:
		return nil
	}
	return err
}

// roundTrips sends n numbered records of size bytes from b, keeping at most
// window in flight, and checks each comes back in order, idling when there
// is nothing to read.
func roundTrips(t *testing.T, b dgramio.Backend, n, size, window int) {
	t.Helper()
	payload := make([]byte, size)
	pkts := make([]dgramio.Packet, 64)
	sent, got := 0, 0
	for deadline := time.Now().Add(120 * time.Second); got < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records back; stats %+v", got, n, b.Stats())
		}
		for sent < n && sent-got < window {
			binary.BigEndian.PutUint32(payload, uint32(sent))
			if b.Queue(payload) != nil {
				break
			}
			sent++
		}
		if err := b.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		k, err := b.Rx(pkts)
		if err != nil {
			t.Fatalf("Rx: %v", err)
		}
		for _, pk := range pkts[:k] {
			if len(pk.Data) != size || binary.BigEndian.Uint32(pk.Data) != uint32(got) {
				t.Fatalf("record %d: %d bytes, seq %d", got, len(pk.Data), binary.BigEndian.Uint32(pk.Data))
			}
			got++
		}
		if k == 0 {
			if err := idle(context.Background(), b, 100*time.Millisecond); err != nil {
				t.Fatalf("Wait: %v", err)
			}
		}
	}
}

// echoedRecords runs roundTrips of n records of 100 bytes, b a client of
// a kernel echo server, and checks that b's stats count n records each way
// and no reset. It returns those stats.
func echoedRecords(t *testing.T, b dgramio.Backend, n int) dgramio.Stats {
	t.Helper()
	roundTrips(t, b, n, 100, 64)
	s := b.Stats()
	if s.TxSent != uint64(n) || s.RxDelivered != uint64(n) || s.Resets != 0 {
		t.Fatalf("TxSent %d RxDelivered %d Resets %d, want %d, %d, 0; stats %+v", s.TxSent, s.RxDelivered, s.Resets, n, n, s)
	}
	return s
}

// serveKernelClient runs echo on b, a server on addr's port, while a kernel
// client inside h connects to addr, sends n records of 100 bytes, reads
// them back in order and closes. Once b has seen that close, it stops the
// poll loop, checks that b's stats count one accept, n records each way,
// one peer close and no reset, and returns those stats.
func serveKernelClient(t *testing.T, b dgramio.Backend, h *testhost.Host, addr netip.AddrPort, n int) dgramio.Stats {
	t.Helper()
	pl := startPoller(b.(*Backend), echo(t, b.(*Backend)))
	defer pl.stop()
	c := peertest.Dial(t, h, addr)
	if err := peertest.Records(c, 0, n, 100, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The server sees the kernel client's FIN as a peer close.
	for deadline := time.Now().Add(10 * time.Second); b.Stats().PeerCloses != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel client's close was not seen: %+v", b.Stats())
		}
	}
	pl.stop()
	s := b.Stats()
	t.Logf("mode %q: %d records each way", s.Mode, n)
	if s.Accepts != 1 || s.RxDelivered != uint64(n) || s.TxSent != uint64(n) || s.PeerCloses != 1 || s.Resets != 0 {
		t.Fatalf("Accepts %d RxDelivered %d TxSent %d PeerCloses %d Resets %d, want 1, %d, %d, 1, 0",
			s.Accepts, s.RxDelivered, s.TxSent, s.PeerCloses, s.Resets, n, n)
	}
	return s
}

// pinsProcess checks Config.CPUs on a userspace-TCP client: open(cpus)
// opens one, connected to a kernel echo server on p.B port 5000. While it
// is open every thread of the process is bound to the one CPU; after Close
// every thread has its affinity back (the allowed CPUs for those made
// meanwhile; DPDK's own threads, from an EAL started by an earlier test,
// may have one of their own).
func pinsProcess(t *testing.T, p *testhost.Pair, open func(cpus []int) (dgramio.Backend, error)) {
	t.Helper()
	allowed, err := cpu.Allowed()
	if err != nil {
		testutil.Skip(t, "cannot read this process's CPU affinity: "+err.Error())
	}
	c := allowed[len(allowed)-1]
	ln, wait := peertest.Echo(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	before := threadCPUs(t)
	b, err := open([]int{c})
	testutil.SkipIfNotSupported(t, err)
	roundTrips(t, b, 100, 100, 16)
	for tid, l := range threadCPUs(t) {
		if !slices.Equal(l, []int{c}) {
			t.Errorf("while open: thread %d on %v, want [%d]", tid, l, c)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for tid, l := range threadCPUs(t) {
		want, ok := before[tid]
		if !ok {
			want = allowed // made while the backend was open
		}
		if !slices.Equal(l, want) {
			t.Errorf("after Close: thread %d on %v, want %v", tid, l, want)
		}
	}
	peertest.Ended(t, ln, wait)
}

// pinsPoller checks Config.CPUs on a native-engine server: open(cpus),
// called on h's thread, opens one. While it is open the calling thread,
// and only it, is bound to the one CPU (the engine has no goroutines to
// share it with, so the process is left alone); Close on that thread gives
// it every allowed CPU back.
func pinsPoller(t *testing.T, h *testhost.Host, open func(cpus []int) (dgramio.Backend, error)) {
	t.Helper()
	allowed, err := cpu.Allowed()
	if err != nil || len(allowed) < 2 {
		testutil.Skip(t, "needs two allowed CPUs")
	}
	c := allowed[len(allowed)-1]
	var pinned, after []int
	var others map[int][]int
	err = h.Do(func() error {
		b, err := open([]int{c})
		if err != nil {
			return err
		}
		pinned, _ = cpu.Current()
		others = threadCPUs(t)
		delete(others, unix.Gettid())
		if err := b.Close(); err != nil {
			return err
		}
		after, _ = cpu.Current()
		return nil
	})
	testutil.SkipIfNotSupported(t, err)
	if !slices.Equal(pinned, []int{c}) {
		t.Errorf("while open the calling thread runs on %v, want [%d]", pinned, c)
	}
	for tid, l := range others {
		if slices.Equal(l, []int{c}) {
			t.Errorf("while open thread %d is bound to [%d] too: the native engine pins its poller only", tid, c)
		}
	}
	if !slices.Equal(after, allowed) {
		t.Errorf("after Close the calling thread runs on %v, want %v", after, allowed)
	}
}
