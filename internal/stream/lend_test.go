package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/record"
)

// lendConn is a Conn and a Lender over a ring of received bytes, as the
// native engine's: Peek returns what lies contiguous after the lent bytes,
// Read and Consume end the loan, and Consume overwrites what it takes
// back, so that a record used after its loan ended shows.
type lendConn struct {
	fakeConn // out, room, eof, err, the flags; in is unused
	ring     []byte
	head, n  int // n bytes received from head on
	lent     int
	lends    int // Lend calls
}

const poisonByte = 0xa5

func newLendConn(size int) *lendConn {
	return &lendConn{fakeConn: fakeConn{room: -1, reading: true}, ring: bytes.Repeat([]byte{poisonByte}, size)}
}

// arrive appends p to the ring as far as it has room, and returns how many
// bytes it took.
func (c *lendConn) arrive(p []byte) int {
	k := min(len(p), len(c.ring)-c.n)
	for i := range k {
		c.ring[(c.head+c.n+i)%len(c.ring)] = p[i]
	}
	c.n += k
	return k
}

func (c *lendConn) Peek() []byte {
	at := (c.head + c.lent) % len(c.ring)
	n := min(c.n-c.lent, len(c.ring)-at)
	return c.ring[at : at+n : at+n]
}

func (c *lendConn) Lend(n int) {
	if n > len(c.Peek()) {
		panic(fmt.Sprintf("Lend(%d) beyond Peek's %d bytes", n, len(c.Peek())))
	}
	c.lent += n
	c.lends++
}

func (c *lendConn) Consume() {
	for range c.lent {
		c.ring[c.head] = poisonByte
		c.head = (c.head + 1) % len(c.ring)
	}
	c.n -= c.lent
	c.lent = 0
}

func (c *lendConn) Read(p []byte) (int, error) {
	c.Consume()
	if c.n == 0 {
		switch {
		case c.err != nil:
			return 0, c.err
		case c.eof:
			return 0, io.EOF
		}
		return 0, nil
	}
	k := min(len(p), c.n)
	for i := range k {
		p[i] = c.ring[c.head]
		c.ring[c.head] = poisonByte
		c.head = (c.head + 1) % len(c.ring)
	}
	c.n -= k
	return k, nil
}

func (c *lendConn) Readable() bool { return c.n > c.lent || c.eof || c.err != nil }

var _ Lender = (*lendConn)(nil)

// newLendLayer returns a layer over one lendConn with a ring of size
// bytes.
func newLendLayer(o Options, size int) (*Layer, *lendConn) {
	s := newFakeLayer(&fakeTransport{}, o)
	c := newLendConn(size)
	s.Add(c, peer(0))
	return s, c
}

// numbered is record i's payload: a few bytes to some hundred, with its
// number in it.
func numbered(i int) []byte {
	p := fmt.Appendf(nil, "r%05d-", i)
	return append(p, bytes.Repeat([]byte{byte('a' + i%26)}, (i*37)%150)...)
}

// The layer hands a Lender's records out where they lie, and they stay
// as they arrived until the next Rx: records cut by the ring's end, by
// what has arrived or by the Rx batch, and oversize records, all come out
// (or are skipped) as through a copy, in order, in pieces of any size.
func TestLentRecordsInPlace(t *testing.T) {
	const n, maxRecord = 400, 120
	var want []string
	var stream []byte
	var err error
	for i := range n {
		p := numbered(i)
		if stream, err = record.AppendRecord(stream, p); err != nil {
			t.Fatal(err)
		}
		if len(p) <= maxRecord {
			want = append(want, string(p))
		}
	}
	for _, piece := range []int{1, 7, 64, 150, 1000, len(stream)} {
		t.Run(fmt.Sprint(piece), func(t *testing.T) {
			s, c := newLendLayer(Options{MaxRecord: maxRecord, RxBatch: 3, DecoderSize: 300}, 1024)
			pkts := make([]dgramio.Packet, 8)
			var got []string
			for off, rounds := 0, 0; len(got) < len(want); rounds++ {
				if rounds > 100*n {
					t.Fatalf("%d of %d records after %d rounds", len(got), len(want), rounds)
				}
				if off < len(stream) {
					off += c.arrive(stream[off:min(off+piece, len(stream))])
				}
				k, err := s.Rx(pkts)
				if err != nil {
					t.Fatal(err)
				}
				// A Flush in between moves nothing that was handed out.
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				for _, p := range pkts[:k] {
					got = append(got, string(p.Data))
				}
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("record %d is %q, want %q", i, got[i], want[i])
				}
			}
			// Pieces shorter than a record always leave one cut at the
			// front, which the decoder takes (Read); longer ones are lent.
			if piece >= 64 && c.lends == 0 {
				t.Fatal("no record was lent: every one went through the decoder")
			}
			st := s.Counters()
			if st.RxTruncated != uint64(n-len(want)) || st.StreamRx != uint64(len(stream)) {
				t.Fatalf("RxTruncated %d, StreamRx %d; want %d and %d", st.RxTruncated, st.StreamRx, n-len(want), len(stream))
			}
		})
	}
}

// A loan ends at the next Rx, not before: the records of one Rx are
// whole after it, and the bytes go back to the transport (the window
// opens) when the next Rx begins. With nothing behind the loan, the
// layer has nothing to read (Ready).
func TestLoanEndsAtNextRx(t *testing.T) {
	s, c := newLendLayer(Options{MaxRecord: 100, RxBatch: 16, DecoderSize: 256}, 4096)
	c.arrive(records(t, []byte("one"), []byte("two")))
	pkts := make([]dgramio.Packet, 16)
	k, err := s.Rx(pkts)
	if err != nil || k != 2 {
		t.Fatalf("Rx = %d, %v; want 2 records", k, err)
	}
	if c.lent != 10 || c.n != 10 {
		t.Fatalf("%d bytes lent of %d held, want all 10", c.lent, c.n)
	}
	if s.Ready() {
		t.Fatal("Ready with nothing behind the loan")
	}
	s.Flush()
	if string(pkts[0].Data) != "one" || string(pkts[1].Data) != "two" {
		t.Fatalf("records %q %q after the Flush", pkts[0].Data, pkts[1].Data)
	}
	if k, _ := s.Rx(pkts); k != 0 || c.n != 0 || c.lent != 0 {
		t.Fatalf("next Rx: %d records, %d bytes held, %d lent; want the loan back", k, c.n, c.lent)
	}
}

// The peer's FIN or a reset behind lent records is read once the loan is
// back: every record is delivered first, then the end is reported, once.
func TestLoanThenEnd(t *testing.T) {
	for _, reset := range []bool{false, true} {
		s, c := newLendLayer(Options{MaxRecord: 100, RxBatch: 16, DecoderSize: 256, Events: true}, 4096)
		c.arrive(records(t, []byte("a"), []byte("b")))
		if reset {
			c.err = &dgramio.PeerError{Reset: true, Err: errors.New("reset")}
		} else {
			c.eof = true
		}
		got, errs := rxAll(s, 4)
		var pe *dgramio.PeerError
		if fmt.Sprint(got) != "[a b]" || len(errs) != 1 || !errors.As(errs[0], &pe) || pe.Reset != reset {
			t.Fatalf("reset %v: records %q, errors %v", reset, got, errs)
		}
		if s.Len() != 0 {
			t.Fatalf("reset %v: %d connections left", reset, s.Len())
		}
	}
}

// Records an Rx delivers stay valid until the next Rx when the
// connection fails before it (a Flush's write fails): the layer reads
// out and counts what is left only then, whether the records lie in its
// decoder or in the transport's buffer.
func TestRecordsOutliveFailure(t *testing.T) {
	for _, tc := range []struct {
		lend  bool
		batch int
	}{{false, 2}, {false, 4}, {true, 2}, {true, 4}} {
		lend := tc.lend
		o := Options{MaxRecord: 100, RxBatch: tc.batch, DecoderSize: 256, StagingSize: 256}
		var s *Layer
		var fc *fakeConn
		in := records(t, []byte("r0"), []byte("r1"), []byte("r2"), []byte("r3"))
		in = append(in, 0, 50, 'x') // a record cut short
		if lend {
			var c *lendConn
			s, c = newLendLayer(o, 4096)
			c.arrive(in)
			fc = &c.fakeConn
		} else {
			var cs []*fakeConn
			s, cs = newLayer(1, o)
			fc = cs[0]
			fc.in.Write(in)
		}
		pkts := make([]dgramio.Packet, tc.batch)
		if k, err := s.Rx(pkts); k != tc.batch || err != nil {
			t.Fatalf("lend %v: first Rx = %d, %v", lend, k, err)
		}
		var first []string
		for _, p := range pkts {
			first = append(first, string(p.Data))
		}
		fc.err = errors.New("broken")
		if s.QueueTo([]byte("answer"), peer(0)) != nil {
			t.Fatalf("lend %v: answer not queued", lend)
		}
		s.Flush()
		for i, p := range pkts {
			if string(p.Data) != first[i] {
				t.Fatalf("lend %v, batch %d: record %d reads %q after the failed Flush, %q before", lend, tc.batch, i, p.Data, first[i])
			}
		}
		got, errs := rxAll(s, 3)
		st := s.Counters()
		// The records left are delivered (those decoded before the
		// failure) or counted lost (those the transport still held).
		if len(errs) != 0 || st.Resets != 1 || len(got)+int(st.RxClosed) != 4-tc.batch || st.RxMalformed != 1 || s.Len() != 0 {
			t.Fatalf("lend %v: errors %v, resets %d, then %q, RxClosed %d, RxMalformed %d, %d connections",
				lend, errs, st.Resets, got, st.RxClosed, st.RxMalformed, s.Len())
		}
	}
}
