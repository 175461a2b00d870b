package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestOrphans: a connection the application closes with bytes still to
// send counts as an orphan (RFC 9293 §3.10.4: the FIN follows the data)
// until its FIN is acknowledged (FIN-WAIT-2); a connection the
// application holds, or that the peer closed first and we then close
// (LAST-ACK until our FIN is acknowledged), counts only while its FIN is
// unacknowledged.
func TestOrphans(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(80)
	if n := w.a.Orphans(); n != 0 {
		t.Fatalf("an open connection counted: %d orphans", n)
	}
	ca.Write(make([]byte, 32<<10))
	ca.Close()
	if n := w.a.Orphans(); n != 1 {
		t.Fatalf("closed with bytes to send: %d orphans, want 1", n)
	}
	buf := make([]byte, 64<<10)
	w.until(10*time.Second, "the FIN acknowledged", func() bool {
		for {
			k, _ := cb.Read(buf)
			if k == 0 {
				break
			}
		}
		return w.a.Orphans() == 0
	})
	if w.b.Orphans() != 0 {
		t.Fatalf("the peer, in CLOSE-WAIT and held, counted: %d", w.b.Orphans())
	}
	cb.Close()
	if n := w.b.Orphans(); n != 1 {
		t.Fatalf("closed in CLOSE-WAIT: %d orphans, want 1 (LAST-ACK)", n)
	}
	w.until(10*time.Second, "LAST-ACK over", func() bool { return w.b.Orphans() == 0 })
}
