package netconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// connect dials B:port from A and accepts on ln; both closed at cleanup.
func connect(t *testing.T, p *pair, ln *Listener) (dialled, accepted *Conn) {
	t.Helper()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- res{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := p.A.Dial(ctx, fmt.Sprintf("%s:%d", ipB, ln.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	r := <-ch
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return d, r.c
}

// listen listens on port of s, failing the test otherwise; the listener is
// closed at cleanup (closing it earlier is fine).
func listen(t testing.TB, s *Service, port uint16) *Listener {
	t.Helper()
	ln, err := s.Listen(port)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestAddrs: LocalAddr and RemoteAddr are *net.TCPAddr and mirror each
// other; the listener's is B:port.
func TestAddrs(t *testing.T) { forEngines(t, testAddrs) }

func testAddrs(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	if got := ln.Addr().String(); got != fmt.Sprintf("%s:%d", ipB, testPort) {
		t.Errorf("listener Addr %s", got)
	}
	dl, dr := d.LocalAddr().(*net.TCPAddr), d.RemoteAddr().(*net.TCPAddr)
	al, ar := a.LocalAddr().(*net.TCPAddr), a.RemoteAddr().(*net.TCPAddr)
	if dl.String() != ar.String() || dr.String() != al.String() {
		t.Errorf("dialled %v->%v, accepted %v->%v", dl, dr, al, ar)
	}
	if !dl.IP.Equal(ipA.AsSlice()) || dl.Port == 0 || dr.Port != testPort {
		t.Errorf("dialled local %v remote %v", dl, dr)
	}
}

// TestDialRefused: no listener on the port: ECONNREFUSED in a dial
// *net.OpError, and nothing left behind.
func TestDialRefused(t *testing.T) { forEngines(t, testDialRefused) }

func testDialRefused(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	_, err := p.A.Dial(context.Background(), fmt.Sprintf("%s:%d", ipB, 81))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed port: %v, want ECONNREFUSED", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" || oe.Net != "tcp" {
		t.Errorf("%#v is not a dial *net.OpError", err)
	}
	if n := p.A.Conns(); n != 0 {
		t.Errorf("%d conns after a refused dial", n)
	}
	st := p.A.Stats()
	if v, _ := st.Counter("netconn", "dial_failures"); v != 1 {
		t.Errorf("dial_failures %d", v)
	}
	waitFor(t, 10*time.Second, func() bool { return p.A.Endpoints() == 0 },
		func() string { return fmt.Sprintf("%d endpoints left", p.A.Endpoints()) })
}

// TestDialTimeout: SYNs (and ARP) go nowhere: the context's deadline
// ends the dial with a timeout that matches context.DeadlineExceeded and
// os.ErrDeadlineExceeded; Config.ConnectTimeout bounds a dial without one.
func TestDialTimeout(t *testing.T) { forEngines(t, testDialTimeout) }

func testDialTimeout(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{AtoB: memio.Impairment{Loss: 1}}, Options{}, onEngine(stk, dgramio.Config{ConnectTimeout: 300 * time.Millisecond}))
	addr := fmt.Sprintf("%s:%d", ipB, testPort)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := p.A.Dial(ctx, addr)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("dial past the deadline: %v", err)
	}
	start := time.Now()
	_, err = p.A.Dial(context.Background(), addr)
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial past ConnectTimeout: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("ConnectTimeout of 300ms ended the dial after %v", d)
	}
	if n := p.A.Conns(); n != 0 {
		t.Errorf("%d conns after failed dials", n)
	}
}

// TestDialHostUnreachable: nobody answers ARP for the address:
// EHOSTUNREACH.
func TestDialHostUnreachable(t *testing.T) { forEngines(t, testDialHostUnreachable) }

func testDialHostUnreachable(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := p.A.Dial(ctx, "198.18.0.9:80")
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("dial to nobody: %v, want EHOSTUNREACH", err)
	}
}

// TestDialBadAddress: names and IPv6 are refused with an *net.AddrError;
// a network other than tcp/tcp4 with net.UnknownNetworkError.
func TestDialBadAddress(t *testing.T) { forEngines(t, testDialBadAddress) }

func testDialBadAddress(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	for _, a := range []string{"localhost:80", "[2001:db8::1]:80", "198.18.0.2"} {
		_, err := p.A.Dial(context.Background(), a)
		var ae *net.AddrError
		if !errors.As(err, &ae) {
			t.Errorf("Dial(%q): %v, want *net.AddrError", a, err)
		}
	}
	_, err := p.A.DialContext(context.Background(), "udp", "198.18.0.2:80")
	var ue net.UnknownNetworkError
	if !errors.As(err, &ue) {
		t.Errorf("DialContext(udp): %v", err)
	}
}

// TestEOFAndHalfClose: CloseWrite sends FIN after the data: the peer reads
// it all, then io.EOF (unwrapped), and can still write back; our Write
// after CloseWrite is EPIPE. CloseRead makes our Reads return io.EOF.
func TestEOFAndHalfClose(t *testing.T) { forEngines(t, testEOFAndHalfClose) }

func testEOFAndHalfClose(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	msg := bytes.Repeat([]byte("half-close "), 1000)
	if _, err := d.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := d.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(a)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("ReadAll: %d bytes, %v", len(got), err)
	}
	if n, err := a.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("Read after FIN: %d, %v (want io.EOF itself)", n, err)
	}
	if _, err := a.Write([]byte("reply")); err != nil {
		t.Fatalf("Write on the half-closed peer: %v", err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(d, buf); err != nil || string(buf) != "reply" {
		t.Fatalf("read the reply after CloseWrite: %q %v", buf, err)
	}
	if _, err := d.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write after CloseWrite: %v, want EPIPE", err)
	}
	if err := a.CloseRead(); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after CloseRead: %d %v", n, err)
	}
}

// TestReset: the peer closes with data left unread, so netstack resets
// (as Linux): our Read sees ECONNRESET, a net.Error that is no timeout.
func TestReset(t *testing.T) { forEngines(t, testReset) }

func testReset(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	if _, err := d.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	// Wait until a has the bytes, then close it unread: RST.
	waitFor(t, 10*time.Second, func() bool {
		return unread(a)
	}, func() string { return "the bytes never reached the peer" })
	a.Close()
	d.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := d.Read(make([]byte, 10))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after the peer's RST: %v, want ECONNRESET", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || ne.Timeout() {
		t.Errorf("%v: not a net.Error, or a timeout", err)
	}
	if _, err := d.Write([]byte("x")); err == nil {
		t.Errorf("Write after RST succeeded")
	}
}

// TestClosed: after Close, every method returns an error matching
// net.ErrClosed (a second Close too); a Read blocked at the time returns
// at once.
func TestClosed(t *testing.T) { forEngines(t, testClosed) }

func testClosed(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	d, _ := connect(t, p, ln)
	unblocks(t, "the conn's Close", func() error { return d.Close() }, net.ErrClosed, func() error {
		_, err := d.Read(make([]byte, 10))
		return err
	})
	_, rerr := d.Read(make([]byte, 1))
	_, werr := d.Write([]byte("x"))
	for name, err := range map[string]error{
		"Read": rerr, "Write": werr, "Close": d.Close(), "SetDeadline": d.SetDeadline(time.Now()),
		"CloseWrite": d.CloseWrite(), "SetWriteBuffer": d.SetWriteBuffer(4096),
	} {
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	// A blocked Accept returns when the listener closes.
	unblocks(t, "the listener's Close", ln.Close, net.ErrClosed, func() error {
		_, err := ln.Accept()
		return err
	})
}

// unblocks starts each call on a goroutine of its own, lets them block
// (20 ms), runs unblock (what names it), and checks that every call then
// returns within 20 s with an error matching want.
func unblocks(t *testing.T, what string, unblock func() error, want error, calls ...func() error) {
	t.Helper()
	errc := make(chan error, len(calls))
	for _, call := range calls {
		go func() { errc <- call() }()
	}
	time.Sleep(20 * time.Millisecond)
	if err := unblock(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for range calls {
		select {
		case err := <-errc:
			if !errors.Is(err, want) {
				t.Errorf("a call blocked at %s returned %v, want %v", what, err, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("a call still blocked 20 s after %s", what)
		}
	}
}

// TestDeadlines: a read deadline ends a blocked Read with an error that is
// os.ErrDeadlineExceeded and a net.Error timeout, and leaves the
// connection usable; moving the deadline earlier applies to a Read already
// waiting; a listener deadline ends Accept.
func TestDeadlines(t *testing.T) { forEngines(t, testDeadlines) }

func testDeadlines(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	d.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := d.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline: %v", err)
	}
	d.SetReadDeadline(time.Time{})
	a.Write([]byte("ok"))
	if _, err := io.ReadFull(d, make([]byte, 2)); err != nil {
		t.Fatalf("Read after clearing the deadline: %v", err)
	}
	// A deadline moved from far away to now wakes the waiting Read.
	d.SetReadDeadline(time.Now().Add(time.Hour))
	unblocks(t, "the deadline's move to now", func() error { return d.SetReadDeadline(time.Now()) }, os.ErrDeadlineExceeded, func() error {
		_, err := d.Read(make([]byte, 10))
		return err
	})
	ln.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := ln.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Accept past its deadline: %v", err)
	}
}

// TestServiceClose: closing the Service ends blocked Reads, Writes and
// Accepts with net.ErrClosed, sends FIN to the peer, and refuses new
// Listen and Dial.
func TestServiceClose(t *testing.T) { forEngines(t, testServiceClose) }

func testServiceClose(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	unblocks(t, "the Service's Close", p.B.Close, net.ErrClosed, func() error {
		_, err := a.Read(make([]byte, 10))
		return err
	}, func() error {
		_, err := ln.Accept()
		return err
	})
	d.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := d.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the peer's Read after our Service closed: %v, want io.EOF (our FIN)", err)
	}
	if _, err := p.B.Listen(testPort + 1); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Listen after Close: %v", err)
	}
	if _, err := p.B.Dial(context.Background(), fmt.Sprintf("%s:%d", ipA, testPort)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close: %v", err)
	}
	if err := p.B.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestListenErrors: a port in use is EADDRINUSE.
func TestListenErrors(t *testing.T) { forEngines(t, testListenErrors) }

func testListenErrors(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	listen(t, p.B, testPort)
	if _, err := p.B.Listen(testPort); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second Listen on the port: %v", err)
	}
}

// TestAutoClose: a Service that belongs to what it returned (Listen and
// Dial's form) closes when the listener and the last connection close,
// after the FIN is through.
func TestAutoClose(t *testing.T) { forEngines(t, testAutoClose) }

func testAutoClose(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	p.B.mu.Lock()
	p.B.auto = true
	p.B.mu.Unlock()
	d, a := connect(t, p, ln)
	ln.Close()
	if p.B.stop.Load() {
		t.Fatal("closed with a connection open")
	}
	if _, err := a.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if !p.B.stop.Load() {
		t.Fatal("still running after its last connection closed")
	}
	got, err := io.ReadAll(d)
	if err != nil || string(got) != "bye" {
		t.Fatalf("the peer read %q, %v: want the data and a clean FIN", got, err)
	}
}
