package stream

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/record"
)

// stageConn is a fakeConn that is a Stager: free bytes of room, the
// records staged in held until Release moves them to out. Write must
// never be called on it.
type stageConn struct {
	fakeConn
	free      int
	held      []byte
	unstaged  int // Unstage calls
	wroteOnce bool
}

func (c *stageConn) Room() int {
	if c.err != nil {
		return 0
	}
	return c.free
}

func (c *stageConn) Stage(head, body []byte) bool {
	if len(head)+len(body) > c.Room() {
		return false
	}
	c.held = append(append(c.held, head...), body...)
	c.free -= len(head) + len(body)
	return true
}

func (c *stageConn) Release() { c.out.Write(c.held); c.held = c.held[:0] }
func (c *stageConn) Unstage() { c.free += len(c.held); c.held = c.held[:0]; c.unstaged++ }

func (c *stageConn) Write(p []byte) (int, error) {
	c.wroteOnce = true
	return c.fakeConn.Write(p)
}

var _ Stager = (*stageConn)(nil)

// Records queued for a Stager's connection go into its buffer at Queue,
// held there until Flush releases them all, and count as sent then; the
// layer writes nothing itself. Queue stays all-or-none across a Stager
// and a connection the layer stages for, and a record that does not fit
// the Stager's room is back-pressure; Abandon drops what is staged
// (TxDropped).
func TestStagerHoldsUntilFlush(t *testing.T) {
	s, cs := newLayer(1, Options{})
	sc := &stageConn{fakeConn: fakeConn{room: -1, reading: true}, free: 100}
	s.Add(sc, peer(9))
	if s.Queue([]byte("one")) != nil || s.QueueTo([]byte("two"), peer(9)) != nil {
		t.Fatal("Queue refused")
	}
	if string(sc.held) != "\x00\x03one\x00\x03two" || sc.out.Len() != 0 {
		t.Fatalf("staged %q, released %q before Flush", sc.held, sc.out.Bytes())
	}
	if _, bytes, records := s.Staged(1); bytes != 10 || records != 2 {
		t.Fatalf("Staged says %d bytes, %d records; want 10 and 2", bytes, records)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if sc.out.String() != "\x00\x03one\x00\x03two" || len(sc.held) != 0 || sc.wroteOnce {
		t.Fatalf("after Flush: released %q, held %q, Write called %v", sc.out.Bytes(), sc.held, sc.wroteOnce)
	}
	if cs[0].out.String() != "\x00\x03one" {
		t.Fatalf("the other connection got %q", cs[0].out.Bytes())
	}
	st := s.Counters()
	if st.TxSent != 3 || st.TxBytes != 9 || st.StreamTx != 15 {
		t.Fatalf("TxSent %d, TxBytes %d, StreamTx %d; want 3, 9, 15", st.TxSent, st.TxBytes, st.StreamTx)
	}
	// 90 bytes of room are left: a record of 89 does not fit, anywhere.
	if s.Queue(make([]byte, 89)) != dgramio.ErrBackPressure || len(sc.held) != 0 || s.conns[0].stage.Len() != 0 {
		t.Fatal("Queue staged a record the Stager had no room for")
	}
	if s.QueueTo(make([]byte, 89), peer(9)) != dgramio.ErrBackPressure {
		t.Fatal("QueueTo staged a record the Stager had no room for")
	}
	if st := s.Counters(); st.TxBackpressure != 3 {
		t.Fatalf("TxBackpressure %d, want 3 (two connections, then one)", st.TxBackpressure)
	}
	if s.QueueTo([]byte("kept"), peer(9)) != nil {
		t.Fatal("a record that fits was refused")
	}
	s.Abandon()
	if st := s.Counters(); st.TxDropped != 1 || sc.unstaged != 1 || len(sc.held) != 0 {
		t.Fatalf("Abandon: TxDropped %d, Unstage calls %d, held %q", st.TxDropped, sc.unstaged, sc.held)
	}
}

// A Stager whose room does not grow while a record waits for it is a
// send stall (Options.SendStall), reported once (an EventStalled, no
// error); room that grows starts the clock again, and a record that fits
// ends the watch.
func TestStagerStall(t *testing.T) {
	const stall = 20 * time.Millisecond
	var reported []netip.AddrPort
	s := newFakeLayer(&fakeTransport{}, Options{MaxRecord: 100, RxBatch: 16, DecoderSize: 256, StagingSize: 4 * (record.HeaderLen + 100), SendStall: stall, Events: true,
		StallError: func(peer netip.AddrPort, d time.Duration) error {
			reported = append(reported, peer)
			return errors.New("stalled")
		}})
	sc := &stageConn{fakeConn: fakeConn{room: -1, reading: true}, free: 50}
	s.Add(sc, peer(1))
	if s.QueueTo(make([]byte, 60), peer(1)) != dgramio.ErrBackPressure {
		t.Fatal("a record larger than the room was staged")
	}
	// The room grows (the peer acknowledged), then stops growing.
	time.Sleep(stall / 2)
	sc.free += 5
	grew := time.Now()
	s.Flush()
	time.Sleep(stall / 2)
	err := s.Flush()
	if since := time.Since(grew); since < stall && (err != nil || len(reported) != 0) {
		t.Fatalf("stall reported (%v) although the room grew %v ago", err, since)
	}
	var errs int
	if err != nil {
		errs++
	}
	for deadline := time.Now().Add(10 * time.Second); len(reported) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no stall reported")
		}
		if s.Flush() != nil {
			errs++
		}
		time.Sleep(time.Millisecond)
	}
	for range 5 {
		if s.Flush() != nil {
			errs++
		}
	}
	if errs != 0 || len(reported) != 1 || reported[0] != peer(1) || s.Counters().Stalls != 1 {
		t.Fatalf("%d errors, reported %v, Stalls %d; want one stall of peer 1, no error", errs, reported, s.Counters().Stalls)
	}
	var stalls []netip.AddrPort
	pkts := make([]dgramio.Packet, 16)
	for range 3 {
		n, _ := s.Rx(pkts)
		for _, p := range pkts[:n] {
			if p.Event == dgramio.EventStalled && p.Err != nil {
				stalls = append(stalls, p.From)
			}
		}
	}
	if len(stalls) != 1 || stalls[0] != peer(1) {
		t.Fatalf("EventStalled of %v, want one of peer 1", stalls)
	}
	// Room for the largest record: the watch ends.
	sc.free = record.HeaderLen + 100
	s.Flush()
	if len(s.tx) != 0 {
		t.Fatal("still watched with room for any record")
	}
	if k, err := s.Rx(pkts[:1]); k != 0 || err != nil {
		t.Fatalf("Rx = %d, %v", k, err)
	}
}

// A Stager with room to spare still holds no more than StagingSize bytes
// between two Flushes (Config.TxQueue's records): the record beyond is
// back-pressure until the Flush, which is no send stall.
func TestStagerHoldsTxQueue(t *testing.T) {
	s := newFakeLayer(&fakeTransport{}, Options{MaxRecord: 100, RxBatch: 16, DecoderSize: 256,
		StagingSize: 3 * (record.HeaderLen + 10), SendStall: time.Nanosecond,
		StallError: func(netip.AddrPort, time.Duration) error { return errors.New("stalled") }})
	sc := &stageConn{fakeConn: fakeConn{room: -1, reading: true}, free: 1 << 20}
	s.Add(sc, peer(1))
	for i := range 3 {
		if s.QueueTo(make([]byte, 10), peer(1)) != nil {
			t.Fatalf("record %d refused", i)
		}
	}
	if s.QueueTo(make([]byte, 10), peer(1)) != dgramio.ErrBackPressure || s.Queue(make([]byte, 10)) != dgramio.ErrBackPressure {
		t.Fatal("a fourth record was staged before Flush")
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if s.QueueTo(make([]byte, 10), peer(1)) != nil {
		t.Fatal("refused after the Flush")
	}
	if st := s.Counters(); st.TxBackpressure != 2 || st.TxSent != 3 || st.Stalls != 0 {
		t.Fatalf("TxBackpressure %d, TxSent %d, Stalls %d; want 2, 3, 0", st.TxBackpressure, st.TxSent, st.Stalls)
	}
}
