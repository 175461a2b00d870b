package native

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestEmptyRingsGoHome: a request and its answer empty both ends' send
// and receive rings, each ring goes back to the engine's pool then, and
// the next one (the same ring, from the pool: nothing is allocated after
// the first round) starts at its home, so that the next record is
// written to and read from the same few cache lines instead of a new
// part of a ring of megabytes.
func TestEmptyRingsGoHome(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(80)
	buf := make([]byte, 256)
	read := func(c *Conn, n int, what string) []byte {
		var got []byte
		w.until(time.Minute, what, func() bool {
			k, _ := c.Read(buf)
			got = append(got, buf[:k]...)
			return len(got) == n
		})
		return got
	}
	var allocs [2]uint64
	for i := range 20 {
		req := randBytes(uint64(i), 100+i)
		if ca.Write(req) != len(req) {
			t.Fatal("the request did not fit")
		}
		if ca.sHead != sendHome {
			t.Fatalf("round %d: the client's send ring starts at %d, want its home %d", i, ca.sHead, sendHome)
		}
		w.until(time.Minute, "request arrived", func() bool { return cb.rLen == len(req) })
		if cb.rHead != recvHome {
			t.Fatalf("round %d: the server's receive ring starts at %d, want its home %d", i, cb.rHead, recvHome)
		}
		got := read(cb, len(req), "request")
		if !bytes.Equal(got, req) {
			t.Fatalf("round %d: request differs", i)
		}
		if cb.rbuf != nil {
			t.Fatalf("round %d: the server kept its empty receive ring", i)
		}
		if cb.Write(got) != len(got) {
			t.Fatal("the answer did not fit")
		}
		if back := read(ca, len(req), "answer"); !bytes.Equal(back, req) {
			t.Fatalf("round %d: answer differs", i)
		}
		w.until(time.Minute, "both acknowledged", func() bool { return ca.sLen == 0 && cb.sLen == 0 })
		if ca.rbuf != nil || ca.sbuf != nil || cb.sbuf != nil {
			t.Fatalf("round %d: empty rings kept: client send %v receive %v, server send %v",
				i, ca.sbuf != nil, ca.rbuf != nil, cb.sbuf != nil)
		}
		a := [2]uint64{w.a.pool.allocs, w.b.pool.allocs}
		if i > 0 && a != allocs {
			t.Fatalf("round %d: rings allocated %v, after round 0 %v: the pool was not reused", i, a, allocs)
		}
		allocs = a
	}
}

// TestRingKeepsItsPlaceBehindAHole: out-of-order data lies in the receive
// ring at its offset from RCV.NXT, so a read that takes every in-order
// byte while a later segment waits behind a hole must not move the ring
// back home; the retransmission that fills the hole then reads
// out byte-exact (RFC 9293 §3.10.7.4: segments are queued for in-order
// delivery).
func TestRingKeepsItsPlaceBehindAHole(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(80)
	first, lost, later := randBytes(1, 100), randBytes(2, 100), randBytes(3, 100)
	send := func(p []byte) {
		if ca.Write(p) != len(p) {
			t.Fatal("write did not fit")
		}
		w.step()
		w.step()
	}
	send(first)
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	send(lost)
	w.pa.SetImpairment(memio.Impairment{})
	send(later)
	if cb.nooo == 0 {
		t.Fatal("the segment after the lost one is not held out of order")
	}
	buf := make([]byte, 512)
	n, _ := cb.Read(buf)
	if !bytes.Equal(buf[:n], first) {
		t.Fatalf("read %d bytes before the hole, want the first 100", n)
	}
	if cb.rHead != recvHome+len(first) {
		t.Fatalf("receive ring at %d after reading up to a hole, want %d (out-of-order data lies behind it)", cb.rHead, recvHome+len(first))
	}
	var got []byte
	w.until(time.Minute, "the hole filled", func() bool {
		k, _ := cb.Read(buf)
		got = append(got, buf[:k]...)
		return len(got) == len(lost)+len(later)
	})
	if !bytes.Equal(got, append(append([]byte{}, lost...), later...)) {
		t.Fatal("the bytes after the hole differ")
	}
	if cb.rbuf != nil {
		t.Fatal("the receive ring was kept once empty")
	}
}

// TestResetBehindAHoleIsRead: a reset that ends a connection while data
// waits out of order behind a hole is what the next Read returns, once
// the in-order bytes before it are read (RFC 9293 §3.10.7.4: a RST in
// the window resets the connection; §3.10.2's "connection reset" to the
// user), however much out-of-order data the ring still holds.
func TestResetBehindAHoleIsRead(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(80)
	send := func(p []byte) {
		if ca.Write(p) != len(p) {
			t.Fatal("write did not fit")
		}
		w.step()
		w.step()
	}
	send(randBytes(1, 100))
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	send(randBytes(2, 100))
	w.pa.SetImpairment(memio.Impairment{})
	send(randBytes(3, 100))
	if cb.nooo == 0 {
		t.Fatal("the segment after the lost one is not held out of order")
	}
	buf := make([]byte, 512)
	if n, err := cb.Read(buf); n != 100 || err != nil {
		t.Fatalf("Read before the hole: %d, %v", n, err)
	}
	ca.Abort()
	w.step()
	w.step()
	if n, err := cb.Read(buf); n != 0 || !errors.Is(err, ErrReset) {
		t.Fatalf("Read after the peer's reset: %d, %v; want 0, %v", n, err, ErrReset)
	}
}
