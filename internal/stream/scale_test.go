package stream

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/record"
)

// edgeConn is a fakeConn that counts the layer's calls on it.
type edgeConn struct {
	fakeConn
	calls int
	loose bool // Readable always true, as a transport that cannot tell
}

func (c *edgeConn) Write(p []byte) (int, error) { c.calls++; return c.fakeConn.Write(p) }
func (c *edgeConn) Read(p []byte) (int, error)  { c.calls++; return c.fakeConn.Read(p) }
func (c *edgeConn) Readable() bool              { c.calls++; return c.loose || c.fakeConn.Readable() }
func (c *edgeConn) Writable() bool              { c.calls++; return c.fakeConn.Writable() }

// edgeTransport reports a connection once per notify, as an engine that
// marks a connection when bytes arrive for it (edge-triggered).
type edgeTransport struct{ events []Conn }

func (t *edgeTransport) Poll() bool                        { return true }
func (t *edgeTransport) Push() error                       { return nil }
func (t *edgeTransport) Accept(func(Conn, netip.AddrPort)) {}
func (t *edgeTransport) notify(c Conn)                     { t.events = append(t.events, c) }
func (t *edgeTransport) Watch(mark func(Conn)) {
	for _, c := range t.events {
		mark(c)
	}
	t.events = t.events[:0]
}

// newEdgeLayer returns a layer of n idle connections over an
// edgeTransport, after the first Rx (which reads every new connection
// once), with every call count zero.
func newEdgeLayer(tb testing.TB, n int) (*Layer, *edgeTransport, []*edgeConn) {
	tb.Helper()
	tr := &edgeTransport{}
	s := New(tr, Options{MaxRecord: 1472, RxBatch: 16, StagingSize: 4 << 10, DecoderSize: 4 << 10})
	cs := make([]*edgeConn, n)
	for i := range cs {
		cs[i] = &edgeConn{fakeConn: fakeConn{room: -1, reading: true}}
		s.Add(cs[i], netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 5000))
	}
	if n, err := s.Rx(make([]dgramio.Packet, 16)); n != 0 || err != nil {
		tb.Fatalf("first Rx: %d, %v", n, err)
	}
	for _, c := range cs {
		c.calls = 0
	}
	return s, tr, cs
}

// touched returns the indices of the connections the layer called since
// the last call, and zeroes the counts.
func touched(cs []*edgeConn) []int {
	var got []int
	for i, c := range cs {
		if c.calls > 0 {
			got = append(got, i)
		}
		c.calls = 0
	}
	return got
}

// TestRxTouchesOnlyWhatMoves: among 10,000 idle connections, an Rx calls
// the transport on the one that was reported readable, a Flush on the one
// that has records staged, and an idle Rx or Flush on none.
func TestRxTouchesOnlyWhatMoves(t *testing.T) {
	s, tr, cs := newEdgeLayer(t, 10000)
	pkts := make([]dgramio.Packet, 16)

	cs[1234].in.Write(records(t, []byte("ping")))
	tr.notify(cs[1234])
	n, err := s.Rx(pkts)
	if n != 1 || err != nil || string(pkts[0].Data) != "ping" || pkts[0].From != s.conns[cs[1234].hook().c.pos].peer {
		t.Fatalf("Rx: %d %v", n, err)
	}
	if got := touched(cs); fmt.Sprint(got) != "[1234]" {
		t.Fatalf("Rx called the transport on connections %v, want [1234]", got)
	}

	if s.QueueTo([]byte("pong"), cs[77].hook().c.peer) != nil {
		t.Fatal("QueueTo refused")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := touched(cs); fmt.Sprint(got) != "[77]" {
		t.Fatalf("Flush called the transport on connections %v, want [77]", got)
	}
	if cs[77].out.Len() != record.HeaderLen+4 {
		t.Fatalf("connection 77 was written %d bytes", cs[77].out.Len())
	}

	for range 3 {
		if n, err := s.Rx(pkts); n != 0 || err != nil {
			t.Fatalf("idle Rx: %d, %v", n, err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if got := touched(cs); len(got) != 0 {
		t.Fatalf("idle Rx and Flush called the transport on connections %v, want none", got)
	}
}

// TestRxReadsOnWithoutReports: a read that filled the buffer is followed
// by another at the next Rx without a new report, and a connection held
// while it was reported is read when it is let go, also without one.
func TestRxReadsOnWithoutReports(t *testing.T) {
	s, tr, cs := newEdgeLayer(t, 3)
	pkts := make([]dgramio.Packet, 16)
	c := cs[1]
	var want int
	for c.in.Len() < 3*(4<<10) {
		c.in.Write(records(t, make([]byte, 1000)))
		want++
	}
	tr.notify(c)
	got := 0
	for round := 0; got < want && round < 100; round++ {
		n, err := s.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if got != want {
		t.Fatalf("delivered %d of %d records reported once", got, want)
	}

	peer := cs[2].hook().c.peer
	s.Hold(peer, true)
	cs[2].in.Write(records(t, []byte("held")))
	tr.notify(cs[2])
	if n, _ := s.Rx(pkts); n != 0 {
		t.Fatalf("a held connection delivered %d records", n)
	}
	s.Hold(peer, false)
	if n, _ := s.Rx(pkts); n != 1 || string(pkts[0].Data) != "held" {
		t.Fatalf("after Hold off: %d records", n)
	}
}

// BenchmarkRxIdle is an Rx with nothing to read among conns idle
// connections: its cost must not grow with them.
func BenchmarkRxIdle(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			s, _, _ := newEdgeLayer(b, n)
			pkts := make([]dgramio.Packet, 16)
			b.ReportAllocs()
			for b.Loop() {
				if k, err := s.Rx(pkts); k != 0 || err != nil {
					b.Fatal(k, err)
				}
			}
		})
	}
}

// BenchmarkRxOne is one record in and its answer out (Rx, QueueTo,
// Flush) on one of conns connections.
func BenchmarkRxOne(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			s, tr, cs := newEdgeLayer(b, n)
			c := cs[n/2]
			rec := records(b, make([]byte, 64))
			pkts := make([]dgramio.Packet, 16)
			b.ReportAllocs()
			for b.Loop() {
				c.in.Write(rec)
				c.out.Reset()
				tr.notify(c)
				k, err := s.Rx(pkts)
				if k != 1 || err != nil {
					b.Fatal(k, err)
				}
				if s.QueueTo(pkts[0].Data, pkts[0].From) != nil {
					b.Fatal("QueueTo refused")
				}
				if err := s.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRxEdgeReportsLoseNothing: a transport reports a connection only
// when bytes arrive for it (edge-triggered), and the layer still delivers
// every record of every connection, in order, whatever the interleaving
// of arrivals (records split anywhere), Rx batch sizes and holds; some
// connections' Readable always says true (as kernel tcp's does).
func TestRxEdgeReportsLoseNothing(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 99))
		const n = 5
		tr := &edgeTransport{}
		s := New(tr, Options{MaxRecord: 64, RxBatch: 1 + rng.IntN(8), StagingSize: 1 << 10, DecoderSize: 256})
		cs := make([]*edgeConn, n)
		var pending [n][]byte // bytes not yet arrived
		var want, got [n][]string
		peers := map[netip.AddrPort]int{}
		for i := range cs {
			cs[i] = &edgeConn{fakeConn: fakeConn{room: -1, reading: true}}
			cs[i].loose = rng.IntN(2) == 0
			p := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), 5000)
			peers[p] = i
			s.Add(cs[i], p)
			for k := range rng.IntN(40) {
				r := fmt.Sprintf("%d-%d-%s", i, k, make([]byte, rng.IntN(50)))
				want[i] = append(want[i], r)
				pending[i] = append(pending[i], records(t, []byte(r))...)
			}
		}
		held := make([]bool, n)
		pkts := make([]dgramio.Packet, 8)
		rx := func() {
			k, err := s.Rx(pkts[:1+rng.IntN(len(pkts))])
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for _, p := range pkts[:k] {
				i := peers[p.From]
				got[i] = append(got[i], string(p.Data))
			}
		}
		for range 2000 {
			switch i := rng.IntN(n); rng.IntN(5) {
			case 0, 1:
				if len(pending[i]) > 0 {
					// Up to more than the decoder takes at once.
					k := 1 + rng.IntN(min(len(pending[i]), 400))
					cs[i].in.Write(pending[i][:k])
					pending[i] = pending[i][k:]
					tr.notify(cs[i])
				}
			case 2, 3:
				rx()
			case 4:
				if i < 2 { // the others are never held
					held[i] = !held[i]
					s.Hold(cs[i].hook().c.peer, held[i])
				}
			}
		}
		for i := range cs {
			if len(pending[i]) > 0 {
				cs[i].in.Write(pending[i])
				tr.notify(cs[i])
			}
			if held[i] {
				s.Hold(cs[i].hook().c.peer, false)
			}
		}
		for range 500 {
			rx()
		}
		for i := range cs {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("seed %d, connection %d: delivered %d of %d records (%d bytes left unread)",
					seed, i, len(got[i]), len(want[i]), cs[i].in.Len())
			}
		}
	}
}
