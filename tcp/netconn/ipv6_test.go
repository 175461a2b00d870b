package netconn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// The IPv6 addresses of newPair6's Services (RFC 5180's benchmarking
// range).
var (
	ip6A = netip.MustParseAddr("2001:2::1")
	ip6B = netip.MustParseAddr("2001:2::2")
)

// newPair6 is newPair with IPv6 Services: A (2001:2::1) and B (2001:2::2).
func newPair6(t testing.TB, o Options, cfg dgramio.Config) *pair {
	t.Helper()
	cfg.ConnectTimeout = 20 * time.Second
	pa, pb := memio.NewPair(memio.Options{})
	ca, cb := cfg, cfg
	ca.LocalIP, cb.LocalIP = ip6A, ip6B
	a, err := NewOverFrameIO(ca, pa, o)
	if err != nil {
		t.Fatalf("service A: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := NewOverFrameIO(cb, pb, o)
	if err != nil {
		t.Fatalf("service B: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return &pair{A: a, B: b, pa: pa, pb: pb}
}

// TestNetTestConnIPv6Memio: two IPv6 Services joined in memory, on each
// engine: B resolves A by neighbour discovery (RFC 4861 §7.2.2) and x/net's
// nettest.TestConn runs over IPv6 connections (RFC 8200, RFC 9293) that A
// dials with "tcp6" and an IPv6 literal; the addresses are IPv6 and mirror
// each other, and a Service of one family refuses the other's.
func TestNetTestConnIPv6Memio(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		p := newPair6(t, Options{}, onEngine(stk))
		ln := listen(t, p.B, testPort)
		target := fmt.Sprintf("[%s]:%d", ip6B, testPort)
		if got := ln.Addr().String(); got != target {
			t.Fatalf("listener address %s, want %s", got, target)
		}
		nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
			return p.A.DialContext(ctx, "tcp6", target)
		}))

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		d, err := p.A.DialContext(ctx, "tcp", target)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		a := <-accepted
		if a == nil {
			t.Fatal("nothing accepted")
		}
		defer a.Close()
		dl, dr := d.LocalAddr().(*net.TCPAddr), d.RemoteAddr().(*net.TCPAddr)
		al, ar := a.LocalAddr().(*net.TCPAddr), a.RemoteAddr().(*net.TCPAddr)
		if dl.AddrPort().Addr() != ip6A || dr.AddrPort() != netip.AddrPortFrom(ip6B, testPort) ||
			dl.String() != ar.String() || dr.String() != al.String() {
			t.Errorf("dialled %v->%v, accepted %v->%v", dl, dr, al, ar)
		}

		for _, bad := range []struct{ network, addr string }{
			{"tcp4", target},
			{"tcp", fmt.Sprintf("198.18.0.2:%d", testPort)},
			{"tcp", fmt.Sprintf("[::ffff:198.18.0.2]:%d", testPort)},
			{"tcp6", fmt.Sprintf("[::]:%d", testPort)},
			{"udp6", target},
		} {
			if c, err := p.A.DialContext(ctx, bad.network, bad.addr); err == nil {
				c.Close()
				t.Errorf("DialContext(%q, %q) on an IPv6 Service dialled", bad.network, bad.addr)
			}
		}
		p4 := newPair(t, memio.Options{}, Options{}, onEngine(stk))
		if c, err := p4.A.DialContext(ctx, "tcp6", target); err == nil {
			c.Close()
			t.Error("tcp6 dialled from an IPv4 Service")
		}
		if c, err := p4.A.Dial(ctx, target); err == nil {
			c.Close()
			t.Error("an IPv6 literal dialled from an IPv4 Service")
		}
	})
}

// TestHTTPOverMemioIPv6: an unchanged net/http Server on an IPv6 Service
// and an http.Client dialling through another (Service.DialContext, URL
// with an IPv6 literal) exchange bodies of 0 B to 16 MiB each way on one
// keep-alive connection, on each engine.
func TestHTTPOverMemioIPv6(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		p := newPair6(t, Options{}, onEngine(stk))
		ln := listen(t, p.B, 8080)
		srv := &http.Server{Handler: echoBody}
		go srv.Serve(ln)
		defer srv.Close()
		tr := &http.Transport{DialContext: p.A.DialContext}
		defer tr.CloseIdleConnections()
		exchangeBodies(t, &http.Client{Timeout: time.Minute, Transport: tr}, fmt.Sprintf("http://[%s]:8080", ip6B))
		if st := p.B.Stats(); st.Accepts != 1 {
			t.Errorf("keep-alive: %d connections accepted, want 1", st.Accepts)
		}
	})
}

// TestNativeIPv6Veth: a tcp-xdp Service on the native engine (the
// default) with an IPv6 address on A, over veth. B's kernel resolves it
// by a neighbour solicitation that the XDP program hands to the engine,
// which advertises it (RFC 4861 §7.2.4); x/net's nettest.TestConn runs
// over B's kernel "tcp6" clients; an unchanged net/http Server on the
// Service answers a kernel http.Client in B, and an http.Client dialling
// through the Service (DialContext, to B's address, which the engine
// learnt from B's solicitation, §7.2.3) is answered by a kernel net/http
// Server in B.
func TestNativeIPv6Veth(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{IPv6: true})
	srvIP := addr6(p.A, 3)
	s := openVeth(t, p.A, dgramio.Config{LocalIP: srvIP, Port: 8080}, Options{})
	if s.nat == nil {
		t.Fatal("the Service does not run the native engine")
	}
	ln := listen(t, s, 8080)
	target := netip.AddrPortFrom(srvIP, 8080).String()
	dial := peertest.Dialer(p.B)
	nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
		return dial(ctx, "tcp6", target)
	}))
	if mac, _, err := p.B.Neigh(srvIP); err != nil || mac.String() != p.A.MAC.String() {
		t.Fatalf("B's kernel holds %v for %v (%v), want A's %v", mac, srvIP, err, p.A.MAC)
	}

	srv := &http.Server{Handler: echoBody}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{DialContext: dial}
	defer tr.CloseIdleConnections()
	exchangeBodies(t, &http.Client{Timeout: time.Minute, Transport: tr}, "http://"+target)

	kln, err := p.B.ListenTCP6(8080)
	if err != nil {
		t.Fatal(err)
	}
	defer kln.Close()
	ksrv := &http.Server{Handler: echoBody}
	go ksrv.Serve(kln)
	defer ksrv.Close()
	tr2 := &http.Transport{DialContext: s.DialContext}
	defer tr2.CloseIdleConnections()
	exchangeBodies(t, &http.Client{Timeout: time.Minute, Transport: tr2}, fmt.Sprintf("http://[%s]:8080", p.B.Addr6))
	if v := counter(s.Stats(), "netconn", "dials"); v != 1 {
		t.Errorf("keep-alive: %d dials, want 1", v)
	}
	st := s.Stats()
	if counter(st, "native", "ndp_na_sent") == 0 {
		t.Errorf("the engine advertised nothing: %v", st.Layers)
	}
}
