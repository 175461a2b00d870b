package native

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// connRound is one connection of a connection-rate run: the client
// dials, sends a 100-byte request, the server answers 100 bytes and
// closes (its side keeps TIME-WAIT, as an HTTP/1.0 server's does), the
// client reads the answer and the end and closes. It returns when the
// client has closed; the last segments of the close ride on the next
// rounds' steps.
func connRound(tb testing.TB, w *world, l *Listener, req, buf []byte) {
	c, err := w.a.Dial(netip.AddrPortFrom(addrB, 80), 0)
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	c.Write(req)
	var s *Conn
	served, got := false, 0
	for i := 0; ; i++ {
		if i > 10_000 {
			tb.Fatalf("round stuck: client %v (%d bytes), server %v", c.State(), got, s)
		}
		w.step()
		if s == nil {
			s, _ = l.Accept()
		}
		if s != nil && !served {
			if n, _ := s.Read(buf); n == len(req) {
				s.Write(buf[:n])
				s.Close()
				served = true
			}
		}
		n, err := c.Read(buf)
		got += n
		if err != nil {
			if got != len(req) {
				tb.Fatalf("client read %d bytes, then %v", got, err)
			}
			c.Close()
			return
		}
		if n == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			w.clk.Advance(10 * time.Microsecond)
		}
	}
}

// BenchmarkConnRate: connections per second between two engines over
// memio (native at both ends, one goroutine): open, a 100-byte request
// and its answer, close, one after the other. The clock is fake and
// moves 10 µs whenever both engines wait, so TIME-WAIT records pile up
// as at a real rate, up to MaxTimeWait.
func BenchmarkConnRate(b *testing.B) {
	o := Options{}
	w := newWorld(b, memio.Options{}, o, o)
	l, err := w.b.Listen(80, 0)
	if err != nil {
		b.Fatal(err)
	}
	req, buf := make([]byte, 100), make([]byte, 256)
	for range 100 { // the ARP entries, the pools
		connRound(b, w, l, req, buf)
	}
	start := time.Now()
	n := 0
	for b.Loop() {
		connRound(b, w, l, req, buf)
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "conns/s")
	b.ReportMetric(float64(w.b.TimeWaits()), "timewait")
}

// TestConnRateLeavesNothing: a few thousand connections opened and
// closed one after the other leave no slot, table entry, timer or ring
// once TIME-WAIT is over, and the ones after the first hundred allocate
// no ring (the pool serves them).
func TestConnRateLeavesNothing(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	l, err := w.b.Listen(80, 0)
	if err != nil {
		t.Fatal(err)
	}
	req, buf := make([]byte, 100), make([]byte, 256)
	for range 100 {
		connRound(t, w, l, req, buf)
	}
	allocs := w.a.pool.allocs + w.b.pool.allocs
	for range 3000 {
		connRound(t, w, l, req, buf)
	}
	if a := w.a.pool.allocs + w.b.pool.allocs; a != allocs {
		t.Errorf("%d rings allocated over 3000 connections after the first 100", a-allocs)
	}
	w.until(5*time.Minute, "TIME-WAIT over, pools trimmed", func() bool {
		_, pa, _, _ := w.a.BufferStats()
		_, pb, _, _ := w.b.BufferStats()
		return w.b.TimeWaits() == 0 && pa+pb == 0 && len(w.a.table)+len(w.b.table) == 0
	})
	l.Close()
	leaks(t, "client", w.a)
	leaks(t, "server", w.b)
}
