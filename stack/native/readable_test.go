package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// taken returns the connections TakeReadable names now.
func taken(e *Engine) []*Conn {
	var got []*Conn
	e.TakeReadable(func(c *Conn) { got = append(got, c) })
	return got
}

// TestTakeReadable: the engine names a connection once after bytes
// arrive in order (RFC 9293 §3.10.7.4, seventh step), after the peer's
// FIN (eighth step), after a Read that left the FIN behind the bytes, and
// after a reset (§3.10.7.4 second step), and names none that nothing
// arrived for: the stream layer reads only those.
func TestTakeReadable(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(7000)
	ca2, cb2 := w.connect(7001)
	taken(w.a)
	taken(w.b)

	ca.Write([]byte("one"))
	ca.Write([]byte("two"))
	w.until(time.Second, "data", func() bool { return cb.Readable() })
	w.until(time.Second, "both", func() bool { return cb.rLen == 6 })
	if got := taken(w.b); len(got) != 1 || got[0] != cb {
		t.Fatalf("after data named %v, want only the receiving connection", got)
	}
	if got := taken(w.b); len(got) != 0 {
		t.Fatalf("named %d connections again with nothing new", len(got))
	}
	if n, _ := cb.Read(make([]byte, 16)); n != 6 {
		t.Fatalf("read %d bytes", n)
	}
	for range 10 {
		w.step()
	}
	if got := taken(w.a); len(got) != 0 {
		t.Fatalf("the sender was named (%d): ACKs carry nothing to read", len(got))
	}

	ca.Write([]byte("last"))
	ca.CloseWrite()
	w.until(time.Second, "FIN", func() bool { return cb.finRcvd })
	if got := taken(w.b); len(got) != 1 || got[0] != cb {
		t.Fatalf("after data and FIN named %v", got)
	}
	if n, err := cb.Read(make([]byte, 16)); n != 4 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if got := taken(w.b); len(got) != 1 || got[0] != cb {
		t.Fatalf("a read that left the FIN to read named %v, want the connection again", got)
	}

	ca2.Abort()
	w.until(time.Second, "reset", func() bool { return cb2.Err() != nil })
	if got := taken(w.b); len(got) != 1 || got[0] != cb2 {
		t.Fatalf("after reset named %v", got)
	}
	if got := taken(w.a); len(got) != 0 {
		t.Fatalf("aborting named %d of the aborting engine's connections", len(got))
	}
}
