package native

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

var (
	addrA  = netip.MustParseAddr("198.18.0.1")
	addrB  = netip.MustParseAddr("198.18.0.2")
	addr6A = netip.MustParseAddr("2001:2::1")
	addr6B = netip.MustParseAddr("2001:2::2")
)

// family is one column of the tests and benchmarks that run over both
// families: engine A's address a and engine B's b.
type family struct {
	name string
	a, b netip.Addr
}

var families = []family{{"IPv4", addrA, addrB}, {"IPv6", addr6A, addr6B}}

// forFamilies runs fn as a subtest (or sub-benchmark) per family.
func forFamilies[T interface{ Run(string, func(T)) bool }](t T, fn func(t T, f family)) {
	for _, f := range families {
		t.Run(f.name, func(t T) { fn(t, f) })
	}
}

// with returns o with addr as its address of the family: Addr for IPv4,
// Addr6 for IPv6.
func (f family) with(o Options, addr netip.Addr) Options {
	if addr.Is4() {
		o.Addr = addr
	} else {
		o.Addr6 = addr
	}
	return o
}

// newWorldFor is newWorld with the family's addresses on the engines
// (only those: an IPv6 world has no IPv4 address).
func newWorldFor(t testing.TB, f family, mo memio.Options, oa, ob Options) *world {
	t.Helper()
	return startWorld(t, mo, f.with(oa, f.a), f.with(ob, f.b))
}

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
	oa.Addr, ob.Addr = addrA, addrB
	return startWorld(t, mo, oa, ob)
}

// startWorld makes the world of engines with options oa and ob (their
// addresses set) on a fresh memio pair and fake clock; at the test's
// end it checks that neither engine built a frame the wire refuses.
func startWorld(t testing.TB, mo memio.Options, oa, ob Options) *world {
	t.Helper()
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	mo.Clock = clk
	pa, pb := memio.NewPair(mo)
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

// advanceIdle moves the clock of a world with nothing to do by dt, or to
// the engines' next timer when that comes sooner (by a microsecond at
// least).
func (w *world) advanceIdle(dt time.Duration) {
	for _, e := range []*Engine{w.a, w.b} {
		if at, ok := e.NextTimer(); ok && at.Sub(w.clk.Now()) < dt {
			dt = max(at.Sub(w.clk.Now()), time.Microsecond)
		}
	}
	w.clk.Advance(dt)
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
	return w.connectFor(families[0], port)
}

// connectFor dials from a to b's listener on port at b's address of the
// family f and returns both ends.
func (w *world) connectFor(f family, port uint16) (ca, cb *Conn) {
	w.t.Helper()
	l, err := w.b.Listen(port, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.connectTo(l, netip.AddrPortFrom(f.b, port))
}

// connectTo dials from a to b's listener at dst and returns both ends.
func (w *world) connectTo(l *Listener, dst netip.AddrPort) (ca, cb *Conn) {
	w.t.Helper()
	ca, err := w.a.Dial(dst, 0)
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
