package wire

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Counters say what the wire did to the frames of one direction. Every
// frame read is accounted for:
//
//	Received + Duplicated = Forwarded + Dropped + Truncated + Overflow + SendErrors + Queued
type Counters struct {
	// Received counts frames read from the ingress end.
	Received uint64
	// Forwarded counts frames written to the egress end, copies included.
	Forwarded uint64
	// Dropped counts frames dropped by the seeded loss (Impairment.Loss).
	Dropped uint64
	// Duplicated counts copies decided by Impairment.Dup.
	Duplicated uint64
	// Reordered counts frames that a later frame overtook (Impairment.Reorder).
	Reordered uint64
	// Corrupted counts frames with one byte flipped (Impairment.Corrupt).
	Corrupted uint64
	// Delayed counts frames (copies included) that left later than they
	// arrived: Delay, Jitter, Rate, or waiting behind such a frame.
	Delayed uint64
	// Overflow counts copies that could not be made because every buffer
	// of the direction's queue (Options.Limit) was in use.
	Overflow uint64
	// Truncated counts frames larger than the wire's buffers (the MTU plus
	// Ethernet header and two VLAN tags), dropped.
	Truncated uint64
	// SendErrors counts frames the egress end refused (link down, no
	// buffer space in the kernel), dropped.
	SendErrors uint64
	// Queued is the number of frames in the wire now (waiting for their
	// release time or held for reordering).
	Queued uint64
	// Partial counts frames that arrived with a partial checksum
	// (TP_STATUS_CSUMNOTREADY): the sender had TX checksum offload on.
	// They are forwarded unchanged and the peer will likely drop them.
	Partial uint64
	// SocketDrops counts frames the kernel dropped in front of the wire,
	// because the ingress socket's buffer was full (PACKET_STATISTICS).
	// They never reached the wire and are not in Received.
	SocketDrops uint64
}

// Balanced reports whether the counters account for every frame received
// (see Counters). It holds at any moment only up to the frames the
// forwarder is handling at that instant; it holds exactly after Close.
func (c Counters) Balanced() bool {
	return c.Received+c.Duplicated ==
		c.Forwarded+c.Dropped+c.Truncated+c.Overflow+c.SendErrors+c.Queued
}

// String implements fmt.Stringer.
func (c Counters) String() string {
	return fmt.Sprintf("received %d forwarded %d dropped %d duplicated %d reordered %d corrupted %d delayed %d overflow %d truncated %d send-errors %d queued %d partial-csum %d socket-drops %d",
		c.Received, c.Forwarded, c.Dropped, c.Duplicated, c.Reordered, c.Corrupted, c.Delayed,
		c.Overflow, c.Truncated, c.SendErrors, c.Queued, c.Partial, c.SocketDrops)
}

// counters is the live form of Counters: written by one forwarder, read by
// anyone.
type counters struct {
	received, forwarded, dropped, duplicated, reordered, corrupted, delayed,
	overflow, truncated, sendErrors, queued, partial, socketDrops atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Received: c.received.Load(), Forwarded: c.forwarded.Load(), Dropped: c.dropped.Load(),
		Duplicated: c.duplicated.Load(), Reordered: c.reordered.Load(), Corrupted: c.corrupted.Load(),
		Delayed: c.delayed.Load(), Overflow: c.overflow.Load(), Truncated: c.truncated.Load(),
		SendErrors: c.sendErrors.Load(), Queued: c.queued.Load(), Partial: c.partial.Load(),
		SocketDrops: c.socketDrops.Load(),
	}
}

// slot is one frame buffer of a direction's pool. buf has the pool's
// buffer size; the frame is buf[:n].
type slot struct {
	buf []byte
	n   int
	arr int64 // arrival, ns on the wire's clock
	at  int64 // release time, ns on the wire's clock
}

// wireOverhead is what an Ethernet link carries per frame beyond the frame
// itself: FCS (4), preamble and start delimiter (8), inter-frame gap (12).
const wireOverhead = 24

// pipe is one direction of the wire without its sockets: a fixed pool of
// frame buffers, the decider, a first-in first-out timed queue and the frame
// held for reordering. Times are nanoseconds on any monotonic clock the
// caller chooses, which makes it testable with a fake one. Not safe for
// concurrent use (except its counters).
type pipe struct {
	dec   *Decider
	slots []slot
	free  []*slot
	ring  []*slot // the queue, ordered by release time
	head  int
	count int

	held      *slot
	holdUntil int64
	lastAt    int64 // release time of the last frame queued
	linkFree  int64 // when the rate-limited link is free again

	c     *counters
	trace tcpTrace // the last TCP segments taken in
}

// newPipe makes a pipe with limit buffers of bufSize bytes each.
func newPipe(dec *Decider, limit, bufSize int, c *counters) *pipe {
	p := &pipe{dec: dec, slots: make([]slot, limit), free: make([]*slot, 0, limit),
		ring: make([]*slot, limit), c: c}
	mem := make([]byte, limit*bufSize)
	for i := range p.slots {
		p.slots[i].buf = mem[i*bufSize : (i+1)*bufSize : (i+1)*bufSize]
		p.free = append(p.free, &p.slots[i])
	}
	return p
}

// freeCount is the number of buffers not in use.
func (p *pipe) freeCount() int { return len(p.free) }

// take returns a free buffer, or nil when all are in use.
func (p *pipe) take() *slot {
	if len(p.free) == 0 {
		return nil
	}
	s := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return s
}

// give returns a buffer to the pool.
func (p *pipe) give(s *slot) {
	s.n = 0
	p.free = append(p.free, s)
}

// queued is the number of frames in the wire: in the queue or held.
func (p *pipe) queued() int {
	if p.held != nil {
		return p.count + 1
	}
	return p.count
}

// discard accounts for a frame that arrived too large for the buffers. It
// draws a decision all the same, so that the decisions of the frames after
// it do not depend on the buffer size.
func (p *pipe) discard(s *slot) {
	p.dec.Next()
	p.c.received.Add(1)
	p.c.truncated.Add(1)
	p.give(s)
}

// push takes in the frame s.buf[:s.n], which arrived at now, and applies the
// next decision: drop it, or queue it (corrupted, duplicated, held back for
// reordering, delayed as decided).
func (p *pipe) push(s *slot, now int64) {
	d := p.dec.Next()
	p.c.received.Add(1)
	p.trace.note(s.buf[:s.n], now, d)
	if d.Drop {
		p.c.dropped.Add(1)
		p.give(s)
		return
	}
	if d.Corrupt && corrupt(s.buf[:s.n], d.CorruptAt, d.CorruptMask) {
		p.c.corrupted.Add(1)
	}
	im := &p.dec.im
	at := now + int64(im.Delay+d.Jitter)
	if at < now {
		at = now
	}
	s.arr, s.at = now, at
	var dup *slot
	if d.Dup {
		p.c.duplicated.Add(1)
		if dup = p.take(); dup == nil {
			p.c.overflow.Add(1)
		} else {
			dup.n = copy(dup.buf, s.buf[:s.n])
			dup.arr, dup.at = now, at
		}
	}
	if d.Reorder && p.held == nil {
		p.held, p.holdUntil = s, at+int64(HoldMax)
		if dup != nil {
			p.enqueue(dup)
		}
		return
	}
	p.enqueue(s)
	if dup != nil {
		p.enqueue(dup)
	}
	if p.held != nil {
		h := p.held
		p.held = nil
		p.enqueue(h)
		p.c.reordered.Add(1)
	}
}

// expire queues the held frame alone once it has waited HoldMax past its
// release time without being overtaken.
func (p *pipe) expire(now int64) {
	if p.held != nil && now >= p.holdUntil {
		h := p.held
		p.held = nil
		p.enqueue(h)
	}
}

// enqueue appends s to the queue: no earlier than the frame before it, and
// after the rate-limited link has carried the frames before it.
func (p *pipe) enqueue(s *slot) {
	if s.at < p.lastAt {
		s.at = p.lastAt
	}
	if r := p.dec.im.Rate; r > 0 {
		start := max(s.at, p.linkFree)
		bits := uint64(s.n+wireOverhead) * 8
		s.at = start + int64(bits*uint64(time.Second)/r)
		p.linkFree = s.at
	}
	if s.at > s.arr {
		p.c.delayed.Add(1)
	}
	p.lastAt = s.at
	p.ring[(p.head+p.count)%len(p.ring)] = s
	p.count++
}

// due appends to out the frames at the head of the queue whose release
// time has come, up to cap(out), without taking them off the queue.
func (p *pipe) due(now int64, out []*slot) []*slot {
	for i := 0; i < p.count && len(out) < cap(out); i++ {
		s := p.ring[(p.head+i)%len(p.ring)]
		if s.at > now {
			break
		}
		out = append(out, s)
	}
	return out
}

// pop takes n frames off the head of the queue and returns their buffers to
// the pool. sent says whether they were forwarded or refused by the egress.
func (p *pipe) pop(n int, sent bool) {
	for ; n > 0 && p.count > 0; n-- {
		s := p.ring[p.head]
		p.ring[p.head] = nil
		p.head = (p.head + 1) % len(p.ring)
		p.count--
		if sent {
			p.c.forwarded.Add(1)
		} else {
			p.c.sendErrors.Add(1)
		}
		p.give(s)
	}
}

// next returns the earliest time at which the pipe has something to do:
// the head frame's release or the held frame's expiry; ok is false when it
// holds no frame.
func (p *pipe) next() (t int64, ok bool) {
	if p.count > 0 {
		t, ok = p.ring[p.head].at, true
	}
	if p.held != nil && (!ok || p.holdUntil < t) {
		t, ok = p.holdUntil, true
	}
	return t, ok
}

// publish stores the number of frames in the wire in the Queued counter.
func (p *pipe) publish() { p.c.queued.Store(uint64(p.queued())) }
