package native

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/testutil"
)

// manyConns opens n connections between two engines over memio (each
// engine's table holds n+16), carries a byte each way on every one, lets
// them idle until the pools are trimmed (PoolIdle), and returns the world,
// both ends of each connection and the heap that the engines (and the
// wire) took per connection end, measured after a GC: slots, table,
// buffers and all.
func manyConns(tb testing.TB, n int) (w *world, cs, acc []*Conn, perEnd float64) {
	tb.Helper()
	o := Options{MaxConns: n + 16, SYNBacklog: n}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w = newWorld(tb, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	w.budget = 1024 // B takes what A's Flush put on the wire
	// Two listening ports, so that the client's ports (from 10000) do
	// not run out.
	const perPort = 50_000
	var ls []*Listener
	for p := 0; p <= (n-1)/perPort; p++ {
		l, err := w.b.Listen(uint16(7000+p), n)
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
	}
	cs = make([]*Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, uint16(7000+i/perPort)), uint16(10000+i%perPort))
		if err != nil {
			tb.Fatalf("dial %d: %v", i, err)
		}
		cs = append(cs, c)
		if i%1000 == 999 {
			w.step() // SYNs in batches the wire holds
		}
	}
	acc = make([]*Conn, 0, n)
	w.until(time.Minute, "accept", func() bool {
		for _, l := range ls {
			for c, ok := l.Accept(); ok; c, ok = l.Accept() {
				acc = append(acc, c)
			}
		}
		return len(acc) == n
	})
	for i, c := range cs {
		if c.State() != Established {
			tb.Fatalf("conn %d: %v", i, c.State())
		}
		c.Write([]byte{byte(i)})
	}
	buf := make([]byte, 8)
	got := 0
	w.until(time.Minute, "data", func() bool {
		for _, c := range acc {
			if k, _ := c.Read(buf); k == 1 {
				c.Write(buf[:1])
				got++
			}
		}
		return got == n
	})
	echoed := 0
	w.until(time.Minute, "echo", func() bool {
		for _, c := range cs {
			if k, _ := c.Read(buf); k == 1 {
				echoed++
			}
		}
		return echoed == n
	})
	w.until(time.Minute, "the pools trimmed", func() bool {
		ua, pa, _, _ := w.a.BufferStats()
		ub, pb, _, _ := w.b.BufferStats()
		return ua+pa+ub+pb == 0
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	return w, cs, acc, float64(after.HeapAlloc-before.HeapAlloc) / float64(2*n)
}

// 10,000 concurrent connections on one engine: every one opens, carries
// a byte each way and is counted; once they idle, what the engines hold
// per connection (heap, buffers included) is about a slot (1 KiB) and
// its entry in the table: the rings went back to the pool when they were
// emptied and the pool was freed after PoolIdle. The bound is generous
// (3 KiB); BenchmarkManyConns reports the figure for 100,000.
func TestTenThousandConns(t *testing.T) {
	const n = 10000
	w, _, _, per := manyConns(t, n)
	t.Logf("%d idle connections on each engine: %.0f bytes of heap per connection end", n, per)
	if per > 3<<10 {
		t.Errorf("%.0f bytes per idle connection end, want well under 3 KiB", per)
	}
	runtime.KeepAlive(w)
}

// BenchmarkManyConns: one bulk connection between two engines over
// memio, alone (idle=0) and among 100,000 idle connections (idle=100000),
// moving 64 KiB per op; the idle connections' heap per connection end is
// reported (B/conn), measured once they idled (rings back in the pool,
// the pool trimmed).
func BenchmarkManyConns(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("idle=%d", n), func(b *testing.B) {
			w, _, _, per := manyConns(b, max(n, 1))
			l, err := w.b.Listen(9000, 0)
			if err != nil {
				b.Fatal(err)
			}
			ca, err := w.a.Dial(netip.AddrPortFrom(addrB, 9000), 0)
			if err != nil {
				b.Fatal(err)
			}
			var cb *Conn
			w.until(10*time.Second, "handshake", func() bool {
				if cb == nil {
					cb, _ = l.Accept()
				}
				return cb != nil && ca.State() == Established
			})
			chunk := make([]byte, 64<<10)
			buf := make([]byte, 256<<10)
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				sent, got := 0, 0
				for got < len(chunk) {
					if sent < len(chunk) {
						sent += ca.Write(chunk[sent:])
					}
					w.step()
					for {
						k, _ := cb.Read(buf)
						if k == 0 {
							break
						}
						got += k
					}
					if w.clk.Now().Sub(time.Unix(1_000_000, 0)) > 0 {
						w.clk.Advance(10 * time.Microsecond) // the RTT estimates see time pass
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cb.rcvCap), "window-B")
			if n > 0 {
				b.ReportMetric(per, "B/conn")
			}
			runtime.KeepAlive(w)
		})
	}
}

// No allocation per message in steady state: a 100-byte request and its
// answer between two engines, Poll and Flush included, in each family.
func TestNoAllocsPerMessage(t *testing.T) { forFamilies(t, testNoAllocsPerMessage) }

func testNoAllocsPerMessage(t *testing.T, f family) {
	o := Options{DelayedACK: time.Millisecond}
	w := newWorldFor(t, f, memio.Options{}, o, o)
	ca, cb := w.connectFor(f, 7000)
	req, buf := make([]byte, 100), make([]byte, 256)
	round := func() {
		ca.Write(req)
		for n := 0; n < 100; {
			w.step()
			k, _ := cb.Read(buf)
			n += k
		}
		cb.Write(buf[:100])
		for n := 0; n < 100; {
			w.step()
			k, _ := ca.Read(buf)
			n += k
		}
	}
	for range 100 {
		round()
	}
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("%v allocations per request and answer, want 0", a)
	}
}

// RFC 1122 §4.2.3.2: with delayed ACKs a request and its answer cost two
// frames, the ACK of each riding on the next data.
func TestDelayedACKRFC1122Sec4_2_3_2(t *testing.T) {
	o := Options{DelayedACK: 10 * time.Millisecond}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	req, buf := make([]byte, 100), make([]byte, 256)
	for range 10 { // past the quick ACKs after the handshake
		ca.Write(req)
		w.until(time.Second, "req", func() bool { n, _ := cb.Read(buf); return n > 0 })
		cb.Write(buf[:100])
		w.until(time.Second, "ans", func() bool { n, _ := ca.Read(buf); return n > 0 })
	}
	tx0 := w.a.cnt[cTxFrames] + w.b.cnt[cTxFrames]
	const rounds = 100
	for range rounds {
		ca.Write(req)
		w.until(time.Second, "req", func() bool { n, _ := cb.Read(buf); return n > 0 })
		cb.Write(buf[:100])
		w.until(time.Second, "ans", func() bool { n, _ := ca.Read(buf); return n > 0 })
	}
	frames := float64(w.a.cnt[cTxFrames]+w.b.cnt[cTxFrames]-tx0) / rounds
	t.Logf("%.2f frames per request and answer", frames)
	if frames > 2.2 {
		t.Errorf("%.2f frames per request and answer, want at most 2.2", frames)
	}
	// A lone segment is acknowledged within the delay, not at once.
	ca.Write(req)
	start := w.clk.Now()
	acks0 := w.b.cnt[cTCPSegmentsOut]
	w.until(time.Second, "delayed ack", func() bool { return w.b.cnt[cTCPSegmentsOut] > acks0 })
	if d := w.clk.Now().Sub(start); d != 10*time.Millisecond {
		t.Errorf("ACK after %v, want the 10 ms delay", d)
	}
	// Two full segments are acknowledged at once.
	cb.Read(buf)
	w.until(time.Second, "settle", func() bool { return ca.sndUna == ca.sndMax })
	acks0 = w.b.cnt[cTCPSegmentsOut]
	ca.Write(make([]byte, 2*ca.smss))
	start = w.clk.Now()
	w.until(time.Second, "ack", func() bool { return w.b.cnt[cTCPSegmentsOut] > acks0 })
	if d := w.clk.Now().Sub(start); d != 0 {
		t.Errorf("two full segments acknowledged after %v, want at once", d)
	}
}

// The engine runs no goroutine of its own, from New to Close.
func TestNoGoroutines(t *testing.T) {
	// The count moves only by the runtime's own comings and goings (a
	// finalizer run counts while it runs, earlier tests' goroutines end):
	// take it once it is steady, and give it time to come back; a
	// goroutine of the engine's would stay.
	before := steadyGoroutines(t)
	settles := func() bool {
		return testutil.Eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= before })
	}
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(7000)
	p := newPipe(ca, cb, randBytes(9, 1<<20))
	w.until(time.Minute, "transfer", func() bool { p.pump(t); return p.done() })
	if !settles() {
		t.Errorf("%d goroutines while running, %d before", runtime.NumGoroutine(), before)
	}
	w.a.Close()
	w.b.Close()
	if !settles() {
		t.Errorf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
	}
}

// steadyGoroutines returns runtime.NumGoroutine once it has not changed
// for 50 ms.
func steadyGoroutines(t *testing.T) int {
	t.Helper()
	n, since := runtime.NumGoroutine(), time.Now()
	if !testutil.Eventually(10*time.Second, func() bool {
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		}
		return time.Since(since) >= 50*time.Millisecond
	}) {
		t.Fatalf("the goroutine count did not settle within 10 s (now %d)", n)
	}
	return n
}
