package native

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestEmptyRingsGoHome: a request and its answer empty both ends' send
// and receive rings, and each ring's position goes back to its home then,
// so that the next record is written to and read from the same few cache
// lines instead of a new part of a ring of megabytes; the rings stay with
// the connection while it goes on (nothing allocated, nothing pooled
// after the first round), and go back to the pool once it idles.
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
		got := read(cb, len(req), "request")
		if !bytes.Equal(got, req) {
			t.Fatalf("round %d: request differs", i)
		}
		if cb.rHead != recvHome {
			t.Fatalf("round %d: the server's receive ring is empty at position %d, want its home %d", i, cb.rHead, recvHome)
		}
		if cb.Write(got) != len(got) {
			t.Fatal("the answer did not fit")
		}
		if back := read(ca, len(req), "answer"); !bytes.Equal(back, req) {
			t.Fatalf("round %d: answer differs", i)
		}
		w.until(time.Minute, "both acknowledged", func() bool { return ca.sLen == 0 && cb.sLen == 0 })
		if ca.rHead != recvHome || ca.sHead != sendHome || cb.sHead != sendHome {
			t.Fatalf("round %d: empty rings at positions client send %d receive %d, server send %d; want their homes %d, %d",
				i, ca.sHead, ca.rHead, cb.sHead, sendHome, recvHome)
		}
		a := [2]uint64{w.a.pool.allocs, w.b.pool.allocs}
		if i > 0 && a != allocs {
			t.Fatalf("round %d: rings allocated %v, after round 0 %v", i, a, allocs)
		}
		allocs = a
	}
	// Idle: the next trim takes the empty rings back, the one after
	// frees them.
	w.until(time.Minute, "the rings back and freed", func() bool {
		ua, pa, _, _ := w.a.BufferStats()
		ub, pb, _, _ := w.b.BufferStats()
		return ua+pa+ub+pb == 0
	})
	if ca.sbuf != nil || ca.rbuf != nil || cb.sbuf != nil || cb.rbuf != nil {
		t.Fatal("an idle connection kept a ring")
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
	if cb.rHead != recvHome {
		t.Fatalf("receive ring at %d once empty, want its home %d", cb.rHead, recvHome)
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
