package tcp

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// tcp-xdp on the native engine over IPv6 (2001:2::/48 on the test veth),
// against the kernel's TCP in the other namespace. The engine holds an
// address of A's /64 that A's kernel does not (::3): B's kernel finds it
// by neighbour discovery, which the XDP program (SetHost6) hands to the
// engine.

// addr6 is h's IPv6 address with its last byte set to last.
func addr6(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr6.As16()
	a[15] = last
	return netip.AddrFrom16(a)
}

// listen6 opens a kernel TCP listener on addr inside h's namespace.
func listen6(t *testing.T, h *testhost.Host, addr netip.AddrPort) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp6", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// recordsFromKernel6 has a kernel TCP client in B's namespace connect over
// IPv6 to addr (a native engine on A, which answers B's kernel's neighbour
// solicitation, RFC 4861 §7.2.4) and exchange n records, each echoed to
// its sender; then it closes the client.
func recordsFromKernel6(t *testing.T, p *testhost.Pair, addr netip.AddrPort, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), peertest.DialTimeout)
	defer cancel()
	c, err := peertest.Dialer(p.B)(ctx, "tcp6", addr.String())
	if err != nil {
		t.Fatalf("kernel client connect to %s: %v", addr, err)
	}
	defer c.Close()
	if err := peertest.Records(c, 0, n, 100, 120*time.Second); err != nil {
		t.Fatal(err)
	}
}

// echoedByKernel6: the backend open makes of cfg (a native engine on A,
// on A's address cfg.LocalIP) connects over IPv6 to a kernel TCP echo
// server on B's port: it resolves B by neighbour discovery (RFC 4861
// §7.2.2: a solicitation, B's kernel's advertisement) and 2000 records
// come back in order; Close ends the kernel's side.
func echoedByKernel6(t *testing.T, p *testhost.Pair, port uint16, cfg dgramio.Config, open func(dgramio.Config) (dgramio.Backend, error)) {
	t.Helper()
	srv := netip.AddrPortFrom(p.B.Addr6, port)
	ln := listen6(t, p.B, srv)
	wait := peertest.ServeEcho(ln)
	cfg.Dests, cfg.Port = []netip.AddrPort{srv}, port
	b, err := open(cfg)
	testutil.SkipIfNotSupported(t, err)
	s := echoedRecords(t, b, 2000)
	if v, _ := s.Counter("native", "ndp_ns_sent"); v == 0 {
		t.Errorf("B resolved without a solicitation?")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	peertest.Ended(t, ln, wait)
	peertest.Clean(t, p.A)
}

// TestXDPNativeIPv6ServerKernelClient: a kernel TCP client on B connects
// over IPv6 to tcp-xdp (native) serving on A and exchanges 2000 records,
// each echoed to its sender; the engine answered B's kernel's neighbour
// solicitation (RFC 4861 §7.2.4) and its segments carry the IPv6
// pseudo-header checksum the kernel checks (RFC 8200 §8.1).
func TestXDPNativeIPv6ServerKernelClient(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{IPv6: true})
	addr := netip.AddrPortFrom(addr6(p.A, 3), 5000)
	b, err := openXDP(t, p.A, dgramio.Config{Role: dgramio.RoleServer, LocalIP: addr.Addr(), Port: addr.Port(),
		TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNative}})
	testutil.SkipIfNotSupported(t, err)
	pl := startPoller(b.(*Backend), echo(t, b.(*Backend)))
	defer pl.stop()
	const n = 2000
	recordsFromKernel6(t, p, addr, n)
	for deadline := time.Now().Add(10 * time.Second); b.Stats().PeerCloses != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel client's close was not seen: %+v", b.Stats())
		}
	}
	pl.stop()
	s := b.Stats()
	if s.Accepts != 1 || s.RxDelivered != n || s.TxSent != n || s.Resets != 0 {
		t.Fatalf("Accepts %d RxDelivered %d TxSent %d Resets %d, want 1, %d, %d, 0", s.Accepts, s.RxDelivered, s.TxSent, s.Resets, n, n)
	}
	for _, name := range []string{"ndp_na_sent", "ip6_delivered"} {
		if v, _ := s.Counter("native", name); v == 0 {
			t.Errorf("native %s 0", name)
		}
	}
	if v, _ := s.Counter("native", "tcp_checksum_errors"); v != 0 {
		t.Errorf("tcp_checksum_errors %d", v)
	}
	t.Logf("mode %q", s.Mode)
	peertest.CloseClean(t, b, p.A)
}

// TestXDPNativeIPv6ClientKernelServer: tcp-xdp (native) on A connects
// over IPv6 to a kernel TCP echo server on B: it resolves B by neighbour
// discovery (RFC 4861 §7.2.2: a solicitation, B's kernel's advertisement)
// and 2000 records come back in order; Close ends the kernel's side.
func TestXDPNativeIPv6ClientKernelServer(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{IPv6: true})
	echoedByKernel6(t, p, 5000, dgramio.Config{LocalIP: addr6(p.A, 3), TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNative}},
		func(cfg dgramio.Config) (dgramio.Backend, error) { return openXDP(t, p.A, cfg) })
}
