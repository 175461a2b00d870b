package netconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// leadPair is a tcp-xdp Service on A (native, asleep in the netpoller) and
// n connections to it from kernel clients in B: srv[i] the Service's end,
// cli[i] the kernel's.
func leadPair(t *testing.T, n int) (p *testhost.Pair, s *Service, srv []*Conn, cli []net.Conn) {
	testutil.RequireRoot(t)
	p = hosttest.New(t, testhost.Options{})
	addr := peertest.Addr(p.A, 3)
	s = openVeth(t, p.A, onEngine(dgramio.TCPStackNative, dgramio.Config{LocalIP: addr, Port: testPort}), Options{})
	if s.nat.rf == nil {
		t.Fatal("the native Service over AF_XDP has no fd to lead on")
	}
	ln := listen(t, s, testPort)
	dial := peertest.Dialer(p.B)
	for i := 0; i < n; i++ {
		k, err := dial(context.Background(), "tcp4", fmt.Sprintf("%s:%d", addr, testPort))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		srv, cli = append(srv, c.(*Conn)), append(cli, k)
	}
	return p, s, srv, cli
}

// leading waits until c's blocked Read leads (waits on the fd itself).
func leading(t *testing.T, s *Service, c *Conn) {
	t.Helper()
	waitFor(t, 20*time.Second, func() bool { return s.nat.leader.Load() == c.nc },
		func() string { return "the blocked Read never led" })
}

type readResult struct {
	b   []byte
	err error
}

func readAsync(c net.Conn, n int) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		b := make([]byte, n)
		_, err := io.ReadFull(c, b)
		ch <- readResult{b, err}
	}()
	return ch
}

func expect(t *testing.T, ch <-chan readResult, want string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || string(r.b) != want {
			t.Fatalf("read %q, %v; want %q", r.b, r.err, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%q never arrived", want)
	}
}

// TestLeadingRead: a Read that blocks while the poller sleeps in the
// netpoller waits on the AF_XDP socket itself and gets its bytes by a
// round of its own (no hop through the poller goroutine), message after
// message, byte-exact.
func TestLeadingRead(t *testing.T) {
	_, s, srv, cli := leadPair(t, 1)
	a, k := srv[0], cli[0]
	for i := 0; i < 20; i++ {
		ch := readAsync(a, 7)
		leading(t, s, a)
		asleep(t, s)
		msg := fmt.Sprintf("ping %02d", i)
		if _, err := k.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		expect(t, ch, msg)
	}
	if s.nat.leadRounds.Load() == 0 {
		t.Error("no Read ran a round of its own: every message went through the poller")
	}
}

// TestLeadingReadServesOthers: while one connection's Read leads (and the
// poller leaves the frames' rounds to it), another connection's bytes
// reach its reader, a new connection is accepted, and a segment of a
// third that was lost is retransmitted (RFC 6298 §5.1: its timer, the
// engine's, fires while the only goroutines waiting are readers); the
// leader's Read still gets its own bytes after.
func TestLeadingReadServesOthers(t *testing.T) {
	p, s, srv, cli := leadPair(t, 3)
	lead := readAsync(srv[0], 4)
	leading(t, s, srv[0])

	other := readAsync(srv[1], 5)
	if _, err := cli[1].Write([]byte("other")); err != nil {
		t.Fatal(err)
	}
	expect(t, other, "other")

	leading(t, s, srv[0])
	var ln *Listener
	s.mu.Lock()
	for l := range s.lns {
		ln = l
	}
	s.mu.Unlock()
	dialed := make(chan net.Conn, 1)
	go func() {
		k, err := peertest.Dialer(p.B)(context.Background(), "tcp4", srv[0].LocalAddr().String())
		if err != nil {
			t.Error(err)
		}
		dialed <- k
	}()
	ln.SetDeadline(time.Now().Add(30 * time.Second))
	nc, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept while a Read leads: %v", err)
	}
	defer nc.Close()
	if k := <-dialed; k != nil {
		defer k.Close()
		if _, err := k.Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		expect(t, readAsync(nc, 3), "new")
	}

	// B's end down: what A sends now is lost, and only A's
	// retransmission timer brings it.
	leading(t, s, srv[0])
	if err := p.B.SetLinkUp(false); err != nil {
		t.Fatal(err)
	}
	if _, err := srv[2].Write([]byte("retransmitted")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.B.SetLinkUp(true); err != nil {
		t.Fatal(err)
	}
	expect(t, readAsync(cli[2], 13), "retransmitted")
	if r := counter(s.Stats(), "native", "tcp_retransmits") + counter(s.Stats(), "native", "tcp_tlp_probes"); r == 0 {
		t.Error("the data arrived without a retransmission or probe: the loss was not simulated")
	}

	if _, err := cli[0].Write([]byte("mine")); err != nil {
		t.Fatal(err)
	}
	expect(t, lead, "mine")
}

// TestLeadingReadWakes: a Read that leads is ended as a parked one is: by
// its deadline passing, by a deadline set in the past from another
// goroutine (as net/http's abortPendingRead does), by CloseRead and by
// Close.
func TestLeadingReadWakes(t *testing.T) {
	_, s, srv, _ := leadPair(t, 1)
	a := srv[0]
	b := make([]byte, 1)

	a.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := a.Read(b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	a.SetReadDeadline(time.Time{})

	ended := func(what string, stop func(), ok func(error) bool) {
		t.Helper()
		ch := readAsync(a, 1)
		leading(t, s, a)
		stop()
		select {
		case r := <-ch:
			if !ok(r.err) {
				t.Fatalf("Read after %s: %v", what, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a leading Read did not end at %s", what)
		}
	}
	ended("a deadline in the past", func() { a.SetReadDeadline(time.Unix(1, 0)) },
		func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) })
	a.SetReadDeadline(time.Time{})
	ended("CloseRead", func() { a.CloseRead() },
		func(err error) bool { return err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) })
}

// TestLeadingReadClose: Close ends a leading Read with net.ErrClosed.
func TestLeadingReadClose(t *testing.T) {
	_, s, srv, _ := leadPair(t, 1)
	a := srv[0]
	ch := readAsync(a, 1)
	leading(t, s, a)
	a.Close()
	select {
	case r := <-ch:
		if !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a leading Read did not end at Close")
	}
}
