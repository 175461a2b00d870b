package bulk

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
)

// TestCellDialsWithoutCookiesRFC4987Sec3_6: a cell's connections, all
// dialled at once, each get a SYN-ACK with state, not a SYN cookie (RFC
// 4987 §3.6), whose connection had only the MSS of the SYN's options
// (no window scaling, SACK or timestamps) when the cell's figures were
// taken. With nativeOptions alone the server's bound on SYN-RECEIVED
// was (conns+16)/4 and 8 of 16 connections were cookie connections.
func TestCellDialsWithoutCookiesRFC4987Sec3_6(t *testing.T) {
	const conns, port = 16, 5201
	a, b := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	side := func(local, peer netip.Addr, server bool) native.Options {
		s := &side{row: Row{Kind: dgramio.KindTCPXDP, Stack: dgramio.TCPStackNative}, spec: SideSpec{Server: server, Conns: conns,
			Local: local, Peer: peer, Port: port, Iface: "veth0"}}
		return cellOptions(s.nativeConfig().WithDefaults(), tcp.Options{}, conns)
	}
	pa, pb := memio.NewPair(memio.Options{Seed: 1})
	defer pa.Close()
	defer pb.Close()
	client, err := native.New(pa, side(a, b, false))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := native.New(pb, side(b, a, true))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	ln, err := server.Listen(port, MaxConns)
	if err != nil {
		t.Fatal(err)
	}
	var dialled []*native.Conn
	for range conns {
		c, err := client.Dial(netip.AddrPortFrom(b, port), 0)
		if err != nil {
			t.Fatal(err)
		}
		dialled = append(dialled, c)
	}
	accepted := 0
	for end := time.Now().Add(10 * time.Second); accepted < conns; {
		if time.Now().After(end) {
			t.Fatalf("%d of %d connections accepted within 10 s", accepted, conns)
		}
		client.Poll(256)
		server.Poll(256)
		for {
			if _, ok := ln.Accept(); !ok {
				break
			}
			accepted++
		}
		if err := client.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := server.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range dialled {
		if c.State() != native.Established {
			t.Fatalf("a dialled connection in %v", c.State())
		}
	}
	if n, _ := server.Counter("tcp_syncookies_sent"); n != 0 {
		t.Errorf("the server answered %d of %d SYNs with a cookie (no window scaling, SACK or timestamps on those connections), want 0", n, conns)
	}
}
