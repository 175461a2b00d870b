package load

import (
	"context"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
)

// loopBackend answers every flushed message at once, from preallocated
// slots, allocating nothing: a stand-in for a backend that keeps the rule.
type loopBackend struct {
	slots          [][]byte
	lens           []int
	head, tail, fl int // queued: [fl, tail); answerable: [head, fl)
	st             dgramio.Stats
	// With stop set, the rxLimit-th Rx call sets it.
	stop    *atomic.Bool
	rxLimit int
	rxCalls int
}

func newLoopBackend(n, size int) *loopBackend {
	b := &loopBackend{slots: make([][]byte, n), lens: make([]int, n)}
	for i := range b.slots {
		b.slots[i] = make([]byte, size)
	}
	return b
}

func (b *loopBackend) Queue(p []byte) error { return b.QueueTo(p, netip.AddrPort{}) }
func (b *loopBackend) QueueTo(p []byte, _ netip.AddrPort) error {
	if b.tail-b.head >= len(b.slots) {
		b.st.TxBackpressure++
		return dgramio.ErrBackPressure
	}
	i := b.tail % len(b.slots)
	b.lens[i] = copy(b.slots[i], p)
	b.tail++
	b.st.TxQueued++
	return nil
}
func (b *loopBackend) Flush() error { b.st.TxSent += uint64(b.tail - b.fl); b.fl = b.tail; return nil }
func (b *loopBackend) Rx(pkts []dgramio.Packet) (int, error) {
	if b.rxCalls++; b.stop != nil && b.rxCalls >= b.rxLimit {
		b.stop.Store(true)
	}
	n := 0
	for n < len(pkts) && b.head < b.fl {
		i := b.head % len(b.slots)
		pkts[n] = dgramio.Packet{Data: b.slots[i][:b.lens[i]]}
		b.head++
		n++
	}
	b.st.RxDelivered += uint64(n)
	return n, nil
}
func (b *loopBackend) Wait(context.Context) error { return nil }
func (b *loopBackend) Stats() dgramio.Stats       { return b.st }
func (b *loopBackend) Close() error               { return nil }

// The loop of Load allocates nothing per message: its allocations are the
// same for ten thousand messages and for two hundred thousand.
func TestLoadNoAllocPerMessage(t *testing.T) {
	mallocs := func(d time.Duration) (uint64, uint64) {
		l, err := newLoader(newLoopBackend(4096, 100), LoadOptions{Rate: 1e6, Duration: d, Drain: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		err = l.run(context.Background())
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := l.finish(nil)
		if r.Total.Received != r.Total.Sent || r.Total.Sent == 0 {
			t.Fatalf("sent %d received %d", r.Total.Sent, r.Total.Received)
		}
		return m1.Mallocs - m0.Mallocs, r.Total.Sent
	}
	small, ns := mallocs(10 * time.Millisecond)
	big, nb := mallocs(200 * time.Millisecond)
	t.Logf("%d messages: %d allocations; %d messages: %d allocations", ns, small, nb, big)
	// Allow a little for the runtime's own work during the longer run.
	if big > small+20 {
		t.Fatalf("%d more allocations for %d more messages", big-small, nb-ns)
	}
}

// The echo loop allocates nothing per message either.
func TestEchoNoAllocPerMessage(t *testing.T) {
	mallocs := func(rounds int) (uint64, uint64) {
		var stop atomic.Bool
		b := newLoopBackend(4096, 100)
		b.stop, b.rxLimit = &stop, rounds
		m, _ := NewMsg(100, 1)
		for i := 0; i < 1000; i++ {
			b.Queue(m)
		}
		b.Flush()
		r := &EchoResult{}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		err := echoLoop(context.Background(), b, EchoOptions{Batch: 16}, r, &stop)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Reflected != r.Received || r.Received == 0 {
			t.Fatalf("received %d reflected %d", r.Received, r.Reflected)
		}
		return m1.Mallocs - m0.Mallocs, r.Received
	}
	small, ns := mallocs(1000)
	big, nb := mallocs(100000)
	t.Logf("%d messages: %d allocations; %d messages: %d allocations", ns, small, nb, big)
	if big > small+20 {
		t.Fatalf("%d more allocations for %d more messages", big-small, nb-ns)
	}
}
