package netconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// echoBody is the handler of the body tests: an unchanged net/http handler
// that answers with the request's body.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
})

// bodySizes are the request and answer bodies of the HTTP tests.
var bodySizes = []int{0, 1, 100, 64 << 10, 1 << 20, 16 << 20}

// exchangeBodies posts each of bodySizes to url through client and checks
// that the answer is the same bytes.
func exchangeBodies(t *testing.T, client *http.Client, url string) {
	t.Helper()
	for i, size := range bodySizes {
		body := bytes.Repeat([]byte{byte('a' + i)}, size)
		resp, err := client.Post(fmt.Sprintf("%s/body%d", url, size), "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %d bytes: %v", size, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("POST %d bytes: status %d, %d bytes back, %v", size, resp.StatusCode, len(got), err)
		}
	}
}

// TestHTTPOverMemio: an unchanged net/http Server on B and http.Client on
// A (Transport.DialContext = Service.DialContext) exchange requests on one
// keep-alive connection, with bodies of 0 B to 16 MiB each way.
func TestHTTPOverMemio(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
		ln := listen(t, p.B, 8080)
		srv := &http.Server{Handler: echoBody}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		tr := &http.Transport{DialContext: p.A.DialContext}
		client := &http.Client{Timeout: time.Minute, Transport: tr}
		defer tr.CloseIdleConnections()
		url := fmt.Sprintf("http://%s:8080", ipB)
		for i := 0; i < 20; i++ {
			resp, err := client.Get(fmt.Sprintf("%s/req%d", url, i))
			if err != nil {
				t.Fatalf("GET %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		exchangeBodies(t, client, url)
		if st := p.B.Stats(); st.Accepts != 1 {
			t.Errorf("keep-alive: %d connections accepted, want 1", st.Accepts)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve: %v", err)
		}
	})
}

// TestEachDirection: a half-close (RFC 9293 §3.10.4: the peer reads EOF
// and still writes), a reset (RFC 9293 §3.10.7.4; a close with data left
// unread sends it, as Linux) and a read deadline, from the dialled side to
// the accepted one and back.
func TestEachDirection(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		p := newPair(t, memio.Options{}, Options{}, onEngine(stk))
		ln := listen(t, p.B, testPort)
		for _, dir := range []string{"dialled→accepted", "accepted→dialled"} {
			t.Run(dir, func(t *testing.T) {
				d, a := connect(t, p, ln)
				from, to := d, a
				if dir == "accepted→dialled" {
					from, to = a, d
				}
				to.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
				if _, err := to.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || !isTimeout(err) {
					t.Fatalf("Read past the deadline: %v", err)
				}
				to.SetReadDeadline(time.Now().Add(20 * time.Second))
				from.SetReadDeadline(time.Now().Add(20 * time.Second))
				from.Write([]byte("last"))
				if err := from.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if got, err := io.ReadAll(to); err != nil || string(got) != "last" {
					t.Fatalf("after the half-close: %q, %v; want the data and io.EOF", got, err)
				}
				if _, err := to.Write([]byte("back")); err != nil {
					t.Fatalf("Write on the half-closed peer: %v", err)
				}
				buf := make([]byte, 4)
				if _, err := io.ReadFull(from, buf); err != nil || string(buf) != "back" {
					t.Fatalf("reading after our CloseWrite: %q %v", buf, err)
				}
				// "back2" left unread when from closes: a reset for to,
				// which has read the FIN: its Reads stay io.EOF (Linux
				// reports the FIN before a later error) and its Writes
				// fail with EPIPE (Linux's tcp_reset in CLOSE-WAIT).
				to.Write([]byte("back2"))
				waitFor(t, 10*time.Second, func() bool { return unread(from) },
					func() string { return "the bytes never arrived" })
				from.Close()
				to.SetWriteDeadline(time.Now().Add(20 * time.Second))
				var err error
				for err == nil {
					_, err = to.Write([]byte("x"))
					time.Sleep(time.Millisecond)
				}
				if !errors.Is(err, syscall.EPIPE) {
					t.Fatalf("Write after the peer's RST in CLOSE-WAIT: %v, want EPIPE", err)
				}

				// On an open connection the reset reaches the Read:
				// ECONNRESET.
				d, a = connect(t, p, ln)
				from, to = d, a
				if dir == "accepted→dialled" {
					from, to = a, d
				}
				to.Write([]byte("unread"))
				waitFor(t, 10*time.Second, func() bool { return unread(from) },
					func() string { return "the bytes never arrived" })
				from.Close()
				if _, err := to.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("Read after the peer's RST: %v, want ECONNRESET", err)
				}
			})
		}
	})
}

// TestLingerAtServiceClose: a Service closed right after a Write of 1 MiB
// keeps polling (Options.Linger) until the bytes and the FIN are
// acknowledged: the peer reads all of it, then io.EOF; the same when the
// application closed the connection itself just before (as Linux keeps
// sending what a closed socket holds). Only B lingers long: A's own
// close at cleanup sends a FIN that nobody acknowledges any more.
func TestLingerAtServiceClose(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		for _, closeFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("closed-first=%v", closeFirst), func(t *testing.T) {
				pa, pb := memio.NewPair(memio.Options{})
				ca, cb := onEngine(stk), onEngine(stk)
				ca.LocalIP, cb.LocalIP = ipA, ipB
				ca.ConnectTimeout, cb.ConnectTimeout = 20*time.Second, 20*time.Second
				A, err := NewOverFrameIO(ca, pa, Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { A.Close() })
				B, err := NewOverFrameIO(cb, pb, Options{Linger: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { B.Close() })
				p := &pair{A: A, B: B, pa: pa, pb: pb}
				ln := listen(t, p.B, testPort)
				d, a := connect(t, p, ln)
				msg := bytes.Repeat([]byte("linger"), 1<<20/6)
				if _, err := a.Write(msg); err != nil {
					t.Fatal(err)
				}
				if closeFirst {
					a.Close()
				}
				got := make(chan []byte, 1)
				go func() {
					d.SetReadDeadline(time.Now().Add(30 * time.Second))
					b, err := io.ReadAll(d)
					if err != nil {
						t.Errorf("the peer's read: %v after %d bytes", err, len(b))
					}
					got <- b
				}()
				if err := p.B.Close(); err != nil {
					t.Fatal(err)
				}
				if b := <-got; !bytes.Equal(b, msg) {
					t.Errorf("the peer read %d of %d bytes", len(b), len(msg))
				}
			})
		}
	})
}

// TestLingerRunOutResets: a connection closed with bytes its peer does
// not read is still sending when Service.Close's Linger runs out; the
// peer then gets a reset (RFC 9293 §3.10.4, ABORT), so its Read ends with
// ECONNRESET instead of waiting for bytes that will never come.
func TestLingerRunOutResets(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		pa, pb := memio.NewPair(memio.Options{})
		ca, cb := onEngine(stk), onEngine(stk)
		ca.LocalIP, cb.LocalIP = ipA, ipB
		A, err := NewOverFrameIO(ca, pa, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { A.Close() })
		B, err := NewOverFrameIO(cb, pb, Options{Linger: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { B.Close() })
		p := &pair{A: A, B: B, pa: pa, pb: pb}
		ln := listen(t, p.B, testPort)
		d, a := connect(t, p, ln)
		// More than the peer's receive window: the rest waits for a
		// reader that does not come until the Service is gone.
		msg := make([]byte, 8<<20)
		go a.Write(msg)
		time.Sleep(100 * time.Millisecond)
		a.Close()
		if err := p.B.Close(); err != nil {
			t.Fatal(err)
		}
		d.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := io.Copy(io.Discard, d)
		if !errors.Is(err, syscall.ECONNRESET) {
			for _, c := range A.Stats().Layers {
				if c.Value != 0 {
					t.Logf("A %s/%s=%d", c.Layer, c.Name, c.Value)
				}
			}
			for _, c := range B.Stats().Layers {
				if c.Value != 0 {
					t.Logf("B %s/%s=%d", c.Layer, c.Name, c.Value)
				}
			}
			t.Fatalf("the peer read %d bytes, then %v; want ECONNRESET", n, err)
		}
	})
}

// TestNoGoroutineLeft: after Service.Close nothing of the Service runs:
// the number of goroutines settles back to what it was before it
// started.
func TestNoGoroutineLeft(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		base := runtime.NumGoroutine()
		pa, pb := memio.NewPair(memio.Options{})
		ca, cb := onEngine(stk), onEngine(stk)
		ca.LocalIP, cb.LocalIP = ipA, ipB
		a, err := NewOverFrameIO(ca, pa, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewOverFrameIO(cb, pb, Options{})
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		ln, err := b.Listen(testPort)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		for i := 0; i < 3; i++ {
			c := dialB(t, a)
			pingPong(t, c, 10, 100)
			c.Close()
		}
		a.Close()
		b.Close()
		waitFor(t, 20*time.Second, func() bool { return runtime.NumGoroutine() <= base },
			func() string {
				buf := make([]byte, 1<<16)
				return fmt.Sprintf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
			})
	})
}

// TestConnRefusedNative: an answer the native engine gives a dial to a
// closed port is ECONNREFUSED, as an *net.OpError around an
// *os.SyscallError ("connect"), as the standard library's.
func TestConnRefusedNative(t *testing.T) {
	p := newPair(t, memio.Options{}, Options{}, onEngine(dgramio.TCPStackNative))
	_, err := p.A.Dial(context.Background(), fmt.Sprintf("%s:%d", ipB, 81))
	var se *os.SyscallError
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.As(err, &se) || se.Syscall != "connect" || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed port: %#v", err)
	}
}
