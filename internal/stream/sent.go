package stream

import (
	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/record"
)

// Sent follows where the records written to one connection's stream start,
// so that when the connection ends its transport can tell how many records
// the peer never acknowledged the first byte of: those never reached the
// peer's application, and the layer counts them in TxDropped instead of
// TxSent (a record whose head was acknowledged and whose rest was not
// reaches the peer cut, and the peer counts it in RxMalformed).
//
// It keeps a ring of record start offsets, which grows to the records
// written and not known acknowledged and is reused; Forget drops those the
// peer acknowledged. The zero value is ready for use. Not safe for
// concurrent use.
type Sent struct {
	off     uint64 // stream bytes written
	need    int    // bytes left of the record body being written
	hdrHave int    // bytes of its length prefix written so far
	hdr     [record.HeaderLen32]byte
	starts  []uint64 // ring of record start offsets, a power of two long
	head    int
	count   int
	// heldBytes and heldRecs are the records at the end of the stream
	// that were staged (Stage) and not released: not written yet.
	heldBytes uint64
	heldRecs  int
	// raw: the stream has no record prefixes (SetRaw); hl is the prefix's
	// length otherwise (0: record.HeaderLen). appended is where the
	// appends noted by Appended end.
	raw      bool
	hl       int
	appended uint64
}

// SetFraming makes s follow a stream of framing f (dgramio.Config.Framing):
// u16 records (the zero value's), u32 records or raw bytes (SetRaw). Call
// it before anything is written.
func (s *Sent) SetFraming(f dgramio.Framing) {
	switch f {
	case dgramio.FramingRaw:
		s.SetRaw()
	case dgramio.FramingU32:
		s.hl = record.HeaderLen32
	}
}

// prefix is the length of a record's prefix.
func (s *Sent) prefix() int {
	if s.raw {
		return 0
	}
	if s.hl == 0 {
		return record.HeaderLen
	}
	return s.hl
}

// SetRaw makes s follow a stream without framing (dgramio.FramingRaw):
// its bytes carry no record starts, so a "record" is what one QueueTo
// appended, and s learns where each starts from Stage (a Stager's
// transport) or from Appended (the layer, through an Appender). Call it
// before anything is written.
func (s *Sent) SetRaw() { s.raw = true }

// Appended notes, in raw framing, one append of n bytes to the stream
// after those written and appended before, not written yet: Wrote takes
// its bytes later. An empty append starts nothing.
func (s *Sent) Appended(n int) {
	if !s.raw || n <= 0 {
		return
	}
	s.push(s.marked())
	s.appended += uint64(n)
}

// marked is the stream offset where the next append starts: the end of
// what was written, or of what was appended and not written yet.
func (s *Sent) marked() uint64 {
	w := s.Written()
	if s.appended > w {
		return s.appended
	}
	return w
}

// Stage notes one whole record of n payload bytes staged after what was
// written and staged before: it is written at Release, or dropped by
// Unstage. Wrote must not be called while records are staged.
func (s *Sent) Stage(n int) {
	if s.raw && n == 0 {
		return // an empty append starts nothing
	}
	s.push(s.off)
	s.off += uint64(s.prefix() + n)
	s.heldBytes += uint64(s.prefix() + n)
	s.heldRecs++
}

// Release notes that the staged records were written.
func (s *Sent) Release() { s.heldBytes, s.heldRecs = 0, 0 }

// Unstage drops the staged records.
func (s *Sent) Unstage() {
	s.count -= s.heldRecs
	s.off -= s.heldBytes
	s.Release()
}

// Wrote notes p, the next bytes written to the stream (whole records or
// parts of them, in order).
func (s *Sent) Wrote(p []byte) {
	hl := s.prefix()
	for i := 0; i < len(p) && !s.raw; {
		if s.need > 0 {
			k := min(s.need, len(p)-i)
			s.need -= k
			i += k
			continue
		}
		if s.hdrHave == 0 {
			s.push(s.off + uint64(i))
			if len(p)-i >= hl { // the whole prefix: the usual case
				s.need = prefixLen(p[i:], hl)
				i += hl
				continue
			}
		}
		s.hdr[s.hdrHave] = p[i]
		s.hdrHave++
		i++
		if s.hdrHave == hl {
			s.need = prefixLen(s.hdr[:], hl)
			s.hdrHave = 0
		}
	}
	s.off += uint64(len(p))
}

// push appends a record start to the ring, doubling it when full (its
// length is a power of two, so that a position is a mask away).
func (s *Sent) push(at uint64) {
	if s.count == len(s.starts) {
		grown := make([]uint64, max(64, 2*len(s.starts)))
		for i := 0; i < s.count; i++ {
			grown[i] = s.starts[(s.head+i)&(len(s.starts)-1)]
		}
		s.starts, s.head = grown, 0
	}
	s.starts[(s.head+s.count)&(len(s.starts)-1)] = at
	s.count++
}

// Forget drops the records whose first byte the peer acknowledged:
// unacked is how many of the bytes written so far it has not (more than
// were written counts as all of them).
func (s *Sent) Forget(unacked uint64) {
	written := s.off - s.heldBytes
	acked := written - min(unacked, written)
	for s.count > 0 && s.starts[s.head] < acked {
		s.head = (s.head + 1) & (len(s.starts) - 1)
		s.count--
	}
}

// Unacked returns the number of records written whose first byte is
// among the last unacked bytes of the stream: those the peer never
// acknowledged the start of. It forgets the others.
func (s *Sent) Unacked(unacked uint64) int {
	s.Forget(unacked)
	n := s.count - s.heldRecs
	if s.raw { // appends not written yet start at or after Written
		w := s.Written()
		for i := s.count - 1 - s.heldRecs; i >= 0 && s.starts[(s.head+i)&(len(s.starts)-1)] >= w; i-- {
			n--
		}
	}
	return n
}

// Tracked is the number of record starts the ring holds: a transport
// without a cheap view of its acknowledgements calls Forget when it grows.
func (s *Sent) Tracked() int { return s.count }

// Written is the number of stream bytes written.
func (s *Sent) Written() uint64 { return s.off - s.heldBytes }

// prefixLen reads a big-endian length prefix of hl bytes (2 or 4).
func prefixLen(b []byte, hl int) int {
	if hl == record.HeaderLen {
		return int(b[0])<<8 | int(b[1])
	}
	return int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}
