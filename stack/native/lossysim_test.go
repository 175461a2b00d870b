package native

import (
	"fmt"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// lossyRun is one bulk transfer of n bytes from a to b over a memio wire
// that loses loss of the frames each way and delays each by delay, with
// fake time moving in steps of 10 µs while nothing moves: a model of
// dgramio-bulk's lossy wire whose throughput is cwnd over the round
// trip, so that what recovery does to cwnd is what it measures.
type lossyResult struct {
	mbps                        float64 // Mbit/s in engine time
	drops, recoveries, rto, rtx uint64
	tlp, rackRec, dsacks, undos uint64
}

func lossyRun(t testing.TB, o Options, seed uint64, loss float64, delay time.Duration, n int) lossyResult {
	t.Helper()
	w := newWorld(t, memio.Options{Seed: seed, TxSlots: 4096, RxSlots: 4096}, o, o)
	ca, cb := w.connect(7100)
	imp := memio.Impairment{Loss: loss, Delay: delay}
	w.pa.SetImpairment(imp)
	w.pb.SetImpairment(imp)
	p := newPipe(ca, cb, randBytes(seed, n))
	start := w.clk.Now()
	const quantum = 10 * time.Microsecond
	end := start.Add(time.Hour)
	for !p.done() {
		if w.clk.Now().After(end) {
			t.Fatalf("lossy transfer: not done within an hour of engine time (%d of %d)", p.got.Len(), n)
		}
		p.pump(t)
		if w.step() == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			d := quantum
			if at, ok := w.a.NextTimer(); ok && at.Sub(w.clk.Now()) < d {
				d = max(at.Sub(w.clk.Now()), time.Microsecond)
			}
			w.clk.Advance(d)
		}
	}
	el := w.clk.Now().Sub(start)
	var drops uint64
	for _, p := range []*memio.Port{w.pa, w.pb} {
		for _, c := range p.Stats().Layers {
			if c.Name == "impair_lost" {
				drops += c.Value
			}
		}
	}
	c := func(name string) uint64 { return counterOf(t, w.a, name) }
	return lossyResult{
		mbps:  float64(n) * 8 / el.Seconds() / 1e6,
		drops: drops, recoveries: c("tcp_fast_retransmits"), rto: c("tcp_timeouts"),
		rtx: c("tcp_retransmits"), tlp: c("tcp_tlp_probes"), rackRec: c("tcp_rack_recoveries"),
		dsacks: c("tcp_dsacks_received"),
	}
}

func (r lossyResult) String() string {
	return fmt.Sprintf("%.0f Mbit/s drops %d recoveries %d rto %d rtx %d tlp %d", r.mbps, r.drops, r.recoveries, r.rto, r.rtx, r.tlp)
}

// BenchmarkLossyWire is the model of dgramio-bulk's lossy wire (0.2 ms
// each way) at 0.1%, 1% and 3% loss: Mbit/s in engine time.
func BenchmarkLossyWire(b *testing.B) {
	for _, loss := range []float64{0.001, 0.01, 0.03} {
		for _, cc := range []Congestion{NewReno, CUBIC} {
			b.Run(fmt.Sprintf("loss=%g/%s", loss*100, cc), func(b *testing.B) {
				var sum lossyResult
				for i := 0; i < b.N; i++ {
					r := lossyRun(b, Options{Congestion: cc}, uint64(i+1), loss, 200*time.Microsecond, 16<<20)
					sum.mbps += r.mbps
					sum.recoveries += r.recoveries
					sum.drops += r.drops
					sum.rto += r.rto
				}
				nn := float64(b.N)
				b.ReportMetric(sum.mbps/nn, "Mbit/s")
				b.ReportMetric(float64(sum.recoveries)/nn, "recoveries")
				b.ReportMetric(float64(sum.drops)/nn, "drops")
				b.ReportMetric(float64(sum.rto)/nn, "rtos")
			})
		}
	}
}
