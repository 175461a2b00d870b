// Package record is the u16 length-prefixed record framing that the
// stream kinds (kernel tcp, tcp-xdp, tcp-dpdk) put on a TCP byte stream:
// every message is one record, a big-endian u16 length followed by that
// many bytes of payload. TCP has no message boundaries; the prefix gives
// them back at 2 bytes per record. A record is the unit that is never
// split on send: the receiver could not find the next boundary after a
// half record.
//
// AppendRecord and PutRecord encode one record; Staging is a send buffer
// of whole records, Decoder reassembles records from reads of any size.
// The package is a leaf: it imports only the standard library, so any
// stream (a net.Conn, a socket, a userspace TCP) can use it.
package record

import (
	"errors"
)

// HeaderLen is the size of a record's length prefix.
const HeaderLen = 2

// HeaderLen32 is the size of the length prefix of the u32 framing
// (NewStaging32, NewDecoder32): a big-endian u32, as the message length of
// SBE's framing header, here counting the payload only.
const HeaderLen32 = 4

// recLen reads the big-endian length prefix of hl bytes (2 or 4) at b.
func recLen(b []byte, hl int) int {
	if hl == HeaderLen {
		return int(b[0])<<8 | int(b[1])
	}
	return int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}

// putLen writes n as a big-endian length prefix of hl bytes at b.
func putLen(b []byte, hl, n int) {
	if hl == HeaderLen {
		b[0], b[1] = byte(n>>8), byte(n)
		return
	}
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

// MaxRecord is the largest payload a record carries (the u16 length).
const MaxRecord = 65535

// ErrRecordTooLarge is returned for a payload longer than MaxRecord bytes,
// which the u16 length cannot describe.
var ErrRecordTooLarge = errors.New("record: record payload longer than 65535 bytes")

// ErrStagingFull is returned by Staging.Put when the record does not fit in
// the free space: back-pressure, nothing was written.
var ErrStagingFull = errors.New("record: staging buffer full")

// ErrOversize is returned by Decoder.Next for a record longer than the
// decoder's maximum: the record is dropped (its bytes are skipped as they
// arrive, so the stream stays in step) and reported once.
var ErrOversize = errors.New("record: record longer than the receiver's maximum, dropped")

// AppendRecord appends payload as one record (prefix and payload) to dst
// and returns the extended slice. It refuses a payload over MaxRecord with
// ErrRecordTooLarge and returns dst unchanged. It allocates only when dst
// lacks capacity.
func AppendRecord(dst, payload []byte) ([]byte, error) {
	if len(payload) > MaxRecord {
		return dst, ErrRecordTooLarge
	}
	n := len(payload)
	dst = append(dst, byte(n>>8), byte(n))
	return append(dst, payload...), nil
}

// PutRecord writes payload as one record at the start of dst and returns
// the bytes written, HeaderLen+len(payload). It returns ErrRecordTooLarge
// for a payload over MaxRecord, and ErrStagingFull when dst is too short;
// in both cases it writes nothing.
func PutRecord(dst, payload []byte) (int, error) {
	n := len(payload)
	if n > MaxRecord {
		return 0, ErrRecordTooLarge
	}
	if len(dst) < HeaderLen+n {
		return 0, ErrStagingFull
	}
	dst[0], dst[1] = byte(n>>8), byte(n)
	copy(dst[HeaderLen:], payload)
	return HeaderLen + n, nil
}

// Staging is a fixed-size send buffer of whole records for one stream: the
// records queued and not yet taken by the stream (a socket that said
// EAGAIN, a TCP window that is closed). A record goes in whole or not at
// all, and the stream takes the bytes in order, so a record may leave in
// two writes but is never cut off: the receiver never loses step.
//
// Staging owns its buffer. Pending's slice is valid until the next Put or
// Consume. It does not allocate after NewStaging. It is not safe for
// concurrent use.
type Staging struct {
	buf []byte
	r   int // first byte not yet taken by the stream
	w   int // end of the staged bytes
	// next is the offset of the next record boundary at or after r (the
	// start of the first record not yet fully taken), for counting whole
	// records in Consume.
	next int
	recs int // records staged and not fully taken
	// taken is the payload bytes of the records taken whole so far.
	taken uint64
	// raw: the records have no prefix (NewRawStaging); lens[lh:] are the
	// lengths of those not fully taken, in order.
	raw  bool
	lens []int
	lh   int
	hl   int // the prefix's length: HeaderLen or HeaderLen32
}

// NewStaging returns a Staging of size bytes: it holds as many records as
// fit with their prefixes (size/(HeaderLen+payload)).
func NewStaging(size int) *Staging {
	return &Staging{buf: make([]byte, size), hl: HeaderLen}
}

// NewStaging32 returns a Staging of size bytes whose records have a u32
// length prefix (HeaderLen32) instead of a u16 one; a payload still
// carries at most MaxRecord bytes.
func NewStaging32(size int) *Staging {
	return &Staging{buf: make([]byte, size), hl: HeaderLen32}
}

// NewRawStaging returns a Staging of size bytes for a stream without
// framing: Put appends the payload alone, and the "records" that
// Records, Started, Consume and TakenPayload count are the Puts (a
// payload of 0 bytes is refused as ErrStagingFull: it would never be
// taken). The receiver sees one byte stream.
func NewRawStaging(size int) *Staging {
	return &Staging{buf: make([]byte, size), raw: true}
}

// Raw reports whether s was made by NewRawStaging.
func (s *Staging) Raw() bool { return s.raw }

// Cap is the buffer size given to NewStaging.
func (s *Staging) Cap() int { return len(s.buf) }

// Len is the number of staged bytes not yet taken.
func (s *Staging) Len() int { return s.w - s.r }

// Records is the number of records staged and not fully taken; a record
// partly taken counts. They are the records lost if the stream dies now.
func (s *Staging) Records() int { return s.recs }

// Started reports whether the stream has taken part, but not all, of the
// first staged record: a connection closed now leaves the receiver a cut
// record.
func (s *Staging) Started() bool { return s.r > s.next }

// Fits reports whether a record of n payload bytes would be accepted by Put
// now. The space of a record partly taken by the stream is free again only
// once the record is taken whole.
func (s *Staging) Fits(n int) bool {
	if s.raw {
		return n > 0 && n <= MaxRecord && n <= len(s.buf)-(s.w-s.next)
	}
	return n <= MaxRecord && s.hl+n <= len(s.buf)-(s.w-s.next)
}

// Put appends payload as one record. It returns ErrRecordTooLarge for a
// payload over MaxRecord and ErrStagingFull when the record does not fit;
// then nothing was staged. The caller may reuse payload at once.
func (s *Staging) Put(payload []byte) error {
	n := len(payload)
	if n > MaxRecord {
		return ErrRecordTooLarge
	}
	if s.raw {
		return s.putRaw(payload)
	}
	if s.hl+n > len(s.buf)-s.w {
		if !s.Fits(n) {
			return ErrStagingFull
		}
		s.compact()
	}
	putLen(s.buf[s.w:], s.hl, n)
	copy(s.buf[s.w+s.hl:], payload)
	s.w += s.hl + n
	s.recs++
	return nil
}

// putRaw is Put without a prefix.
func (s *Staging) putRaw(payload []byte) error {
	n := len(payload)
	if !s.Fits(n) {
		return ErrStagingFull
	}
	if n > len(s.buf)-s.w {
		s.compact()
	}
	copy(s.buf[s.w:], payload)
	s.w += n
	if s.lh > 0 && s.lh == len(s.lens) {
		s.lens, s.lh = s.lens[:0], 0
	} else if s.lh >= 64 && s.lh > len(s.lens)/2 {
		s.lens = s.lens[:copy(s.lens, s.lens[s.lh:])]
		s.lh = 0
	}
	s.lens = append(s.lens, n)
	s.recs++
	return nil
}

// compact moves the staged bytes to the start of the buffer, from the
// start of the record being taken (its prefix is needed to find its end).
func (s *Staging) compact() {
	if s.next == 0 {
		return
	}
	copy(s.buf, s.buf[s.next:s.w])
	s.w -= s.next
	s.r -= s.next
	s.next = 0
}

// Pending returns the staged bytes in stream order, for the caller to write
// to the stream. The slice is valid until the next Put or Consume.
func (s *Staging) Pending() []byte { return s.buf[s.r:s.w] }

// Consume marks the first n bytes of Pending as taken by the stream and
// returns how many records were completed by them (their last byte is now
// taken). n must not exceed Len.
func (s *Staging) Consume(n int) int {
	if n < 0 || n > s.w-s.r {
		panic("record: Staging.Consume beyond the staged bytes")
	}
	s.r += n
	done := 0
	for s.raw && s.lh < len(s.lens) {
		end := s.next + s.lens[s.lh]
		if end > s.r {
			break
		}
		s.taken += uint64(s.lens[s.lh])
		s.next = end
		s.lh++
		done++
	}
	for !s.raw && s.next < s.w {
		end := s.next + s.hl + recLen(s.buf[s.next:], s.hl)
		if end > s.r {
			break
		}
		s.taken += uint64(end - s.next - s.hl)
		s.next = end
		done++
	}
	if s.next == s.w && s.r == s.w {
		// Everything taken: start again at the front, no copy.
		s.r, s.w, s.next = 0, 0, 0
	}
	s.recs -= done
	return done
}

// TakenPayload is the number of payload bytes (prefixes not counted) of
// the records the stream has taken whole since NewStaging.
func (s *Staging) TakenPayload() uint64 { return s.taken }

// Reset drops everything staged.
func (s *Staging) Reset() {
	s.r, s.w, s.next, s.recs = 0, 0, 0, 0
	s.lens, s.lh = s.lens[:0], 0
}

// Decoder reassembles records from a byte stream read in pieces of any
// size. It owns one buffer that the stream is read into (Tail and Commit, or
// Feed), and hands out each record as a slice of that buffer, without
// copying or allocating.
//
// Lifetimes: a record returned by Next stays valid until the next Compact
// or Reset; Tail, Commit, Feed and Next never move bytes already read. A
// receive loop therefore calls Compact once at the start of each round,
// after the records of the previous round are done with, then reads and
// decodes as often as the buffer has room.
//
// It is not safe for concurrent use.
type Decoder struct {
	buf  []byte
	max  int
	r, w int // unread bytes are buf[r:w]
	skip int // bytes of an oversize record still to be dropped
	raw  bool
	hl   int // the prefix's length: HeaderLen or HeaderLen32
}

// NewDecoder returns a Decoder that delivers records of up to max payload
// bytes (1..MaxRecord) and reports longer ones with ErrOversize. bufSize is
// the size of its read buffer, raised to HeaderLen+max if smaller so that
// any record fits; a larger buffer lets one read take many records.
func NewDecoder(max, bufSize int) *Decoder {
	if max < 0 || max > MaxRecord {
		max = MaxRecord
	}
	if bufSize < HeaderLen+max {
		bufSize = HeaderLen + max
	}
	return &Decoder{buf: make([]byte, bufSize), max: max, hl: HeaderLen}
}

// NewDecoder32 is NewDecoder for records with a u32 length prefix
// (HeaderLen32). A prefix larger than max is an oversize record, as with
// NewDecoder, whatever its length (its bytes are skipped as they come).
func NewDecoder32(max, bufSize int) *Decoder {
	d := NewDecoder(max, bufSize+HeaderLen32-HeaderLen)
	d.hl = HeaderLen32
	return d
}

// NewRawDecoder returns a Decoder for a stream without framing: Next
// returns the buffered bytes as they are, at most most (1..MaxRecord) at
// a time, and never ErrOversize. bufSize is raised to most if smaller.
func NewRawDecoder(most, bufSize int) *Decoder {
	most = min(MaxRecord, max(most, 1))
	return &Decoder{buf: make([]byte, max(bufSize, most)), max: most, raw: true}
}

// Max is the largest record payload the decoder delivers.
func (d *Decoder) Max() int { return d.max }

// Buffered is the number of bytes read and not yet decoded: a partial
// record, or whole records that Next has not returned yet.
func (d *Decoder) Buffered() int { return d.w - d.r }

// Idle reports whether the decoder is between records: nothing buffered
// and no oversize record being dropped, so that the stream's next byte
// starts a record.
func (d *Decoder) Idle() bool { return d.r == d.w && d.skip == 0 }

// Compact moves the undecoded bytes to the front of the buffer, so Tail
// has room for at least the rest of the current record. It invalidates
// every record returned so far.
func (d *Decoder) Compact() {
	if d.r == d.w {
		d.r, d.w = 0, 0
		return
	}
	if d.r == 0 {
		return
	}
	copy(d.buf, d.buf[d.r:d.w])
	d.w -= d.r
	d.r = 0
}

// Tail returns the free space after the buffered bytes, to read the
// stream into; then call Commit with the number of bytes read. It is empty
// when the buffer is full: decode (Next) and Compact first. After Compact
// with no complete record buffered, Tail is never empty.
func (d *Decoder) Tail() []byte { return d.buf[d.w:] }

// Commit records that n bytes were written at the start of Tail.
func (d *Decoder) Commit(n int) {
	if n < 0 || n > len(d.buf)-d.w {
		panic("record: Decoder.Commit beyond the tail")
	}
	d.w += n
}

// Feed copies as much of p as fits into Tail, commits it and returns how
// many bytes it took. For streams that deliver data in their own buffers.
func (d *Decoder) Feed(p []byte) int {
	n := copy(d.buf[d.w:], p)
	d.w += n
	return n
}

// Next returns the next complete record's payload, a slice of the
// decoder's buffer valid until the next Compact or Reset. It returns nil,
// nil when the buffered bytes hold no complete record (read more), and nil,
// ErrOversize once for each record longer than Max: that record's bytes are
// dropped as they arrive and decoding goes on after it. An empty record
// (length 0) is returned as a non-nil empty slice.
func (d *Decoder) Next() ([]byte, error) {
	if d.raw {
		n := min(d.w-d.r, d.max)
		if n == 0 {
			return nil, nil
		}
		rec := d.buf[d.r : d.r+n : d.r+n]
		d.r += n
		return rec, nil
	}
	for {
		if d.skip > 0 {
			n := d.w - d.r
			if n > d.skip {
				n = d.skip
			}
			d.r += n
			d.skip -= n
			if d.skip > 0 {
				return nil, nil // every buffered byte was dropped
			}
			continue
		}
		if d.w-d.r < d.hl {
			return nil, nil
		}
		n := recLen(d.buf[d.r:], d.hl)
		if n > d.max {
			d.r += d.hl
			d.skip = n
			d.dropSome()
			return nil, ErrOversize
		}
		if d.w-d.r < d.hl+n {
			return nil, nil
		}
		rec := d.buf[d.r+d.hl : d.r+d.hl+n : d.r+d.hl+n]
		d.r += d.hl + n
		return rec, nil
	}
}

// Complete reports whether Next would return something now: a record or
// ErrOversize. It changes nothing.
func (d *Decoder) Complete() bool {
	if d.raw {
		return d.w > d.r
	}
	r := d.r + min(d.skip, d.w-d.r)
	if d.w-r < d.hl {
		return false
	}
	n := recLen(d.buf[r:], d.hl)
	return n > d.max || d.w-r >= d.hl+n
}

// dropSome drops the buffered bytes of the record being skipped.
func (d *Decoder) dropSome() {
	n := d.w - d.r
	if n > d.skip {
		n = d.skip
	}
	d.r += n
	d.skip -= n
}

// Reset drops everything buffered, for a new stream.
func (d *Decoder) Reset() { d.r, d.w, d.skip = 0, 0, 0 }
