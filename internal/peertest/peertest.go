// Package peertest holds the fixtures that the veth tests of package tcp
// and package tcp/netconn share: a kernel TCP peer inside a namespace of
// internal/testhost (listener, echo server, client), the numbered records
// the record-framed tests exchange with it, and the check that a backend
// left its interface as it found it. Only tests import it.
package peertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/record"
	"github.com/dgramio/dgramio/internal/testhost"
)

// DialTimeout bounds Dial's connect.
const DialTimeout = 20 * time.Second

// Addr is h's subnet with the last byte set to last: .3 (or .4 on B) is an
// address the kernel does not hold, which tcp-xdp needs (see tcp.NewXDP).
func Addr(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr.As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

// Listen opens a kernel TCP listener on addr inside h's namespace; it is
// closed at cleanup (closing it earlier is fine).
func Listen(t testing.TB, h *testhost.Host, addr netip.AddrPort) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Dialer dials from inside h's namespace: a kernel TCP client there, for
// http.Transport.DialContext and the like.
func Dialer(h *testhost.Host) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := h.Do(func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Dial connects a kernel TCP client inside h to addr within DialTimeout,
// failing the test otherwise; the connection is closed at cleanup
// (closing it earlier is fine).
func Dial(t testing.TB, h *testhost.Host, addr netip.AddrPort) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	c, err := Dialer(h)(ctx, "tcp4", addr.String())
	if err != nil {
		t.Fatalf("kernel client connect to %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ServeEcho accepts on ln until it is closed, echoing the byte stream of
// each connection (records and all) on a goroutine of its own. The
// returned func waits, once ln is closed, for the accept loop and every
// echo to end, that is for every peer to have closed its side.
func ServeEcho(ln net.Listener) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return wg.Wait
}

// Echo is a kernel TCP echo server on addr inside h: Listen and ServeEcho.
func Echo(t testing.TB, h *testhost.Host, addr netip.AddrPort) (ln net.Listener, wait func()) {
	t.Helper()
	ln = Listen(t, h, addr)
	return ln, ServeEcho(ln)
}

// Ended closes ln and waits up to 10 s for wait (ServeEcho's) to return:
// every connection of the echo server saw its peer close.
func Ended(t testing.TB, ln net.Listener, wait func()) {
	t.Helper()
	ln.Close()
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("kernel echo connection still open 10s after the peer's Close")
	}
}

// Records writes n records on c, each a record.HeaderLen length prefix and
// a payload of size bytes (at least 8) that begins with id and the
// record's number, and reads n records back, checking that each is the
// next of id's own, within timeout. It returns the first failure. Writing
// runs on a goroutine of its own, so an echo can answer while the client
// still sends.
func Records(c net.Conn, id uint32, n, size int, timeout time.Duration) error {
	if size < 8 || size > record.MaxRecord {
		return fmt.Errorf("peertest.Records: payload of %d bytes, want 8 to %d", size, record.MaxRecord)
	}
	errc := make(chan error, 1)
	go func() {
		rec := make([]byte, record.HeaderLen+size)
		binary.BigEndian.PutUint16(rec, uint16(size))
		p := rec[record.HeaderLen:]
		binary.BigEndian.PutUint32(p, id)
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint32(p[4:], uint32(i))
			if _, err := c.Write(rec); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	c.SetReadDeadline(time.Now().Add(timeout))
	in := make([]byte, record.HeaderLen+size)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(c, in); err != nil {
			return fmt.Errorf("record %d of %d back: %v", i, id, err)
		}
		l, p := binary.BigEndian.Uint16(in), in[record.HeaderLen:]
		if gotID, seq := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]); int(l) != size || gotID != id || seq != uint32(i) {
			return fmt.Errorf("record %d of %d back: length %d, record %d of %d", i, id, l, seq, gotID)
		}
	}
	return <-errc
}

// Clean checks that h's interface is as a backend found it: no XDP
// program attached, not promiscuous.
func Clean(t testing.TB, h *testhost.Host) {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("XDP program left on %s", h.Iface)
	}
	if on, _ := h.Promisc(); on {
		t.Errorf("%s left promiscuous", h.Iface)
	}
}

// CloseClean closes c, failing the test on an error, and checks that it
// left h's interface clean (Clean).
func CloseClean(t testing.TB, c io.Closer, h *testhost.Host) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	Clean(t, h)
}
