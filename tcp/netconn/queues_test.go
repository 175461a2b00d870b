package netconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// queuePair is a two-queue veth pair whose XPS masks send CPU q's frames
// on transmit queue q (so a frame sent from CPU q arrives on receive queue
// q: see dgramio's Group doc), with a two-queue native Service on each end
// (A: 198.18.x.3, B: 198.18.x.4), queue q's poller pinned to cpus[q].
func queuePair(t *testing.T) (p *testhost.Pair, a, b *Service, cpus []int) {
	t.Helper()
	testutil.RequireRoot(t)
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testutil.Skip(t, fmt.Sprintf("two queues on two CPUs: this process may use %v", allowed))
	}
	cpus = allowed[:2]
	p = hosttest.New(t, testhost.Options{Queues: 2, XPSCPUs: cpus})
	cfg := func(h *testhost.Host, last byte) dgramio.Config {
		return dgramio.Config{LocalIP: peertest.Addr(h, last), Port: testPort, Queues: 2, CPUs: cpus}
	}
	a = openVeth(t, p.A, cfg(p.A, 3), Options{})
	b = openVeth(t, p.B, cfg(p.B, 4), Options{})
	return p, a, b, cpus
}

// queueOf is the queue whose engine holds c.
func queueOf(c net.Conn) int { return c.(*Conn).nc.n.q }

// TestQueuesEcho: a two-queue Service's Listener accepts the connections
// of both its queues; a two-queue Service dials from its queues in turn,
// each connection from a source port of its queue's share; every
// connection keeps to its queue (a segment on the other queue's engine
// would be answered with a RST: RFC 9293 §3.10.7.1), which 16 MiB echoed
// byte-exact over 8 connections at once shows, with no reset counted.
func TestQueuesEcho(t *testing.T) {
	_, a, b, _ := queuePair(t)
	if got := len(a.nats); got != 2 {
		t.Fatalf("%d engines, want 2", got)
	}
	ln := listen(t, a, testPort)
	var mu sync.Mutex
	accepted := map[int]int{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted[queueOf(c)]++
			mu.Unlock()
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	const conns, each = 8, 2 << 20
	dialled := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := b.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", a.Addr(), testPort))
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		q := queueOf(c)
		dialled[q]++
		if port := c.LocalAddr().(*net.TCPAddr).Port; port%2 != q {
			t.Errorf("dial %d on queue %d from port %d: not the queue's share (port %% 2 == queue)", i, q, port)
		}
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			defer c.Close()
			errs <- echoCheck(c, uint64(i), each)
		}(i, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if dialled[0] != conns/2 || dialled[1] != conns/2 {
		t.Errorf("dials by queue %v, want %d on each", dialled, conns/2)
	}
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return accepted[0]+accepted[1] == conns
	}, func() string { return fmt.Sprintf("accepted by queue %v", accepted) })
	mu.Lock()
	if accepted[0] == 0 || accepted[1] == 0 {
		t.Errorf("accepted by queue %v: the Listener did not return both queues' connections", accepted)
	}
	mu.Unlock()
	for _, s := range []*Service{a, b} {
		if v := counter(s.Stats(), "native", "tcp_resets_sent"); v != 0 {
			t.Errorf("%s: %d resets sent: a connection left its queue", s.Addr(), v)
		}
	}
}

// echoCheck writes n seeded bytes to c while it reads them back, byte for
// byte.
func echoCheck(c net.Conn, seed uint64, n int) error {
	want := make([]byte, n)
	(&seededReader{rng: rand.New(rand.NewPCG(seed, 7))}).Read(want)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		werr <- err
	}()
	got := make([]byte, n)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("conn %d: read back: %w", seed, err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("conn %d: write: %w", seed, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("conn %d: the echo differs from what was written", seed)
	}
	return nil
}

// TestQueuesNetTest runs x/net/nettest's conformance test for net.Conn
// between two two-queue Services, the dials alternating queues.
func TestQueuesNetTest(t *testing.T) {
	_, a, b, _ := queuePair(t)
	ln := listen(t, a, testPort)
	nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
		return b.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", a.Addr(), testPort))
	}))
}

// TestQueuesHTTP: an unchanged net/http Server on a two-queue Service
// answers an http.Client that dials through a two-queue Service
// (Service.DialContext), 8 clients at once, bodies of 0 B to 1 MiB on
// keep-alive connections spread over both queues of each end.
func TestQueuesHTTP(t *testing.T) {
	_, a, b, _ := queuePair(t)
	ln := listen(t, a, testPort)
	srv := &http.Server{Handler: echoBody}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{DialContext: b.DialContext, MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: time.Minute, Transport: tr}
	url := fmt.Sprintf("http://%s", netip.AddrPortFrom(netip.MustParseAddr(a.Addr().String()), testPort))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, size := range []int{0, 1, 1000, 64 << 10, 1 << 20} {
				body := bytes.Repeat([]byte{byte('a' + g + i)}, size)
				resp, err := client.Post(fmt.Sprintf("%s/%d/%d", url, g, size), "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, body) {
					errs <- fmt.Errorf("client %d, %d bytes: got %d bytes back (%v)", g, size, len(got), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v := counter(b.Stats(), "netconn", "dials"); v < 2 {
		t.Errorf("%d dials: both queues were not used", v)
	}
	for _, s := range []*Service{a, b} {
		if v := counter(s.Stats(), "native", "tcp_resets_sent"); v != 0 {
			t.Errorf("%s: %d resets sent: a connection left its queue", s.Addr(), v)
		}
	}
}

// TestQueuesConfig: several queues are the native engine's on tcp-xdp
// only; a Config that asks them elsewhere is a *dgramio.ConfigError naming
// Queues, and opens nothing.
func TestQueuesConfig(t *testing.T) {
	for _, cfg := range []dgramio.Config{
		{Kind: dgramio.KindTCPXDP, Iface: "lo", LocalIP: netip.MustParseAddr("198.18.0.3"), Port: testPort, Queues: 2, TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}},
		{Kind: dgramio.KindTCPDPDK, Iface: "lo", LocalIP: netip.MustParseAddr("198.18.0.3"), Port: testPort, Queues: 2},
	} {
		_, err := New(cfg, Options{})
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Queues" {
			t.Errorf("%s on %s, 2 queues: %v, want a ConfigError on Queues", cfg.Kind, cfg.TCP.Stack, err)
		}
	}
	_, err := New(dgramio.Config{Kind: dgramio.KindTCPXDP, Iface: "lo", LocalIP: netip.MustParseAddr("198.18.0.3"), Port: testPort, Queues: 2},
		Options{Open: OpenXDP})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Queues" {
		t.Errorf("2 queues with Options.Open: %v, want a ConfigError on Queues", err)
	}
}

// TestQueuesListenerClose: closing a two-queue Listener resets the
// connections of both queues that were established and not yet accepted
// (as Linux resets a closed listener's accept queue), and the Service
// holds nothing afterwards.
func TestQueuesListenerClose(t *testing.T) {
	_, a, b, _ := queuePair(t)
	ln := listen(t, a, testPort)
	var conns []net.Conn
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := b.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", a.Addr(), testPort))
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// Two listeners and the four connections, held by the queues.
	waitFor(t, 10*time.Second, func() bool { return a.Endpoints() == 2+4 },
		func() string { return fmt.Sprintf("%d endpoints, want 6", a.Endpoints()) })
	ln.Close()
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("conn %d (queue %d): read %v, want ECONNRESET", i, queueOf(c), err)
		}
	}
	waitFor(t, 10*time.Second, func() bool { return a.Endpoints() == 0 },
		func() string { return fmt.Sprintf("%d endpoints after the close, want 0", a.Endpoints()) })
}
