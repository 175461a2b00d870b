package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/record"
)

// fakeConn is an in-memory stream.Conn: in is what the peer sent (read
// from the front), out what Write took, up to room bytes at a time.
type fakeConn struct {
	Hook
	in, out         bytes.Buffer
	room            int   // bytes Write takes in all before it is full; <0: unbounded
	eof             bool  // the peer's FIN follows in
	err             error // Read and Write fail with it
	reading         bool
	closed, aborted bool
}

func (f *fakeConn) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := len(p)
	if f.room >= 0 {
		n = min(n, f.room)
		f.room -= n
	}
	f.out.Write(p[:n])
	return n, nil
}

func (f *fakeConn) Read(p []byte) (int, error) {
	if f.in.Len() > 0 {
		return f.in.Read(p)
	}
	if f.err != nil {
		return 0, f.err
	}
	if f.eof {
		return 0, io.EOF
	}
	return 0, nil
}

func (f *fakeConn) Readable() bool     { return f.in.Len() > 0 || f.eof || f.err != nil }
func (f *fakeConn) Writable() bool     { return f.room != 0 }
func (f *fakeConn) SetReading(on bool) { f.reading = on }
func (f *fakeConn) Close()             { f.closed = true }
func (f *fakeConn) Abort()             { f.aborted = true }

// fakeTransport accepts what is in pending. Its Watch reports every
// connection of its layer that is Readable (as a level-triggered epoll).
type fakeTransport struct {
	pending []*fakeConn
	peers   []netip.AddrPort
	layer   *Layer
	polls   int
	// idle makes Poll report that nothing happened; pushes and watches
	// count Push and Watch calls.
	idle            bool
	pushes, watches int
}

// newFakeLayer returns a layer over t, which watches it.
func newFakeLayer(t *fakeTransport, o Options) *Layer {
	t.layer = New(t, o)
	return t.layer
}

func (t *fakeTransport) Watch(mark func(Conn)) {
	t.watches++
	for _, c := range t.layer.conns {
		if c.t.Readable() {
			mark(c.t)
		}
	}
}

func (t *fakeTransport) Poll() bool  { t.polls++; return !t.idle }
func (t *fakeTransport) Push() error { t.pushes++; return nil }
func (t *fakeTransport) Accept(add func(Conn, netip.AddrPort)) {
	for i, c := range t.pending {
		add(c, t.peers[i])
	}
	t.pending, t.peers = nil, nil
}

func peer(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), 5000)
}

// newLayer returns a layer with n connections of unbounded room, and them.
func newLayer(n int, o Options) (*Layer, []*fakeConn) {
	if o.MaxRecord == 0 {
		o.MaxRecord = 1472
	}
	if o.RxBatch == 0 {
		o.RxBatch = 16
	}
	if o.StagingSize == 0 {
		o.StagingSize = 4 * (record.HeaderLen + o.MaxRecord)
	}
	if o.DecoderSize == 0 {
		o.DecoderSize = 64 << 10
	}
	s := newFakeLayer(&fakeTransport{}, o)
	var cs []*fakeConn
	for i := 0; i < n; i++ {
		c := &fakeConn{room: -1, reading: true}
		s.Add(c, peer(i))
		cs = append(cs, c)
	}
	return s, cs
}

func records(t testing.TB, payloads ...[]byte) []byte {
	t.Helper()
	var b []byte
	for _, p := range payloads {
		var err error
		if b, err = record.AppendRecord(b, p); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// rxAll calls Rx up to rounds times and returns the records, and the
// errors it returned and the ends of connections it delivered (with
// Options.Events: an EventPeerFIN as a *dgramio.PeerError of Reset false,
// an EventReset as its Err), in order.
func rxAll(s *Layer, rounds int) (got []string, errs []error) {
	pkts := make([]dgramio.Packet, 16)
	for i := 0; i < rounds; i++ {
		n, err := s.Rx(pkts)
		for _, p := range pkts[:n] {
			switch p.Event {
			case dgramio.EventData:
				got = append(got, string(p.Data))
			case dgramio.EventPeerFIN:
				errs = append(errs, &dgramio.PeerError{Peer: p.From})
			case dgramio.EventReset:
				errs = append(errs, p.Err)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return got, errs
}

// dgramio.Stats: message counters count one per destination, TxOversize
// included.
func TestCountsPerDestination(t *testing.T) {
	s, _ := newLayer(3, Options{})
	if s.Queue(make([]byte, 1473)) != dgramio.ErrTooLarge {
		t.Fatal("Queue took an oversize payload")
	}
	if s.QueueTo(make([]byte, 1473), peer(1)) != dgramio.ErrTooLarge {
		t.Fatal("QueueTo took an oversize payload")
	}
	if s.Queue([]byte("x")) != nil {
		t.Fatal("Queue refused")
	}
	c := s.Counters()
	if c.TxOversize != 4 || c.TxQueued != 3 {
		t.Fatalf("TxOversize %d TxQueued %d, want 4 (3+1) and 3", c.TxOversize, c.TxQueued)
	}
}

func TestQueueAllOrNone(t *testing.T) {
	s, _ := newLayer(2, Options{MaxRecord: 100, StagingSize: 3 * (record.HeaderLen + 100)})
	for i := 0; i < 3; i++ {
		if s.QueueTo(make([]byte, 100), peer(0)) != nil {
			t.Fatalf("QueueTo %d refused", i)
		}
	}
	if s.Queue(make([]byte, 100)) != dgramio.ErrBackPressure {
		t.Fatal("Queue took a record one connection has no room for")
	}
	if _, n, _ := s.Staged(1); n != 0 {
		t.Fatalf("the other connection has %d bytes staged after a refused Queue", n)
	}
	if c := s.Counters(); c.TxBackpressure != 2 {
		t.Fatalf("TxBackpressure %d, want 2", c.TxBackpressure)
	}
}

// TxBytes counts payload, not the stream's prefixes.
func TestTxBytesPayload(t *testing.T) {
	s, cs := newLayer(1, Options{})
	s.Queue([]byte("hello"))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	c := s.Counters()
	if c.TxBytes != 5 || c.StreamTx != 7 || c.TxSent != 1 || cs[0].out.Len() != 7 {
		t.Fatalf("TxBytes %d StreamTx %d TxSent %d written %d, want 5, 7, 1, 7", c.TxBytes, c.StreamTx, c.TxSent, cs[0].out.Len())
	}
}

// A record longer than MaxRecord that fills the decoder is skipped and
// counted, and the records after it arrive: the connection goes on.
func TestOversizeRecordSkipped(t *testing.T) {
	s, cs := newLayer(1, Options{})
	cs[0].in.Write(records(t, make([]byte, record.MaxRecord), []byte("after")))
	got, errs := rxAll(s, 4)
	if len(got) != 1 || got[0] != "after" || len(errs) != 0 {
		t.Fatalf("got %q, errors %v; want the record after the oversize one", got, errs)
	}
	if c := s.Counters(); c.RxTruncated != 1 {
		t.Fatalf("RxTruncated %d, want 1", c.RxTruncated)
	}
}

// RFC 9293 §3.6: a FIN closes the peer's direction only. The records
// before it are delivered, the FIN comes once as EventPeerFIN (never an
// error of Rx or Flush), answers queued after it until the next Flush
// still go out, and then the layer closes its side: EventEnded.
func TestHalfClose(t *testing.T) {
	s, cs := newLayer(1, Options{Events: true})
	f := cs[0]
	f.in.Write(records(t, []byte("a"), []byte("b")))
	f.eof = true
	pkts := make([]dgramio.Packet, 16)
	n, err := s.Rx(pkts)
	if n != 3 || err != nil || pkts[0].Event != dgramio.EventOpened || pkts[0].From != peer(0) || len(pkts[0].Data) != 0 {
		t.Fatalf("Rx = %d, %v (%+v); want the opened event and the 2 records", n, err, pkts[0])
	}
	for _, p := range pkts[1:n] {
		if p.Event != dgramio.EventData || s.QueueTo(p.Data, p.From) != nil {
			t.Fatal("QueueTo refused an answer to a peer that is still sending")
		}
	}
	n, err = s.Rx(pkts)
	if n != 1 || err != nil || pkts[0].Event != dgramio.EventPeerFIN || pkts[0].From != peer(0) {
		t.Fatalf("Rx = %d, %v (%+v); want the peer's FIN as EventPeerFIN", n, err, pkts[0])
	}
	if s.QueueTo([]byte("bye"), peer(0)) != nil {
		t.Fatal("QueueTo refused an answer to the peer's FIN")
	}
	if f.closed {
		t.Fatal("the connection was closed with answers still staged")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	want := records(t, []byte("a"), []byte("b"), []byte("bye"))
	if !bytes.Equal(f.out.Bytes(), want) {
		t.Fatalf("peer got %q, want %q", f.out.Bytes(), want)
	}
	if n, err = s.Rx(pkts); n != 1 || err != nil || pkts[0].Event != dgramio.EventEnded || pkts[0].From != peer(0) {
		t.Fatalf("Rx = %d, %v (%+v); want EventEnded", n, err, pkts[0])
	}
	if !f.closed || s.Len() != 0 {
		t.Fatalf("closed %v, connections %d: want our side closed once the answers were written", f.closed, s.Len())
	}
	if s.QueueTo([]byte("late"), peer(0)) != dgramio.ErrNoRoute {
		t.Fatal("QueueTo took a record for a closed connection")
	}
	if c := s.Counters(); c.PeerCloses != 1 || c.Resets != 0 || c.NoConn != 1 || c.TxSent != 3 || c.TxDropped != 0 {
		t.Fatalf("counters %+v", c)
	}
	// A held (paused) peer is not closed: its holder still has answers
	// for it. Without Events the FIN is only counted.
	s2, cs2 := newLayer(1, Options{})
	cs2[0].in.Write(records(t, []byte("q1"), []byte("q2")))
	cs2[0].eof = true
	s2.Rx(pkts[:1]) // q1
	s2.Rx(pkts[:2]) // q2, and the FIN read behind it
	s2.Hold(peer(0), true)
	if n, err := s2.Rx(pkts); n != 0 || err != nil {
		t.Fatalf("Rx of a held, finished peer: %d, %v, want nothing", n, err)
	}
	if c := s2.Counters(); c.PeerCloses != 1 {
		t.Fatalf("PeerCloses %d, want 1", c.PeerCloses)
	}
	if cs2[0].closed || s2.QueueTo([]byte("held answer"), peer(0)) != nil {
		t.Fatal("a held peer's connection was closed after its FIN")
	}
	s2.Hold(peer(0), false)
	s2.Flush()
	if !cs2[0].closed || cs2[0].out.Len() == 0 {
		t.Fatalf("closed %v, written %d after Hold off", cs2[0].closed, cs2[0].out.Len())
	}
}

// RFC 9293 §3.6.1: after the peer's FIN our direction stays open for as
// long as the application has answers to send (Linux keeps the socket
// until close). An answer that QueueTo refused for back-pressure is one
// the caller still has: the finished connection stays open until it is
// queued and written, not only until what was staged is written; a caller
// that gives the answer up holds it FinishTimeout at most.
func TestHalfCloseWaitsForRefusedAnswer(t *testing.T) {
	for _, giveUp := range []bool{false, true} {
		s, cs := newLayer(1, Options{MaxRecord: 10, StagingSize: 2 * (record.HeaderLen + 2), FinishTimeout: 50 * time.Millisecond})
		f := cs[0]
		f.room = 0
		f.in.Write(records(t, []byte("q0"), []byte("q1"), []byte("q2")))
		f.eof = true
		pkts := make([]dgramio.Packet, 4)
		n, err := s.Rx(pkts) // the records, and the FIN read behind them
		if n != 3 || err != nil {
			t.Fatalf("Rx = %d, %v; want the 3 records", n, err)
		}
		var backlog []string
		for _, p := range pkts[:n] {
			a := "a" + string(p.Data[1:])
			if s.QueueTo([]byte(a), p.From) != nil {
				backlog = append(backlog, a)
			}
		}
		if len(backlog) != 1 {
			t.Fatalf("%d answers refused, want 1 (the staging holds 2)", len(backlog))
		}
		s.Flush()
		f.room = -1 // the peer reads: what was staged is written
		s.Rx(pkts)
		s.Flush()
		if f.out.Len() == 0 || f.closed || s.Len() != 1 {
			t.Fatalf("closed %v with an answer refused and not queued since", f.closed)
		}
		if giveUp {
			deadline := time.Now().Add(10 * time.Second)
			for !f.closed && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				s.Rx(pkts)
				s.Flush()
			}
			if !f.closed || s.QueueTo([]byte(backlog[0]), peer(0)) != dgramio.ErrNoRoute {
				t.Fatalf("closed %v: a caller that gave its answer up holds the connection past FinishTimeout", f.closed)
			}
			continue
		}
		if s.QueueTo([]byte(backlog[0]), peer(0)) != nil {
			t.Fatal("the refused answer was refused again with room")
		}
		s.Flush()
		s.Rx(pkts)
		want := records(t, []byte("a0"), []byte("a1"), []byte("a2"))
		if !f.closed || !bytes.Equal(f.out.Bytes(), want) {
			t.Fatalf("closed %v, peer got %q; want %q, then our side closed", f.closed, f.out.Bytes(), want)
		}
		if c := s.Counters(); c.TxSent != 3 || c.TxDropped != 0 || c.PeerCloses != 1 {
			t.Fatalf("counters %+v", c)
		}
	}
}

// A record cut by the peer's FIN or reset is counted once, RxMalformed.
func TestCutRecordCounted(t *testing.T) {
	for _, reset := range []bool{false, true} {
		s, cs := newLayer(1, Options{Events: true})
		cs[0].in.Write(records(t, []byte("whole"), []byte("cut-off"))[:10])
		if reset {
			cs[0].err = &dgramio.PeerError{Reset: true, Err: errors.New("reset")}
		} else {
			cs[0].eof = true
		}
		got, errs := rxAll(s, 4)
		if len(got) != 1 || len(errs) != 1 {
			t.Fatalf("reset %v: got %q, errors %v", reset, got, errs)
		}
		if c := s.Counters(); c.RxMalformed != 1 {
			t.Fatalf("reset %v: RxMalformed %d, want 1", reset, c.RxMalformed)
		}
	}
}

// A reset ends both directions: what is staged is dropped and counted.
func TestResetDropsStaged(t *testing.T) {
	s, cs := newLayer(1, Options{Events: true})
	s.Queue([]byte("x"))
	cs[0].err = &dgramio.PeerError{Reset: true, Err: errors.New("reset")}
	_, errs := rxAll(s, 2)
	if len(errs) != 1 || !cs[0].aborted {
		t.Fatalf("errors %v, aborted %v", errs, cs[0].aborted)
	}
	if c := s.Counters(); c.Resets != 1 || c.TxDropped != 1 {
		t.Fatalf("Resets %d TxDropped %d, want 1 and 1", c.Resets, c.TxDropped)
	}
}

// Hold stops delivery and reading of one connection; the others go on.
func TestHold(t *testing.T) {
	s, cs := newLayer(2, Options{})
	cs[0].in.Write(records(t, []byte("a0")))
	cs[1].in.Write(records(t, []byte("b0")))
	if !s.Hold(peer(0), true) || cs[0].reading {
		t.Fatal("Hold did not stop reading")
	}
	got, _ := rxAll(s, 3)
	if len(got) != 1 || got[0] != "b0" {
		t.Fatalf("got %q while peer 0 is held, want only b0", got)
	}
	if cs[0].in.Len() == 0 {
		t.Fatal("a held connection was read")
	}
	s.Hold(peer(0), false)
	if got, _ = rxAll(s, 2); len(got) != 1 || got[0] != "a0" {
		t.Fatalf("got %q after Hold off, want a0", got)
	}
	// A held connection still wakes for room for its released bytes (a
	// holder waits for that room).
	s.Hold(peer(0), true)
	s.Hold(peer(1), true)
	cs[0].room = 0
	s.QueueTo([]byte("answer"), peer(0))
	s.Flush()
	if s.Ready() {
		t.Fatal("Ready with nothing to read and no room")
	}
	cs[0].room = -1
	if !s.Ready() {
		t.Fatal("not Ready when a held connection has room for its released bytes")
	}
	if s.Hold(peer(9), true) {
		t.Fatal("Hold of an unknown peer said yes")
	}
}

// Close counts what is staged: a record partly taken counts as sent (the
// receiver counts it cut), the rest as dropped.
func TestAbandonCounts(t *testing.T) {
	s, cs := newLayer(1, Options{})
	cs[0].room = 3 // the first record's head only
	s.Queue([]byte("first"))
	s.Queue([]byte("second"))
	s.Flush()
	s.Abandon()
	s.Close()
	if c := s.Counters(); c.TxSent != 1 || c.TxDropped != 1 {
		t.Fatalf("TxSent %d TxDropped %d, want 1 and 1", c.TxSent, c.TxDropped)
	}
	if !cs[0].closed {
		t.Fatal("Close did not close the connection")
	}
}

func TestAccept(t *testing.T) {
	tr := &fakeTransport{pending: []*fakeConn{{room: -1}}, peers: []netip.AddrPort{peer(7)}}
	s := newFakeLayer(tr, Options{MaxRecord: 100, RxBatch: 4, StagingSize: 1000, DecoderSize: 1000})
	s.Flush()
	if s.Len() != 1 || s.Counters().Accepts != 1 || s.QueueTo([]byte("x"), peer(7)) != nil {
		t.Fatalf("connections %d, accepts %d", s.Len(), s.Counters().Accepts)
	}
}

func TestNoAllocs(t *testing.T) {
	s, cs := newLayer(1, Options{})
	pkts := make([]dgramio.Packet, 16)
	rec := records(t, []byte("ping"))
	allocs := testing.AllocsPerRun(100, func() {
		cs[0].in.Write(rec)
		n, _ := s.Rx(pkts)
		for _, p := range pkts[:n] {
			s.QueueTo(p.Data, p.From)
		}
		s.Flush()
		cs[0].out.Reset()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round trip", allocs)
	}
}

// FuzzRx feeds any bytes, in any pieces, ended by a FIN or a reset, to a
// connection: Rx never panics or hands out more than MaxRecord bytes, and
// every record is delivered, skipped (RxTruncated) or, cut at the end,
// counted (RxMalformed, at most one). A connection whose transport lends
// its bytes in place (Lender, through a ring that wraps) delivers the
// same records and counts the same.
func FuzzRx(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c', 0, 1}, uint8(2), false)
	f.Add(append([]byte{0xff, 0xff}, make([]byte, 300)...), uint8(7), true)
	f.Fuzz(func(t *testing.T, stream []byte, piece uint8, reset bool) {
		o := Options{MaxRecord: 100, DecoderSize: 256, RxBatch: 4}
		step := int(piece%64) + 1
		copied, cs := newLayer(1, o)
		plain := fuzzRx(t, copied, stream, step, reset, func(p []byte) int { cs[0].in.Write(p); return len(p) }, cs[0])
		lent, lc := newLendLayer(o, 200)
		inPlace := fuzzRx(t, lent, stream, step, reset, lc.arrive, &lc.fakeConn)
		if fmt.Sprint(plain) != fmt.Sprint(inPlace) {
			t.Fatalf("records copied\n%q\nlent\n%q", plain, inPlace)
		}
		if a, b := copied.Counters(), lent.Counters(); a != b {
			t.Fatalf("counters copied %+v, lent %+v", a, b)
		}
	})
}

// fuzzRx is FuzzRx's run over one layer: arrive delivers bytes to its
// connection (as many as it takes), end its FIN or reset.
func fuzzRx(t *testing.T, s *Layer, stream []byte, step int, reset bool, arrive func([]byte) int, end *fakeConn) []string {
	pkts := make([]dgramio.Packet, 4)
	var got []string
	for off, rounds := 0, 0; s.Len() > 0; rounds++ {
		if rounds > 4*len(stream)+100 {
			t.Fatalf("the connection never ended: %+v", s.Counters())
		}
		if off < len(stream) {
			off += arrive(stream[off:min(off+step, len(stream))])
		} else if reset {
			end.err = &dgramio.PeerError{Reset: true, Err: errors.New("reset")}
		} else {
			end.eof = true
		}
		n, _ := s.Rx(pkts)
		for _, p := range pkts[:n] {
			if len(p.Data) > 100 {
				t.Fatalf("record of %d bytes", len(p.Data))
			}
			got = append(got, string(p.Data))
		}
	}
	c := s.Counters()
	if c.RxDelivered != uint64(len(got)) || c.RxMalformed > 1 || c.PeerCloses+c.Resets != 1 {
		t.Fatalf("delivered %d, counters %+v", len(got), c)
	}
	return got
}

// halfConn is a fakeConn that can half-close: after CloseWrite, each wait
// of Linger moves the next of later into in (what the peer sends after
// our FIN), and the peer's FIN follows the last when fin is set.
type halfConn struct {
	fakeConn
	shut  bool
	later [][]byte
	fin   bool
}

func (h *halfConn) CloseWrite() error { h.shut = true; return nil }

func (h *halfConn) step() {
	if len(h.later) > 0 {
		h.in.Write(h.later[0])
		h.later = h.later[1:]
	}
	if len(h.later) == 0 && h.fin {
		h.eof = true
	}
}

func lingerLayer(t *testing.T, in []byte, later [][]byte, fin bool) (*Layer, *halfConn) {
	t.Helper()
	s := newFakeLayer(&fakeTransport{}, Options{MaxRecord: 1472, RxBatch: 16, StagingSize: 4 << 10, DecoderSize: 64 << 10})
	h := &halfConn{fakeConn: fakeConn{room: -1, reading: true}, later: later, fin: fin}
	h.in.Write(in)
	s.Add(h, peer(1))
	return s, h
}

// TestLingerReadsWhatFollowsOurFIN: after our FIN the peer's direction
// stays open (RFC 9293 §3.6, FIN-WAIT-1/2 go on receiving), so a closing
// end reads on until the peer's FIN, and every record it reads, and every
// one decoded before and never delivered, counts in RxClosed: none of
// them is lost without a counter.
func TestLingerReadsWhatFollowsOurFIN(t *testing.T) {
	recs := records(t, []byte("a1"), []byte("a2"), []byte("a3"), []byte("a4"))
	// Two records and half of the third have arrived; the rest, and a
	// fourth, come after our FIN.
	cut := len(records(t, []byte("a1"), []byte("a2"))) + 3
	s, h := lingerLayer(t, recs[:cut], [][]byte{recs[cut : cut+2], recs[cut+2:]}, true)
	waits := 0
	s.Abandon()
	s.Linger(time.Second, 10*time.Second, func(conns []Conn, d time.Duration) {
		if len(conns) != 1 || conns[0] != Conn(h) {
			t.Fatalf("wait for %v, want the one open connection", conns)
		}
		waits++
		h.step()
	})
	s.Close()
	c := s.Counters()
	if !h.shut || !h.closed {
		t.Errorf("CloseWrite %v, Close %v: want both", h.shut, h.closed)
	}
	if c.RxClosed != 4 || c.RxMalformed != 0 {
		t.Errorf("RxClosed %d RxMalformed %d, want 4 and 0", c.RxClosed, c.RxMalformed)
	}
	if waits != 2 {
		t.Errorf("%d waits, want 2 (it stops at the peer's FIN)", waits)
	}
	var st dgramio.Stats
	s.Fill(&st)
	if v, ok := st.Counter("stream", "rx_closed"); !ok || v != 4 || st.Lost() != 4 {
		t.Errorf("stream.rx_closed %d (%v), Lost %d; want 4, a loss", v, ok, st.Lost())
	}
}

// TestLingerIdlePeer: a peer that sends nothing more and never closes is
// given up after the idle time; the record it left cut counts in
// RxMalformed, the whole one in RxClosed.
func TestLingerIdlePeer(t *testing.T) {
	recs := records(t, []byte("b1"), []byte("b2"))
	s, h := lingerLayer(t, recs[:len(recs)-1], nil, false)
	start := time.Now()
	s.Linger(20*time.Millisecond, 10*time.Second, func(_ []Conn, d time.Duration) { time.Sleep(d) })
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Linger took %v on an idle peer", el)
	}
	s.Close()
	if c := s.Counters(); c.RxClosed != 1 || c.RxMalformed != 1 || !h.shut {
		t.Errorf("RxClosed %d RxMalformed %d CloseWrite %v; want 1, 1, true", c.RxClosed, c.RxMalformed, h.shut)
	}
}

// TestFailedConnUnreadCounted: a connection whose write fails (the peer
// reset: RFC 9293 §3.10.7.4) still holds what the peer sent before; the
// layer reads it out and counts its records in RxClosed, the staged one
// in TxDropped.
func TestFailedConnUnreadCounted(t *testing.T) {
	s, cs := newLayer(1, Options{})
	cs[0].in.Write(records(t, []byte("c1"), []byte("c2"), []byte("c3")))
	cs[0].err = errors.New("connection reset")
	if s.Queue([]byte("answer")) != nil {
		t.Fatal("Queue refused")
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v for a failed connection (an event, not an error)", err)
	}
	c := s.Counters()
	if c.Resets != 1 || c.RxClosed != 3 || c.TxDropped != 1 || s.Len() != 0 || !cs[0].aborted {
		t.Errorf("RxClosed %d TxDropped %d, %d conns, aborted %v; want 3, 1, 0, true", c.RxClosed, c.TxDropped, s.Len(), cs[0].aborted)
	}
}

// TestQueueToFollowsByPeer: QueueTo's memory of the connection it found
// last never outlives byPeer's entry: answers alternate between two
// peers and reach each; a new connection from a peer takes its answers
// from then on; a peer whose connection ended has none (NoConn).
func TestQueueToFollowsByPeer(t *testing.T) {
	s, cs := newLayer(2, Options{})
	for _, p := range []int{0, 0, 1, 0} {
		if s.QueueTo([]byte{byte('a' + p)}, peer(p)) != nil {
			t.Fatalf("QueueTo peer %d refused", p)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := cs[0].out.Bytes(), records(t, []byte("a"), []byte("a"), []byte("a")); !bytes.Equal(got, want) {
		t.Fatalf("peer 0 got %q, want %q", got, want)
	}
	if got, want := cs[1].out.Bytes(), records(t, []byte("b")); !bytes.Equal(got, want) {
		t.Fatalf("peer 1 got %q, want %q", got, want)
	}
	// Peer 0 connects again: its answers go to the new connection.
	again := &fakeConn{room: -1, reading: true}
	s.Add(again, peer(0))
	if s.QueueTo([]byte("new"), peer(0)) != nil {
		t.Fatal("QueueTo the new connection refused")
	}
	s.Flush()
	if got, want := again.out.Bytes(), records(t, []byte("new")); !bytes.Equal(got, want) {
		t.Fatalf("the new connection got %q, want %q (the old one %q)", got, want, cs[0].out.Bytes())
	}
	// Peer 1 finishes: once the layer removed it, QueueTo has nowhere to go.
	s.QueueTo([]byte("x"), peer(1))
	cs[1].eof = true
	rxAll(s, 3)
	s.Flush()
	before := s.Counters().NoConn
	if s.QueueTo([]byte("late"), peer(1)) != dgramio.ErrNoRoute {
		t.Fatal("QueueTo a removed connection's peer took the record")
	}
	if s.Counters().NoConn != before+1 {
		t.Errorf("NoConn %d, want %d", s.Counters().NoConn, before+1)
	}
}

// TestRxKeepsOrderWhenAllVisited: when one Rx reaches every connection
// and some still have records (their decoders filled up), they keep their
// order for the next Rx, and nothing is skipped or repeated.
func TestRxKeepsOrderWhenAllVisited(t *testing.T) {
	const per = 6 // records per connection; the decoder holds two
	s, cs := newLayer(3, Options{MaxRecord: 8, DecoderSize: 2 * (record.HeaderLen + 8)})
	for i, c := range cs {
		for j := 0; j < per; j++ {
			c.in.Write(records(t, []byte(fmt.Sprintf("c%d-r%04d", i, j))))
		}
	}
	var want []string
	for j := 0; j < per; j += 2 {
		for i := range cs {
			want = append(want, fmt.Sprintf("c%d-r%04d", i, j), fmt.Sprintf("c%d-r%04d", i, j+1))
		}
	}
	got, errs := rxAll(s, per)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records in the order\n%v\nwant\n%v", got, want)
	}
}

// TestFlushPollsUnlessRxDid: a poll loop's step (Rx, then Flush) polls
// the transport once; a Flush with no Rx since the last Flush polls (a
// sender that never calls Rx still takes its ACKs and accepts).
func TestFlushPollsUnlessRxDid(t *testing.T) {
	s, cs := newLayer(1, Options{})
	tr := s.t.(*fakeTransport)
	cs[0].in.Write(records(t, []byte("q")))
	pkts := make([]dgramio.Packet, 4)
	step := func(rx bool) int {
		before := tr.polls
		if rx {
			if _, err := s.Rx(pkts); err != nil {
				t.Fatal(err)
			}
		}
		if s.Queue([]byte("a")) != nil {
			t.Fatal("Queue refused")
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		return tr.polls - before
	}
	if n := step(true); n != 1 {
		t.Fatalf("Rx and Flush polled %d times, want 1", n)
	}
	for i := range 3 {
		if n := step(false); n != 1 {
			t.Fatalf("Flush %d without an Rx polled %d times, want 1", i, n)
		}
	}
	if n := step(true); n != 1 {
		t.Fatalf("Rx and Flush polled %d times, want 1", n)
	}
	// A connection the transport accepted after an Rx is taken by the
	// next Rx, or by a Flush after a Flush.
	if _, err := s.Rx(pkts); err != nil {
		t.Fatal(err)
	}
	tr.pending, tr.peers = []*fakeConn{{room: -1, reading: true}}, []netip.AddrPort{peer(9)}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 1 {
		t.Fatalf("%d connections after a Flush that follows an Rx, want 1 (no poll)", s.Len())
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Fatalf("%d connections after a second Flush, want 2", s.Len())
	}
	if got := cs[0].out.Len(); got != 5*(record.HeaderLen+1) {
		t.Fatalf("wrote %d bytes, want %d", got, 5*(record.HeaderLen+1))
	}
}

// TestIdleRx: an Rx whose Poll reports that nothing happened, with no
// work of the layer's own waiting, returns at once, without Accept, Watch
// or Push; one with records still to deliver, or after Poll reported
// something, does the whole round.
func TestIdleRx(t *testing.T) {
	s, cs := newLayer(1, Options{RxBatch: 1})
	tr := s.t.(*fakeTransport)
	pkts := make([]dgramio.Packet, 4)
	rx := func() int {
		t.Helper()
		n, err := s.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	rx() // the connection's first read (Add lists it)
	tr.idle = true
	w, p := tr.watches, tr.pushes
	if n := rx(); n != 0 || tr.watches != w || tr.pushes != p {
		t.Fatalf("an idle Rx: %d records, %d watches, %d pushes; want 0, none, none", n, tr.watches-w, tr.pushes-p)
	}
	// Two records arrive, reported by a Poll that says so; the batch of
	// one leaves the second decoded, which the next Rx delivers even
	// though its Poll reports nothing.
	cs[0].in.Write(records(t, []byte("a"), []byte("b")))
	tr.idle = false
	if n := rx(); n != 1 || string(pkts[0].Data) != "a" {
		t.Fatalf("first Rx: %d records %q, want \"a\"", n, pkts[0].Data)
	}
	tr.idle = true
	if n := rx(); n != 1 || string(pkts[0].Data) != "b" {
		t.Fatalf("second Rx (Poll idle): %d records %q, want \"b\"", n, pkts[0].Data)
	}
	// An event to report is the layer's own work too.
	s.Report(errors.New("stall"))
	if _, err := s.Rx(pkts); err == nil {
		t.Fatal("an idle Rx with an event waiting returned no error")
	}
}

// A connection's end is reported once: a write that fails after the peer's
// FIN was reported (a peer process that died leaves a FIN, then resets
// what we write to it) drops and counts what was staged, and is followed
// by EventEnded only, not by a second end (EventReset).
func TestEndReportedOnceAfterFIN(t *testing.T) {
	s, cs := newLayer(1, Options{Events: true, MaxRecord: 10, StagingSize: 2 * (record.HeaderLen + 2), FinishTimeout: time.Minute})
	f := cs[0]
	f.room = 0
	f.eof = true
	got, errs := rxAll(s, 1)
	if len(got) != 0 || len(errs) != 1 {
		t.Fatalf("got %q, ends %v; want the FIN", got, errs)
	}
	refused := 0
	for i := 0; i < 3; i++ {
		if s.QueueTo([]byte("q"), peer(0)) == dgramio.ErrBackPressure {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no record refused: the connection is not held open by a refused one")
	}
	s.Flush()
	f.err = &dgramio.PeerError{Err: syscall.EPIPE} // the peer is gone
	f.room = -1
	var ended bool
	pkts := make([]dgramio.Packet, 16)
	for i := 0; i < 8; i++ {
		s.Flush()
		n, err := s.Rx(pkts)
		if err != nil {
			t.Fatalf("Rx: %v", err)
		}
		for _, p := range pkts[:n] {
			switch p.Event {
			case dgramio.EventEnded:
				ended = true
			case dgramio.EventData:
				t.Fatalf("a record after the FIN: %q", p.Data)
			default:
				t.Fatalf("the end reported again: %v %v", p.Event, p.Err)
			}
		}
	}
	if !ended || s.Len() != 0 {
		t.Fatalf("ended %v, %d connections: the failed connection was not removed", ended, s.Len())
	}
	if c := s.Counters(); c.PeerCloses != 1 || c.TxDropped != 2 || c.TxQueued != 2 {
		t.Fatalf("counters %+v: want the FIN once and the 2 staged records dropped", c)
	}
}
