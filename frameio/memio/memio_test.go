package memio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/bits"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// frame returns a 64-byte frame carrying seq in bytes 14..18.
func frame(seq uint32) []byte {
	f := make([]byte, 64)
	copy(f[0:6], DefaultMACB)
	copy(f[6:12], DefaultMACA)
	f[12], f[13] = 0x88, 0xb5 // local experimental EtherType
	binary.BigEndian.PutUint32(f[14:], seq)
	for i := 18; i < len(f); i++ {
		f[i] = byte(seq) + byte(i)
	}
	return f
}

func seqOf(f []byte) uint32 { return binary.BigEndian.Uint32(f[14:]) }

// drain delivers everything due on p and returns copies of the frames.
func drain(p *Port) [][]byte {
	var out [][]byte
	for p.RxFrames(64, func(f []byte) { out = append(out, append([]byte(nil), f...)) }) > 0 {
	}
	return out
}

func counter(t *testing.T, p *Port, name string) uint64 {
	t.Helper()
	for _, c := range p.Stats().Layers {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("no counter %q", name)
	return 0
}

func TestSendReceiveBothWays(t *testing.T) {
	a, b := NewPair(Options{})
	if !bytes.Equal(a.MAC(), DefaultMACA) || !bytes.Equal(b.MAC(), DefaultMACB) || a.MTU() != 1500 {
		t.Fatalf("defaults: %v %v %d", a.MAC(), b.MAC(), a.MTU())
	}
	for i := uint32(0); i < 10; i++ {
		if !a.TxFrame(frame(i)) {
			t.Fatalf("TxFrame %d refused", i)
		}
	}
	if got := drain(b); len(got) != 0 {
		t.Fatalf("%d frames arrived before Kick", len(got))
	}
	if err := a.Kick(); err != nil {
		t.Fatal(err)
	}
	got := drain(b)
	if len(got) != 10 {
		t.Fatalf("got %d frames, want 10", len(got))
	}
	for i, f := range got {
		if !bytes.Equal(f, frame(uint32(i))) {
			t.Fatalf("frame %d changed on a perfect wire", i)
		}
	}
	if !b.TxFrame(frame(77)) || b.Kick() != nil {
		t.Fatal("B cannot send")
	}
	if back := drain(a); len(back) != 1 || seqOf(back[0]) != 77 {
		t.Fatalf("B->A: %d frames", len(back))
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.TxFrames != 10 || sb.RxFrames != 10 || sa.TxBytes != 640 || sb.RxBytes != 640 || sb.TxFrames != 1 || sa.RxFrames != 1 {
		t.Fatalf("stats A %+v B %+v", sa, sb)
	}
	if sa.Mode != "memio" {
		t.Fatalf("mode %q", sa.Mode)
	}
}

func TestRxFramesMax(t *testing.T) {
	a, b := NewPair(Options{})
	for i := uint32(0); i < 5; i++ {
		a.TxFrame(frame(i))
	}
	a.Kick()
	var seen []uint32
	if n := b.RxFrames(2, func(f []byte) { seen = append(seen, seqOf(f)) }); n != 2 {
		t.Fatalf("RxFrames(2) = %d", n)
	}
	if n := b.RxFrames(0, func([]byte) { t.Fatal("deliver called with max 0") }); n != 0 {
		t.Fatalf("RxFrames(0) = %d", n)
	}
	if n := b.RxFrames(10, func(f []byte) { seen = append(seen, seqOf(f)) }); n != 3 {
		t.Fatalf("RxFrames(10) = %d", n)
	}
	for i, s := range seen {
		if s != uint32(i) {
			t.Fatalf("order %v", seen)
		}
	}
}

func TestTxRingBound(t *testing.T) {
	a, b := NewPair(Options{TxSlots: 4, RxSlots: 8})
	for i := uint32(0); i < 4; i++ {
		if !a.TxFrame(frame(i)) {
			t.Fatalf("frame %d refused below the bound", i)
		}
	}
	if a.TxFrame(frame(4)) {
		t.Fatal("TxFrame accepted a fifth frame into a 4-slot ring")
	}
	if s := a.Stats(); s.TxRingFull != 1 || s.TxFrames != 4 {
		t.Fatalf("TxRingFull %d TxFrames %d", s.TxRingFull, s.TxFrames)
	}
	a.Kick()
	if !a.TxFrame(frame(4)) {
		t.Fatal("ring still full after Kick")
	}
	a.Kick()
	if got := drain(b); len(got) != 5 {
		t.Fatalf("got %d", len(got))
	}
}

func TestWireBound(t *testing.T) {
	a, b := NewPair(Options{TxSlots: 8, RxSlots: 8})
	for round := 0; round < 3; round++ {
		for i := 0; i < 8; i++ {
			a.TxFrame(frame(uint32(round*8 + i)))
		}
		a.Kick()
	}
	got := drain(b)
	if len(got) != 8 {
		t.Fatalf("the wire held %d frames, bound 8", len(got))
	}
	if seqOf(got[7]) != 7 {
		t.Fatalf("the wire kept the wrong frames: last %d", seqOf(got[7]))
	}
	s := b.Stats()
	if full := counter(t, b, "rx_ring_full"); full != 16 || s.RxDropped != 16 {
		t.Fatalf("rx_ring_full %d RxDropped %d, want 16", full, s.RxDropped)
	}
}

func TestOversizeAndRunt(t *testing.T) {
	a, b := NewPair(Options{MTU: 100})
	if a.TxFrame(make([]byte, 115)) {
		t.Fatal("accepted a frame longer than MTU+14")
	}
	if !a.TxFrame(make([]byte, 114)) || !a.TxFrame(make([]byte, 42)) {
		t.Fatal("refused frames that fit")
	}
	a.Kick()
	if got := drain(b); len(got) != 2 || len(got[1]) != 42 {
		t.Fatalf("got %d frames", len(got))
	}
	if counter(t, a, "tx_oversize") != 1 || counter(t, a, "tx_runt") != 1 {
		t.Fatal("oversize/runt not counted")
	}
}

// TestDeliverBuffersReusedAndPoisoned shows that a frame must not be kept
// past deliver: its buffer is overwritten, and reused for later frames.
func TestDeliverBuffersReusedAndPoisoned(t *testing.T) {
	a, b := NewPair(Options{TxSlots: 2, RxSlots: 2})
	addrs := map[uintptr]bool{}
	var kept []byte
	for i := uint32(0); i < 100; i++ {
		a.TxFrame(frame(i))
		a.Kick()
		n := b.RxFrames(1, func(f []byte) {
			if seqOf(f) != i {
				t.Fatalf("frame %d carried %d", i, seqOf(f))
			}
			addrs[uintptr(unsafe.Pointer(&f[0]))] = true
			kept = f
		})
		if n != 1 {
			t.Fatalf("RxFrames = %d", n)
		}
		for j, c := range kept {
			if c != PoisonByte {
				t.Fatalf("byte %d of a delivered frame is %#x after deliver returned, want poison", j, c)
			}
		}
	}
	// 2 tx + 2*2 wire + 2 spare buffers exist; 100 frames went through them.
	if len(addrs) > 8 {
		t.Fatalf("%d distinct buffers for 100 frames: not reused", len(addrs))
	}
}

// run sends n frames through a pair impaired both ways with seed, in kicks
// of 7, and returns what arrived at B and the counters.
func run(seed uint64, n int, imp Impairment) ([]uint32, [][]byte, [8]uint64) {
	a, b := NewPair(Options{Seed: seed, AtoB: imp, TxSlots: 64, RxSlots: 1024})
	var seqs []uint32
	var frames [][]byte
	for i := 0; i < n; i++ {
		a.TxFrame(frame(uint32(i)))
		if i%7 == 6 || i == n-1 {
			a.Kick()
			b.RxFrames(1024, func(f []byte) {
				seqs = append(seqs, seqOf(f))
				frames = append(frames, append([]byte(nil), f...))
			})
		}
	}
	a.Kick() // releases a frame held back by the last kick
	b.RxFrames(1024, func(f []byte) {
		seqs = append(seqs, seqOf(f))
		frames = append(frames, append([]byte(nil), f...))
	})
	var c [8]uint64
	for i, l := range b.Stats().Layers {
		c[i] = l.Value
	}
	return seqs, frames, c
}

var heavy = Impairment{Loss: 0.1, Corrupt: 0.1, Duplicate: 0.1, Reorder: 0.1}

func TestImpairmentDeterministicPerSeed(t *testing.T) {
	seed := Seed(t)
	s1, f1, c1 := run(seed, 3000, heavy)
	s2, f2, c2 := run(seed, 3000, heavy)
	if c1 != c2 {
		t.Fatalf("same seed, different counters: %v vs %v", c1, c2)
	}
	if len(f1) != len(f2) {
		t.Fatalf("same seed, %d vs %d frames", len(f1), len(f2))
	}
	for i := range f1 {
		if s1[i] != s2[i] || !bytes.Equal(f1[i], f2[i]) {
			t.Fatalf("same seed, frame %d differs", i)
		}
	}
	s3, _, c3 := run(seed+1, 3000, heavy)
	if c1 == c3 && len(s1) == len(s3) {
		same := true
		for i := range s1 {
			same = same && s1[i] == s3[i]
		}
		if same {
			t.Fatal("seeds differ but the runs are identical")
		}
	}
}

func TestImpairmentEffects(t *testing.T) {
	seed := Seed(t)
	const n = 20000
	near := func(name string, got uint64, p float64) {
		t.Helper()
		want := p * n
		if float64(got) < want*0.8 || float64(got) > want*1.2 {
			t.Errorf("%s: %d of %d frames, want about %.0f", name, got, n, want)
		}
	}

	seqs, _, c := run(seed, n, Impairment{Loss: 0.05})
	near("impair_lost", c[0], 0.05)
	if uint64(len(seqs))+c[0] != n {
		t.Errorf("loss: %d arrived + %d lost != %d", len(seqs), c[0], n)
	}

	seqs, frames, c := run(seed, n, Impairment{Corrupt: 0.05})
	near("impair_corrupted", c[2], 0.05)
	var flipped uint64
	for i, f := range frames {
		d := 0
		for j, x := range frame(uint32(i)) {
			d += bits.OnesCount8(x ^ f[j])
		}
		if d > 1 {
			t.Fatalf("frame %d differs in %d bits; corruption flips one", i, d)
		}
		flipped += uint64(d)
	}
	if len(frames) != n {
		t.Errorf("corruption lost frames: %d", len(frames))
	}
	if flipped != c[2] {
		t.Errorf("%d frames seen flipped, %d counted", flipped, c[2])
	}

	seqs, _, c = run(seed, n, Impairment{Duplicate: 0.05})
	near("impair_duplicated", c[3], 0.05)
	if uint64(len(seqs)) != n+c[3] {
		t.Errorf("duplication: %d arrived, %d + %d expected", len(seqs), n, c[3])
	}
	dups := 0
	for i := 1; i < len(seqs); i++ {
		if seqs[i] == seqs[i-1] {
			dups++
		}
	}
	if uint64(dups) != c[3] {
		t.Errorf("%d adjacent duplicates seen, %d counted", dups, c[3])
	}

	seqs, _, c = run(seed, n, Impairment{Reorder: 0.05})
	near("impair_reordered", c[4], 0.05)
	if len(seqs) != n {
		t.Fatalf("reordering lost or added frames: %d", len(seqs))
	}
	seen := make([]bool, n)
	inversions := 0
	for i, s := range seqs {
		if seen[s] {
			t.Fatalf("seq %d twice", s)
		}
		seen[s] = true
		if i > 0 && s < seqs[i-1] {
			inversions++
		}
	}
	// Each held frame lets one pass, except one held at the very end,
	// which the final empty kick releases in place.
	if uint64(inversions) != c[4] && uint64(inversions)+1 != c[4] {
		t.Errorf("%d inversions seen, %d reorders counted", inversions, c[4])
	}
}

func TestReorderedFrameLeavesByNextKick(t *testing.T) {
	a, b := NewPair(Options{AtoB: Impairment{Reorder: 1}})
	a.TxFrame(frame(1))
	a.Kick()
	if got := drain(b); len(got) != 0 {
		t.Fatalf("held frame arrived at once")
	}
	a.Kick() // an empty kick
	if got := drain(b); len(got) != 1 || seqOf(got[0]) != 1 {
		t.Fatalf("held frame not released by the next kick: %d frames", len(got))
	}
	a.TxFrame(frame(2))
	a.TxFrame(frame(3))
	a.Kick()
	got := drain(b)
	if len(got) != 2 || seqOf(got[0]) != 3 || seqOf(got[1]) != 2 {
		t.Fatalf("want 3 then 2, got %d frames", len(got))
	}
}

func TestDelayWithFakeClock(t *testing.T) {
	clk := NewFakeClock(time.Unix(1000, 0))
	a, b := NewPair(Options{Clock: clk, AtoB: Impairment{Delay: 10 * time.Millisecond}})
	a.TxFrame(frame(1))
	a.Kick()
	clk.Advance(5 * time.Millisecond)
	a.TxFrame(frame(2))
	a.Kick()
	if got := drain(b); len(got) != 0 {
		t.Fatal("delayed frame arrived early")
	}
	clk.Advance(5 * time.Millisecond)
	if got := drain(b); len(got) != 1 || seqOf(got[0]) != 1 {
		t.Fatalf("after 10ms: %d frames", len(got))
	}
	// Wait sleeps while frame 2 is pending and wakes once the clock passes.
	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background()) }()
	time.Sleep(20 * time.Millisecond) // real time passes, the fake clock does not
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the frame was due", err)
	default:
	}
	clk.Advance(5 * time.Millisecond)
	waitEnds(t, done, nil, "the clock passed the frame's time")
	if got := drain(b); len(got) != 1 || seqOf(got[0]) != 2 {
		t.Fatalf("frame 2: %d frames", len(got))
	}
	if counter(t, b, "impair_delayed") != 2 {
		t.Fatal("impair_delayed")
	}
	// B->A is not delayed.
	b.TxFrame(frame(9))
	b.Kick()
	if got := drain(a); len(got) != 1 {
		t.Fatal("B->A delayed")
	}
}

func TestDelaySystemClock(t *testing.T) {
	a, b := NewPair(Options{AtoB: Impairment{Delay: 20 * time.Millisecond}})
	start := time.Now()
	a.TxFrame(frame(1))
	a.Kick()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the delay", el)
	}
	if got := drain(b); len(got) != 1 {
		t.Fatalf("%d frames", len(got))
	}
}

// waitEnds waits up to 10 s for the Wait behind done to return after what
// (the event that must end it), and checks its error matches want (nil:
// no error).
func waitEnds(t *testing.T, done <-chan error, want error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("Wait after %s: %v, want %v", what, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not end Wait", what)
	}
}

func TestWait(t *testing.T) {
	a, b := NewPair(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	err := b.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle Wait: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background()) }()
	a.TxFrame(frame(1))
	a.Kick()
	waitEnds(t, done, nil, "the peer's Kick")
	go func() { done <- b.Wait(context.Background()) }()
	if err := <-done; err != nil { // a frame is pending: at once
		t.Fatal(err)
	}
	drain(b)
	go func() { done <- b.Wait(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	waitEnds(t, done, net.ErrClosed, "Close")
	if b.TxFrame(frame(1)) || b.Kick() == nil || b.RxFrames(1, func([]byte) {}) != 0 {
		t.Fatal("closed port still works")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !a.TxFrame(frame(2)) || a.Kick() != nil {
		t.Fatal("the peer of a closed port stopped")
	}
}

// TestInterrupt: Interrupt ends a Wait in progress, or the next one when
// none is; one Interrupt ends one Wait; a Wait that returns because a frame
// is there takes a pending Interrupt with it; after Close, Interrupt is
// harmless; and neither allocates.
func TestInterrupt(t *testing.T) {
	a, b := NewPair(Options{})
	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	b.Interrupt()
	waitEnds(t, done, nil, "Interrupt")
	// Before the Wait: it returns at once; twice counts once.
	b.Interrupt()
	b.Interrupt()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after Interrupt: %v", err)
	}
	idle := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: Wait = %v, want DeadlineExceeded", what, err)
		}
	}
	idle("the Interrupt was used up")
	// A frame there: Wait returns for it and takes the Interrupt along.
	a.TxFrame(frame(1))
	a.Kick()
	b.Interrupt()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	drain(b)
	idle("a frame's Wait took the Interrupt")
	if n := testing.AllocsPerRun(100, func() {
		b.Interrupt()
		b.Wait(context.Background())
	}); n != 0 {
		t.Errorf("%.1f allocations per Interrupt and Wait", n)
	}
	b.Close()
	b.Interrupt()
	if err := b.Wait(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

// TestConcurrentSides drives each port's TX and RX sides from separate
// goroutines (four in all), as frameio.FrameIO allows; run with -race.
func TestConcurrentSides(t *testing.T) {
	a, b := NewPair(Options{TxSlots: 16, RxSlots: 64})
	const n = 5000
	var wg sync.WaitGroup
	send := func(p *Port) {
		defer wg.Done()
		for i := uint32(0); i < n; {
			if p.TxFrame(frame(i)) {
				i++
			} else {
				p.Kick()
				time.Sleep(10 * time.Microsecond)
			}
		}
		p.Kick()
	}
	recv := func(p *Port, got *[]uint32, dropped func() uint64) {
		defer wg.Done()
		deadline := time.Now().Add(60 * time.Second)
		for uint64(len(*got))+dropped() < n && time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			p.Wait(ctx)
			cancel()
			p.RxFrames(32, func(f []byte) { *got = append(*got, seqOf(f)) })
		}
	}
	var ga, gb []uint32
	wg.Add(4)
	go send(a)
	go send(b)
	go recv(b, &gb, func() uint64 { return b.Stats().RxDropped })
	go recv(a, &ga, func() uint64 { return a.Stats().RxDropped })
	wg.Wait()
	for _, g := range [][]uint32{ga, gb} {
		for i := 1; i < len(g); i++ {
			if g[i] <= g[i-1] {
				t.Fatalf("order broken at %d: %d after %d", i, g[i], g[i-1])
			}
		}
	}
	if uint64(len(gb))+b.Stats().RxDropped != n || uint64(len(ga))+a.Stats().RxDropped != n {
		t.Fatalf("A got %d (+%d dropped), B got %d (+%d dropped), want %d each",
			len(ga), a.Stats().RxDropped, len(gb), b.Stats().RxDropped, n)
	}
}

func TestZeroAllocs(t *testing.T) {
	a, b := NewPair(Options{Seed: 1, AtoB: heavy})
	f := frame(1)
	deliver := func([]byte) {}
	allocs := testing.AllocsPerRun(1000, func() {
		a.TxFrame(f)
		a.TxFrame(f)
		a.Kick()
		b.RxFrames(8, deliver)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round", allocs)
	}
}

type fakeTB struct {
	testing.TB
	failed   bool
	logs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()                 {}
func (f *fakeTB) Logf(s string, a ...any) { f.logs = append(f.logs, s) }
func (f *fakeTB) Cleanup(fn func())       { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Failed() bool            { return f.failed }
func (f *fakeTB) Name() string            { return "TestX" }

func TestSeedFromEnv(t *testing.T) {
	t.Setenv(SeedEnv, "12345")
	f := &fakeTB{}
	if s := Seed(f); s != 12345 {
		t.Fatalf("seed %d", s)
	}
	f.failed = true
	for _, c := range f.cleanups {
		c()
	}
	if len(f.logs) != 2 {
		t.Fatalf("want the seed logged at start and on failure, got %q", f.logs)
	}
	t.Setenv(SeedEnv, "")
	if a, b := Seed(&fakeTB{}), Seed(&fakeTB{}); a == 0 || b == 0 {
		t.Fatal("clock seed is zero")
	}
}

// TestPoisonEveryLength: poison overwrites every byte of a buffer of any
// length, and nothing past it.
func TestPoisonEveryLength(t *testing.T) {
	buf := make([]byte, 301)
	for n := 0; n < len(buf); n++ {
		for i := range buf {
			buf[i] = byte(i) | 1 // never PoisonByte (0xDB is odd: avoid it)
			if buf[i] == PoisonByte {
				buf[i] = 1
			}
		}
		poison(buf[:n])
		for i, c := range buf {
			if want := i < n; (c == PoisonByte) != want {
				t.Fatalf("length %d: byte %d is %#x", n, i, c)
			}
		}
	}
}

// TestRateWithFakeClock: with Impairment.Rate a frame leaves once those
// before it took their length over the rate, then waits its Delay; a
// wire that was idle sends at once.
func TestRateWithFakeClock(t *testing.T) {
	clk := NewFakeClock(time.Unix(1000, 0))
	f := frame(1)
	per := time.Duration(float64(len(f)) / 1e6 * 1e9) // at 1 MB/s
	a, b := NewPair(Options{Clock: clk, AtoB: Impairment{Rate: 1e6, Delay: time.Millisecond}})
	for i := uint32(1); i <= 3; i++ {
		a.TxFrame(frame(i))
	}
	a.Kick()
	clk.Advance(time.Millisecond + per - 1)
	if got := drain(b); len(got) != 0 {
		t.Fatalf("%d frames before the first had left and crossed", len(got))
	}
	clk.Advance(1)
	if got := drain(b); len(got) != 1 || seqOf(got[0]) != 1 {
		t.Fatalf("after one frame's time and the delay: %d frames", len(got))
	}
	clk.Advance(2 * per)
	if got := drain(b); len(got) != 2 || seqOf(got[1]) != 3 {
		t.Fatalf("after three frames' time: %d frames", len(got))
	}
	clk.Advance(time.Second) // the wire is idle again
	a.TxFrame(frame(4))
	a.Kick()
	clk.Advance(time.Millisecond + per)
	if got := drain(b); len(got) != 1 || seqOf(got[0]) != 4 {
		t.Fatalf("a frame on an idle wire: %d frames", len(got))
	}
}

// TestRxSlots: a port tells how many frames the wire into it holds, as an
// AF_XDP socket tells its receive ring, so that an engine over it can
// bound the windows it opens by it.
func TestRxSlots(t *testing.T) {
	a, b := NewPair(Options{TxSlots: 64, RxSlots: 1024})
	defer a.Close()
	defer b.Close()
	if a.RxSlots() != 1024 || b.RxSlots() != 1024 {
		t.Fatalf("RxSlots: A %d, B %d, want 1024", a.RxSlots(), b.RxSlots())
	}
	c, d := NewPair(Options{})
	defer c.Close()
	defer d.Close()
	if c.RxSlots() != DefaultSlots {
		t.Fatalf("RxSlots with the default: %d, want %d", c.RxSlots(), DefaultSlots)
	}
}
