package netconn

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// addr6 is h's IPv6 prefix with the last byte set to last: an address the
// kernel does not hold, as peertest.Addr is for IPv4.
func addr6(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr6.As16()
	a[15] = last
	return netip.AddrFrom16(a)
}

// TestNetTestConnIPv6Veth: netstack over tcp-xdp on A, with an IPv6
// address, serves kernel TCP clients in B: B's kernel resolves the address
// with a neighbour solicitation that the XDP program (IPv6 host address)
// hands to netstack, which advertises it (RFC 4861 §7.2.4); then
// x/net/nettest's conformance test of net.Conn runs over those
// connections (RFC 8200 IPv6, RFC 9293 TCP). The Service also dials B's
// kernel listener with DialContext("tcp6").
func TestNetTestConnIPv6Veth(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{IPv6: true})
	srvIP := addr6(p.A, 3)
	s := openVeth(t, p.A, dgramio.Config{Kind: dgramio.KindTCPXDP, LocalIP: srvIP, Port: 7000,
		TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}}, Options{})
	if a := s.Addr(); !a.Equal(net.IP(srvIP.AsSlice())) {
		t.Fatalf("Service address %v", a)
	}
	ln, err := s.Listen(7000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ln.Addr().String(); got != "["+srvIP.String()+"]:7000" {
		t.Fatalf("listener address %s", got)
	}
	dial := peertest.Dialer(p.B)
	target := netip.AddrPortFrom(srvIP, 7000).String()
	nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
		return dial(ctx, "tcp6", target)
	}))
	if mac, _, err := p.B.Neigh(srvIP); err != nil || mac.String() != p.A.MAC.String() {
		t.Fatalf("B's kernel holds %v for %v (%v), want A's %v", mac, srvIP, err, p.A.MAC)
	}
	st := s.Stats()
	if v := counter(st, "netstack", "ndp_adverts_sent"); v == 0 {
		t.Errorf("netstack sent no neighbour advertisement: %v", st.Layers)
	}

	// The Service dials B's kernel: tcp6 to an IPv6 literal. On tcp-xdp
	// the peer's port must be Config.Port (the XDP program's).
	kl, err := p.B.ListenTCP6(7000)
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := kl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.DialContext(ctx, "tcp4", netip.AddrPortFrom(p.B.Addr6, 7000).String()); err == nil {
		t.Fatal("tcp4 on an IPv6 Service dialled")
	}
	c, err := s.DialContext(ctx, "tcp6", netip.AddrPortFrom(p.B.Addr6, 7000).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kc, ok := <-accepted
	if !ok {
		t.Fatal("B's listener accepted nothing")
	}
	defer kc.Close()
	if got := kc.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != srvIP {
		t.Fatalf("B saw the connection from %v, want %v", got, srvIP)
	}
	if _, err := c.Write([]byte("ping6")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	kc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(kc, buf); err != nil || string(buf) != "ping6" {
		t.Fatalf("%q %v", buf, err)
	}
	if _, err := s.Dial(ctx, "198.18.0.2:7000"); err == nil {
		t.Fatal("an IPv4 address dialled from an IPv6 Service")
	}
}
