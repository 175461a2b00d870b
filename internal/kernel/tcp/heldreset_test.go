package tcp

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
)

// TestHeldConnSeesReset: a connection the server holds (Pause: not read,
// its socket out of EPOLLIN) whose peer resets it (RFC 9293 §3.10.7.4)
// ends all the same: the layer asks the socket (TCP_INFO's TCP_CLOSE)
// when epoll names it, counts the reset, refuses a new Pause, and once
// resumed the records that waited come out and the connection leaves.
// Before, it stayed in the set, counted nowhere, until Close (a client
// that sends without reading, then resets, against dgramio-echo).
func TestHeldConnSeesReset(t *testing.T) {
	srv := newServer(t, dgramio.Config{Framing: dgramio.FramingRaw, Events: true}, lo)
	c, err := net.Dial("tcp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hold me")); err != nil {
		t.Fatal(err)
	}
	pkts := make([]dgramio.Packet, 8)
	var peer netip.AddrPort
	until(t, "the first bytes", func() bool {
		n, _ := srv.Rx(pkts)
		for _, p := range pkts[:n] {
			if p.Event == dgramio.EventData {
				peer = p.From
			}
		}
		return peer.IsValid()
	})
	if err := srv.Pause(peer); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("behind the hold"))
	c.(*net.TCPConn).SetLinger(0)
	c.Close() // RST
	until(t, "the reset of the held connection", func() bool {
		srv.Rx(pkts)
		srv.Flush()
		if srv.Pause(peer) != nil {
			srv.Resume(peer)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		srv.Wait(ctx) // a poll loop's sleep: epoll names the socket
		cancel()
		return srv.Stats().Resets == 1 && srv.Stats().Conns == 0
	})
}
