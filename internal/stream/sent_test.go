package stream

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
)

// TestSentCountsRecordStarts: Sent counts a record as unacknowledged when
// its first byte is among the unacknowledged ones, whatever the writes
// split (a prefix in two, a body in pieces), and forgets the others.
func TestSentCountsRecordStarts(t *testing.T) {
	recs := records(t, []byte("aaaa"), []byte("bb"), []byte("cccccc")) // starts 0, 6, 10; 18 bytes
	var s Sent
	for _, cut := range [][2]int{{0, 1}, {1, 5}, {5, 7}, {7, 18}} {
		s.Wrote(recs[cut[0]:cut[1]])
	}
	if s.Written() != 18 {
		t.Fatalf("Written %d, want 18", s.Written())
	}
	for _, tc := range []struct {
		unacked uint64
		want    int
	}{
		{100, 3}, {18, 3}, {13, 2}, {12, 2}, {8, 1}, {3, 0}, {0, 0},
	} {
		if got := s.Unacked(tc.unacked); got != tc.want {
			t.Errorf("%d bytes unacknowledged: %d records, want %d", tc.unacked, got, tc.want)
		}
	}
}

// TestSentCountsRawAppends: in raw framing a "record" is one append
// (QueueTo), whether the transport stages it (Stage) or the layer notes it
// before the bytes are written (Appended); an append counts as
// unacknowledged when its first byte was written and is among the
// unacknowledged ones, and one not written yet does not count.
func TestSentCountsRawAppends(t *testing.T) {
	cases := []struct {
		unacked uint64
		want    int
	}{{100, 3}, {12, 3}, {8, 2}, {7, 1}, {6, 1}, {2, 0}, {0, 0}} // appends start at 0, 4 and 6 of 12 bytes
	t.Run("Appended", func(t *testing.T) {
		var s Sent
		s.SetRaw()
		s.Appended(4)
		s.Appended(0) // starts nothing
		s.Appended(2)
		if got := s.Unacked(0); got != 0 {
			t.Fatalf("nothing written: %d unacknowledged, want 0", got)
		}
		s.Wrote(make([]byte, 3))
		if got := s.Unacked(3); got != 1 {
			t.Fatalf("3 of 6 bytes written: %d appends unacknowledged, want 1", got)
		}
		s.Appended(6)
		s.Wrote(make([]byte, 3)) // 6 of 12 written: the third append not started
		if got := s.Unacked(100); got != 2 {
			t.Fatalf("6 of 12 bytes written: %d appends unacknowledged, want 2", got)
		}
		s.Wrote(make([]byte, 6))
		for _, tc := range cases {
			if got := s.Unacked(tc.unacked); got != tc.want {
				t.Errorf("%d bytes unacknowledged: %d appends, want %d", tc.unacked, got, tc.want)
			}
		}
	})
	t.Run("Stage", func(t *testing.T) {
		var s Sent
		s.SetRaw()
		for _, n := range []int{4, 0, 2, 6} {
			s.Stage(n)
		}
		if got := s.Unacked(100); got != 0 {
			t.Fatalf("all staged: %d unacknowledged, want 0", got)
		}
		s.Release()
		if s.Written() != 12 {
			t.Fatalf("Written %d, want 12", s.Written())
		}
		for _, tc := range cases {
			if got := s.Unacked(tc.unacked); got != tc.want {
				t.Errorf("%d bytes unacknowledged: %d appends, want %d", tc.unacked, got, tc.want)
			}
		}
	})
}

// unackConn is a fakeConn that says how many records its peer has not
// acknowledged.
type unackConn struct {
	fakeConn
	unacked int
	ended   bool
	shut    bool // CloseWrite was called
}

func (u *unackConn) UnackedRecords() (int, bool) { return u.unacked, u.ended }

func (u *unackConn) CloseWrite() error { u.shut = true; return nil }

// TestCloseCountsUnackedRecords: at Close, records the transport took and
// the peer never acknowledged the head of move from TxSent to TxDropped,
// and their connection is reset (RFC 9293 §3.10.4: ABORT), so the loss
// counted is the loss that happens; a connection with none closes in
// order.
func TestCloseCountsUnackedRecords(t *testing.T) {
	s := newFakeLayer(&fakeTransport{}, Options{MaxRecord: 1472, RxBatch: 16, StagingSize: 4 << 10, DecoderSize: 64 << 10})
	lossy := &unackConn{fakeConn: fakeConn{room: -1, reading: true}, unacked: 2}
	clean := &unackConn{fakeConn: fakeConn{room: -1, reading: true}}
	s.Add(lossy, peer(1))
	s.Add(clean, peer(2))
	for range 3 {
		s.Queue([]byte("rec"))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	s.Linger(time.Millisecond, time.Millisecond, func([]Conn, time.Duration) {})
	s.Close()
	c := s.Counters()
	if c.TxSent != 4 || c.TxDropped != 2 {
		t.Errorf("TxSent %d TxDropped %d, want 4 and 2", c.TxSent, c.TxDropped)
	}
	if !lossy.aborted || clean.aborted || !clean.closed {
		t.Errorf("aborted: lossy %v clean %v; clean closed %v", lossy.aborted, clean.aborted, clean.closed)
	}
}

// TestFinishedWaitsForAcks: after the peer's FIN (RFC 9293 §3.6: our
// direction stays open) and the last answer written, an Unacker's
// connection is not closed while the peer has not acknowledged answers:
// it takes no more records, and when it ends unacknowledged (the peer
// reset it) they count in TxDropped; one whose answers were acknowledged
// closes in order.
func TestFinishedWaitsForAcks(t *testing.T) {
	s := newFakeLayer(&fakeTransport{}, Options{MaxRecord: 1472, RxBatch: 16, StagingSize: 4 << 10, DecoderSize: 64 << 10})
	lossy := &unackConn{fakeConn: fakeConn{room: -1, reading: true, eof: true}, unacked: 1}
	clean := &unackConn{fakeConn: fakeConn{room: -1, reading: true, eof: true}, unacked: 1}
	s.Add(lossy, peer(1))
	s.Add(clean, peer(2))
	if s.Queue([]byte("answer")) != nil {
		t.Fatal("Queue refused")
	}
	pkts := make([]dgramio.Packet, 4)
	s.Rx(pkts) // the FINs
	s.Flush()
	if s.Len() != 2 || lossy.closed || clean.closed {
		t.Fatalf("%d conns, closed %v %v: want both kept until acknowledged", s.Len(), lossy.closed, clean.closed)
	}
	if !lossy.shut || !clean.shut {
		t.Error("no FIN after the last answer: the peer would wait for our acknowledgements")
	}
	if s.Queue([]byte("late")) != dgramio.ErrNoRoute || s.Counters().NoConn != 1 {
		t.Error("Queue staged for connections that are closing")
	}
	lossy.ended = true
	clean.unacked = 0
	for deadline := time.Now().Add(10 * time.Second); s.Len() > 0 && time.Now().Before(deadline); {
		time.Sleep(checkEvery)
		s.Rx(pkts)
	}
	c := s.Counters()
	if s.Len() != 0 || !lossy.aborted || !clean.closed || clean.aborted {
		t.Errorf("%d conns; lossy aborted %v; clean closed %v aborted %v", s.Len(), lossy.aborted, clean.closed, clean.aborted)
	}
	if c.TxSent != 1 || c.TxDropped != 1 {
		t.Errorf("TxSent %d TxDropped %d, want 1 and 1", c.TxSent, c.TxDropped)
	}
}

// TestCloseReadsAllThatArrived: Close reads out everything its transport
// holds, not the bounded read-out of a live connection (readOutMax): a
// closing client with a full 32 MiB receive buffer of answers counts each
// of them in RxClosed.
func TestCloseReadsAllThatArrived(t *testing.T) {
	s, cs := newLayer(1, Options{DecoderSize: 64 << 10})
	rec := records(t, make([]byte, 1000))
	n := 2 * readOutMax * (64 << 10) / len(rec)
	for range n {
		cs[0].in.Write(rec)
	}
	s.Close()
	if c := s.Counters(); c.RxClosed != uint64(n) {
		t.Errorf("RxClosed %d, want %d", c.RxClosed, n)
	}
}

// TestFinishTimeout: a finished connection whose peer never acknowledges
// its last answers and never ends it (a peer that vanished) is reset
// after Options.FinishTimeout, its unacknowledged records counted in
// TxDropped.
func TestFinishTimeout(t *testing.T) {
	s := newFakeLayer(&fakeTransport{}, Options{MaxRecord: 1472, RxBatch: 16, StagingSize: 4 << 10, DecoderSize: 64 << 10,
		FinishTimeout: 20 * time.Millisecond})
	gone := &unackConn{fakeConn: fakeConn{room: -1, reading: true, eof: true}, unacked: 1}
	s.Add(gone, peer(1))
	s.Queue([]byte("answer"))
	pkts := make([]dgramio.Packet, 4)
	s.Rx(pkts)
	s.Flush()
	for deadline := time.Now().Add(10 * time.Second); s.Len() > 0 && time.Now().Before(deadline); {
		time.Sleep(checkEvery)
		s.Rx(pkts)
	}
	if c := s.Counters(); s.Len() != 0 || !gone.aborted || c.TxDropped != 1 || c.TxSent != 0 {
		t.Errorf("%d conns, aborted %v, TxSent %d TxDropped %d; want 0, true, 0, 1", s.Len(), gone.aborted, c.TxSent, c.TxDropped)
	}
}

// TestSentRandomSplits: whatever the sizes of the records and of the
// writes (prefixes split or whole, many records a write), Sent counts
// the records whose start is among the last unacked bytes, across the
// ring's growth.
func TestSentRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 50 {
		var s Sent
		var stream []byte
		var starts []int
		for range 1 + rng.IntN(300) {
			starts = append(starts, len(stream))
			stream = append(stream, records(t, make([]byte, rng.IntN(40)))...)
		}
		for i := 0; i < len(stream); {
			n := min(1+rng.IntN(64), len(stream)-i)
			s.Wrote(stream[i : i+n])
			i += n
		}
		for unacked := len(stream); unacked >= 0; unacked -= 1 + rng.IntN(50) {
			want := 0
			for _, st := range starts {
				if st >= len(stream)-unacked {
					want++
				}
			}
			if got := s.Unacked(uint64(unacked)); got != want {
				t.Fatalf("round %d: %d of %d bytes unacknowledged: %d records, want %d", round, unacked, len(stream), got, want)
			}
		}
	}
}

// BenchmarkSentWrote is one 100-byte record written whole and then
// acknowledged, as each message of a request/answer exchange.
func BenchmarkSentWrote(b *testing.B) {
	rec := records(b, make([]byte, 100))
	var s Sent
	b.ReportAllocs()
	for b.Loop() {
		s.Wrote(rec)
		s.Forget(0)
	}
}
