package tcp

import (
	"context"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// roundTrip sends one record from cli and spins (Rx, no Wait) until it
// comes back.
func roundTrip(t testing.TB, cli *Backend, msg []byte, pkts []dgramio.Packet) {
	if cli.Queue(msg) != nil {
		t.Fatal("Queue refused")
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := cli.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no echo within 10s")
		}
	}
}

// Allocation budgets per 100-byte request/response over memio, counted in
// the whole process (both stacks, netstack's goroutines included).
//
// Spinning (both poll loops call Rx and Flush without Wait): our code
// allocates nothing per message (Queue, Flush and Rx copy into buffers made
// at New; the link endpoint hands packets to the FrameIO without netstack's
// per-packet PacketBufferList), and netstack's segments, views and packet
// buffers come from its pools. The budget is 1 for a pool refill now and
// then.
//
// Sleeping (the server's loop calls Wait, with its one long-lived context,
// between messages): memio is a stack.Interrupter, so Endpoint.Sleep waits
// without slicing the sleep into contexts, and the wake-ups netstack's
// goroutines make (Interrupt) allocate nothing either. The same budget of
// 1. (Over a FrameIO without Interrupt, each sleep allocates a
// context.WithTimeout per stack.SleepSlice: 3 to 4 allocations.)
const (
	allocBudgetSpin  = 1
	allocBudgetSleep = 1
)

// sleepEcho is echo that sleeps in Wait (on the poller's own context, made
// once) whenever Rx has nothing.
func sleepEcho(b *Backend) func(ctx context.Context) bool { return plainEcho(b, true) }

// spinEcho is echo without Wait.
func spinEcho(b *Backend) func(ctx context.Context) bool { return plainEcho(b, false) }

// plainEcho is a server body that allocates nothing of its own: every
// record goes back to its sender, flushing until QueueTo takes it (it
// stops on a Flush error or when ctx ends); with sleep it sleeps in Wait
// whenever Rx has nothing. Errors other than peer closes and resets stop
// it.
func plainEcho(b *Backend, sleep bool) func(ctx context.Context) bool {
	pkts := make([]dgramio.Packet, 64)
	return func(ctx context.Context) bool {
		n, err := b.Rx(pkts)
		if err != nil && !isPeer(err) {
			return false
		}
		for i := 0; i < n; i++ {
			for b.QueueTo(pkts[i].Data, pkts[i].From) != nil {
				if b.Flush() != nil || ctx.Err() != nil {
					return false
				}
			}
		}
		b.Flush()
		if n == 0 && sleep {
			b.Wait(ctx)
		}
		return true
	}
}

func TestAllocsPerMessage(t *testing.T) { engines(t, testAllocsPerMessage) }

func testAllocsPerMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race (sync.Pool drops objects)")
	}
	for _, tc := range []struct {
		name   string
		body   func(*Backend) func(context.Context) bool
		budget float64
	}{
		{"spinning", spinEcho, allocBudgetSpin},
		{"sleeping", sleepEcho, allocBudgetSleep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), tc.body)
			msg := make([]byte, 100)
			pkts := make([]dgramio.Packet, 8)
			for i := 0; i < 200; i++ { // warm the pools
				roundTrip(t, cli, msg, pkts)
			}
			n := testing.AllocsPerRun(500, func() { roundTrip(t, cli, msg, pkts) })
			t.Logf("%.2f allocations per 100-byte round trip (both stacks, all goroutines)", n)
			if n > tc.budget {
				t.Errorf("%.2f allocations per round trip, budget %v", n, tc.budget)
			}
		})
	}
}

// TestAllocsOwnPath: the backend's own calls on a quiet connection (Rx
// with nothing to read, Flush with nothing queued) allocate nothing.
func TestAllocsOwnPath(t *testing.T) { engines(t, testAllocsOwnPath) }

func testAllocsOwnPath(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race (sync.Pool drops objects)")
	}
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), nil)
	pkts := make([]dgramio.Packet, 8)
	cli.Flush()
	cli.Rx(pkts)
	n := testing.AllocsPerRun(1000, func() {
		cli.Flush()
		cli.Rx(pkts)
	})
	if n != 0 {
		t.Errorf("%.1f allocations per idle Flush+Rx", n)
	}
}

// BenchmarkRoundTrip: one 100-byte record echoed over memio, the client
// spinning on Rx; allocations are the whole process's.
func BenchmarkRoundTrip(b *testing.B) {
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := NewOverFrameIO(serverConfig(), pa, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	p := startPoller(srv, sleepEcho(srv))
	defer p.stop()
	cli, err := NewOverFrameIO(clientConfig(), pb, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	msg := make([]byte, 100)
	pkts := make([]dgramio.Packet, 8)
	for i := 0; i < 100; i++ {
		roundTrip(b, cli, msg, pkts)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roundTrip(b, cli, msg, pkts)
	}
}
