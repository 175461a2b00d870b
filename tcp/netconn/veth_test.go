package netconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// openVeth starts a Service of cfg.Kind (tcp-xdp when unset) on h's
// interface inside h's namespace, closed at cleanup; it skips (fails in
// CI) where the kind is not supported.
func openVeth(t testing.TB, h *testhost.Host, cfg dgramio.Config, o Options) *Service {
	t.Helper()
	if cfg.Kind == "" {
		cfg.Kind = dgramio.KindTCPXDP
	}
	cfg.Iface = h.Iface
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	var s *Service
	err := h.Do(func() error {
		var err error
		s, err = New(cfg, o)
		return err
	})
	testutil.SkipIfNotSupported(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// hello is the handler of the HTTP tests: an unchanged net/http handler.
var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "hello %s from %s: %d bytes", r.URL.Path, r.RemoteAddr, len(body))
})

// TestHTTPServerOverXDP: net/http's Server, unchanged, serves over tcp-xdp
// on A; Go's http.Client, a kernel TCP client in B, gets the answers
// (keep-alive: one connection, many requests; then a body of 1 MiB). After
// Shutdown the XDP program is gone.
func TestHTTPServerOverXDP(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := peertest.Addr(p.A, 3)
	s := openVeth(t, p.A, dgramio.Config{LocalIP: addr, Port: 8080}, Options{})
	ln := listen(t, s, 8080)
	srv := &http.Server{Handler: hello}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: peertest.Dialer(p.B)}}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("http://%s:8080", addr)
	for i := 0; i < 20; i++ {
		resp, err := client.Get(fmt.Sprintf("%s/req%d", url, i))
		if err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("hello /req%d from %s:", i, p.B.Addr)
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(string(body), want) {
			t.Fatalf("GET %d: %d %q %v; want %q...", i, resp.StatusCode, body, err, want)
		}
	}
	resp, err := client.Post(url+"/big", "application/octet-stream", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(body), ": 1048576 bytes") {
		t.Fatalf("POST 1 MiB: %q", body)
	}
	st := s.Stats()
	if st.Accepts != 1 {
		t.Errorf("keep-alive: %d connections accepted, want 1", st.Accepts)
	}
	if v := counter(st, "netstack", "arp_replies_sent") + counter(st, "native", "arp_replies_sent"); v == 0 {
		t.Errorf("netstack answered no ARP: did the kernel reach us?")
	}
	t.Logf("mode %q; %d frames polled in %d rounds, %d sleeps", st.Mode, counter(st, "netconn", "poll_frames"), counter(st, "netconn", "poll_rounds"), counter(st, "netconn", "sleeps"))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	peertest.CloseClean(t, s, p.A)
}

// TestHTTPClientOverXDP: Go's http.Client dials through a tcp-xdp Service
// on A (Service.DialContext) to a kernel net/http server in B.
func TestHTTPClientOverXDP(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	kln := peertest.Listen(t, p.B, netip.AddrPortFrom(p.B.Addr, 8080))
	srv := &http.Server{Handler: hello}
	go srv.Serve(kln)
	defer srv.Close()

	s := openVeth(t, p.A, dgramio.Config{LocalIP: peertest.Addr(p.A, 3), Port: 8080}, Options{})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: s.DialContext}}
	defer client.CloseIdleConnections()
	for i := 0; i < 10; i++ {
		resp, err := client.Get(fmt.Sprintf("http://%s:8080/c%d", p.B.Addr, i))
		if err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("hello /c%d from %s:", i, peertest.Addr(p.A, 3)); !strings.HasPrefix(string(body), want) {
			t.Fatalf("GET %d: %q, want %q...", i, body, want)
		}
	}
	if st := s.Stats(); counter(st, "netconn", "dials") != 1 {
		t.Errorf("keep-alive: %d dials", counter(st, "netconn", "dials"))
	}
	// Another port reaches netstack too (the program hands it every
	// frame to its address): B's kernel, with nothing there, resets it.
	if _, err := s.Dial(context.Background(), fmt.Sprintf("%s:8081", p.B.Addr)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to a closed port of the peer: %v, want connection refused", err)
	}
}

// TestListenDialOverXDP: the one-line forms. Listen(cfg) on A and
// Dial(ctx, cfg, addr) on B, each owning a tcp-xdp Service; closing what
// they returned closes the Service and detaches the program.
func TestListenDialOverXDP(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	srvAddr := peertest.Addr(p.A, 3)
	var ln net.Listener
	err := p.A.Do(func() error {
		var err error
		ln, err = Listen(dgramio.Config{Kind: dgramio.KindTCPXDP, Iface: p.A.Iface, LocalIP: srvAddr, Port: 7000})
		return err
	})
	testutil.SkipIfNotSupported(t, err)
	defer ln.Close()
	var c net.Conn
	if err := p.B.Do(func() error {
		var err error
		c, err = Dial(context.Background(), dgramio.Config{Kind: dgramio.KindTCPXDP, Iface: p.B.Iface, LocalIP: peertest.Addr(p.B, 4)},
			fmt.Sprintf("%s:7000", srvAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	a.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("%q %v", buf, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	peertest.Clean(t, p.B) // the client's Service went with its connection
	if n, err := a.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("server Read after the client closed: %d %v", n, err)
	}
	ln.Close()
	a.Close() // the last: the server's Service closes now
	peertest.Clean(t, p.A)
}

// TestKernelThousandConns: 1,000 kernel TCP connections from B to a
// tcp-xdp echo server on A, open at once, each with a round trip, then
// closed: the Service ends with no connection, no goroutine left over, and
// (after a shortened TIME-WAIT) only the listener's endpoint; on each
// engine.
func TestKernelThousandConns(t *testing.T) {
	testutil.RequireRoot(t)
	forEngines(t, testKernelThousandConns)
}

func testKernelThousandConns(t *testing.T, stk dgramio.TCPStack) {
	const n = 1000
	p := hosttest.New(t, testhost.Options{})
	addr := peertest.Addr(p.A, 3)
	cfg := dgramio.Config{LocalIP: addr, Port: 7001}
	cfg.TCP.SendBuf, cfg.TCP.RecvBuf = 64<<10, 64<<10
	s := openVeth(t, p.A, onEngine(stk, cfg), Options{MaxConns: n, TimeWait: 500 * time.Millisecond})
	ln := listen(t, s, 7001)
	served := peertest.ServeEcho(ln)
	baseline := runtime.NumGoroutine()
	conns := make([]net.Conn, n)
	// The kernel sockets are made inside B, n at a time on one thread.
	if err := p.B.Do(func() error {
		for i := range conns {
			c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:7001", addr), 30*time.Second)
			if err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
			conns[i] = c
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			msg := []byte(fmt.Sprintf("message %04d", i))
			if _, err := c.Write(msg); err != nil {
				errs[i] = err
				return
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
				errs[i] = fmt.Errorf("connection %d: %q %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return s.Conns() == n }, func() string { return fmt.Sprintf("%d open, want %d", s.Conns(), n) })
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, 60*time.Second, func() bool { return s.Conns() == 0 }, func() string { return fmt.Sprintf("%d still open", s.Conns()) })
	waitFor(t, 60*time.Second, func() bool { return runtime.NumGoroutine() <= baseline }, func() string {
		return fmt.Sprintf("%d goroutines, baseline %d", runtime.NumGoroutine(), baseline)
	})
	waitFor(t, 60*time.Second, func() bool { return s.Endpoints() == 1 }, func() string {
		return fmt.Sprintf("%d endpoints, want 1 (the listener)", s.Endpoints())
	})
	if st := s.Stats(); st.Accepts != n {
		t.Errorf("%d accepted, want %d", st.Accepts, n)
	}
	ln.Close()
	served()
}

func counter(s dgramio.Stats, layer, name string) uint64 {
	v, _ := s.Counter(layer, name)
	return v
}

// TestXDPAnswersAsHost: the address of a tcp-xdp Service answers as a
// host's, seen from a kernel on B: a connection to a port nobody listens
// on is refused by a RST at once (RFC 9293 §3.10.7.1), where before the
// XDP program gave the SYN to a kernel that does not hold the address and
// nothing answered; an ICMP echo request is answered (RFC 1122 §3.2.2.6).
func TestXDPAnswersAsHost(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := peertest.Addr(p.A, 3)
	s := openVeth(t, p.A, dgramio.Config{LocalIP: addr, Port: 7000}, Options{})
	listen(t, s, 7000)
	err := p.B.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:7001", addr), 10*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial a closed port of the tcp-xdp address: %v, want connection refused", err)
	}
	err = p.B.Do(func() error {
		c, err := net.Dial("ip4:icmp", addr.String())
		if err != nil {
			return err
		}
		defer c.Close()
		req := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1, 'd', 'g'}
		binary.BigEndian.PutUint16(req[2:], ^onesSum(req))
		if _, err := c.Write(req); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 1500)
		for {
			n, _, err := c.(*net.IPConn).ReadFrom(buf) // the IPv4 header stripped
			if err != nil {
				return fmt.Errorf("no echo reply: %w", err)
			}
			if b := buf[:n]; n >= 8 && b[0] == 0 && b[4] == 0x12 && b[5] == 0x34 {
				return nil
			}
		}
	})
	if err != nil {
		t.Errorf("ping the tcp-xdp address: %v", err)
	}
}

// onesSum is the ones' complement sum of b (the ICMP checksum, inverted).
func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
