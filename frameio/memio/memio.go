package memio

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
)

// Defaults of Options.
const (
	DefaultMTU   = 1500
	DefaultSlots = 256
)

// PoisonByte is what a delivered frame's buffer is overwritten with once
// deliver returns.
const PoisonByte = 0xDB

// Default MAC addresses of ports A and B (locally administered, unicast).
var (
	DefaultMACA = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x0a}
	DefaultMACB = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x0b}
)

// Clock tells the time that delayed frames wait for. SystemClock is the
// default; FakeClock lets a test move time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock, time.Now.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// FakeClock is a Clock that moves only when told to. Safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Impairment describes what the wire does to the frames of one direction.
// Probabilities are in [0, 1]; the zero value is a perfect wire. Each frame
// put on the wire by Kick draws, in this order: lost?, corrupted (and which
// byte and bit)?, duplicated?, reordered? — so the fate of the n-th frame
// depends only on the seed and n.
type Impairment struct {
	// Loss is the probability that a frame is dropped.
	Loss float64
	// Corrupt is the probability that one bit of one byte (chosen uniformly
	// over the whole frame) is flipped.
	Corrupt float64
	// Duplicate is the probability that a frame arrives twice. The copy is
	// skipped (and not counted) when the wire has no room for it.
	Duplicate float64
	// Reorder is the probability that a frame is held back and arrives after
	// the next frame of this direction. A held frame leaves at the latest
	// at the end of the following Kick, even if no other frame came.
	Reorder float64
	// Delay holds every frame on the wire until the clock passes the time of
	// its Kick plus Delay. The wire stays first in, first out.
	Delay time.Duration
	// Rate, when above 0, is the wire's bandwidth in bytes per second: a
	// frame leaves (and its Delay starts) once the frames before it have,
	// each taking its length over Rate; frames wait for it on the wire,
	// which, full, drops them (a drop-tail bottleneck of RxSlots frames).
	Rate float64
}

func (i Impairment) random() bool {
	return i.Loss > 0 || i.Corrupt > 0 || i.Duplicate > 0 || i.Reorder > 0
}

// Dir names a direction of the wire.
type Dir int

// The two directions.
const (
	AtoB Dir = iota
	BtoA
)

// String returns "A->B" or "B->A".
func (d Dir) String() string {
	if d == BtoA {
		return "B->A"
	}
	return "A->B"
}

// Options configure a pair. The zero value is a perfect wire with the
// defaults.
type Options struct {
	// MTU is the largest IP packet a frame carries (the frame without its
	// 14-byte Ethernet header). Default 1500.
	MTU int
	// TxSlots is each port's transmit ring size; RxSlots the number of frames
	// each direction of the wire holds. Default 256 each.
	TxSlots, RxSlots int
	// MACA and MACB are the ports' addresses. Default DefaultMACA/DefaultMACB.
	MACA, MACB net.HardwareAddr
	// AtoB and BtoA impair the two directions.
	AtoB, BtoA Impairment
	// Seed seeds the impairment of both directions (each direction draws from
	// its own stream derived from it). Use Seed(t) in tests.
	Seed uint64
	// Clock is the time delayed frames wait for. Default SystemClock.
	Clock Clock
	// Tap, when set, sees every frame as Kick puts it on the wire, before
	// impairment, with its direction. frame is valid only inside the call.
	// It runs under the direction's lock: it must not call into the pair.
	Tap func(dir Dir, frame []byte)
}

// slot is one frame buffer on a ring or the wire.
type slot struct {
	buf []byte // len == cap == the frame's maximum size
	n   int    // frame length
	due time.Time
}

// link is one direction of the wire: the sender's transmit ring, the wire
// towards the receiver and the buffers they share.
type link struct {
	dir   Dir
	clock Clock
	tap   func(Dir, []byte)
	frame int // largest frame

	mu   sync.Mutex
	imp  Impairment
	rng  *rand.Rand
	free [][]byte
	tx   ring
	wire ring
	held slot // a frame held back for reordering; held.buf == nil when none
	// heldDup says the held frame is to be duplicated when it leaves;
	// heldKick is the kick count when it was taken.
	heldDup  bool
	heldKick uint64
	kicks    uint64
	freeAt   time.Time // with Impairment.Rate: when the last frame has left

	// signal wakes the receiver's Wait after a Kick (capacity 1).
	signal chan struct{}

	// counters of the impairment and the wire, counted at the receiver.
	lost, corrupted, duplicated, reordered, delayed, rxFull atomic.Uint64
}

// ring is a fixed-size FIFO of slots.
type ring struct {
	s          []slot
	head, size int
}

func newRing(n int) ring { return ring{s: make([]slot, n)} }

func (r *ring) full() bool { return r.size == len(r.s) }

func (r *ring) push(s slot) {
	r.s[(r.head+r.size)%len(r.s)] = s
	r.size++
}

func (r *ring) peek() *slot { return &r.s[r.head] }

func (r *ring) pop() slot {
	s := r.s[r.head]
	r.s[r.head] = slot{}
	r.head = (r.head + 1) % len(r.s)
	r.size--
	return s
}

func newLink(dir Dir, o *Options, imp Impairment) *link {
	l := &link{
		dir:    dir,
		clock:  o.Clock,
		tap:    o.Tap,
		frame:  o.MTU + 14,
		imp:    imp,
		rng:    rand.New(rand.NewPCG(o.Seed, 0x6d656d696f+uint64(dir))),
		tx:     newRing(o.TxSlots),
		wire:   newRing(o.RxSlots),
		signal: make(chan struct{}, 1),
	}
	// Every buffer is in one place: free, the transmit ring, the wire, held
	// back, or being delivered (taken from the wire). This many never runs
	// out; get allocates only if it somehow does.
	n := o.TxSlots + 2*o.RxSlots + 2
	backing := make([]byte, n*l.frame)
	l.free = make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		l.free = append(l.free, backing[i*l.frame:(i+1)*l.frame:(i+1)*l.frame])
	}
	return l
}

func (l *link) get() []byte {
	if len(l.free) == 0 {
		return make([]byte, l.frame)
	}
	b := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	return b
}

func (l *link) put(b []byte) { l.free = append(l.free, b) }

// toWire puts s on the wire and reports true, or drops it when the wire is
// full.
func (l *link) toWire(s slot) bool {
	if l.wire.full() {
		l.rxFull.Add(1)
		l.put(s.buf)
		return false
	}
	l.wire.push(s)
	return true
}

// send puts s on the wire, followed by its copy when dup is set and there
// is room for both.
func (l *link) send(s slot, dup bool) {
	if !l.toWire(s) || !dup || l.wire.full() {
		return
	}
	b := l.get()
	copy(b, s.buf[:s.n])
	l.wire.push(slot{buf: b, n: s.n, due: s.due})
	l.duplicated.Add(1)
}

// releaseHeld puts the frame held back for reordering on the wire.
func (l *link) releaseHeld() {
	h, dup := l.held, l.heldDup
	l.held, l.heldDup = slot{}, false
	l.send(h, dup)
}

// kick moves the transmit ring onto the wire, impairing as told. It returns
// whether anything reached the wire.
func (l *link) kick() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kicks++
	before := l.wire.size
	var due, now time.Time
	if (l.imp.Delay > 0 || l.imp.Rate > 0) && l.tx.size > 0 {
		now = l.clock.Now()
		due = now.Add(l.imp.Delay)
	}
	for l.tx.size > 0 {
		s := l.tx.pop()
		s.due = due
		if l.imp.Rate > 0 {
			if l.freeAt.Before(now) {
				l.freeAt = now
			}
			l.freeAt = l.freeAt.Add(time.Duration(float64(s.n) / l.imp.Rate * 1e9))
			s.due = l.freeAt.Add(l.imp.Delay)
		}
		if l.tap != nil {
			l.tap(l.dir, s.buf[:s.n])
		}
		if l.imp.Delay > 0 {
			l.delayed.Add(1)
		}
		if !l.imp.random() {
			l.send(s, false)
			if l.held.buf != nil {
				l.releaseHeld()
			}
			continue
		}
		// Draw every decision for this frame, always in the same order and
		// number, so the stream stays aligned with the frame sequence.
		rLoss, rCorrupt, rDup, rReorder := l.rng.Float64(), l.rng.Float64(), l.rng.Float64(), l.rng.Float64()
		pos, bit := l.rng.Uint64(), l.rng.Uint64()
		if rLoss < l.imp.Loss {
			l.lost.Add(1)
			l.put(s.buf)
			continue
		}
		if rCorrupt < l.imp.Corrupt && s.n > 0 {
			s.buf[pos%uint64(s.n)] ^= 1 << (bit % 8)
			l.corrupted.Add(1)
		}
		dup := rDup < l.imp.Duplicate
		if rReorder < l.imp.Reorder && l.held.buf == nil {
			l.held, l.heldDup, l.heldKick = s, dup, l.kicks
			l.reordered.Add(1)
			continue
		}
		l.send(s, dup)
		if l.held.buf != nil {
			l.releaseHeld()
		}
	}
	if l.held.buf != nil && l.heldKick < l.kicks {
		l.releaseHeld()
	}
	return l.wire.size > before
}

// Port is one end of a pair. It implements frameio.FrameIO,
// frameio.Waiter and Interrupt (package stack's Interrupter).
type Port struct {
	name string
	mac  net.HardwareAddr
	mtu  int
	out  *link // frames we send
	in   *link // frames we receive

	// taken holds the frames RxFrames took from the wire and is delivering.
	taken []slot
	// held is the transmit slot TxSlot took, until TxCommit.
	held  []byte
	timer *time.Timer

	closeOnce sync.Once
	closed    atomic.Bool
	done      chan struct{}
	// irq holds an Interrupt not yet taken by a Wait (capacity 1).
	irq chan struct{}

	rxFrames, txFrames, rxBytes, txBytes atomic.Uint64
	txRingFull, txOversize, txRunt       atomic.Uint64
}

var (
	_ frameio.FrameIO    = (*Port)(nil)
	_ frameio.Waiter     = (*Port)(nil)
	_ frameio.SlotWriter = (*Port)(nil)
)

// NewPair returns two ports joined by an in-memory wire. All buffers are
// allocated here. Nothing needs closing but Close is honoured.
func NewPair(opts Options) (a, b *Port) {
	if opts.MTU <= 0 {
		opts.MTU = DefaultMTU
	}
	if opts.TxSlots <= 0 {
		opts.TxSlots = DefaultSlots
	}
	if opts.RxSlots <= 0 {
		opts.RxSlots = DefaultSlots
	}
	if opts.MACA == nil {
		opts.MACA = DefaultMACA
	}
	if opts.MACB == nil {
		opts.MACB = DefaultMACB
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	ab := newLink(AtoB, &opts, opts.AtoB)
	ba := newLink(BtoA, &opts, opts.BtoA)
	a = newPort("A", &opts, opts.MACA, ab, ba)
	b = newPort("B", &opts, opts.MACB, ba, ab)
	return a, b
}

func newPort(name string, o *Options, mac net.HardwareAddr, out, in *link) *Port {
	return &Port{
		name:  name,
		mac:   append(net.HardwareAddr(nil), mac...),
		mtu:   o.MTU,
		out:   out,
		in:    in,
		taken: make([]slot, 0, o.RxSlots),
		done:  make(chan struct{}),
		irq:   make(chan struct{}, 1),
	}
}

// String returns "memio A" or "memio B".
func (p *Port) String() string { return "memio " + p.name }

// SetImpairment changes the impairment of the frames this port sends, from
// the next Kick on. The random stream goes on where it was.
func (p *Port) SetImpairment(imp Impairment) {
	p.out.mu.Lock()
	p.out.imp = imp
	p.out.mu.Unlock()
}

// TxFrame copies frame into the transmit ring. It returns false when the
// ring is full (Stats.TxRingFull), when frame is longer than MTU+14
// (counted as tx_oversize) or after Close. Frames shorter than
// frameio.MinFrame are sent as they are and counted as tx_runt, so tests
// can assert that raw paths pad. The caller keeps frame.
func (p *Port) TxFrame(frame []byte) bool {
	if p.closed.Load() {
		return false
	}
	if len(frame) > p.out.frame {
		p.txOversize.Add(1)
		return false
	}
	l := p.out
	l.mu.Lock()
	if l.tx.full() {
		l.mu.Unlock()
		p.txRingFull.Add(1)
		return false
	}
	b := l.get()
	n := copy(b, frame)
	l.tx.push(slot{buf: b, n: n})
	l.mu.Unlock()
	if n < frameio.MinFrame {
		p.txRunt.Add(1)
	}
	p.txFrames.Add(1)
	p.txBytes.Add(uint64(n))
	return true
}

// TxSlot takes a frame buffer for the caller to build a frame in (or
// returns the one taken before and not committed): len 0, cap the
// largest frame; nil after Close (frameio.SlotWriter).
func (p *Port) TxSlot() []byte {
	if p.closed.Load() {
		return nil
	}
	if p.held == nil {
		l := p.out
		l.mu.Lock()
		p.held = l.get()
		l.mu.Unlock()
	}
	return p.held[:0]
}

// TxCommit queues the first n bytes of the buffer TxSlot took as a frame
// for the next Kick, as TxFrame queues a copy; false (the buffer stays
// taken) when none was taken, n is out of range, the ring is full or the
// port closed.
func (p *Port) TxCommit(n int) bool {
	if p.closed.Load() || p.held == nil {
		return false
	}
	if n <= 0 || n > len(p.held) {
		p.txOversize.Add(1)
		return false
	}
	l := p.out
	l.mu.Lock()
	if l.tx.full() {
		l.mu.Unlock()
		p.txRingFull.Add(1)
		return false
	}
	l.tx.push(slot{buf: p.held, n: n})
	l.mu.Unlock()
	p.held = nil
	if n < frameio.MinFrame {
		p.txRunt.Add(1)
	}
	p.txFrames.Add(1)
	p.txBytes.Add(uint64(n))
	return true
}

// Kick puts the transmit ring on the wire, impaired as configured, and wakes
// the peer's Wait. It returns net.ErrClosed after Close.
func (p *Port) Kick() error {
	if p.closed.Load() {
		return net.ErrClosed
	}
	if p.out.kick() {
		select {
		case p.out.signal <- struct{}{}:
		default:
		}
	}
	return nil
}

// RxFrames delivers up to max frames whose time has come, in wire order,
// and returns how many. It never blocks. frame is valid only inside
// deliver: its buffer is overwritten with PoisonByte when deliver returns
// and reused. deliver may call TxFrame and Kick on either port.
func (p *Port) RxFrames(max int, deliver func(frame []byte)) int {
	if max <= 0 || p.closed.Load() {
		return 0
	}
	l := p.in
	l.mu.Lock()
	var now time.Time
	for len(p.taken) < cap(p.taken) && len(p.taken) < max && l.wire.size > 0 {
		if d := l.wire.peek().due; !d.IsZero() {
			if now.IsZero() {
				now = l.clock.Now()
			}
			if now.Before(d) {
				break
			}
		}
		p.taken = append(p.taken, l.wire.pop())
	}
	l.mu.Unlock()
	n := len(p.taken)
	for i := range p.taken {
		s := &p.taken[i]
		deliver(s.buf[:s.n])
		p.rxBytes.Add(uint64(s.n))
		poison(s.buf[:s.n])
	}
	p.rxFrames.Add(uint64(n))
	if n > 0 {
		l.mu.Lock()
		for i := range p.taken {
			l.put(p.taken[i].buf)
			p.taken[i] = slot{}
		}
		l.mu.Unlock()
	}
	p.taken = p.taken[:0]
	return n
}

// poison overwrites b with PoisonByte, doubling a copy (a byte loop
// costs ten instructions a byte, more than the engines under test spend
// on the frame).
func poison(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = PoisonByte
	for k := 1; k < len(b); k *= 2 {
		copy(b[k:], b[:k])
	}
}

// ready reports whether a frame is due, and the time of the first pending
// frame that is not (zero when none is pending).
func (p *Port) ready() (bool, time.Time) {
	l := p.in
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wire.size == 0 {
		return false, time.Time{}
	}
	d := l.wire.peek().due
	if d.IsZero() || !l.clock.Now().Before(d) {
		return true, time.Time{}
	}
	return false, d
}

// pendingPoll is how often Wait looks at the clock while a delayed frame
// is pending; the clock may be a FakeClock that no timer follows.
const pendingPoll = time.Millisecond

// Wait blocks until RxFrames can deliver a frame, Interrupt is called, ctx
// is done (ctx.Err()) or the port is closed (net.ErrClosed). While a
// delayed frame is pending it looks at the clock every millisecond. A Wait
// that returns nil takes the pending Interrupt, if any, with it.
func (p *Port) Wait(ctx context.Context) error {
	for {
		if p.closed.Load() {
			return net.ErrClosed
		}
		ok, due := p.ready()
		if ok {
			p.takeInterrupt()
			return nil
		}
		var tick <-chan time.Time
		if !due.IsZero() {
			d := pendingPoll
			if _, wall := p.in.clock.(SystemClock); wall {
				if left := time.Until(due); left < d {
					d = left
				}
			}
			if p.timer == nil {
				p.timer = time.NewTimer(d)
			} else {
				p.timer.Reset(d)
			}
			tick = p.timer.C
		}
		select {
		case <-p.in.signal:
		case <-tick:
		case <-p.irq:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return net.ErrClosed
		}
	}
}

// Interrupt makes the Wait in progress return nil at once, or, when none
// is, the next Wait. Safe from any goroutine, after Close too; it never
// blocks and allocates nothing.
func (p *Port) Interrupt() {
	select {
	case p.irq <- struct{}{}:
	default: // one is pending already
	}
}

// takeInterrupt drops a pending Interrupt.
func (p *Port) takeInterrupt() {
	select {
	case <-p.irq:
	default:
	}
}

// MAC returns the port's address.
func (p *Port) MAC() net.HardwareAddr { return p.mac }

// MTU returns the largest IP packet a frame carries.
func (p *Port) MTU() int { return p.mtu }

// Stats returns the port's counters. The impairment of the frames sent
// towards this port is counted here, at the receiver, in Layers (layer
// "memio"): impair_lost and rx_ring_full are frames that never arrived
// (Loss true; RxDropped is their sum, not a further loss);
// impair_corrupted, impair_duplicated, impair_reordered and impair_delayed
// arrived changed, twice, late or out of order (Loss false: a corrupted
// frame is dropped, and counted, by the parser that receives it, or it
// carried nothing a parser checks). tx_oversize and tx_runt count frames
// this port was given: refused for being longer than MTU+14, and sent
// shorter than 60 bytes.
func (p *Port) Stats() frameio.Stats {
	l := p.in
	lost, full := l.lost.Load(), l.rxFull.Load()
	return frameio.Stats{
		Mode:       "memio",
		RxFrames:   p.rxFrames.Load(),
		TxFrames:   p.txFrames.Load(),
		RxBytes:    p.rxBytes.Load(),
		TxBytes:    p.txBytes.Load(),
		TxRingFull: p.txRingFull.Load(),
		RxDropped:  lost + full,
		Layers: []dgramio.Counter{
			{Layer: "memio", Name: "impair_lost", Value: lost, Loss: true},
			{Layer: "memio", Name: "rx_ring_full", Value: full, Loss: true},
			{Layer: "memio", Name: "impair_corrupted", Value: l.corrupted.Load()},
			{Layer: "memio", Name: "impair_duplicated", Value: l.duplicated.Load()},
			{Layer: "memio", Name: "impair_reordered", Value: l.reordered.Load()},
			{Layer: "memio", Name: "impair_delayed", Value: l.delayed.Load()},
			{Layer: "memio", Name: "tx_oversize", Value: p.txOversize.Load()},
			{Layer: "memio", Name: "tx_runt", Value: p.txRunt.Load()},
		},
	}
}

// Close stops the port: TxFrame returns false, RxFrames 0, Kick and Wait
// net.ErrClosed; a Wait in progress returns. Frames still on the wire
// towards it are dropped by the wire as it fills. Safe to call more than
// once; the peer goes on working.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.done)
	})
	return nil
}

// RxSlots is how many frames the wire into this port holds
// (Options.RxSlots): the receive ring a native engine bounds its
// receive windows by (native.Options.RecvMemory).
func (p *Port) RxSlots() int { return len(p.in.wire.s) }
