package native

import (
	"bytes"
	"encoding/binary"
)

// IPv6 reassembly (RFC 8200 §4.5): a few slots, each the fragments of one
// packet (source, destination, identification), written into a buffer at
// their offsets with the ranges received. Complete, the packet is rebuilt
// without its Fragment header (the unfragmentable part of the first
// fragment, then the fragmentable part) and handed back to be parsed
// again. Overlapping fragments abandon the packet and every later
// fragment of it (RFC 5722 §4); exact duplicates are dropped alone (RFC
// 8200 §4.5 allows it). A first fragment without the whole header chain
// is dropped (RFC 7112 §5). Atomic fragments never come here (RFC 6946:
// parseIPv6 walks past them).
const (
	reasm6Slots   = 4
	reasm6Ranges  = 16
	reasm6Timeout = int64(60e9) // RFC 8200 §4.5: 60 seconds
)

// reasm6Result says what became of a fragment; every result but
// reasm6Queued and reasm6Done is a drop with its own counter name.
type reasm6Result int

const (
	reasm6Queued        reasm6Result = iota // kept, the packet is not whole yet
	reasm6Done                              // the packet is whole: returned
	reasm6BadLength                         // M set and a length not a multiple of 8, or no data (§4.5: Parameter Problem code 0)
	reasm6TooBig                            // offset + length beyond 65535 (§4.5: Parameter Problem code 0)
	reasm6NoSlot                            // every slot is in use
	reasm6Overlap                           // overlapped a fragment received: the packet is abandoned (RFC 5722)
	reasm6Abandoned                         // a fragment of a packet abandoned for overlap, before its timeout
	reasm6Duplicate                         // an exact copy of a fragment received
	reasm6TooManyRanges                     // more holes than a slot tracks
	reasm6BadTotal                          // the last fragment disagrees with data received
	reasm6ChainCut                          // a first fragment without the whole header chain (RFC 7112 §5)
	nReasm6Results
)

var reasm6Names = [nReasm6Results]string{
	reasm6Queued:        "ip6_fragments_queued",
	reasm6Done:          "ip6_reassembled",
	reasm6BadLength:     "ip6_fragment_bad_length",
	reasm6TooBig:        "ip6_fragment_too_big",
	reasm6NoSlot:        "ip6_reassembly_no_slot",
	reasm6Overlap:       "ip6_fragment_overlap",
	reasm6Abandoned:     "ip6_fragment_abandoned",
	reasm6Duplicate:     "ip6_fragment_duplicate",
	reasm6TooManyRanges: "ip6_fragment_too_many_holes",
	reasm6BadTotal:      "ip6_fragment_bad_total",
	reasm6ChainCut:      "ip6_fragment_chain_cut",
}

func (r reasm6Result) String() string {
	if r >= 0 && r < nReasm6Results {
		return reasm6Names[r]
	}
	return "ip6_fragment_unknown_result"
}

type reasm6Slot struct {
	used     bool
	dead     bool // abandoned for overlap: later fragments are dropped until deadline
	src, dst ip6Addr
	id       uint32
	unfrag   int // bytes of the first fragment's unfragmentable part (fixed header included), 0 until it came
	total    int // fragmentable bytes, -1 until the last fragment came
	ranges   [reasm6Ranges]sackBlock
	n        int
	deadline int64
	hdr      []byte // the unfragmentable part of the first fragment, up to ip6Len+maxExt6Bytes
	buf      []byte // the fragmentable part, maxPayload6 bytes, allocated on first use
	out      []byte // the rebuilt packet, allocated on first use
}

// reasm6 is the IPv6 reassembly table. The zero value is ready; its
// buffers are allocated on first use of each slot and kept.
type reasm6 struct {
	slots    [reasm6Slots]reasm6Slot
	used     int
	timeouts uint64 // slots freed by expire: the counter ip6_reassembly_timeout
}

// input takes fragment p, parsed into h (h.frag set), at time now. When
// it completes a packet it returns reasm6Done and the rebuilt packet,
// valid until the next input; parse it again with walk6(…,
// walkReassembled).
func (t *reasm6) input(now int64, p []byte, h *ip6Hdr) ([]byte, reasm6Result) {
	data := p[h.off:h.end]
	end := h.fragOff + len(data)
	if len(data) == 0 || h.fragMore && len(data)%8 != 0 {
		return nil, reasm6BadLength
	}
	if end > maxPayload6 {
		return nil, reasm6TooBig
	}
	if h.fragOff == 0 && !chainWhole(p[h.off:h.end], h.proto) {
		return nil, reasm6ChainCut
	}
	r := t.slot(now, h)
	if r == nil {
		return nil, reasm6NoSlot
	}
	if r.dead {
		return nil, reasm6Abandoned
	}
	if r.total >= 0 && (end > r.total || !h.fragMore && end != r.total) ||
		!h.fragMore && r.n > 0 && int(r.ranges[r.n-1].end) > end {
		t.abandon(r)
		return nil, reasm6BadTotal
	}
	blk := sackBlock{uint32(h.fragOff), uint32(end)}
	for i := 0; i < r.n; i++ {
		b := r.ranges[i]
		if b.end <= blk.start || blk.end <= b.start {
			continue
		}
		if b.start == blk.start && b.end == blk.end && bytes.Equal(r.buf[b.start:b.end], data) &&
			(h.fragOff != 0 || r.unfrag == h.fragAt) {
			return nil, reasm6Duplicate
		}
		t.abandon(r)
		return nil, reasm6Overlap
	}
	if !r.insert(blk) {
		t.abandon(r)
		return nil, reasm6TooManyRanges
	}
	copy(r.buf[h.fragOff:], data)
	if !h.fragMore {
		r.total = end
	}
	if h.fragOff == 0 {
		u := unfragPart(p, h)
		r.unfrag = copy(r.hdr, u)
		r.hdr[h.fragPrev] = h.proto // the header that named the Fragment header now names what it named
	}
	if r.unfrag == 0 || r.total < 0 || r.n != 1 || r.ranges[0].start != 0 || int(r.ranges[0].end) != r.total {
		return nil, reasm6Queued
	}
	if r.unfrag-ip6Len+r.total > maxPayload6 {
		t.abandon(r)
		return nil, reasm6TooBig
	}
	if r.out == nil {
		r.out = make([]byte, ip6Len+maxExt6Bytes+maxPayload6)
	}
	out := r.out[:r.unfrag+r.total]
	copy(out, r.hdr[:r.unfrag])
	copy(out[r.unfrag:], r.buf[:r.total])
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-ip6Len))
	t.free(r)
	return out, reasm6Done
}

// insert adds b, which overlaps no range of r, to r's sorted ranges,
// merging it with the ranges it touches; false when there is no room.
func (r *reasm6Slot) insert(b sackBlock) bool {
	i := 0
	for i < r.n && r.ranges[i].end <= b.start {
		i++
	}
	left := i > 0 && r.ranges[i-1].end == b.start
	right := i < r.n && r.ranges[i].start == b.end
	switch {
	case left && right:
		r.ranges[i-1].end = r.ranges[i].end
		copy(r.ranges[i:], r.ranges[i+1:r.n])
		r.n--
	case left:
		r.ranges[i-1].end = b.end
	case right:
		r.ranges[i].start = b.start
	default:
		if r.n == len(r.ranges) {
			return false
		}
		copy(r.ranges[i+1:r.n+1], r.ranges[i:r.n])
		r.ranges[i] = b
		r.n++
	}
	return true
}

// unfragPart is the fixed header and the extension headers before the
// Fragment header of p.
func unfragPart(p []byte, h *ip6Hdr) []byte { return p[:h.fragAt] }

// chainWhole says whether the first fragment's data b, which starts with
// a header of type next, holds the whole header chain up to and including
// the upper-layer header (RFC 7112 §5): extension headers whole, then at
// least the TCP, UDP or ICMPv6 header's fixed part.
func chainWhole(b []byte, next uint8) bool {
	for range maxExt6Headers + 1 {
		switch next {
		case protoTCP:
			return len(b) >= tcpLen
		case protoUDP, protoICMPv6:
			return len(b) >= 8
		case extHopByHop, extRouting, extDestOpts:
			if len(b) < 2 || len(b) < (int(b[1])+1)*8 {
				return false
			}
			next, b = b[0], b[(int(b[1])+1)*8:]
		case extFragment:
			if len(b) < 8 {
				return false
			}
			next, b = b[0], b[8:]
		default: // extNoNext, or what parsing the packet will reject
			return true
		}
	}
	return true // the reassembled packet's walk rejects the chain's length
}

// slot finds the slot of h's packet, or takes a free one: a slot whose
// time ran out is free.
func (t *reasm6) slot(now int64, h *ip6Hdr) *reasm6Slot {
	var free *reasm6Slot
	for i := range t.slots {
		r := &t.slots[i]
		if r.used && r.deadline <= now {
			if !r.dead {
				t.timeouts++
			}
			t.free(r)
		}
		if r.used && r.id == h.fragID && r.src == h.src && r.dst == h.dst {
			return r
		}
		if !r.used && free == nil {
			free = r
		}
	}
	if free == nil {
		return nil
	}
	if free.buf == nil {
		free.buf = make([]byte, maxPayload6)
		free.hdr = make([]byte, ip6Len+maxExt6Bytes)
	}
	t.used++
	*free = reasm6Slot{used: true, src: h.src, dst: h.dst, id: h.fragID, total: -1,
		deadline: now + reasm6Timeout, hdr: free.hdr, buf: free.buf, out: free.out}
	return free
}

// abandon drops r's fragments and keeps the slot, dead, until its
// deadline, so the rest of the packet is dropped too (RFC 5722 §4: "all
// the fragments ... including those not yet received").
func (t *reasm6) abandon(r *reasm6Slot) {
	r.dead, r.n, r.unfrag, r.total = true, 0, 0, -1
}

func (t *reasm6) free(r *reasm6Slot) {
	if r.used {
		r.used, r.dead = false, false
		t.used--
	}
}

// expire frees the slots whose time ran out at now (an ICMPv6 Time
// Exceeded is not sent: RFC 8200 §4.5 asks for it only when the first
// fragment came, and the engine leaves it out as it does for IPv4) and
// returns how many; they are added to timeouts. A dead slot's expiry is
// not a loss and is not counted.
func (t *reasm6) expire(now int64) int {
	n := 0
	if t.used == 0 {
		return 0
	}
	for i := range t.slots {
		if r := &t.slots[i]; r.used && r.deadline <= now {
			if !r.dead {
				n++
			}
			t.free(r)
		}
	}
	t.timeouts += uint64(n)
	return n
}

// next returns the earliest deadline of a slot in use.
func (t *reasm6) next() (int64, bool) {
	at, ok := int64(0), false
	if t.used == 0 {
		return at, ok
	}
	for i := range t.slots {
		if r := &t.slots[i]; r.used && (!ok || r.deadline < at) {
			at, ok = r.deadline, true
		}
	}
	return at, ok
}
