package native

import "encoding/binary"

// IPv4 reassembly (RFC 791 §3.2, RFC 1122 §3.3.2): slots, each the
// fragments of one datagram (source, ID, protocol) written into a buffer
// at their offsets, with the fragments received; complete, the datagram
// is delivered as if it had come whole.
//
// Hardening, as Linux's ip_fragment does it since the FragmentSmack
// fixes (CVE-2018-5391):
//   - The slots are bounded by memory (Options.ReassemblyMemory, Linux's
//     ipfrag_high_thresh): each holds a buffer of the largest datagram,
//     allocated on first use. A fragment of a new datagram with every slot
//     taken evicts the oldest incomplete datagram (counted
//     ip_reassembly_evicted), so a stream of first fragments that never
//     complete cannot block reassembly: at worst it pushes out one
//     datagram per new one.
//   - A fragment that overlaps one already held drops the whole datagram
//     (counted ip_reassembly_overlaps; RFC 5722 §4 for IPv6, which Linux
//     applies to IPv4 too); an exact duplicate of a held fragment (RFC
//     5722 erratum 3089) is dropped alone (ip_fragment_duplicates).
//   - A slot left incomplete is freed after Options.ReassemblyTimeout
//     (RFC 791 §3.2's timer).
const (
	reasmFrags  = 64 // fragments of one datagram held (1480-byte fragments: 45 for the largest)
	maxDatagram = 65535
	reasmBuf    = ipLen + maxDatagram
)

type reasmSlot struct {
	used     bool
	first    bool // the fragment at offset 0 came (hdr is its header)
	proto    uint8
	id       uint16
	src      [4]byte
	srcMAC   [6]byte
	hdr      [ipLen]byte
	total    int // payload length, -1 until the last fragment came
	n        int // fragments in frags
	born     int64
	deadline int64
	frags    [reasmFrags]sackBlock // the fragments' [start, end), sorted, disjoint
	buf      []byte                // reasmBuf bytes, allocated on first use
}

// reasmSlotsFor is the number of slots that mem bytes of buffers hold
// (at least one).
func reasmSlotsFor(mem int) int { return max(1, mem/reasmBuf) }

// fragment takes one fragment of a datagram for us.
func (e *Engine) fragment(srcMAC [6]byte, p ipv4) {
	e.cnt[cIPFragment]++
	fo := binary.BigEndian.Uint16(p[6:])
	off := int(fo&0x1fff) * 8
	more := fo&0x2000 != 0
	data := p.payload()
	end := off + len(data)
	if end > maxDatagram-ipLen || more && len(data)%8 != 0 || len(data) == 0 {
		e.cnt[cIPReasmFailed]++
		return
	}
	r := e.reasmSlot(p)
	if !more {
		if r.total >= 0 && r.total != end || r.n > 0 && int(r.frags[r.n-1].end) > end {
			e.reasmDrop(r) // two different ends, or data beyond the end
			return
		}
		r.total = end
	} else if r.total >= 0 && end > r.total {
		e.reasmDrop(r)
		return
	}
	switch r.insert(uint32(off), uint32(end)) {
	case fragDup:
		e.cnt[cIPFragDup]++
		return
	case fragOverlap:
		e.reasmFree(r)
		e.cnt[cIPReasmOverlap]++
		return
	case fragFull:
		e.reasmDrop(r)
		return
	}
	if off == 0 {
		copy(r.hdr[:], p[:ipLen])
		r.first, r.srcMAC = true, srcMAC
	}
	copy(r.buf[ipLen+off:], data)
	if !r.complete() {
		return
	}
	d := r.buf[:ipLen+r.total]
	copy(d, r.hdr[:])
	binary.BigEndian.PutUint16(d[2:], uint16(ipLen+r.total))
	binary.BigEndian.PutUint16(d[6:], 0)
	d[10], d[11] = 0, 0
	binary.BigEndian.PutUint16(d[10:], fold(csum(0, d[:ipLen])))
	e.reasmFree(r)
	e.cnt[cIPReassembled]++
	e.ipDeliver(r.srcMAC, ipv4(d))
}

// What insert made of a fragment.
const (
	fragNew = iota
	fragDup
	fragOverlap
	fragFull
)

// insert records the fragment [start, end): fragDup when it is exactly one
// already held, fragOverlap when it overlaps any other, fragFull when the
// slot holds reasmFrags fragments already.
func (r *reasmSlot) insert(start, end uint32) int {
	i := 0
	for i < r.n && r.frags[i].end <= start {
		i++
	}
	if i < r.n && r.frags[i].start < end {
		if r.frags[i] == (sackBlock{start, end}) {
			return fragDup
		}
		return fragOverlap
	}
	if r.n == reasmFrags {
		return fragFull
	}
	copy(r.frags[i+1:r.n+1], r.frags[i:r.n])
	r.frags[i] = sackBlock{start, end}
	r.n++
	return fragNew
}

// complete reports whether the fragments cover the datagram, first and
// last included.
func (r *reasmSlot) complete() bool {
	if !r.first || r.total < 0 {
		return false
	}
	at := uint32(0)
	for i := 0; i < r.n; i++ {
		if r.frags[i].start != at {
			return false
		}
		at = r.frags[i].end
	}
	return int(at) == r.total
}

// reasmSlot finds the slot of p's datagram, or takes a free one, or
// evicts the oldest.
func (e *Engine) reasmSlot(p ipv4) *reasmSlot {
	id := binary.BigEndian.Uint16(p[4:])
	src, proto := p.src(), p.proto()
	var free, oldest *reasmSlot
	for i := range e.reasm {
		r := &e.reasm[i]
		if !r.used {
			if free == nil {
				free = r
			}
			continue
		}
		if r.src == src && r.id == id && r.proto == proto {
			return r
		}
		if oldest == nil || r.born < oldest.born {
			oldest = r
		}
	}
	if free == nil {
		e.reasmFree(oldest)
		e.cnt[cIPReasmEvicted]++
		free = oldest
	}
	if free.buf == nil {
		free.buf = make([]byte, reasmBuf)
	}
	e.reasmUsed++
	free.used, free.first, free.proto, free.id, free.src = true, false, proto, id, src
	free.total, free.n = -1, 0
	free.born, free.deadline = e.now, e.now+int64(e.o.ReassemblyTimeout)
	return free
}

func (e *Engine) reasmDrop(r *reasmSlot) {
	e.reasmFree(r)
	e.cnt[cIPReasmFailed]++
}

// reasmFree gives slot r back.
func (e *Engine) reasmFree(r *reasmSlot) {
	r.used = false
	e.reasmUsed--
}

// reasmTimers frees slots whose time ran out (RFC 791 §3.2's timer; no
// ICMP time exceeded is sent: RFC 1122 §3.3.2 makes it a MAY).
func (e *Engine) reasmTimers() {
	for i := range e.reasm {
		if r := &e.reasm[i]; r.used && r.deadline <= e.now {
			e.reasmFree(r)
			e.cnt[cIPReasmTimeout]++
		}
	}
}

// reasmNext returns the earliest reassembly deadline.
func (e *Engine) reasmNext() (int64, bool) {
	at, ok := int64(0), false
	if e.reasmUsed == 0 { // the poll loop's common case: skip the slots
		return at, ok
	}
	for i := range e.reasm {
		if r := &e.reasm[i]; r.used && (!ok || r.deadline < at) {
			at, ok = r.deadline, true
		}
	}
	return at, ok
}
