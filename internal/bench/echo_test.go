package bench

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

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/kernel/sock/socktest"
	ktcp "github.com/dgramio/dgramio/kernel/tcp"
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
	srv := socktest.Server(t, unix.SOCK_STREAM, core.Config{Kind: core.KindTCP,
		LocalIP: netip.MustParseAddr("127.0.0.1"), TxQueue: 4, SockBuf: 64 << 10, MaxDatagram: size}, ktcp.New)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *EchoResult, 1)
	go func() {
		r, _ := Echo(ctx, srv, EchoOptions{Wait: true})
		done <- r
	}()
	defer cancel()

	port := srv.(interface{ LocalAddr() netip.AddrPort }).LocalAddr().Port()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(port)))
	if err != nil {
		t.Fatal(err)
	}
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
