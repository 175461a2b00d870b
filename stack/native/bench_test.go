package native

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// BenchmarkNativeHandoff is one 100-byte request and its answer between
// two engines over memio, on the real clock, with delayed ACKs (so the
// ACKs ride on the data). "one-loop" drives both engines from one
// goroutine (the engines' own cost); "two-loops" runs the echo engine on
// a poll loop of its own, as a server would (compare with tcp's
// BenchmarkHandoff, which does the same for netstack and for raw frames).
// Each runs over both families (one-loop/IPv4, one-loop/IPv6, ...).
func BenchmarkNativeHandoff(b *testing.B) {
	b.Run("one-loop", func(b *testing.B) {
		forFamilies(b, func(b *testing.B, f family) { oneLoopHandoff(b, f, NewReno) })
	})
	// The same under BBR: its pacing and rate sampling on the path of a
	// request and its answer.
	b.Run("one-loop-bbr", func(b *testing.B) {
		forFamilies(b, func(b *testing.B, f family) { oneLoopHandoff(b, f, BBR) })
	})
	b.Run("two-loops", func(b *testing.B) { forFamilies(b, twoLoopsHandoff) })
}

// twoLoopsHandoff is BenchmarkNativeHandoff's two-loops case in the
// family f.
func twoLoopsHandoff(b *testing.B, f family) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	cli, srv, cc, sc := benchPair(b, f, pa, pb, Options{DelayedACK: 5 * time.Millisecond}, 64)
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // the echo's poll loop
		defer close(done)
		buf := make([]byte, 256)
		for !stop.Load() && ctx.Err() == nil {
			srv.Poll(64)
			if n, _ := sc.Read(buf); n > 0 {
				sc.Write(buf[:n])
			}
			srv.Flush()
		}
	}()
	req, buf := make([]byte, 100), make([]byte, 256)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cc.Write(req)
		cli.Flush()
		pollRead(cli, cc, buf, 100)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	stop.Store(true)
	cancel()
	<-done
	srv.Close()
	report(b, lat)
}

// oneLoopHandoff is BenchmarkNativeHandoff's one-loop case in the family
// f under the congestion control ccName.
func oneLoopHandoff(b *testing.B, f family, ccName Congestion) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	cli, srv, cc, sc := benchPair(b, f, pa, pb, Options{DelayedACK: 5 * time.Millisecond, Congestion: ccName}, 64)
	defer cli.Close()
	defer srv.Close()
	req, buf := make([]byte, 100), make([]byte, 256)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cc.Write(req)
		cli.Flush()
		pollRead(srv, sc, buf, 100)
		sc.Write(buf[:100])
		srv.Flush()
		pollRead(cli, cc, buf, 100)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	report(b, lat)
}

// benchPair makes a client engine on pa and a server engine on pb, with
// options o and the family's addresses, and one connection between them
// on the real clock, polling up to budget frames a round until it is
// established.
func benchPair(b *testing.B, f family, pa, pb *memio.Port, o Options, budget int) (cli, srv *Engine, cc, sc *Conn) {
	cli, err := New(pa, f.with(o, f.a))
	if err != nil {
		b.Fatal(err)
	}
	srv, err = New(pb, f.with(o, f.b))
	if err != nil {
		b.Fatal(err)
	}
	l, _ := srv.Listen(7000, 0)
	cc, _ = cli.Dial(netip.AddrPortFrom(f.b, 7000), 0)
	deadline := time.Now().Add(10 * time.Second)
	for sc == nil || cc.State() != Established {
		cli.Poll(budget)
		srv.Poll(budget)
		cli.Flush()
		srv.Flush()
		if sc == nil {
			sc, _ = l.Accept()
		}
		if time.Now().After(deadline) {
			b.Fatal("no handshake")
		}
	}
	return cli, srv, cc, sc
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// pollRead polls e until n bytes of c have been read into buf (overwriting).
func pollRead(e *Engine, c *Conn, buf []byte, n int) {
	for got := 0; got < n; {
		e.Poll(64)
		k, _ := c.Read(buf)
		got += k
	}
}
