package native

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// cpuShareRun moves bytes on n connections between two engines over
// memio for d of engine time, each sender writing as fast as its send
// buffer takes, and returns the bytes each receiver read. The engines'
// work is the bottleneck, as when many netconn connections share one
// engine over memio (tcp/netconn's TestFairness): one CPU runs both
// engines in turn on the fake clock, each frame an engine sends or
// takes costing it perFrame and each round of the loop perStep, and the
// receiving engine takes at most 64 frames a poll; memio's receive ring
// (1024 frames) is the queue in front of it, and drops what does not
// fit. There is no link rate and no delay: the round trip is the
// engines' loop and the queue in the ring.
func cpuShareRun(t *testing.T, cc Congestion, n int, d time.Duration) (got []int64, w *world) {
	t.Helper()
	o := Options{Congestion: cc, DelayedACK: time.Millisecond, SendBuf: 1 << 20, RecvBuf: 1 << 20}
	w = newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	l, err := w.b.Listen(7000, n)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Conn, n)
	for i := range cs {
		if cs[i], err = w.a.Dial(netip.AddrPortFrom(addrB, 7000), 0); err != nil {
			t.Fatal(err)
		}
	}
	var acc []*Conn
	w.until(10*time.Second, "accept", func() bool {
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			acc = append(acc, c)
		}
		if len(acc) < n {
			return false
		}
		for _, c := range cs {
			if c.State() != Established {
				return false
			}
		}
		return true
	})
	idx := make(map[uint16]int, n) // accepted in any order: by the client's port
	for i, c := range cs {
		idx[c.LocalPort()] = i
	}
	got = make([]int64, n)
	src := randBytes(1, 64<<10)
	const perFrame, perStep = 500 * time.Nanosecond, 2 * time.Microsecond
	end := w.clk.Now().Add(d)
	for w.clk.Now().Before(end) {
		for _, c := range cs {
			for c.Write(src) > 0 {
			}
		}
		k := w.step()
		for _, c := range acc {
			for p := c.Peek(); len(p) > 0; p = c.Peek() {
				got[idx[c.Peer().Port()]] += int64(len(p))
				c.Lend(len(p))
			}
			c.Consume()
		}
		w.clk.Advance(perStep + time.Duration(k)*perFrame)
		if k == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			w.idle() // all paced: on to the next pacing timer
		}
	}
	return got, w
}

// ringDrops is what memio's receive ring of p dropped.
func ringDrops(p *memio.Port) uint64 {
	for _, c := range p.Stats().Layers {
		if c.Name == "rx_ring_full" {
			return c.Value
		}
	}
	return 0
}

// BBR shares the engine among its connections as NewReno does. Sixteen
// connections of one engine send at once for half a second, the
// engines' CPU the bottleneck and memio's receive ring (about a
// millisecond of it) the buffer. BBR v1's flights (two BDPs, three
// pacing quanta and the ACK aggregation each) overflowed that ring for
// good: 8% of the segments were lost, 140 RTOs, and the connections
// that lost a retransmission sat in RTO backoff (the slowest moved
// 0.3-0.5 of the mean; NewReno's slowest 0.8). The loss bound
// (bbrLossBound: the inflight_hi of BBR v2 and v3, draft-cardwell-
// iccrg-bbr-congestion-control-02) takes a loss with a standing queue as
// the buffer overflowing: under 1% sent again, the slowest at least
// half the mean, with NewReno as the control.
func TestBBRSharesEngineAmongConnections(t *testing.T) {
	for _, cc := range []Congestion{NewReno, BBR} {
		t.Run(string(cc), func(t *testing.T) {
			got, w := cpuShareRun(t, cc, 16, 500*time.Millisecond)
			var total, lo int64 = 0, got[0]
			for _, v := range got {
				total += v
				lo = min(lo, v)
			}
			mean := total / int64(len(got))
			t.Logf("%s: slowest/mean %.2f, mean %.1f MB; ring drops %d, retransmits %d, timeouts %d, loss bounds %d; per connection %v",
				cc, float64(lo)/float64(mean), float64(mean)/1e6, ringDrops(w.pb), counterOf(t, w.a, "tcp_retransmits"),
				counterOf(t, w.a, "tcp_timeouts"), counterOf(t, w.a, "tcp_bbr_loss_bounds"), got)
			if lo < mean/2 {
				t.Errorf("the slowest connection moved %d bytes, the mean %d", lo, mean)
			}
			if rtx, segs := counterOf(t, w.a, "tcp_retransmits"), counterOf(t, w.a, "tcp_segments_out"); rtx > segs/100 {
				t.Errorf("%d of %d segments sent again: the flights overflow the ring", rtx, segs)
			}
			if cc == BBR && counterOf(t, w.a, "tcp_bbr_loss_bounds") == 0 {
				t.Error("tcp_bbr_loss_bounds 0: the ring overflowed and no round bounded the flight")
			}
		})
	}
}
