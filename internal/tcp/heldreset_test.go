package tcp

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// TestHeldConnSeesReset: a connection the server holds (Conns.Pause, as
// dgramio-echo does while an answer does not fit) and whose peer then
// resets it ends all the same, on either engine: the reset is counted
// in Stats.Resets and the connection leaves the set (RFC 9293 §3.10.7.4:
// a RST in window ends the connection). The layer does not read a held
// connection, so it must learn of the end without reading; before, the
// native engine's connection stayed in the set, counted nowhere, until
// the backend closed (ncat --send-only against dgramio-echo --framing raw).
func TestHeldConnSeesReset(t *testing.T) { engines(t, testHeldConnSeesReset) }

func testHeldConnSeesReset(t *testing.T) {
	var held, resets, conns atomic.Int64
	conns.Store(-1)
	body := func(b *Backend) func(context.Context) bool {
		pkts := make([]dgramio.Packet, 8)
		return func(ctx context.Context) bool {
			n, _ := b.Rx(pkts)
			for _, p := range pkts[:n] {
				if p.Event == dgramio.EventData && b.Pause(p.From) == nil {
					held.Add(1)
				}
			}
			b.Flush()
			s := b.Stats()
			resets.Store(int64(s.Resets))
			conns.Store(int64(s.Conns))
			wctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			b.Wait(wctx)
			cancel()
			return true
		}
	}
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), body)
	if cli.Queue([]byte("hold me")) != nil {
		t.Fatal("Queue refused")
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	pkts := make([]dgramio.Packet, 8)
	poll := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !done(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: server resets %d conns %d", what, resets.Load(), conns.Load())
			}
			cli.Rx(pkts)
			cli.Flush()
			time.Sleep(time.Millisecond)
		}
	}
	poll("the server did not hold the connection", func() bool { return held.Load() > 0 })
	if err := cli.ResetConn(netip.AddrPortFrom(srvIP, testPort)); err != nil {
		t.Fatal(err)
	}
	poll("the held connection's reset went unseen", func() bool { return resets.Load() == 1 && conns.Load() == 0 })
}

// TestHeldConnEndsForEcho: as dgramio-echo does, the server holds a peer
// while an answer does not fit and retries it, pausing again while the
// connection is there; records of the peer wait decoded behind the hold
// when the peer resets. The retry is refused (dgramio.ErrNoRoute), the
// Pause too (the connection ended: dgramio.ErrNoConn), the server
// resumes, the waiting records come out and the reset is counted, on
// either engine. Before, Pause took an ended connection, whose end
// waited for its records, which waited for the Resume: it never ended.
func TestHeldConnEndsForEcho(t *testing.T) { engines(t, testHeldConnEndsForEcho) }

func testHeldConnEndsForEcho(t *testing.T) {
	var held, resets, conns atomic.Int64
	conns.Store(-1)
	body := func(b *Backend) func(context.Context) bool {
		pkts := make([]dgramio.Packet, 4)
		var peer netip.AddrPort
		holding := false
		return func(ctx context.Context) bool {
			if holding && b.QueueTo([]byte("answer"), peer) != nil {
				if b.Pause(peer) != nil {
					b.Resume(peer)
					holding = false
				}
			}
			n, _ := b.Rx(pkts)
			for _, p := range pkts[:n] {
				if p.Event == dgramio.EventData && !holding && held.Load() == 0 && b.Pause(p.From) == nil {
					peer, holding = p.From, true
					held.Add(1)
				}
			}
			b.Flush()
			s := b.Stats()
			resets.Store(int64(s.Resets))
			conns.Store(int64(s.Conns))
			wctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			b.Wait(wctx)
			cancel()
			return true
		}
	}
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), body)
	pkts := make([]dgramio.Packet, 8)
	poll := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !done(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: server resets %d conns %d", what, resets.Load(), conns.Load())
			}
			cli.Rx(pkts)
			cli.Flush()
			time.Sleep(time.Millisecond)
		}
	}
	for i := 0; i < 50; i++ {
		if cli.Queue([]byte("record behind the hold")) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	poll("the server did not hold the connection", func() bool { return held.Load() > 0 })
	if err := cli.ResetConn(netip.AddrPortFrom(srvIP, testPort)); err != nil {
		t.Fatal(err)
	}
	poll("the held connection never ended", func() bool { return resets.Load() == 1 && conns.Load() == 0 })
}
