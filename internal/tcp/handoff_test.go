package tcp

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// BenchmarkHandoff measures what netstack's goroutine hand-off costs a
// request/response of one 100-byte record over memio, both poll loops
// spinning (no Wait), against the same ping-pong of bare frames:
//
//   - raw: two goroutines bounce one frame over memio: the transport and
//     the Go scheduler, no stack.
//   - netstack/yield: the backends as shipped; after delivering frames
//     the poll loop yields (runtime.Gosched) so that the TCP processor that
//     netstack queued the segment to runs at once.
//   - netstack/noyield: the same without that yield: the processor runs
//     when the runtime finds it a P.
//
// It reports the mean (ns/op) and the p50 and p99 of the round trips.
func BenchmarkHandoff(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		pa, pb := memio.NewPair(memio.Options{})
		defer pa.Close()
		defer pb.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { // the echo side
			defer close(done)
			for ctx.Err() == nil {
				if pa.RxFrames(8, func(f []byte) { pa.TxFrame(f) }) > 0 {
					pa.Kick()
				}
			}
		}()
		frame := make([]byte, 142)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			pb.TxFrame(frame)
			pb.Kick()
			for pb.RxFrames(8, func([]byte) {}) == 0 {
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		cancel()
		<-done
		report(b, lat)
	})
	b.Run("native", func(b *testing.B) {
		testStack = dgramio.TCPStackNative
		defer func() { testStack = dgramio.TCPStackNetstack }()
		handoff(b, false)
	})
	for _, noYield := range []bool{false, true} {
		name := "netstack/yield"
		if noYield {
			name = "netstack/noyield"
		}
		b.Run(name, func(b *testing.B) { handoff(b, noYield) })
	}
}

// handoff is BenchmarkHandoff over two backends of testStack's engine.
func handoff(b *testing.B, noYield bool) {
	{
		{
			pa, pb := memio.NewPair(memio.Options{})
			srv, err := NewOverFrameIO(serverConfig(), pa, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			srv.noYield = noYield
			p := startPoller(srv, spinEcho(srv))
			defer p.stop()
			cli, err := NewOverFrameIO(clientConfig(), pb, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer cli.Close()
			cli.noYield = noYield
			msg := make([]byte, 100)
			pkts := make([]dgramio.Packet, 8)
			for i := 0; i < 200; i++ {
				roundTrip(b, cli, msg, pkts)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				roundTrip(b, cli, msg, pkts)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			report(b, lat)
		}
	}
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
