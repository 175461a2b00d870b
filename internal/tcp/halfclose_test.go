package tcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// rxFor calls cli.Rx (sleeping in Wait between empty rounds) until done
// says so or 20 s pass, handing each record to onRec, and each error and
// end of a connection (Config.Events: an EventPeerFIN as a
// *dgramio.PeerError of Reset false, an EventReset as its Err) to onErr.
func rxFor(t *testing.T, cli *Backend, onRec func([]byte), onErr func(error), done func() bool) {
	t.Helper()
	pkts := make([]dgramio.Packet, 64)
	for end := time.Now().Add(20 * time.Second); !done(); {
		if time.Now().After(end) {
			t.Fatalf("timed out; client %+v", cli.Stats())
			_ = 0
		}
		if err := cli.Flush(); err != nil {
			onErr(err)
		}
		n, err := cli.Rx(pkts)
		for _, p := range pkts[:n] {
			switch p.Event {
			case dgramio.EventData:
				onRec(p.Data)
			case dgramio.EventPeerFIN:
				onErr(&dgramio.PeerError{Peer: p.From})
			case dgramio.EventReset:
				onErr(p.Err)
			}
		}
		if err != nil {
			onErr(err)
		}
		if n == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			cli.Wait(ctx)
			cancel()
		}
	}
}

// A record longer than the server's MaxDatagram (a 65535-byte one) is
// skipped and counted, and the connection goes on: the record after it is
// answered.
func TestOversizeRecordFromPeer(t *testing.T) { engines(t, testOversizeRecordFromPeer) }

func testOversizeRecordFromPeer(t *testing.T) {
	cc := clientConfig()
	cc.MaxDatagram = MaxRecord
	srv, cli, _, _ := setup(t, memio.Options{}, serverConfig(), cc, nil)
	if cli.Queue(make([]byte, MaxRecord)) != nil || cli.Queue([]byte("after")) != nil {
		t.Fatal("Queue refused")
	}
	var got []string
	rxFor(t, cli, func(r []byte) { got = append(got, string(r)) },
		func(err error) { t.Fatalf("client: %v", err) }, func() bool { return len(got) > 0 })
	if len(got) != 1 || got[0] != "after" {
		t.Fatalf("answers %q, want the record after the oversize one", got)
	}
	if s := srv.Stats(); s.RxTruncated != 1 || s.RxDelivered != 1 {
		t.Fatalf("server RxTruncated %d RxDelivered %d, want 1 and 1", s.RxTruncated, s.RxDelivered)
	}
}

// RFC 9293 §3.6: a FIN closes the sender's direction only. A client that
// sends everything, shuts down its write side and reads on gets every
// answer, then the server's FIN.
func TestHalfCloseAnswersFlow(t *testing.T) { engines(t, testHalfCloseAnswersFlow) }

func testHalfCloseAnswersFlow(t *testing.T) {
	const n, size = 2000, 1000
	cc := clientConfig()
	cc.Events = true
	sc := serverConfig()
	if testStack == dgramio.TCPStackNative {
		// BBR paces the answers: many wait in the echo's backlog,
		// refused for back-pressure, when the client's FIN arrives.
		cc.TCP.Congestion, sc.TCP.Congestion = dgramio.CongestionBBR, dgramio.CongestionBBR
	}
	srv, cli, _, _ := setup(t, memio.Options{}, sc, cc, nil)
	buf := make([]byte, size)
	scratch := make([]byte, size)
	var sent, got uint64
	shut := false
	var fin error
	rxFor(t, cli, func(r []byte) {
		checkRecord(t, r, got, size, scratch)
		got++
	}, func(err error) {
		if !isPeer(err) || fin != nil {
			t.Fatalf("client: %v", err)
		}
		fin = err
	}, func() bool {
		for sent < n && cli.Queue(makeRecord(buf, sent, size)) == nil {
			sent++
		}
		if sent == n && !shut {
			if _, staged, _ := cli.s.Staged(0); staged == 0 {
				shut = true
				if nc, ok := cli.s.Conn(0).(*nconn); ok {
					nc.c.CloseWrite()
				} else if terr := cli.conn(0).ep.Shutdown(tcpip.ShutdownWrite); terr != nil {
					t.Fatalf("shutdown: %v", terr)
				}
			}
		}
		return fin != nil
	})
	var pe *dgramio.PeerError
	if got != n || !errors.As(fin, &pe) || pe.Reset {
		t.Fatalf("%d of %d answers, then %v; want all, then the server's FIN", got, n, fin)
	}
	s := srv.Stats()
	if s.TxSent != n || s.TxDropped != 0 || s.PeerCloses != 1 || s.Resets != 0 {
		t.Fatalf("server TxSent %d TxDropped %d PeerCloses %d Resets %d", s.TxSent, s.TxDropped, s.PeerCloses, s.Resets)
	}
}

// TxBytes counts payload on every kind: the stream's prefixes are in
// layer "stream" bytes_tx only.
func TestTxBytesCountsPayload(t *testing.T) { engines(t, testTxBytesCountsPayload) }

func testTxBytesCountsPayload(t *testing.T) {
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), nil)
	for i := 0; i < 10; i++ {
		if cli.Queue(make([]byte, 100)) != nil {
			t.Fatal("Queue refused")
		}
	}
	got := 0
	rxFor(t, cli, func([]byte) { got++ }, func(err error) { t.Fatalf("client: %v", err) },
		func() bool { return got == 10 })
	s := cli.Stats()
	stream, _ := s.Counter("stream", "bytes_tx")
	if s.TxBytes != 1000 || stream != 1000+10*HeaderLen {
		t.Fatalf("TxBytes %d, stream bytes_tx %d; want 1000 and %d", s.TxBytes, stream, 1000+10*HeaderLen)
	}
}
