package netconn

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// fairResult is what a fairRun measured: bytes per connection, and the
// pair it ran on (for its counters).
type fairResult struct {
	lo, mean, hi, total int64
	p                   *pair
}

// fairRun streams from n connections of A to one listener of B at once
// for d over memio (rings of 1024 frames), and returns what each moved.
func fairRun(t testing.TB, n int, d time.Duration, cfg dgramio.Config) fairResult {
	p := newPair(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, Options{}, cfg)
	ln := listen(t, p.B, testPort)
	got := make([]atomic.Int64, n)
	var readers sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]*Conn, n)
	for i := range conns {
		readers.Add(1)
		go func() {
			defer readers.Done()
			c, err := ln.AcceptConn()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 1)
			// The first byte names the connection.
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Error(err)
				return
			}
			id := int(buf[0])
			buf = make([]byte, 32<<10)
			for {
				k, err := c.Read(buf)
				got[id].Add(int64(k))
				if err != nil {
					return
				}
			}
		}()
		c, err := p.A.Dial(ctx, fmt.Sprintf("%s:%d", ipB, testPort))
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var writers sync.WaitGroup
	for _, c := range conns {
		writers.Add(1)
		go func() {
			defer writers.Done()
			buf := make([]byte, 16<<10)
			for ctx.Err() == nil {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(d)
	cancel()
	for _, c := range conns {
		c.Close()
	}
	writers.Wait()
	readers.Wait()
	r := fairResult{lo: 1 << 62, p: p}
	for i := range got {
		v := got[i].Load()
		r.total += v
		r.lo, r.hi = min(r.lo, v), max(r.hi, v)
	}
	r.mean = r.total / int64(n)
	t.Logf("%d connections, %v: %.1f MiB in all; per connection min %.2f (%.2f of the mean), mean %.2f, max %.2f MiB",
		n, d, float64(r.total)/(1<<20), float64(r.lo)/(1<<20), float64(r.lo)/float64(max(r.mean, 1)),
		float64(r.mean)/(1<<20), float64(r.hi)/(1<<20))
	return r
}

// TestFairness: 16 connections stream to one Service at once for a
// while; every one of them moves data, and the slowest gets a fair share
// (here at least a tenth of the mean: the poller hands frames to netstack
// in arrival order, and each connection's processor and reader are its
// own). A connection starved by another would show as near zero.
func TestFairness(t *testing.T) {
	r := fairRun(t, 16, time.Second, dgramio.Config{})
	if r.mean == 0 || r.lo < r.mean/10 {
		t.Fatalf("unfair: the slowest connection moved %d bytes, the mean %d", r.lo, r.mean)
	}
}

// BenchmarkFairness runs TestFairness's 16 connections for a second per
// iteration under each congestion control of the native engine, and
// reports what they moved (MiB/s in all, the slowest connection's share
// of the mean) and what it cost: frames memio dropped at B's receive
// ring, retransmissions and retransmission timeouts at A (docs/
// congestion.md, "Why NewReno by default"). Speed and sharing are
// measured here, not asserted: they depend on the machine's load.
func BenchmarkFairness(b *testing.B) {
	for _, cc := range []dgramio.Congestion{"reno", "cubic", "bbr"} {
		b.Run(string(cc), func(b *testing.B) {
			var cfg dgramio.Config
			cfg.TCP.Congestion = cc
			var mib, share, drops, rtx, rtos float64
			for range b.N {
				r := fairRun(b, 16, time.Second, cfg)
				sa, sb := r.p.A.Stats(), r.p.B.Stats()
				mib += float64(r.total) / (1 << 20)
				share += float64(r.lo) / float64(max(r.mean, 1))
				drops += float64(counter(sb, "memio", "rx_ring_full"))
				rtx += float64(counter(sa, "native", "tcp_retransmits"))
				rtos += float64(counter(sa, "native", "tcp_timeouts"))
				r.p.A.Close()
				r.p.B.Close()
			}
			n := float64(b.N)
			b.ReportMetric(mib/n, "MiB/s")
			b.ReportMetric(share/n, "min/mean")
			b.ReportMetric(drops/n, "ring-drops/s")
			b.ReportMetric(rtx/n, "rtx/s")
			b.ReportMetric(rtos/n, "rtos/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
