package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
)

// echoLoop answers every record to its sender until ctx ends, holding a
// refused answer (and the peer) until it fits, and returns the ends of
// connections it saw (b has Config.Events: an EventPeerFIN as a
// *dgramio.PeerError of Reset false, an EventReset as its Err) and any
// error of Rx or Flush, in order.
func echoLoop(ctx context.Context, t *testing.T, b *Backend) (events []error) {
	pkts := make([]dgramio.Packet, 16)
	var backlog [][]byte
	var from dgramio.Packet
	for ctx.Err() == nil {
		for len(backlog) > 0 && b.QueueTo(backlog[0], from.From) == nil {
			backlog = backlog[1:]
		}
		if len(backlog) == 0 && from.From.IsValid() {
			b.Hold(from.From, false)
		}
		n, err := b.Rx(pkts)
		for _, p := range pkts[:n] {
			switch p.Event {
			case dgramio.EventPeerFIN:
				events = append(events, &dgramio.PeerError{Peer: p.From})
				continue
			case dgramio.EventReset:
				events = append(events, p.Err)
				continue
			case dgramio.EventData:
			default:
				continue
			}
			if len(backlog) == 0 && b.QueueTo(p.Data, p.From) == nil {
				continue
			}
			from = p
			b.Hold(p.From, true)
			backlog = append(backlog, append([]byte(nil), p.Data...))
		}
		if ferr := b.Flush(); ferr != nil {
			events = append(events, ferr)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return events
			}
			events = append(events, err)
		}
		if n == 0 {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			b.Wait(wctx)
			cancel()
		}
	}
	return events
}

// TestHalfCloseAnswersFlow: RFC 9293 §3.6, a FIN closes the sender's
// direction only. A peer that sends every record, shuts down its write
// side and reads to EOF gets every answer, then the server's FIN; the
// server delivers the peer's FIN once (EventPeerFIN, not a reset), and
// neither Rx nor Flush returns an error.
func TestHalfCloseAnswersFlow(t *testing.T) {
	const n, size = 3000, 1000
	srv := newServer(t, dgramio.Config{TxQueue: 8, SockBuf: 64 << 10, Events: true}, lo)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []error, 1)
	go func() { done <- echoLoop(ctx, t, srv) }()

	c, err := net.Dial("tcp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	werr := make(chan error, 1)
	go func() {
		rec := make([]byte, 2+size)
		binary.BigEndian.PutUint16(rec, size)
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint32(rec[2:], uint32(i))
			if _, err := c.Write(rec); err != nil {
				werr <- err
				return
			}
		}
		werr <- c.(*net.TCPConn).CloseWrite()
	}()
	time.Sleep(200 * time.Millisecond) // read late: answers wait in the server
	rec := make([]byte, 2+size)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(c, rec); err != nil {
			t.Fatalf("answer %d of %d: %v (server %+v)", i, n, err, srv.Stats())
		}
		if got := binary.BigEndian.Uint32(rec[2:]); got != uint32(i) {
			t.Fatalf("answer %d carries record %d", i, got)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(rec); err != io.EOF {
		t.Fatalf("after the last answer: %v, want the server's FIN (EOF)", err)
	}
	// The server keeps the connection until it sees its last answers and
	// its FIN acknowledged, which the echo loop finds on a later Rx or
	// Flush than the one that sent the FIN: wait for that before stopping
	// it.
	until(t, "the server to let the connection go", func() bool { return srv.Stats().Conns == 0 })
	cancel()
	events := <-done
	var pe *dgramio.PeerError
	if len(events) != 1 || !errors.As(events[0], &pe) || pe.Reset {
		t.Fatalf("peer events %v, want the one FIN", events)
	}
	s := srv.Stats()
	if s.TxSent != n || s.TxDropped != 0 || s.PeerCloses != 1 || s.Resets != 0 || s.Conns != 0 {
		t.Fatalf("server TxSent %d TxDropped %d PeerCloses %d Resets %d Conns %d", s.TxSent, s.TxDropped, s.PeerCloses, s.Resets, s.Conns)
	}
	if v, _ := s.Counter("tcp", "queue_no_conn"); v != 0 {
		t.Fatalf("queue_no_conn %d", v)
	}
}
