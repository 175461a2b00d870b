package load

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	ktcp "github.com/dgramio/dgramio/internal/kernel/tcp"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

// TestEchoRawFraming: the echo over a stream in raw framing with
// connection events (echo --framing raw) reflects each client's bytes,
// byte-exact, with back-pressure (a small staging: the refused answers
// wait with their peer paused); clients that leave by FIN and by reset
// (SO_LINGER 0) are counted in PeerEvents, and the echo does not stop.
func TestEchoRawFraming(t *testing.T) {
	srv := socktest.Server(t, unix.SOCK_STREAM, dgramio.Config{Kind: dgramio.KindTCP,
		LocalIP: netip.MustParseAddr("127.0.0.1"), TxQueue: 2, SockBuf: 64 << 10, MaxDatagram: 512,
		Framing: dgramio.FramingRaw, Events: true}, ktcp.New)
	ctx, cancel := context.WithCancel(context.Background())
	done := startEcho(ctx, srv)
	defer cancel()
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*131 + i>>9)
	}
	for k, reset := range []bool{false, true} {
		c := dialLoopback(t, srv)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		werr := make(chan error, 1)
		go func() {
			for off := 0; off < len(data); off += 1000 + k {
				if _, err := c.Write(data[off:min(off+1000+k, len(data))]); err != nil {
					werr <- err
					return
				}
			}
			werr <- nil
		}()
		got := make([]byte, len(data))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("client %d: %v", k, err)
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("client %d: the bytes back are not those sent", k)
		}
		if reset {
			c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for srv.Stats().Conns != 0 || srv.Stats().Accepts != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the clients' ends were not seen: %+v", srv.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	r := <-done
	if r.Error != "" || r.PeerEvents != 2 || r.Received != r.Reflected || r.Dropped != 0 {
		t.Fatalf("echo: error %q, peer events %d, received %d, reflected %d, dropped %d",
			r.Error, r.PeerEvents, r.Received, r.Reflected, r.Dropped)
	}
	if st := r.Stats; st.RxBytes != 2*uint64(len(data)) || st.TxBytes != st.RxBytes || st.TxBackpressure == 0 || st.PeerCloses != 1 || st.Resets != 1 {
		t.Fatalf("stats: RxBytes %d TxBytes %d back-pressure %d peer closes %d resets %d",
			st.RxBytes, st.TxBytes, st.TxBackpressure, st.PeerCloses, st.Resets)
	}
}
