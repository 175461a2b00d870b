package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// bulkOver runs a one-way transfer from ca to cb over a wire with delay
// each way for d of engine time, the reader taking at most perStep bytes
// per 250 µs step (0: all there is), and returns the bytes read. It
// checks the bytes and that cb's window never passed its ceiling.
func bulkOver(t *testing.T, w *world, ca, cb *Conn, d time.Duration, perStep int) int {
	t.Helper()
	data := randBytes(7, 1<<20)
	buf := make([]byte, 1<<20)
	sent, got := 0, 0
	end := w.clk.Now().Add(d)
	for w.clk.Now().Before(end) {
		for {
			n := ca.Write(data[sent%len(data) : min(sent%len(data)+64<<10, len(data))])
			sent += n
			if n == 0 {
				break
			}
		}
		w.step()
		want := len(buf)
		if perStep > 0 {
			want = perStep
		}
		for want > 0 {
			n, _ := cb.Read(buf[:want])
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
			want -= n
		}
		if int(cb.rcvWnd()) > int(cb.m.rcvMax)+rcvSlack(w.b.o.RecvBuf) || cb.rcvCap > int(cb.m.rcvMax) {
			t.Fatalf("window %d, cap %d past the ceiling %d", cb.rcvWnd(), cb.rcvCap, cb.m.rcvMax)
		}
		w.clk.Advance(250 * time.Microsecond)
	}
	return got
}

// TestRecvWindowAutoTuning follows Linux's dynamic right-sizing
// (tcp_rcv_space_adjust): the receive window starts at InitRecvWindow
// and, with a reader that takes everything, grows with what it reads per
// round trip up to RecvBuf, so that a path of 10 ms moves more than a
// window of 64 KiB per round trip; with a reader that takes 16 KiB per
// round trip it stays where it started, and so does the memory the
// connection holds.
func TestRecvWindowAutoTuning(t *testing.T) {
	const rtt = 10 * time.Millisecond
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20}
	t.Run("fast-reader", func(t *testing.T) {
		w := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
		ca, cb := w.connect(80)
		if cb.rcvCap != DefaultInitRecvWindow {
			t.Fatalf("window cap %d at the start, want %d", cb.rcvCap, DefaultInitRecvWindow)
		}
		w.pa.SetImpairment(memio.Impairment{Delay: rtt / 2})
		w.pb.SetImpairment(memio.Impairment{Delay: rtt / 2})
		got := bulkOver(t, w, ca, cb, time.Second, 0)
		if cb.rcvCap != o.RecvBuf {
			t.Errorf("window cap %d after a second of bulk, want RecvBuf %d", cb.rcvCap, o.RecvBuf)
		}
		// A fixed window of 64 KiB moves 6.4 MB in a second of 10 ms
		// round trips.
		if got < 4*100*DefaultInitRecvWindow {
			t.Errorf("%d bytes in a second over 10 ms round trips: the window did not grow", got)
		}
		t.Logf("%d bytes in 1 s, window cap %d, receiver RTT %v", got, cb.rcvCap, time.Duration(cb.m.rcvRTT))
	})
	t.Run("slow-reader", func(t *testing.T) {
		w := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
		ca, cb := w.connect(80)
		w.pa.SetImpairment(memio.Impairment{Delay: rtt / 2})
		w.pb.SetImpairment(memio.Impairment{Delay: rtt / 2})
		got := bulkOver(t, w, ca, cb, time.Second, 400) // 16 KB per 10 ms
		if cb.rcvCap != DefaultInitRecvWindow {
			t.Errorf("window cap %d with a reader of 16 KB per round trip, want it unmoved at %d", cb.rcvCap, DefaultInitRecvWindow)
		}
		if n := len(cb.rbuf); n > 2*DefaultInitRecvWindow {
			t.Errorf("receive ring of %d bytes for a window of %d", n, cb.rcvCap)
		}
		t.Logf("%d bytes in 1 s, window cap %d", got, cb.rcvCap)
	})
	t.Run("SetRecvBuf", func(t *testing.T) {
		// SetRecvBuf fixes the window (as SO_RCVBUF turns off Linux's
		// tuning): a fast reader leaves it where it was set.
		w := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
		ca, cb := w.connect(80)
		cb.SetRecvBuf(128 << 10)
		w.pa.SetImpairment(memio.Impairment{Delay: rtt / 2})
		w.pb.SetImpairment(memio.Impairment{Delay: rtt / 2})
		bulkOver(t, w, ca, cb, 200*time.Millisecond, 0)
		if cb.rcvCap != 128<<10 {
			t.Errorf("window cap %d after SetRecvBuf(128 KiB) and a fast reader", cb.rcvCap)
		}
	})
}

// TestRingsFollowUse: connections hold rings while they use them and
// give them back once they idle; an idle engine's pool is freed after
// PoolIdle, and a steady load allocates no ring after the first round.
func TestRingsFollowUse(t *testing.T) {
	o := Options{PoolIdle: time.Second}
	w := newWorld(t, memio.Options{}, o, o)
	var cs [][2]*Conn
	for i := range 8 {
		ca, cb := w.connect(uint16(80 + i))
		cs = append(cs, [2]*Conn{ca, cb})
	}
	buf := make([]byte, 64<<10)
	round := func() {
		for _, p := range cs {
			p[0].Write(buf[:3000])
		}
		w.until(time.Minute, "requests", func() bool {
			for _, p := range cs {
				if p[1].rLen < 3000 {
					return false
				}
			}
			return true
		})
		for _, p := range cs {
			p[1].Read(buf)
			p[1].Write(buf[:3000])
		}
		w.until(time.Minute, "answers", func() bool {
			for _, p := range cs {
				if p[0].rLen < 3000 || p[1].sLen > 0 {
					return false
				}
			}
			return true
		})
		for _, p := range cs {
			p[0].Read(buf)
		}
	}
	round()
	allocs := w.a.pool.allocs + w.b.pool.allocs
	for range 50 {
		round()
	}
	if a := w.a.pool.allocs + w.b.pool.allocs; a != allocs {
		t.Errorf("%d rings allocated over 50 rounds after the first", a-allocs)
	}
	w.until(time.Minute, "the pools trimmed", func() bool {
		_, pa, _, _ := w.a.BufferStats()
		_, pb, _, _ := w.b.BufferStats()
		return pa == 0 && pb == 0
	})
	for _, e := range []*Engine{w.a, w.b} {
		for k, f := range e.pool.free {
			if f != nil {
				t.Errorf("class %d keeps a list of %d", e.pool.classes[k], len(f))
			}
		}
	}
	round() // and the rings come back on demand
}

// TestRecvMemoryBoundsTuning: with Options.RecvMemory set, what
// auto-tuning adds to the windows of all connections together stays
// within it on round trips no longer than ringWait (as Linux's
// tcp_rcv_space_adjust stops growing under tcp_mem pressure), and goes
// back when the connections end; the default comes from a FrameIO that
// tells its receive ring (an AF_XDP socket), half of it in full
// segments.
func TestRecvMemoryBoundsTuning(t *testing.T) {
	const budget = 256 << 10
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20, RecvMemory: budget}
	added, grown, w := tuneUnderBudget(t, o, 4, 2*time.Millisecond)
	if added > budget || grown != int64(added) {
		t.Errorf("auto-tuning added %d bytes to the windows (accounted %d), RecvMemory %d", added, grown, budget)
	}
	if added < budget/2 {
		t.Errorf("auto-tuning added %d bytes under a bound of %d: it did not tune", added, budget)
	}
	if w.b.pool.grown != 0 {
		t.Errorf("%d bytes of tuning still accounted after every connection ended", w.b.pool.grown)
	}
	if got := recvMemoryFor(rxRing{}, 1460); got != 1024*1460 {
		t.Errorf("default RecvMemory on a ring of 2048 frames: %d, want %d", got, 1024*1460)
	}
	if got, want := recvMemoryFor(w.pa, 1460), w.pa.RxSlots()/2*1460; got != want {
		t.Errorf("default RecvMemory on memio's wire of %d frames: %d, want %d", w.pa.RxSlots(), got, want)
	}
	if got := recvMemoryFor(struct{}{}, 1460); got != 0 {
		t.Errorf("default RecvMemory on a FrameIO that does not tell its ring: %d, want 0 (no bound)", got)
	}
}

// TestRecvMemoryLongPath: on a round trip longer than ringWait (20 ms
// here) a window counts against Options.RecvMemory in proportion,
// ringWait/rtt of its growth, since its peer spreads it over the round
// trip: one connection's window grows past the bound, up to rtt/ringWait
// times it, where counting it whole held it at the bound (half the ring
// by default) and counting half of it at twice the bound, both below a
// 10 ms path's bandwidth-delay product once a loss holds a round trip of
// data behind a hole. Linux bounds the windows by memory (tcp_mem), not
// by a ring.
func TestRecvMemoryLongPath(t *testing.T) {
	const budget = 256 << 10
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20, RecvMemory: budget}
	added, grown, _ := tuneUnderBudget(t, o, 1, 10*time.Millisecond)
	if grown > budget {
		t.Errorf("accounted %d bytes of tuning, RecvMemory %d", grown, budget)
	}
	if added <= 2*budget {
		t.Errorf("auto-tuning added %d bytes on a 20 ms round trip under a bound of %d: the bound counted more than ringWait/rtt of the window", added, budget)
	}
	if added > 4*budget+1 {
		t.Errorf("auto-tuning added %d bytes on a 20 ms round trip, more than rtt/ringWait (4) × RecvMemory %d", added, budget)
	}
	t.Logf("added %d, accounted %d, RecvMemory %d", added, grown, budget)
}

// tuneUnderBudget runs a second of bulk over conns connections with a
// one-way delay of delay and a reader that takes everything, and returns
// what auto-tuning added to the receivers' windows and what the engine
// accounted for it (pool.grown) before the connections ended.
func tuneUnderBudget(t *testing.T, o Options, conns int, delay time.Duration) (added int, grown int64, w *world) {
	t.Helper()
	w = newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
	var cs [][2]*Conn
	for i := range conns {
		ca, cb := w.connect(uint16(80 + i))
		cs = append(cs, [2]*Conn{ca, cb})
	}
	w.pa.SetImpairment(memio.Impairment{Delay: delay})
	w.pb.SetImpairment(memio.Impairment{Delay: delay})
	chunk := make([]byte, 64<<10)
	buf := make([]byte, 1<<20)
	end := w.clk.Now().Add(time.Second)
	for w.clk.Now().Before(end) {
		for _, p := range cs {
			for p[0].Write(chunk) > 0 {
			}
		}
		w.step()
		for _, p := range cs {
			for n, _ := p[1].Read(buf); n > 0; n, _ = p[1].Read(buf) {
			}
		}
		w.clk.Advance(250 * time.Microsecond)
	}
	for _, p := range cs {
		added += p[1].rcvCap - DefaultInitRecvWindow
	}
	grown = w.b.pool.grown
	for _, p := range cs {
		p[0].Abort()
		p[1].Abort()
	}
	return added, grown, w
}

type rxRing struct{}

func (rxRing) RxSlots() int { return 2048 }

// TestSendBufFollowsCwnd follows Linux's tcp_sndbuf_expand: with a
// SendBuf above sendFloor, what Write takes ahead of what is in flight
// is twice the congestion window, at least sendFloor (any record fits an
// idle connection), at most SendBuf; a SendBuf of sendFloor or less is
// the limit itself.
func TestSendBufFollowsCwnd(t *testing.T) {
	o := Options{SendBuf: 4 << 20, RecvBuf: 1 << 20}
	w := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
	ca, _ := w.connect(80)
	ca.cwnd = 10 * 1460
	if got := ca.Room(); got != sendFloor {
		t.Errorf("Room with cwnd of 10 segments: %d, want sendFloor %d", got, sendFloor)
	}
	ca.cwnd = 1500 << 10
	if got := ca.Room(); got != 3000<<10 {
		t.Errorf("Room with cwnd of 1500 KiB: %d, want twice it (%d)", got, 3000<<10)
	}
	ca.cwnd = 4 << 20
	if got := ca.Room(); got != o.SendBuf {
		t.Errorf("Room with cwnd of 4 MiB: %d, want SendBuf %d", got, o.SendBuf)
	}
	ca.cwnd = 10 * 1460
	if n := ca.Write(make([]byte, 2<<20)); n != sendFloor {
		t.Errorf("Write of 2 MiB with a small cwnd took %d, want sendFloor %d", n, sendFloor)
	}
	if got := ca.Room(); got != 0 {
		t.Errorf("Room after the limit was written: %d, want 0", got)
	}

	// Bytes sent and not yet acknowledged (held behind a hole, or not
	// acknowledged at all) do not take the room of new ones: with 3 MiB
	// in flight and cwnd cut to 100 segments, as a recovery cuts it,
	// Write still takes twice cwnd of new bytes. Were the limit twice
	// cwnd alone, it would stop every write, no segment would be sent
	// after a lost retransmission, and RACK, which finds it lost by the
	// delivery of a segment sent after it (RFC 8985 §6.2), would leave it
	// to the RTO.
	w3 := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
	cf, _ := w3.connect(80)
	w3.pb.SetImpairment(memio.Impairment{Loss: 1}) // no ACK comes back
	cf.cwnd, cf.sndWnd = 8<<20, 8<<20
	flight := 3 << 20
	for sent := 0; sent < flight; {
		sent += cf.Write(make([]byte, flight-sent))
		w3.step()
	}
	for i := 0; i < 100 && int(cf.sndMax-cf.sndUna) < flight; i++ {
		w3.step()
	}
	if got := int(cf.sndMax - cf.sndUna); got != flight {
		t.Fatalf("set-up: %d bytes in flight, want %d", got, flight)
	}
	cf.cwnd = 100 * 1460
	if got, want := cf.Room(), 2*int(cf.cwnd); got != want {
		t.Errorf("Room with %d bytes in flight and cwnd of 100 segments: %d, want twice cwnd (%d)", flight, got, want)
	}

	small := Options{SendBuf: 256 << 10, RecvBuf: 256 << 10}
	w2 := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, small, small)
	cs, _ := w2.connect(80)
	cs.cwnd = 10 * 1460
	if got := cs.Room(); got != small.SendBuf {
		t.Errorf("Room with SendBuf 256 KiB: %d, want SendBuf", got)
	}
}

// bulkRound writes what each pair's sender takes, runs the engines once,
// reads everything each pair's receiver holds, and advances the clock
// 250 µs; it returns the bytes read per pair.
func bulkRound(w *world, cs [][2]*Conn, got []int) {
	chunk := make([]byte, 64<<10)
	buf := make([]byte, 1<<20)
	for _, p := range cs {
		for p[0].Write(chunk) > 0 {
		}
	}
	w.step()
	for i, p := range cs {
		for n, _ := p[1].Read(buf); n > 0; n, _ = p[1].Read(buf) {
			got[i] += n
		}
	}
	w.clk.Advance(250 * time.Microsecond)
}

// TestRecvMemorySharedAmongReceivers: one connection receives alone and
// auto-tuning grows its window to the whole of Options.RecvMemory; three
// more start receiving: their windows grow to a share each, the first's
// is lowered to its share (tcp_rcvwnd_shared) without its advertised
// right edge ever moving back (RFC 9293 §3.8.6.2.2), so that each moves
// a fair part of the bytes instead of the first keeping the ring.
func TestRecvMemorySharedAmongReceivers(t *testing.T) {
	sharedAmongReceivers(t, time.Millisecond)
}

// TestRecvMemorySharedOnLongPath is TestRecvMemorySharedAmongReceivers
// on a round trip of 20 ms, four times the 5 ms over which the bound
// counts a window (ringWait): each share is a window four times as
// large, and the connections still move fair parts of the bytes.
func TestRecvMemorySharedOnLongPath(t *testing.T) {
	sharedAmongReceivers(t, 10*time.Millisecond)
}

// sharedAmongReceivers runs the sharing test with delay each way.
func sharedAmongReceivers(t *testing.T, delay time.Duration) {
	const budget = 512 << 10
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20, RecvMemory: budget}
	w := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
	var cs [][2]*Conn
	for i := range 4 {
		ca, cb := w.connect(uint16(80 + i))
		cs = append(cs, [2]*Conn{ca, cb})
	}
	w.pa.SetImpairment(memio.Impairment{Delay: delay})
	w.pb.SetImpairment(memio.Impairment{Delay: delay})
	// A window on a round trip longer than ringWait counts ringWait/rtt
	// of itself: its share, and what one grows to alone, are that much
	// larger as windows.
	scale := max(int64(2*delay)/ringWait, 1)
	first := cs[:1]
	got := make([]int, 4)
	end := w.clk.Now().Add(time.Duration(scale) * time.Second)
	for w.clk.Now().Before(end) {
		bulkRound(w, first, got)
	}
	if g := int64(cs[0][1].rcvCap - DefaultInitRecvWindow); g < scale*budget*3/4 {
		t.Fatalf("one connection alone grew its window by %d, want most of RecvMemory %d as a window (×%d)", g, budget, scale)
	}
	edge := cs[0][1].rcvAdv
	clear(got)
	end = w.clk.Now().Add(time.Duration(2*scale) * time.Second)
	for w.clk.Now().Before(end) {
		bulkRound(w, cs, got)
		if e := cs[0][1].rcvAdv; seqLT(e, edge) {
			t.Fatalf("the first connection's right edge moved back from %d to %d", edge, e)
		} else {
			edge = e
		}
	}
	share := scale * budget / 4
	for i, p := range cs {
		if g := int64(p[1].rcvCap - DefaultInitRecvWindow); g > share+share/8 {
			t.Errorf("connection %d holds %d of RecvMemory above its window's start, its share is %d", i, g, share)
		}
	}
	lo, hi := got[0], got[0]
	for _, n := range got {
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo < hi/2 {
		t.Errorf("bytes moved per connection %v: the slowest moved less than half the fastest's", got)
	}
	if n := counterOf(t, w.b, "tcp_rcvwnd_shared"); n == 0 {
		t.Error("tcp_rcvwnd_shared 0: no window was lowered to its share")
	}
	if w.b.pool.grown > budget+budget/4 {
		t.Errorf("windows grown by %d in all, RecvMemory %d", w.b.pool.grown, budget)
	}
	t.Logf("per connection %v bytes in %d s; windows %d %d %d %d", got,
		2*scale, cs[0][1].rcvCap, cs[1][1].rcvCap, cs[2][1].rcvCap, cs[3][1].rcvCap)
}

// TestRecvWindowIdleGivesBack: a connection that received a bulk and
// then nothing for Options.PoolIdle gives its window's growth back to
// Options.RecvMemory (tcp_rcvwnd_idle), and grows it again when bytes
// come again.
func TestRecvWindowIdleGivesBack(t *testing.T) {
	const budget = 512 << 10
	o := Options{SendBuf: 4 << 20, RecvBuf: 4 << 20, RecvMemory: budget, PoolIdle: 100 * time.Millisecond}
	w := newWorld(t, memio.Options{TxSlots: 8192, RxSlots: 8192}, o, o)
	ca, cb := w.connect(80)
	w.pa.SetImpairment(memio.Impairment{Delay: time.Millisecond})
	w.pb.SetImpairment(memio.Impairment{Delay: time.Millisecond})
	cs := [][2]*Conn{{ca, cb}}
	got := make([]int, 1)
	bulk := func() {
		end := w.clk.Now().Add(500 * time.Millisecond)
		for w.clk.Now().Before(end) {
			bulkRound(w, cs, got)
		}
		w.until(time.Minute, "the bytes sent arrived", func() bool {
			bulkRound(w, nil, nil)
			n, _ := cb.Read(make([]byte, 1<<20))
			return n == 0 && ca.sLen == 0 && cb.rLen == 0
		})
	}
	bulk()
	if cb.rcvCap <= DefaultInitRecvWindow || !cb.m.tuned {
		t.Fatalf("window %d after a bulk, tuned %v: auto-tuning did not grow it", cb.rcvCap, cb.m.tuned)
	}
	w.until(time.Minute, "the idle window given back", func() bool {
		bulkRound(w, nil, nil)
		w.clk.Advance(10 * time.Millisecond)
		return !cb.m.tuned
	})
	if cb.rcvCap != DefaultInitRecvWindow || w.b.pool.grown != 0 || w.b.pool.tuned != 0 {
		t.Errorf("idle: window %d (want %d), pool grown %d tuned %d (want 0)", cb.rcvCap, DefaultInitRecvWindow, w.b.pool.grown, w.b.pool.tuned)
	}
	if n := counterOf(t, w.b, "tcp_rcvwnd_idle"); n != 1 {
		t.Errorf("tcp_rcvwnd_idle %d, want 1", n)
	}
	bulk()
	if cb.rcvCap <= DefaultInitRecvWindow {
		t.Errorf("window %d after a second bulk: it did not grow again", cb.rcvCap)
	}
}
