package load

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	ktcp "github.com/dgramio/dgramio/internal/kernel/tcp"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/tcp"
)

// TestEchoStreamHoldsRefusedAnswers: a peer that floods the echo and reads
// its answers late gets every one of them, in order. The echo's staging
// (TxQueue records) and socket buffers are small, so QueueTo refuses for a
// long while; the echo holds the refused answer and stops reading that
// connection until it fits, and TCP's window stops the peer (RFC 9293
// §3.8.6: a receiver that does not read closes its window), instead of
// dropping answers.
func TestEchoStreamHoldsRefusedAnswers(t *testing.T) {
	const n, size = 4000, 512
	srv := socktest.Server(t, unix.SOCK_STREAM, dgramio.Config{Kind: dgramio.KindTCP,
		LocalIP: netip.MustParseAddr("127.0.0.1"), TxQueue: 4, SockBuf: 64 << 10, MaxDatagram: size}, ktcp.New)
	ctx, cancel := context.WithCancel(context.Background())
	done := startEcho(ctx, srv)
	defer cancel()

	c := dialLoopback(t, srv)
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	werr := make(chan error, 1)
	go func() { // the flood: every record at once, then FIN
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
	time.Sleep(300 * time.Millisecond) // read late: the answers back up
	rec := make([]byte, 2+size)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(c, rec); err != nil {
			cancel()
			r := <-done
			t.Fatalf("answer %d of %d: %v; echo %+v", i, n, err, r)
		}
		if got := binary.BigEndian.Uint32(rec[2:]); got != uint32(i) {
			t.Fatalf("answer %d carries record %d", i, got)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("peer write: %v", err)
	}
	// The peer's FIN ended its direction; the echo closes its side after
	// the last answer.
	if _, err := c.Read(rec); err != io.EOF {
		t.Fatalf("after the last answer: %v, want EOF", err)
	}
	cancel()
	r := <-done
	if r.Dropped != 0 || r.Reflected != n || r.Stats.TxDropped != 0 {
		t.Fatalf("echo: reflected %d dropped %d, TxDropped %d; want %d, 0, 0", r.Reflected, r.Dropped, r.Stats.TxDropped, n)
	}
	if r.Stats.TxBackpressure == 0 {
		t.Fatal("the echo never met back-pressure: the test did not test holding")
	}
}

// The same over the userspace TCP (netstack over an in-memory wire that
// loses 1% of the frames each way): the
// echo holds what it cannot queue, the flooding client that reads late
// gets every answer in order.
func TestEchoStreamHoldsRefusedAnswersUserspace(t *testing.T) {
	const n, size = 4000, 512
	srvIP, cliIP := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	pa, pb := memio.NewPair(memio.Options{AtoB: memio.Impairment{Loss: 0.01}, BtoA: memio.Impairment{Loss: 0.01}, Seed: 7})
	srv, err := tcp.NewOverFrameIO(dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: "memio",
		LocalIP: srvIP, Port: 5000, TxQueue: 4, MaxDatagram: size}, pa, tcp.Options{Mode: "memio"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := startEcho(ctx, srv)
	defer cancel()
	cli, err := tcp.NewOverFrameIO(dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleClient, Iface: "memio",
		LocalIP: cliIP, Dests: []netip.AddrPort{netip.AddrPortFrom(srvIP, 5000)}, Port: 5000, MaxDatagram: size}, pb, tcp.Options{Mode: "memio"})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	msg := make([]byte, size)
	pkts := make([]dgramio.Packet, 64)
	var sent, got uint32
	start := time.Now()
	for end := start.Add(30 * time.Second); got < n; {
		if time.Now().After(end) {
			cancel()
			t.Fatalf("%d of %d answers; echo %+v", got, n, <-done)
		}
		for sent < n && func() bool { binary.BigEndian.PutUint32(msg, sent); return cli.Queue(msg) == nil }() {
			sent++
		}
		cli.Flush()
		if time.Since(start) < 300*time.Millisecond {
			continue // read late: the answers back up
		}
		k, _ := cli.Rx(pkts)
		for _, p := range pkts[:k] {
			if v := binary.BigEndian.Uint32(p.Data); v != got {
				t.Fatalf("answer %d carries record %d", got, v)
			}
			got++
		}
		if k == 0 {
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Millisecond)
			cli.Wait(wctx)
			wcancel()
		}
	}
	cancel()
	if r := <-done; r.Dropped != 0 || r.Reflected != n || r.Stats.TxBackpressure == 0 {
		t.Fatalf("echo: reflected %d dropped %d backpressure %d; want %d, 0, some", r.Reflected, r.Dropped, r.Stats.TxBackpressure, n)
	}
}

// TestEchoStopCountsHeldAnswers: an echo that stops while it holds
// answers for a peer that reads nothing (its window closed, RFC 9293
// §3.8.6) counts them as its own loss: every message it received is
// reflected or dropped.
func TestEchoStopCountsHeldAnswers(t *testing.T) {
	const size = 512
	srv := socktest.Server(t, unix.SOCK_STREAM, dgramio.Config{Kind: dgramio.KindTCP,
		LocalIP: netip.MustParseAddr("127.0.0.1"), TxQueue: 4, SockBuf: 64 << 10, MaxDatagram: size}, ktcp.New)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startEcho(ctx, srv)
	c := dialLoopback(t, srv)
	defer c.Close()
	rec := make([]byte, 2+size)
	binary.BigEndian.PutUint16(rec, size)
	c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
	for { // flood, never read, until the window closes
		if _, err := c.Write(rec); err != nil {
			break
		}
	}
	cancel()
	r := <-done
	if r.Stats.TxBackpressure == 0 || r.Dropped == 0 {
		t.Fatalf("back-pressure %d, dropped %d: the echo held nothing at its stop, the test tested nothing", r.Stats.TxBackpressure, r.Dropped)
	}
	if r.Received != r.Reflected+r.Dropped {
		t.Fatalf("received %d != reflected %d + dropped %d", r.Received, r.Reflected, r.Dropped)
	}
}

// startEcho runs Echo on srv (waiting when idle) on a goroutine of its
// own until ctx ends; the channel then gets its result.
func startEcho(ctx context.Context, srv dgramio.Backend) <-chan *EchoResult {
	done := make(chan *EchoResult, 1)
	go func() {
		r, _ := Echo(ctx, srv, EchoOptions{Wait: true})
		done <- r
	}()
	return done
}

// dialLoopback connects a kernel TCP socket to srv, a tcp server on
// 127.0.0.1; the caller closes it.
func dialLoopback(t *testing.T, srv dgramio.Backend) net.Conn {
	t.Helper()
	port := srv.(interface{ LocalAddr() netip.AddrPort }).LocalAddr().Port()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(port)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
