package native

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestLendInPlace: a reader that uses the received bytes where they lie
// (Peek, Lend, Consume) gets the stream byte-exact through a receive
// buffer that wraps many times; Peek stops at the buffer's end and
// Readable says that more follows; lent bytes keep their room in the
// receive window until Consume (RFC 9293 §3.8.6.2.2: the window offers
// only free buffer), so a reader that lends everything closes the window,
// and Consume opens it again with a window update; Read ends a loan
// first; Close with bytes only lent sends FIN, not a reset (RFC 9293
// §3.10.4: they were read).
func TestLendInPlace(t *testing.T) {
	const buf = 4096
	w := newWorld(t, memio.Options{}, Options{}, Options{RecvBuf: buf})
	ca, cb := w.connect(7000)
	data := make([]byte, 20*buf+123)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	var got []byte
	sent, wraps, calls := 0, 0, 0
	w.until(30*time.Second, "the stream, lent", func() bool {
		if sent < len(data) {
			sent += ca.Write(data[sent:])
		}
		calls++
		if calls%3 == 0 { // the reader holds on to two loans out of three
			cb.Consume()
		}
		p := cb.Peek()
		if len(p) == 0 {
			return len(got) == len(data)
		}
		if at := wrap(cb.rHead+cb.rLent, len(cb.rbuf)); at+len(p) == len(cb.rbuf) && cb.rLen-cb.rLent > len(p) {
			wraps++
			if !cb.Readable() {
				t.Fatal("Readable false with bytes after the buffer's end")
			}
		}
		got = append(got, p...)
		cb.Lend(len(p))
		if q := cb.Peek(); len(q) > 0 && &q[0] == &p[0] {
			t.Fatal("Peek after Lend returned the lent bytes again")
		}
		return false
	})
	cb.Consume()
	if !bytes.Equal(got, data) {
		t.Fatal("the stream lent differs from the one written")
	}
	if wraps == 0 {
		t.Fatal("no Peek stopped at the buffer's end with bytes behind it")
	}

	// Everything received lent and nothing given back: the window closes;
	// Consume opens it, and the rest arrives.
	more := make([]byte, 2*buf)
	sent = ca.Write(more)
	w.until(time.Second, "a full buffer", func() bool {
		cb.Lend(len(cb.Peek()))
		return cb.rLen == cb.rcvCap
	})
	for range 4 {
		w.step()
	}
	if ca.sndWnd != 0 || cb.Readable() {
		t.Fatalf("window %d, Readable %v with the whole buffer lent; want 0 and false", ca.sndWnd, cb.Readable())
	}
	cb.Consume()
	n := 0
	w.until(time.Second, "the rest after Consume", func() bool {
		if sent < len(more) {
			sent += ca.Write(more[sent:])
		}
		n += len(cb.Peek())
		cb.Lend(len(cb.Peek()))
		cb.Consume()
		return n == len(more)-buf
	})

	ca.Write([]byte("abcdef"))
	w.until(time.Second, "six bytes", func() bool { return cb.rLen == 6 })
	cb.Lend(2)
	p := make([]byte, 16)
	if n, err := cb.Read(p); err != nil || string(p[:n]) != "cdef" || cb.rLent != 0 {
		t.Fatalf("Read after lending 2: %q, %v, %d still lent; want the 4 after the loan", p[:n], err, cb.rLent)
	}

	ca.Write([]byte("end"))
	w.until(time.Second, "three bytes", func() bool { return cb.rLen == 3 })
	cb.Lend(3)
	resets := counterOf(t, w.b, "tcp_aborts")
	cb.Close()
	w.until(time.Second, "FIN", func() bool { return ca.finRcvd })
	if counterOf(t, w.b, "tcp_aborts") != resets || ca.Err() != nil {
		t.Fatalf("Close with the bytes lent reset the connection: %v", ca.Err())
	}
	if _, err := ca.Read(p); err != io.EOF {
		t.Fatalf("the writer reads %v, want io.EOF", err)
	}
}
