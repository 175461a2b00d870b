package stream

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/dgramio/dgramio"
)

// rawRx calls Rx rounds times and returns the bytes delivered and the
// largest Packet.
func rawRx(s *Layer, rounds int) (got []byte, largest int) {
	pkts := make([]dgramio.Packet, 4)
	for range rounds {
		n, _ := s.Rx(pkts)
		for _, p := range pkts[:n] {
			if p.Event == dgramio.EventData {
				got = append(got, p.Data...)
				largest = max(largest, len(p.Data))
			}
		}
	}
	return got, largest
}

// FramingRaw: Rx hands the bytes as they came, in Packets of at most
// MaxRecord, through the layer's decoder and through a Lender's buffer in
// place; QueueTo appends bytes without a prefix, one message each.
func TestRawFraming(t *testing.T) {
	in := make([]byte, 1000)
	for i := range in {
		in[i] = byte(i * 7)
	}
	for _, lend := range []bool{false, true} {
		o := Options{MaxRecord: 100, RxBatch: 4, DecoderSize: 256, StagingSize: 1024, Framing: dgramio.FramingRaw}
		var s *Layer
		var fc *fakeConn
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
		got, largest := rawRx(s, 20)
		if !bytes.Equal(got, in) || largest > 100 {
			t.Fatalf("lend %v: %d bytes back (largest Packet %d), want the 1000 sent, at most 100 a Packet", lend, len(got), largest)
		}
		if c := s.Counters(); c.RxBytes != 1000 || c.RxDelivered < 10 || c.RxMalformed != 0 || c.RxTruncated != 0 {
			t.Fatalf("lend %v: counters %+v", lend, c)
		}
		for _, p := range []string{"abc", "", "defg"} {
			if s.QueueTo([]byte(p), peer(0)) != nil {
				t.Fatalf("QueueTo(%q) refused", p)
			}
		}
		if s.QueueTo(make([]byte, 101), peer(0)) != dgramio.ErrTooLarge {
			t.Fatal("QueueTo took more than MaxRecord bytes")
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if fc.out.String() != "abcdefg" {
			t.Fatalf("lend %v: written %q, want the bytes without prefixes", lend, fc.out.String())
		}
		if c := s.Counters(); c.TxQueued != 3 || c.TxSent != 3 || c.TxBytes != 7 || c.StreamTx != 7 || c.TxOversize != 1 {
			t.Fatalf("lend %v: counters %+v", lend, c)
		}
	}
}

// A raw stream's staged bytes are written as the transport takes them:
// an append partly taken is sent, and a reset drops only the appends not
// begun.
func TestRawStagedAcrossWrites(t *testing.T) {
	s, cs := newLayer(1, Options{MaxRecord: 100, StagingSize: 1024, Framing: dgramio.FramingRaw})
	cs[0].room = 5
	s.QueueTo([]byte("0123"), peer(0))
	s.QueueTo([]byte("4567"), peer(0))
	s.QueueTo([]byte("89"), peer(0))
	s.Flush()
	if cs[0].out.String() != "01234" {
		t.Fatalf("written %q", cs[0].out.String())
	}
	cs[0].err = &dgramio.PeerError{Reset: true, Err: errors.New("reset")}
	rawRx(s, 2)
	if c := s.Counters(); c.TxSent != 2 || c.TxDropped != 1 || c.Resets != 1 {
		t.Fatalf("TxSent %d TxDropped %d Resets %d, want 2 (one whole, one begun), 1, 1", c.TxSent, c.TxDropped, c.Resets)
	}
}

// Each connection's life comes in order as events, with Options.Events:
// opened before its data, a reset after the records before it (in the
// Rx after theirs, once they are done with), with its end; without it no
// event is delivered and the same is counted.
func TestEventsOrder(t *testing.T) {
	for _, events := range []bool{false, true} {
		s, cs := newLayer(2, Options{Events: events})
		cs[0].in.Write(records(t, []byte("a")))
		cs[1].in.Write(records(t, []byte("b")))
		cs[1].err = &dgramio.PeerError{Reset: true, Err: errors.New("reset")}
		var got []string
		pkts := make([]dgramio.Packet, 16)
		for range 4 {
			n, err := s.Rx(pkts)
			if err != nil {
				t.Fatalf("Rx: %v", err)
			}
			var round []string
			for _, p := range pkts[:n] {
				if p.Event == dgramio.EventData {
					round = append(round, fmt.Sprintf("%d:%s", p.From.Addr().As4()[3], p.Data))
				} else {
					round = append(round, fmt.Sprintf("%d:%v", p.From.Addr().As4()[3], p.Event))
				}
				if p.Event == dgramio.EventReset && !errors.As(p.Err, new(*dgramio.PeerError)) {
					t.Errorf("EventReset's Err %v", p.Err)
				}
			}
			if len(round) > 0 {
				got = append(got, fmt.Sprint(round))
			}
		}
		want := "[[0:opened 1:opened 0:a 1:b] [1:reset 1:ended]]"
		if !events {
			want = "[[0:a 1:b]]"
		}
		if fmt.Sprint(got) != want {
			t.Errorf("events %v: Rx rounds %v, want %v", events, got, want)
		}
		if c := s.Counters(); c.Resets != 1 || c.RxDelivered != 2 || s.Len() != 1 {
			t.Errorf("events %v: counters %+v, %d connections", events, c, s.Len())
		}
	}
}

// CloseConn: what was queued goes out, then the connection closes (not
// reset); what the peer sent and was not delivered counts in RxClosed;
// nothing more is queued or delivered. ResetConn: staged records count
// in TxDropped, the connection is aborted and counted in Resets; only
// EventEnded is delivered for either.
func TestCloseConnResetConn(t *testing.T) {
	s, cs := newLayer(2, Options{Events: true})
	pkts := make([]dgramio.Packet, 16)
	s.Rx(pkts) // the opened events
	cs[0].in.Write(records(t, []byte("unread1"), []byte("unread2")))
	s.QueueTo([]byte("answer"), peer(0))
	if !s.CloseConn(peer(0)) || s.CloseConn(peer(7)) {
		t.Fatal("CloseConn's answer")
	}
	if s.QueueTo([]byte("late"), peer(0)) != dgramio.ErrNoRoute {
		t.Fatal("QueueTo after CloseConn")
	}
	cs[1].room = 0 // nothing leaves: the staged record is lost at the reset
	s.QueueTo([]byte("staged"), peer(1))
	if !s.ResetConn(peer(1)) {
		t.Fatal("ResetConn refused")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var evs []string
	for range 3 {
		n, err := s.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:n] {
			evs = append(evs, fmt.Sprintf("%d:%v", p.From.Addr().As4()[3], p.Event))
		}
	}
	if fmt.Sprint(evs) != "[0:ended 1:ended]" && fmt.Sprint(evs) != "[1:ended 0:ended]" {
		t.Fatalf("events %v, want only each connection's end", evs)
	}
	if !bytes.Equal(cs[0].out.Bytes(), records(t, []byte("answer"))) || !cs[0].closed || cs[0].aborted {
		t.Fatalf("closed connection: written %q, closed %v, aborted %v", cs[0].out.Bytes(), cs[0].closed, cs[0].aborted)
	}
	if !cs[1].aborted {
		t.Fatal("ResetConn did not abort")
	}
	c := s.Counters()
	if c.RxClosed != 2 || c.RxDelivered != 0 || c.TxSent != 1 || c.TxDropped != 1 || c.Resets != 1 || c.NoConn != 1 || s.Len() != 0 {
		t.Fatalf("counters %+v, %d connections", c, s.Len())
	}
}
