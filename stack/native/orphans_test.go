package native

import (
	"errors"
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

// TestAbortOrphans: an orphan that still has bytes to send is reset by
// AbortOrphans (RFC 9293 §3.10.4, ABORT: "a RST segment is formed and
// sent"), so its peer's Read ends with ErrReset instead of waiting for
// data that will never come; a connection the application still holds is
// left alone.
func TestAbortOrphans(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(80)
	held, peerOfHeld := w.connect(81)
	ca.Write(make([]byte, 32<<10))
	ca.Close()
	if n := w.a.AbortOrphans(); n != 1 {
		t.Fatalf("AbortOrphans = %d, want 1", n)
	}
	if n := w.a.Orphans(); n != 0 {
		t.Fatalf("%d orphans after AbortOrphans", n)
	}
	if held.State() != Established {
		t.Fatalf("a held connection was touched: %v", held.State())
	}
	w.peerReset(cb)
	if peerOfHeld.State() != Established {
		t.Fatalf("the held connection's peer: %v", peerOfHeld.State())
	}
}

// TestAbortAtZeroWindowRFC5961Sec3_2: a connection aborted while its
// peer's window is zero and a persist probe has put SND.MAX one past it
// sends its RST at SND.UNA+SND.WND, the peer's RCV.NXT: the only sequence
// number a zero window accepts (RFC 9293 §3.10.7.4; RFC 5961 §3.2 accepts
// a RST at exactly RCV.NXT). A RST at SND.MAX would be dropped as out of
// window, and the peer would wait for ever.
func TestAbortAtZeroWindowRFC5961Sec3_2(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(80)
	ca.Write(make([]byte, 2<<20))
	w.until(30*time.Second, "a persist probe", func() bool {
		return counterOf(t, w.a, "tcp_persist_probes") > 0
	})
	for w.step() != 0 { // the probe answered, nothing in flight
	}
	if ca.sndMax == ca.sndUna+ca.sndWnd {
		t.Fatalf("no probe byte beyond the window: SND.MAX %d, SND.UNA+SND.WND %d", ca.sndMax, ca.sndUna+ca.sndWnd)
	}
	oow := counterOf(t, w.b, "tcp_out_of_window") // the probes
	ca.Abort()
	w.peerReset(cb)
	if n := counterOf(t, w.b, "tcp_out_of_window") - oow; n != 0 {
		t.Fatalf("the peer found the RST out of its window (%d)", n)
	}
}

// peerReset flushes a and runs the world until cb's Read ends, which must
// be with ErrReset (its bytes read and dropped on the way).
func (w *world) peerReset(cb *Conn) {
	w.t.Helper()
	w.a.Flush()
	buf := make([]byte, 64<<10)
	var err error
	w.until(10*time.Second, "the peer reset", func() bool {
		_, err = cb.Read(buf)
		return err != nil
	})
	if !errors.Is(err, ErrReset) {
		w.t.Fatalf("peer's Read: %v, want %v", err, ErrReset)
	}
}
