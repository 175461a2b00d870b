package native

import "encoding/binary"

// IPv4 reassembly (RFC 791 §3.2, RFC 1122 §3.3.2): a few slots, each the
// fragments of one datagram (source, ID, protocol) written into a buffer
// at their offsets, with the ranges received; complete, the datagram is
// delivered as if it had come whole. A slot left incomplete is freed after
// reasmTimeout; fragments for which no slot is free are dropped.
const (
	reasmSlots   = 4
	reasmRanges  = 16
	reasmTimeout = int64(30e9) // Linux's ipfrag_time
	maxDatagram  = 65535
)

type reasmSlot struct {
	used     bool
	src      [4]byte
	id       uint16
	proto    uint8
	srcMAC   [6]byte
	hdr      [ipLen]byte
	first    bool // the fragment at offset 0 came (hdr is its header)
	total    int  // payload length, -1 until the last fragment came
	ranges   [reasmRanges]sackBlock
	n        int
	deadline int64
	buf      []byte // ipLen + maxDatagram, allocated on first use
}

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
	if r == nil {
		e.cnt[cIPReasmFailed]++
		return
	}
	if !more {
		if r.total >= 0 && r.total != end {
			e.reasmDrop(r)
			return
		}
		r.total = end
	}
	if off == 0 {
		copy(r.hdr[:], p[:ipLen])
		r.first, r.srcMAC = true, srcMAC
	}
	n, ok := insertBlock(r.ranges[:], r.n, sackBlock{uint32(off), uint32(end)})
	if !ok {
		e.reasmDrop(r)
		return
	}
	r.n = n
	copy(r.buf[ipLen+off:], data)
	if !r.first || r.total < 0 || r.n != 1 || r.ranges[0].start != 0 || int(r.ranges[0].end) != r.total {
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

// reasmSlot finds the slot of p's datagram or takes a free one.
func (e *Engine) reasmSlot(p ipv4) *reasmSlot {
	id := binary.BigEndian.Uint16(p[4:])
	var free *reasmSlot
	for i := range e.reasm {
		r := &e.reasm[i]
		if r.used && r.src == p.src() && r.id == id && r.proto == p.proto() {
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
		free.buf = make([]byte, ipLen+maxDatagram)
	}
	e.reasmUsed++
	*free = reasmSlot{used: true, src: p.src(), id: id, proto: p.proto(), total: -1,
		deadline: e.now + reasmTimeout, buf: free.buf}
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
