package native

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// 10,000 concurrent connections on one engine: every one opens, carries
// a byte each way and is counted; the memory the engine holds per
// connection is measured (heap, buffers included) and logged.
func TestTenThousandConns(t *testing.T) {
	const n = 10000
	o := Options{MaxConns: n + 16, SendBuf: 4 << 10, RecvBuf: 4 << 10, SYNBacklog: n}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	w.budget = 1024 // B takes what A's Flush put on the wire
	l, err := w.b.Listen(7000, n)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), uint16(10000+i))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		cs = append(cs, c)
	}
	acc := make([]*Conn, 0, n)
	w.until(time.Minute, "accept", func() bool {
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			acc = append(acc, c)
		}
		return len(acc) == n
	})
	for i, c := range cs {
		if c.State() != Established {
			t.Fatalf("conn %d: %v", i, c.State())
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
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / (2 * n)
	t.Logf("%d connections on each engine: %.0f bytes of heap per connection (SendBuf+RecvBuf = %d)",
		n, per, o.SendBuf+o.RecvBuf)
	if per > float64(o.SendBuf+o.RecvBuf)+4096 {
		t.Errorf("%.0f bytes per connection: more than its buffers and 4 KiB", per)
	}
	runtime.KeepAlive(w)
}

// No allocation per message in steady state: a 100-byte request and its
// answer between two engines, Poll and Flush included.
func TestNoAllocsPerMessage(t *testing.T) {
	o := Options{DelayedACK: time.Millisecond}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
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
	before := runtime.NumGoroutine()
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(7000)
	p := newPipe(ca, cb, randBytes(9, 1<<20))
	w.until(time.Minute, "transfer", func() bool { p.pump(t); return p.done() })
	if n := runtime.NumGoroutine(); n != before {
		t.Errorf("%d goroutines while running, %d before", n, before)
	}
	w.a.Close()
	w.b.Close()
	if n := runtime.NumGoroutine(); n != before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}
