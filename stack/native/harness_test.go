package native

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

var (
	addrA = netip.MustParseAddr("198.18.0.1")
	addrB = netip.MustParseAddr("198.18.0.2")
)

// world is two engines on the ends of a memio pair, on one fake clock.
// It runs both poll loops in the test's goroutine; when neither has
// anything to do it moves the clock to the next timer, so timers of
// seconds take microseconds and every run is deterministic for its seed.
type world struct {
	t      testing.TB
	clk    *memio.FakeClock
	pa, pb *memio.Port
	a, b   *Engine
	steps  int
	budget int // frames per Poll
}

func newWorld(t testing.TB, mo memio.Options, oa, ob Options) *world {
	t.Helper()
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	mo.Clock = clk
	pa, pb := memio.NewPair(mo)
	oa.Addr, ob.Addr = addrA, addrB
	oa.Clock, ob.Clock = clk, clk
	a, err := New(pa, oa)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(pb, ob)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, clk: clk, pa: pa, pb: pb, a: a, b: b, budget: 64}
	t.Cleanup(func() {
		for _, p := range []*memio.Port{pa, pb} {
			for _, c := range p.Stats().Layers {
				if (c.Name == "tx_oversize" || c.Name == "tx_runt") && c.Value != 0 {
					t.Errorf("%v: %s %d: the engine built a frame the wire refuses", p, c.Name, c.Value)
				}
			}
		}
		a.Close()
		b.Close()
		pa.Close()
		pb.Close()
	})
	return w
}

// step polls and flushes both engines once; it returns the frames taken
// and sent.
func (w *world) step() int {
	tx := w.a.cnt[cTxFrames] + w.b.cnt[cTxFrames]
	n := w.a.Poll(w.budget) + w.b.Poll(w.budget)
	if err := w.a.Flush(); err != nil {
		w.t.Fatal(err)
	}
	if err := w.b.Flush(); err != nil {
		w.t.Fatal(err)
	}
	w.steps++
	return n + int(w.a.cnt[cTxFrames]+w.b.cnt[cTxFrames]-tx)
}

// idle advances the clock to the earliest timer of the two engines;
// false when neither has one.
func (w *world) idle() bool {
	ta, oka := w.a.NextTimer()
	tb, okb := w.b.NextTimer()
	if !oka && !okb {
		return false
	}
	at := ta
	if !oka || okb && tb.Before(ta) {
		at = tb
	}
	if d := at.Sub(w.clk.Now()); d > 0 {
		w.clk.Advance(d)
	}
	return true
}

// until runs the world until cond holds, failing after limit of fake
// time or when nothing is left to happen.
func (w *world) until(limit time.Duration, what string, cond func() bool) {
	w.t.Helper()
	end := w.clk.Now().Add(limit)
	for !cond() {
		if w.clk.Now().After(end) {
			w.t.Fatalf("%s: not within %v of engine time", what, limit)
		}
		if w.step() == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			if cond() {
				return
			}
			if !w.idle() {
				w.t.Fatalf("%s: nothing left to happen", what)
			}
		}
	}
}

// connect dials from a to b's listener on port and returns both ends.
func (w *world) connect(port uint16) (ca, cb *Conn) {
	w.t.Helper()
	l, err := w.b.Listen(port, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	ca, err = w.a.Dial(netip.AddrPortFrom(addrB, port), 0)
	if err != nil {
		w.t.Fatal(err)
	}
	w.until(10*time.Second, "handshake", func() bool {
		if cb == nil {
			cb, _ = l.Accept()
		}
		return cb != nil && ca.State() == Established
	})
	return ca, cb
}

// counter reads a counter of e.
func counterOf(t testing.TB, e *Engine, name string) uint64 {
	t.Helper()
	v, ok := e.Counter(name)
	if !ok {
		t.Fatalf("no counter %q", name)
	}
	return v
}

// transfer moves want from src to dst (both directions may run at once
// through several calls) and returns what dst read.
type pipe struct {
	src, dst *Conn
	data     []byte
	sent     int
	got      bytes.Buffer
	buf      []byte
	eof      bool
}

func newPipe(src, dst *Conn, data []byte) *pipe {
	return &pipe{src: src, dst: dst, data: data, buf: make([]byte, 64<<10)}
}

// pump writes what fits and reads what came; it closes the writing side
// when everything is written.
func (p *pipe) pump(t testing.TB) {
	if p.sent < len(p.data) {
		p.sent += p.src.Write(p.data[p.sent:])
		if p.sent == len(p.data) {
			p.src.CloseWrite()
		}
	}
	for !p.eof {
		n, err := p.dst.Read(p.buf)
		p.got.Write(p.buf[:n])
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("read: %v", err)
			}
			p.eof = true
		}
		if n == 0 {
			break
		}
	}
}

func (p *pipe) done() bool { return p.eof }
