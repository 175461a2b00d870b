package sock

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// openServer opens a udp server socket as the kinds do, on ip and a free
// port, and returns it with its table of reply sockets.
func openServer(t *testing.T, ip netip.Addr, n int) (int, *Replies) {
	t.Helper()
	cfg := dgramio.Config{Kind: dgramio.KindUDP, Role: dgramio.RoleServer, LocalIP: ip, ReplySockets: n}.WithDefaults()
	fd, g, err := OpenUDP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	cfg.Port = g.Local.Port()
	r := RepliesFor(cfg, fd, g.Local)
	if r == nil {
		t.Fatal("no table for a server on one address")
	}
	t.Cleanup(r.Close)
	return fd, r
}

// A peer is hot at its ReplyHot-th datagram of a period, once; Open
// connects a socket to it that Lookup finds; StartClose takes it out of
// Lookup; Release frees the slot; a full table counts the hot peers it
// cannot take.
func TestRepliesTable(t *testing.T) {
	_, r := openServer(t, netip.MustParseAddr("127.0.0.1"), 1)
	a := netip.MustParseAddrPort("127.0.0.1:40001")
	b := netip.MustParseAddrPort("127.0.0.1:40002")
	for i := 1; i < ReplyHot; i++ {
		if r.Heard(a) {
			t.Fatalf("hot after %d datagrams", i)
		}
	}
	if !r.Heard(a) {
		t.Fatalf("not hot after %d datagrams", ReplyHot)
	}
	if r.Heard(a) {
		t.Fatal("hot twice")
	}
	i := r.Open(a)
	if i < 0 || r.Lookup(a) != i || r.Lookup(b) != -1 || r.InUse != 1 {
		t.Fatalf("Open %d, Lookup %d/%d, InUse %d", i, r.Lookup(a), r.Lookup(b), r.InUse)
	}
	sa, err := unix.Getpeername(r.Slots[i].Fd)
	if err != nil {
		t.Fatal(err)
	}
	if ap, _ := AddrPortOf(sa); ap != a {
		t.Fatalf("connected to %v, want %v", ap, a)
	}
	for range ReplyHot {
		r.Heard(b)
	}
	if r.Full != 1 {
		t.Fatalf("a hot peer with the table full: Full %d, want 1", r.Full)
	}
	// A new period forgets the counts.
	r.hotAt -= hotPeriod
	r.Sweep()
	for i := 1; i < ReplyHot; i++ {
		if r.Heard(b) {
			t.Fatal("hot before its count in the new period")
		}
	}
	r.StartClose(i)
	if r.Lookup(a) != -1 {
		t.Fatal("a closing socket is still looked up")
	}
	if _, err := unix.Getpeername(r.Slots[i].Fd); err != unix.ENOTCONN {
		t.Fatalf("closing socket: getpeername %v, want ENOTCONN (disconnected)", err)
	}
	if n := r.Release(i); n != 0 || r.InUse != 0 || r.Closed != 1 || r.Slots[i].Fd != -1 {
		t.Fatalf("Release: unread %d, InUse %d, Closed %d, fd %d", n, r.InUse, r.Closed, r.Slots[i].Fd)
	}
}

// A server on an address that routing would not pick as the source for
// its peer gets no reply socket (it would answer from another address):
// 127.0.0.2 answering 127.0.0.1 on loopback, where the source picked is
// 127.0.0.1.
func TestRepliesOtherSource(t *testing.T) {
	_, r := openServer(t, netip.MustParseAddr("127.0.0.2"), 4)
	if i := r.Open(netip.MustParseAddrPort("127.0.0.1:40003")); i >= 0 || r.OpenFailed != 1 || r.InUse != 0 {
		t.Fatalf("Open %d, OpenFailed %d, InUse %d: want a refusal", i, r.OpenFailed, r.InUse)
	}
}

// No table without a server on one address, or with ReplySockets < 0.
func TestRepliesFor(t *testing.T) {
	for _, c := range []dgramio.Config{
		{Role: dgramio.RoleServer},
		{Role: dgramio.RoleServer, LocalIP: netip.IPv6Unspecified()},
		{Role: dgramio.RoleServer, LocalIP: netip.MustParseAddr("127.0.0.1"), ReplySockets: -1},
		{LocalIP: netip.MustParseAddr("127.0.0.1")},
	} {
		if n := ReplySocketsOf(c); n != 0 {
			t.Errorf("%+v: ReplySocketsOf %d, want 0", c, n)
		}
	}
	if n := ReplySocketsOf(dgramio.Config{Role: dgramio.RoleServer, LocalIP: netip.MustParseAddr("::1")}); n != dgramio.DefaultReplySockets {
		t.Errorf("default: %d", n)
	}
}

// A server with reply sockets is SO_REUSEPORT, yet a second server on its
// port is refused with EADDRINUSE, as without them (it does not join the
// first one's reuseport group).
func TestRepliesPortTaken(t *testing.T) {
	cfg := dgramio.Config{Kind: dgramio.KindUDP, Role: dgramio.RoleServer, LocalIP: netip.MustParseAddr("127.0.0.1")}.WithDefaults()
	fd, g, err := OpenUDP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cfg.Port = g.Local.Port()
	if fd2, _, err := OpenUDP(cfg); !errors.Is(err, unix.EADDRINUSE) {
		if err == nil {
			unix.Close(fd2)
		}
		t.Fatalf("second server on %v: %v, want EADDRINUSE", g.Local, err)
	}
}
