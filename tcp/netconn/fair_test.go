package netconn

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestFairness: 16 connections stream to one Service at once for a
// while; every one of them moves data, and the slowest gets a fair share
// (here at least a tenth of the mean: the poller hands frames to netstack
// in arrival order, and each connection's processor and reader are its
// own). A connection starved by another would show as near zero.
func TestFairness(t *testing.T) {
	const n = 16
	p := newPair(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, Options{})
	ln := listen(t, p.B, testPort)
	var got [n]atomic.Int64
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
	time.Sleep(time.Second)
	cancel()
	for _, c := range conns {
		c.Close()
	}
	writers.Wait()
	readers.Wait()
	var total, lo, hi int64
	lo = 1 << 62
	for i := range got {
		v := got[i].Load()
		total += v
		lo, hi = min(lo, v), max(hi, v)
	}
	mean := total / n
	t.Logf("%d connections, 1 s: %.1f MiB in all; per connection min %.2f, mean %.2f, max %.2f MiB",
		n, float64(total)/(1<<20), float64(lo)/(1<<20), float64(mean)/(1<<20), float64(hi)/(1<<20))
	if mean == 0 || lo < mean/10 {
		t.Fatalf("unfair: the slowest connection moved %d bytes, the mean %d", lo, mean)
	}
}
