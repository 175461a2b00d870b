package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// ipv4Frame builds an Ethernet frame carrying an IPv4 packet of total
// length 20+payload (no valid checksums: the pipe does not look at them);
// the payload starts with id.
func ipv4Frame(id uint32, payload int) []byte {
	f := make([]byte, etherHdr+20+payload)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], etherIPv4)
	f[14] = 0x45
	binary.BigEndian.PutUint16(f[16:], uint16(20+payload))
	f[23] = 17
	if payload >= 4 {
		binary.BigEndian.PutUint32(f[34:], id)
	}
	return f
}

func arpFrame() []byte {
	f := make([]byte, 60)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	return f
}

type testPipe struct {
	t *testing.T
	p *pipe
	c *counters
}

func newTestPipe(t *testing.T, im Impairment, limit int) *testPipe {
	c := &counters{}
	return &testPipe{t: t, p: newPipe(NewDecider(1, AtoB, im), limit, 2048, c), c: c}
}

// in pushes frame at now with impairment im for this frame only.
func (tp *testPipe) in(frame []byte, now int64, im Impairment) {
	tp.t.Helper()
	tp.p.dec.SetImpairment(im)
	s := tp.p.take()
	if s == nil {
		tp.t.Fatal("no free buffer")
	}
	s.n = copy(s.buf, frame)
	tp.p.push(s, now)
}

type out struct {
	frame []byte
	at    int64
}

// out takes every frame due at now off the pipe, as the forwarder would
// send them.
func (tp *testPipe) out(now int64) []out {
	tp.p.expire(now)
	var res []out
	buf := make([]*slot, 0, 4)
	for {
		due := tp.p.due(now, buf[:0])
		if len(due) == 0 {
			return res
		}
		for _, s := range due {
			res = append(res, out{frame: bytes.Clone(s.buf[:s.n]), at: s.at})
		}
		tp.p.pop(len(due), true)
	}
}

func (tp *testPipe) check() Counters {
	tp.t.Helper()
	tp.p.publish()
	c := tp.c.snapshot()
	if !c.Balanced() {
		tp.t.Errorf("counters do not balance: %v", c)
	}
	if free, q := tp.p.freeCount(), tp.p.queued(); free+q != len(tp.p.slots) {
		tp.t.Errorf("%d buffers free and %d frames queued, of %d buffers", free, q, len(tp.p.slots))
	}
	return c
}

func ids(o []out) []uint32 {
	var r []uint32
	for _, f := range o {
		r = append(r, binary.BigEndian.Uint32(f.frame[34:]))
	}
	return r
}

func eq(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPipePerfect(t *testing.T) {
	tp := newTestPipe(t, Impairment{}, 16)
	for i := range 10 {
		tp.in(ipv4Frame(uint32(i), 100), 0, Impairment{})
	}
	o := tp.out(0)
	if got := ids(o); !eq(got, []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("order %v", got)
	}
	for i, f := range o {
		if !bytes.Equal(f.frame, ipv4Frame(uint32(i), 100)) {
			t.Errorf("frame %d changed", i)
		}
	}
	if c := tp.check(); c.Received != 10 || c.Forwarded != 10 || c.Delayed != 0 {
		t.Errorf("%v", c)
	}
	if _, ok := tp.p.next(); ok {
		t.Error("an empty pipe has something to do")
	}
}

func TestPipeDelay(t *testing.T) {
	im := Impairment{Delay: time.Millisecond}
	tp := newTestPipe(t, im, 16)
	for i := range 5 {
		tp.in(ipv4Frame(uint32(i), 10), int64(i)*100, im)
	}
	if next, ok := tp.p.next(); !ok || next != ms {
		t.Errorf("next() = %d, %v; want %d", next, ok, ms)
	}
	if o := tp.out(ms - 1); len(o) != 0 {
		t.Fatalf("%d frames out before their delay", len(o))
	}
	if o := tp.out(ms + 250); !eq(ids(o), []uint32{0, 1, 2}) {
		t.Fatalf("at 1.25 ms: %v, want the first three", ids(o))
	}
	if o := tp.out(2 * ms); !eq(ids(o), []uint32{3, 4}) {
		t.Fatalf("at 2 ms: %v", ids(o))
	}
	if c := tp.check(); c.Delayed != 5 || c.Forwarded != 5 {
		t.Errorf("%v", c)
	}
}

// Jitter never reorders: release times do not decrease, and none is before
// its frame's arrival.
func TestPipeJitterFIFO(t *testing.T) {
	im := Impairment{Delay: time.Millisecond, Jitter: time.Millisecond}
	tp := newTestPipe(t, im, 4096)
	const n = 3000
	for i := range n {
		tp.in(ipv4Frame(uint32(i), 10), int64(i)*10_000, im)
	}
	o := tp.out(n*10_000 + 3*ms)
	if len(o) != n {
		t.Fatalf("%d frames out of %d", len(o), n)
	}
	var spread bool
	for i, f := range o {
		if id := binary.BigEndian.Uint32(f.frame[34:]); id != uint32(i) {
			t.Fatalf("position %d: frame %d", i, id)
		}
		arr := int64(i) * 10_000
		if f.at < arr || (i > 0 && f.at < o[i-1].at) {
			t.Fatalf("frame %d arrived %d, released %d after %d", i, arr, f.at, o[max(i-1, 0)].at)
		}
		if f.at-arr > 19*ms/10 {
			spread = true
		}
	}
	if !spread {
		t.Error("no frame got more than 1.9 ms: jitter not applied")
	}
	tp.check()
}

func TestPipeReorder(t *testing.T) {
	tp := newTestPipe(t, Impairment{}, 16)
	tp.in(ipv4Frame(0, 10), 0, Impairment{})
	tp.in(ipv4Frame(1, 10), 0, Impairment{Reorder: 1})
	tp.in(ipv4Frame(2, 10), 0, Impairment{Loss: 1}) // a lost frame overtakes nothing
	tp.in(ipv4Frame(3, 10), 0, Impairment{Reorder: 1})
	tp.in(ipv4Frame(4, 10), 0, Impairment{})
	if o := tp.out(0); !eq(ids(o), []uint32{0, 3, 1, 4}) {
		t.Fatalf("order %v, want 0 3 1 4", ids(o))
	}
	if c := tp.check(); c.Reordered != 1 || c.Dropped != 1 {
		t.Errorf("%v", c)
	}
}

// A held frame that nothing overtakes goes out alone HoldMax after its
// release time, and does not count as reordered.
func TestPipeReorderExpires(t *testing.T) {
	im := Impairment{Delay: time.Millisecond, Reorder: 1}
	tp := newTestPipe(t, im, 16)
	tp.in(ipv4Frame(7, 10), 0, im)
	hold := ms + int64(HoldMax)
	if next, ok := tp.p.next(); !ok || next != hold {
		t.Fatalf("next() = %d, %v; want %d", next, ok, hold)
	}
	if o := tp.out(hold - 1); len(o) != 0 {
		t.Fatalf("held frame out early: %v", ids(o))
	}
	if c := tp.check(); c.Queued != 1 {
		t.Errorf("held frame not in Queued: %v", c)
	}
	if o := tp.out(hold); !eq(ids(o), []uint32{7}) {
		t.Fatalf("at %d: %v", hold, ids(o))
	}
	if c := tp.check(); c.Reordered != 0 || c.Forwarded != 1 || c.Queued != 0 {
		t.Errorf("%v", c)
	}
}

// A frame both held back and duplicated: the copy goes out in place, the
// original after the next frame.
func TestPipeReorderDup(t *testing.T) {
	tp := newTestPipe(t, Impairment{}, 16)
	tp.in(ipv4Frame(1, 10), 0, Impairment{Reorder: 1, Dup: 1})
	tp.in(ipv4Frame(2, 10), 0, Impairment{})
	if o := tp.out(0); !eq(ids(o), []uint32{1, 2, 1}) {
		t.Fatalf("order %v, want 1 2 1", ids(o))
	}
	if c := tp.check(); c.Reordered != 1 || c.Duplicated != 1 || c.Forwarded != 3 {
		t.Errorf("%v", c)
	}
}

func TestPipeDup(t *testing.T) {
	im := Impairment{Dup: 1}
	tp := newTestPipe(t, im, 16)
	for i := range 4 {
		tp.in(ipv4Frame(uint32(i), 50), 0, im)
	}
	o := tp.out(0)
	if !eq(ids(o), []uint32{0, 0, 1, 1, 2, 2, 3, 3}) {
		t.Fatalf("order %v", ids(o))
	}
	for i := 0; i < len(o); i += 2 {
		if !bytes.Equal(o[i].frame, o[i+1].frame) {
			t.Errorf("copy %d differs", i/2)
		}
	}
	if c := tp.check(); c.Duplicated != 4 || c.Forwarded != 8 {
		t.Errorf("%v", c)
	}
}

// With every buffer in use, a copy cannot be made: counted as overflow.
func TestPipeDupOverflow(t *testing.T) {
	im := Impairment{Dup: 1, Delay: time.Millisecond}
	tp := newTestPipe(t, im, 3)
	tp.in(ipv4Frame(0, 10), 0, im) // frame and copy: 2 buffers
	tp.in(ipv4Frame(1, 10), 0, im) // frame: the last buffer, no room for the copy
	if c := tp.check(); c.Overflow != 1 || c.Duplicated != 2 || c.Queued != 3 {
		t.Errorf("%v", c)
	}
	if o := tp.out(ms); !eq(ids(o), []uint32{0, 0, 1}) {
		t.Errorf("order %v", ids(o))
	}
	tp.check()
}

func TestPipeLoss(t *testing.T) {
	im := Impairment{Loss: 1}
	tp := newTestPipe(t, im, 4)
	for i := range 100 {
		tp.in(ipv4Frame(uint32(i), 10), 0, im)
	}
	if o := tp.out(0); len(o) != 0 {
		t.Fatalf("%d frames through a wire losing all", len(o))
	}
	if c := tp.check(); c.Dropped != 100 || c.Received != 100 {
		t.Errorf("%v", c)
	}
}

func TestPipeRate(t *testing.T) {
	// 976 bytes + 24 on the wire = 8000 bits: 1 ms each at 8 Mbit/s.
	im := Impairment{Rate: 8_000_000}
	tp := newTestPipe(t, im, 16)
	for i := range 3 {
		tp.in(ipv4Frame(uint32(i), 976-34), 0, im)
	}
	var at []int64
	for _, f := range tp.out(10 * ms) {
		at = append(at, f.at)
	}
	if len(at) != 3 || at[0] != ms || at[1] != 2*ms || at[2] != 3*ms {
		t.Fatalf("release times %v, want 1, 2, 3 ms", at)
	}
	// The link was idle since 3 ms: a frame at 5 ms takes 1 ms.
	tp.in(ipv4Frame(3, 976-34), 5*ms, im)
	if o := tp.out(10 * ms); len(o) != 1 || o[0].at != 6*ms {
		t.Fatalf("after idle: %+v", o)
	}
	if c := tp.check(); c.Delayed != 4 {
		t.Errorf("%v", c)
	}
}

func TestPipeCorrupt(t *testing.T) {
	im := Impairment{Corrupt: 1}
	tp := newTestPipe(t, im, 64)
	for i := range 40 {
		tp.in(ipv4Frame(uint32(i), 30), 0, im)
	}
	tp.in(arpFrame(), 0, im)
	o := tp.out(0)
	if len(o) != 41 {
		t.Fatalf("%d frames", len(o))
	}
	for i, f := range o[:40] {
		orig := ipv4Frame(uint32(i), 30)
		var diff []int
		for j := range orig {
			if orig[j] != f.frame[j] {
				diff = append(diff, j)
			}
		}
		if len(diff) != 1 || diff[0] < etherHdr || diff[0] >= len(orig) {
			t.Errorf("frame %d: bytes %v differ, want one after the Ethernet header", i, diff)
		}
	}
	if !bytes.Equal(o[40].frame, arpFrame()) {
		t.Error("an ARP frame was corrupted")
	}
	if c := tp.check(); c.Corrupted != 40 {
		t.Errorf("%v", c)
	}
}

// A frame too large for the buffers still takes its decision, so the
// frames after it get the decisions a run without it would give them at
// the same positions.
func TestPipeDiscardKeepsSequence(t *testing.T) {
	im := Impairment{Loss: 0.5}
	ref := NewDecider(1, AtoB, im)
	tp := newTestPipe(t, im, 8)
	ref.Next()
	tp.p.discard(tp.p.take())
	for i := range 200 {
		want := ref.Next()
		before := tp.c.dropped.Load()
		tp.in(ipv4Frame(uint32(i), 10), 0, im)
		if dropped := tp.c.dropped.Load() > before; dropped != want.Drop {
			t.Fatalf("frame %d: dropped %v, decider says %v", i, dropped, want.Drop)
		}
		tp.out(0)
	}
	if c := tp.check(); c.Truncated != 1 || c.Received != 201 {
		t.Errorf("%v", c)
	}
}

// A long run with everything on: all frames accounted for, in release
// order, none early.
func TestPipeEverything(t *testing.T) {
	im := everything
	im.Rate = 100_000_000
	tp := newTestPipe(t, im, 64)
	var now int64
	sent := map[uint32]bool{}
	var got []out
	for i := range 20000 {
		if tp.p.freeCount() > 0 {
			tp.in(ipv4Frame(uint32(i), 100), now, im)
			sent[uint32(i)] = true
		}
		now += 20_000
		got = append(got, tp.out(now)...)
		tp.check()
	}
	got = append(got, tp.out(now+time.Second.Nanoseconds())...)
	c := tp.check()
	if c.Queued != 0 {
		t.Errorf("frames left: %v", c)
	}
	for i, f := range got {
		if i > 0 && f.at < got[i-1].at {
			t.Fatalf("release times go back at %d", i)
		}
	}
	if c.Dropped == 0 || c.Duplicated == 0 || c.Reordered == 0 || c.Corrupted == 0 || c.Delayed == 0 {
		t.Errorf("something never happened: %v", c)
	}
	t.Logf("%v", c)
}
