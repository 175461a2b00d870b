package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// lossyWindowRun moves bytes from a to b for d of engine time over a
// memio wire that loses 1% of the frames each way and delays each by
// 10 ms, with no bottleneck (the rate is the windows' over the round
// trip, as on dgramio-bulk's lossy wire). It returns the Mbit/s
// delivered, in engine time.
func lossyWindowRun(t *testing.T, o Options, seed uint64, d time.Duration) float64 {
	t.Helper()
	w := newWorld(t, memio.Options{Seed: seed, TxSlots: 4096, RxSlots: 4096}, o, o)
	imp := memio.Impairment{Delay: 10 * time.Millisecond, Loss: 0.01}
	w.pa.SetImpairment(imp)
	w.pb.SetImpairment(imp)
	ca, cb := w.connect(7400)
	return bulkFor(t, w, ca, cb, seed, d)
}

// bulkFor moves bytes from ca to cb for d of engine time, the writer
// filling ca's send buffer and the reader taking all there is at each
// step, every byte checked, fake time moving in steps of at most 20 µs
// while nothing moves. It returns the Mbit/s delivered, in engine time.
func bulkFor(t testing.TB, w *world, ca, cb *Conn, seed uint64, d time.Duration) float64 {
	t.Helper()
	data := randBytes(seed, 1<<20)
	buf := make([]byte, 256<<10)
	sent, got := 0, 0
	start := w.clk.Now()
	for end := start.Add(d); w.clk.Now().Before(end); {
		for {
			n := ca.Write(data[sent%len(data):])
			if n == 0 {
				break
			}
			sent += n
		}
		moved := w.step()
		for {
			n, _ := cb.Read(buf)
			if n == 0 {
				break
			}
			for k := 0; k < n; {
				at := (got + k) % len(data)
				m := min(n-k, len(data)-at)
				if !bytes.Equal(buf[k:k+m], data[at:at+m]) {
					t.Fatalf("the bytes at %d differ", got+k)
				}
				k += m
			}
			got += n
		}
		if moved == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			w.advanceIdle(20 * time.Microsecond)
		}
	}
	return float64(got) * 8 / w.clk.Now().Sub(start).Seconds() / 1e6
}

// TestRecvWindowTuningUnderLoss: at 1% loss each way over 10 ms, a
// window auto-tuned from 64 KiB moves what the window fixed at RecvBuf
// moves (Linux's dynamic right-sizing, with its receiver RTT from the
// first echoed timestamp, tcp_rcv_rtt_measure_ts, its per-RTT measure
// that counts the bytes held behind a hole, and its buffer growth on
// out-of-order data, tcp_data_queue_ofo → tcp_rcvbuf_grow). Before, the
// receiver learnt its RTT only once a whole window had arrived, three
// round trips into slow start: the window stayed at 64 KiB while the
// sender's cwnd outgrew it, and when a loss followed, BBR's Startup saw
// three rounds without growth and stayed near the window's rate (over
// ten seeds, auto-tuned windows moved 0.80–0.83 of the fixed ones'
// bytes, the worst seed a quarter).
func TestRecvWindowTuningUnderLoss(t *testing.T) {
	const d = time.Second
	var auto, fixed float64
	for seed := uint64(1); seed <= 10; seed++ {
		o := Options{Congestion: BBR, SendBuf: 1 << 20, RecvBuf: 1 << 20}
		a := lossyWindowRun(t, o, seed, d)
		o.NoBufferTuning = true
		f := lossyWindowRun(t, o, seed, d)
		t.Logf("seed %d: auto-tuned %.0f Mbit/s, fixed %.0f", seed, a, f)
		if a < 0.6*f {
			t.Errorf("seed %d: auto-tuned window %.0f Mbit/s, fixed %.0f", seed, a, f)
		}
		auto += a
		fixed += f
	}
	if auto < 0.9*fixed {
		t.Errorf("auto-tuned windows moved %.2f of what fixed ones moved", auto/fixed)
	}
}

// TestRecvWindowGrowsOnOutOfOrder: data queued out of order opens the
// window to twice the space measured plus the span from RCV.NXT to the
// end of the data held (Linux's tcp_rcvbuf_grow), within RecvBuf and
// RecvMemory; not with SetRecvBuf (SO_RCVBUF), and not without SACK,
// where a window that moves voids the peer's duplicate ACK (RFC 5681
// §2 (e), as Linux grows only SACK flows' windows from
// tcp_data_queue_ofo).
func TestRecvWindowGrowsOnOutOfOrder(t *testing.T) {
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20, RecvMemory: 1 << 20}
	for _, tc := range []struct {
		name           string
		sack, setBuf   bool
		space, at, len int
		want           int
	}{
		{name: "grows", sack: true, space: 100 << 10, at: 60 << 10, len: 4 << 10, want: 264 << 10},
		{name: "enough", sack: true, space: 10 << 10, at: 20 << 10, len: 4 << 10, want: DefaultInitRecvWindow},
		{name: "RecvMemory", sack: true, space: 1 << 20, at: 60 << 10, len: 4 << 10, want: DefaultInitRecvWindow + 1<<20},
		{name: "SetRecvBuf", sack: true, setBuf: true, space: 100 << 10, at: 60 << 10, len: 4 << 10, want: DefaultInitRecvWindow},
		{name: "no-SACK", space: 100 << 10, at: 60 << 10, len: 4 << 10, want: DefaultInitRecvWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, memio.Options{}, o, o)
			_, cb := w.connect(80)
			if tc.setBuf {
				cb.SetRecvBuf(DefaultInitRecvWindow)
			}
			cb.sackOK = tc.sack
			cb.m.space = int32(tc.space)
			seq := cb.rcvNxt + uint32(tc.at)
			cb.dataInput(&segment{seq: seq, flags: flagACK, payload: make([]byte, tc.len)})
			if cb.nooo != 1 {
				t.Fatalf("%d blocks held out of order", cb.nooo)
			}
			if cb.rcvCap != tc.want {
				t.Errorf("window cap %d, want %d", cb.rcvCap, tc.want)
			}
			if g := cb.rcvCap - DefaultInitRecvWindow; w.b.pool.grown != int64(g) {
				t.Errorf("pool accounts %d grown, the window grew %d", w.b.pool.grown, g)
			}
		})
	}
}

// TestRecvRTTFromTimestamp: the receiver takes its RTT from the
// timestamps full-sized segments echo (Linux's tcp_rcv_rtt_measure_ts):
// it has it once the second flight of slow start arrives, echoing its
// ACKs of the first, rather than once a whole window (64 KiB, the third
// flight) has arrived; the first flight's echo, of the handshake long
// before, does not count as a round trip.
func TestRecvRTTFromTimestamp(t *testing.T) {
	const rtt = 20 * time.Millisecond
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	w.pa.SetImpairment(memio.Impairment{Delay: rtt / 2})
	w.pb.SetImpairment(memio.Impairment{Delay: rtt / 2})
	ca, cb := w.connect(80)
	if !cb.tsOK {
		t.Fatal("no timestamps negotiated")
	}
	w.clk.Advance(time.Second) // the handshake's timestamps grow old
	ca.Write(make([]byte, 64<<10))
	iw := int(initialWindow(ca.smss))
	for end := w.clk.Now().Add(time.Second); cb.rLen <= iw; w.clk.Advance(100 * time.Microsecond) {
		if w.clk.Now().After(end) {
			t.Fatalf("%d bytes arrived in a second", cb.rLen)
		}
		w.step()
	}
	if r := time.Duration(cb.m.rcvRTT); r < rtt-time.Millisecond || r > rtt+2*time.Millisecond {
		t.Errorf("receiver RTT %v once the second flight arrives, the path's is %v", r, rtt)
	}
}

// TestRecvWindowLongPathHoldsOutOfOrder: on a round trip longer than
// ringWait the window grows past Options.RecvMemory's bound by the bytes
// it holds out of order behind a hole: they arrived already and cannot
// come into the receive ring again, and a long path's hole holds a round
// trip of them (16 connections at 1% loss and 10 ms each way moved 0.81–
// 0.89 Gbit/s without it, 1.12–1.17 with it, BENCHMARKS.md). On a short
// path the bound holds whole.
func TestRecvWindowLongPathHoldsOutOfOrder(t *testing.T) {
	const budget = 256 << 10
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20, RecvMemory: budget}
	for _, tc := range []struct {
		name string
		rtt  time.Duration
		want int
	}{
		// 64 KiB held (60 KiB up to a 4 KiB segment); the bound 4 × 256 KiB.
		{"long", 20 * time.Millisecond, DefaultInitRecvWindow + 4*budget + 64<<10},
		{"short", 2 * time.Millisecond, DefaultInitRecvWindow + budget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, memio.Options{}, o, o)
			_, cb := w.connect(80)
			rtt := int64(tc.rtt)
			cb.m.rcvRTT, cb.srtt, cb.rk.minRTT, cb.m.minRTT = rtt, rtt, rtt, uint32(rtt/1e3)
			cb.m.space = 1 << 20
			cb.dataInput(&segment{seq: cb.rcvNxt + 60<<10, flags: flagACK, payload: make([]byte, 4<<10)})
			if cb.rcvCap != tc.want {
				t.Errorf("window cap %d, want %d", cb.rcvCap, tc.want)
			}
			g := int64(cb.rcvCap - DefaultInitRecvWindow)
			if rtt > ringWait {
				g = g * ringWait / rtt
			}
			if w.b.pool.grown != g {
				t.Errorf("pool accounts %d grown, want %d", w.b.pool.grown, g)
			}
		})
	}
}
