package tcp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/peertest"
)

// TestXDPLeavesTheKernelItsARP: tcp-xdp answers for its own address (.3)
// on an interface whose kernel keeps another (.1). The XDP program hands
// the stack only the ARP for .3 (and announcements), so the kernel still
// resolves its neighbours there: a datagram A's kernel sends to B after
// forgetting B's MAC arrives (RFC 826: the reply for .1 reaches the
// kernel that asked).
func TestXDPLeavesTheKernelItsARP(t *testing.T) { engines(t, testXDPLeavesTheKernelItsARP) }

func testXDPLeavesTheKernelItsARP(t *testing.T) {
	p, b, _ := xdpServer(t)
	pl := startPoller(b.(*Backend), echo(t, b.(*Backend)))
	defer pl.stop()
	dst, err := p.B.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	src, err := p.A.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_ = p.A.DelNeigh(p.B.Addr) // absent is fine: the kernel must ask
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst.LocalAddr().String()))
	if err := dst.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		_, _, err := dst.ReadFrom(buf)
		got <- err
	}()
	for sent := 0; ; sent++ {
		if _, err := src.WriteTo([]byte("ping"), to); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("B got nothing from A's kernel after %d datagrams: %v (its ARP replies went to the XDP socket?)", sent+1, err)
			}
			pl.stop()
			peertest.CloseClean(t, b, p.A)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}
