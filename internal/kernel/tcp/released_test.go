package tcp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

// rxWait calls b.Rx once and, when it returned nothing, sleeps in b.Wait
// for up to a millisecond. It returns what Rx returned.
func rxWait(t testing.TB, b *Backend, pkts []dgramio.Packet) int {
	t.Helper()
	n, err := b.Rx(pkts)
	if err != nil {
		t.Fatalf("Rx: %v", err)
	}
	if n == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		err := b.Wait(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v", err)
		}
	}
	return n
}

// TestReleasedBytesMoveWithoutFlush: a client whose socket and staging
// filled while the server did not read, and which from then on only calls
// Rx and Wait (an open-loop sender whose Queue is refused has nothing new
// to Flush), still gets every flushed record through once the server
// reads, and its Queue takes records again. A record queued after the
// last Flush waits for the next Flush. (Without Rx writing the released
// bytes, the client held them for good.)
func TestReleasedBytesMoveWithoutFlush(t *testing.T) {
	cli, srv := pair(t, dgramio.Config{SockBuf: 4096, TxQueue: 16, MaxDatagram: 1000})
	accepted := fillUntilRefused(t, cli, 777, 0) // it flushes after every Queue
	if r, _, _ := staged(cli); r == 0 {
		t.Fatalf("nothing left released after filling: %d records accepted, stats %+v", accepted, cli.Stats())
	}
	pkts := make([]dgramio.Packet, 16)
	// The server takes what the client's socket holds; the client's Wait
	// then wakes for the room its released bytes need.
	first, err := srv.Rx(pkts)
	for err == nil && first == 0 {
		rxWait(t, srv, pkts)
		first, err = srv.Rx(pkts)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts[:first] {
		if seq, err := socktest.Check(p.Data); err != nil || seq != uint32(i) {
			t.Fatalf("record %d where %d was due (%v)", seq, i, err)
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	err = cli.Wait(wctx)
	wcancel()
	if err != nil {
		t.Fatalf("the client's Wait with released bytes and a drained peer: %v", err)
	}
	// The server reads on; the client only receives.
	next := receive(t, srv, uint32(first), int(accepted)-first, func() { rxWait(t, cli, pkts) })
	if next != accepted {
		t.Fatalf("received up to %d, accepted %d", next, accepted)
	}
	until(t, "the client's staging to empty by Rx alone", func() bool {
		rxWait(t, cli, pkts)
		_, n, _ := staged(cli)
		return n == 0
	})
	p := make([]byte, 777)
	socktest.Payload(p, next)
	if cli.Queue(p) != nil {
		t.Fatalf("Queue refused with the stream drained: %+v", cli.Stats())
	}
	// Not flushed: Rx must not send it.
	got := 0
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
		rxWait(t, cli, pkts)
		got += rxWait(t, srv, pkts)
	}
	if got != 0 {
		t.Fatalf("the server got %d records: Rx sent a record that was never flushed", got)
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	receive(t, srv, next, 1, nil)
	if s := cli.Stats(); s.TxSent != uint64(accepted)+1 || s.TxDropped != 0 {
		t.Fatalf("client TxSent %d TxDropped %d, want %d and 0", s.TxSent, s.TxDropped, accepted+1)
	}
}

// TestBothEndsStopFlushing: tiny socket buffers, an echo that flushes only
// after an Rx that returned records (as load.Echo does), and a client
// that flushes only after a Queue that succeeded, then stops sending and
// only receives. Both ends end up holding released bytes their sockets
// refused, and neither calls Flush again; every record must still come
// back (or be counted by the echo as refused by its own back-pressure).
// Without Rx writing the released bytes this stalled for good.
func TestBothEndsStopFlushing(t *testing.T) {
	base := dgramio.Config{SockBuf: 4096, TxQueue: 8, MaxDatagram: 1000}
	cli, srv := pair(t, base)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var dropped atomic.Uint64
	var echoErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		pkts := make([]dgramio.Packet, 16)
		for ctx.Err() == nil {
			n, err := srv.Rx(pkts)
			if err != nil {
				echoErr.Store(err)
				return
			}
			for _, p := range pkts[:n] {
				if srv.QueueTo(p.Data, p.From) != nil {
					dropped.Add(1)
				}
			}
			if n > 0 {
				if err := srv.Flush(); err != nil {
					echoErr.Store(err)
					return
				}
				continue
			}
			wctx, wcancel := context.WithTimeout(ctx, time.Millisecond)
			srv.Wait(wctx)
			wcancel()
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	const total = 3000
	p := make([]byte, 900)
	pkts := make([]dgramio.Packet, 16)
	var sent, received uint64
	deadline := time.Now().Add(60 * time.Second)
	for sent < total {
		if time.Now().After(deadline) {
			t.Fatalf("sending stalled: %d of %d records queued, %d back, echo dropped %d; client %+v server %+v",
				sent, total, received, dropped.Load(), cli.Stats(), srv.Stats())
		}
		queued := false
		for sent < total {
			socktest.Payload(p, uint32(sent))
			if cli.Queue(p) != nil {
				break
			}
			sent++
			queued = true
		}
		if queued {
			if err := cli.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		received += uint64(rxWait(t, cli, pkts))
	}
	for received+dropped.Load() < total {
		if time.Now().After(deadline) {
			t.Fatalf("stalled: %d of %d records back, echo dropped %d; client %+v server %+v",
				received, total, dropped.Load(), cli.Stats(), srv.Stats())
		}
		if err := echoErr.Load(); err != nil {
			t.Fatalf("echo: %v", err)
		}
		received += uint64(rxWait(t, cli, pkts))
	}
	t.Logf("%d records back, %d dropped by the echo's back-pressure", received, dropped.Load())
	if s := cli.Stats(); s.TxSent != total || s.TxDropped != 0 {
		t.Errorf("client TxSent %d TxDropped %d, want %d and 0", s.TxSent, s.TxDropped, total)
	}
}
