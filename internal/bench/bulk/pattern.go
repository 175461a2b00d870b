package bulk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"
)

// patternLen is the period of the byte pattern every stream carries: a
// prime, so that chunk sizes that are powers of two never line up with it.
const patternLen = 65521

// headerLen is the stream header: a magic word and the stream's start
// offset into the pattern.
const headerLen = 8

const magic = 0x4447424b // "DGBK"

// pattern holds the pattern twice over, so that any window of at most
// patternLen bytes starting inside the first copy is one slice.
var pattern = func() []byte {
	r := rand.New(rand.NewPCG(0x6275_6c6b, 0x6467_7261))
	p := make([]byte, 2*patternLen)
	for i := 0; i < patternLen; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(p[i:patternLen], w[:])
	}
	copy(p[patternLen:], p[:patternLen])
	return p
}()

// sender produces one direction of one connection: a header that names a
// start offset into the pattern, then the pattern from there, until its
// limit (bytes) or its deadline. Not safe for concurrent use.
type sender struct {
	hdr      [headerLen]byte
	hdrSent  int
	start    int
	sent     int64 // bytes after the header
	limit    int64 // 0: none
	deadline time.Time
	stopped  bool
}

func newSender(start int, limit int64, deadline time.Time) *sender {
	s := &sender{start: start % patternLen, limit: limit, deadline: deadline}
	binary.BigEndian.PutUint32(s.hdr[0:4], magic)
	binary.BigEndian.PutUint32(s.hdr[4:8], uint32(s.start))
	return s
}

// next returns the bytes to send next, at most max (and at most
// patternLen); empty when the sender is done. The slice is read-only.
func (s *sender) next(max int) []byte {
	if s.stopped {
		return nil
	}
	if s.hdrSent < headerLen {
		return s.hdr[s.hdrSent:]
	}
	n := min(max, patternLen)
	if s.limit > 0 && int64(n) > s.limit-s.sent {
		n = int(s.limit - s.sent)
	}
	at := (s.start + int(s.sent%patternLen)) % patternLen
	return pattern[at : at+n]
}

// advance records that n bytes of what next returned were taken.
func (s *sender) advance(n int) {
	if h := min(n, headerLen-s.hdrSent); h > 0 {
		s.hdrSent += h
		n -= h
	}
	s.sent += int64(n)
}

// done reports whether the sender has sent what it should (the limit
// reached, or the deadline passed at now); it stops for good once true.
func (s *sender) done(now time.Time) bool {
	if !s.stopped && s.hdrSent == headerLen &&
		((s.limit > 0 && s.sent >= s.limit) || (s.limit == 0 && !now.Before(s.deadline))) {
		s.stopped = true
	}
	return s.stopped
}

// total is the bytes sent, header included.
func (s *sender) total() int64 { return s.sent + int64(s.hdrSent) }

// receiver checks one direction of one connection byte for byte against
// the pattern from the start offset its header names.
type receiver struct {
	hdr   [headerLen]byte
	hdrN  int
	start int
	got   int64 // bytes after the header
	// first and last are when the first byte and the end (EOF) arrived.
	first, last time.Time
}

// take checks p, the next bytes of the stream.
func (r *receiver) take(p []byte, now time.Time) error {
	if len(p) == 0 {
		return nil
	}
	if r.first.IsZero() {
		r.first = now
	}
	if r.hdrN < headerLen {
		k := copy(r.hdr[r.hdrN:], p)
		r.hdrN += k
		p = p[k:]
		if r.hdrN == headerLen {
			if m := binary.BigEndian.Uint32(r.hdr[0:4]); m != magic {
				return fmt.Errorf("stream header: magic %#x, want %#x", m, magic)
			}
			r.start = int(binary.BigEndian.Uint32(r.hdr[4:8]))
			if r.start >= patternLen {
				return fmt.Errorf("stream header: start offset %d out of range", r.start)
			}
		}
	}
	for len(p) > 0 {
		at := (r.start + int(r.got%patternLen)) % patternLen
		n := min(len(p), patternLen)
		if want := pattern[at : at+n]; !bytes.Equal(p[:n], want) {
			i := 0
			for i < n && p[i] == want[i] {
				i++
			}
			return fmt.Errorf("byte %d of the stream differs (got %#02x, want %#02x)", r.got+int64(i)+headerLen, p[i], want[i])
		}
		r.got += int64(n)
		p = p[n:]
	}
	return nil
}

// total is the bytes received, header included.
func (r *receiver) total() int64 { return r.got + int64(r.hdrN) }
