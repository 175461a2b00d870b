package native

import (
	"fmt"
	"net/netip"
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

// lossyConnsResult is lossyConnsRun's figure: what n connections moved
// together and the sender's counters.
type lossyConnsResult struct {
	mbps                 float64 // Mbit/s in engine time, all connections
	minShare             float64 // the slowest connection's bytes over the mean
	rto, rtx, lostRtx    uint64
	tlp, spuriousRTO     uint64
	drops, ringFull      uint64
	untracked, fastRecov uint64
}

func (r lossyConnsResult) String() string {
	return fmt.Sprintf("%.0f Mbit/s min share %.2f rto %d (spurious %d) rtx %d lost rtx %d tlp %d drops %d ring full %d",
		r.mbps, r.minShare, r.rto, r.spuriousRTO, r.rtx, r.lostRtx, r.tlp, r.drops, r.ringFull)
}

// lossyConnsRun is a model of dgramio-bulk's lossy cell with n
// connections up for d: A's n connections each write without end to B,
// which reads all it gets, over a memio wire that loses loss of the
// frames each way and delays each by delay (the handshakes on the
// delayed wire without loss). The wire holds what 10 Gbit/s puts on it
// in that delay, as dgramio-bulk's does; o's RecvMemory is the AF_XDP
// ring's share unless o sets it.
func lossyConnsRun(t testing.TB, o Options, seed uint64, n int, loss float64, delay, d time.Duration) lossyConnsResult {
	t.Helper()
	if o.RecvMemory == 0 {
		o.RecvMemory = 1024 * 1448 // half dgramio-bulk's 2,048-frame AF_XDP ring
	}
	slots := max(4096, int(delay.Seconds()*10e9/8/1514))
	w := newWorld(t, memio.Options{Seed: seed, TxSlots: 4096, RxSlots: slots}, o, o)
	w.pa.SetImpairment(memio.Impairment{Delay: delay})
	w.pb.SetImpairment(memio.Impairment{Delay: delay})
	l, err := w.b.Listen(7200, 0)
	if err != nil {
		t.Fatal(err)
	}
	ca := make([]*Conn, n)
	cb := make([]*Conn, 0, n)
	for i := range ca {
		if ca[i], err = w.a.Dial(netip.AddrPortFrom(addrB, 7200), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The handshakes in steps of 50 µs, as the transfer's: world.until
	// moves the clock to the next timer, past the wire's delay, and a
	// SYN that arrives after its RTO gives a round trip of seconds.
	for end := w.clk.Now().Add(10 * time.Second); ; {
		for {
			c, ok := l.Accept()
			if !ok {
				break
			}
			cb = append(cb, c)
		}
		up := len(cb) == n
		for _, c := range ca {
			up = up && c.State() == Established
		}
		if up {
			break
		}
		if w.clk.Now().After(end) {
			t.Fatalf("%d of %d connections accepted within 10 s", len(cb), n)
		}
		if w.step() == 0 {
			w.clk.Advance(50 * time.Microsecond)
		}
	}
	imp := memio.Impairment{Delay: delay, Loss: loss}
	w.pa.SetImpairment(imp)
	w.pb.SetImpairment(imp)
	c0 := map[string]uint64{}
	c := func(name string) uint64 { return counterOf(t, w.a, name) - c0[name] }
	for _, name := range []string{"tcp_timeouts", "tcp_retransmits", "tcp_lost_retransmits", "tcp_tlp_probes", "tcp_spurious_rtos", "tcp_lost_retransmit_untracked", "tcp_fast_retransmits"} {
		c0[name] = c(name)
	}
	data := randBytes(seed, 1<<20)
	buf := make([]byte, 256<<10)
	sent := make([]int, n)
	got := make([]int, n)
	start := w.clk.Now()
	for end := start.Add(d); w.clk.Now().Before(end); {
		for i, c := range ca {
			for {
				k := c.Write(data[sent[i]%len(data):])
				if k == 0 {
					break
				}
				sent[i] += k
			}
		}
		moved := w.step()
		for i, c := range cb {
			for {
				k, _ := c.Read(buf)
				if k == 0 {
					break
				}
				got[i] += k
			}
		}
		if moved == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			w.advanceIdle(20 * time.Microsecond)
		}
	}
	total, low := 0, -1
	for _, g := range got {
		total += g
		if low < 0 || g < low {
			low = g
		}
	}
	var r lossyConnsResult
	for _, p := range []*memio.Port{w.pa, w.pb} {
		for _, c := range p.Stats().Layers {
			switch c.Name {
			case "impair_lost":
				r.drops += c.Value
			case "rx_ring_full":
				r.ringFull += c.Value
			}
		}
	}
	r.mbps = float64(total) * 8 / w.clk.Now().Sub(start).Seconds() / 1e6
	if total > 0 {
		r.minShare = float64(low) * float64(n) / float64(total)
	}
	r.rto, r.rtx, r.lostRtx = c("tcp_timeouts"), c("tcp_retransmits"), c("tcp_lost_retransmits")
	r.tlp, r.spuriousRTO = c("tcp_tlp_probes"), c("tcp_spurious_rtos")
	r.untracked, r.fastRecov = c("tcp_lost_retransmit_untracked"), c("tcp_fast_retransmits")
	return r
}

// BenchmarkLossyWireConns is the model of dgramio-bulk's 16-connection
// cells at 10 ms one way and 1% and 3% loss each way, 3 s of engine
// time, the options of its native rows (SendBuf 4 MiB, RecvBuf 6 MiB
// auto-tuned, RecvMemory half the AF_XDP ring, MaxConns 32, room in
// SYN-RECEIVED for every connection dialled at once): Mbit/s in engine
// time, the slowest connection's share, and the sender's timeouts and
// lost retransmissions during the transfer. One wire seed per
// iteration.
func BenchmarkLossyWireConns(b *testing.B) {
	for _, loss := range []float64{0.01, 0.03} {
		for _, cc := range []Congestion{BBR, CUBIC, NewReno} {
			b.Run(fmt.Sprintf("loss=%g/%s", loss*100, cc), func(b *testing.B) {
				var sum lossyConnsResult
				for i := 0; i < b.N; i++ {
					o := Options{Congestion: cc, SendBuf: 4 << 20, RecvBuf: 6 << 20, DelayedACK: 5 * time.Millisecond, MaxConns: 32, MaxSYNReceived: 16}
					r := lossyConnsRun(b, o, uint64(i+1), 16, loss, 10*time.Millisecond, 3*time.Second)
					if testing.Verbose() {
						b.Logf("seed %d: %v", i+1, r)
					}
					sum.mbps += r.mbps
					sum.minShare += r.minShare
					sum.rto += r.rto
					sum.lostRtx += r.lostRtx
				}
				nn := float64(b.N)
				b.ReportMetric(sum.mbps/nn, "Mbit/s")
				b.ReportMetric(sum.minShare/nn, "min-share")
				b.ReportMetric(float64(sum.rto)/nn, "rtos")
				b.ReportMetric(float64(sum.lostRtx)/nn, "lost-rtx")
			})
		}
	}
}
