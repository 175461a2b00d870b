package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// heavyLoss loses one frame in ten each way, and duplicates, reorders and
// corrupts some.
var heavyLoss = memio.Impairment{Loss: 0.10, Duplicate: 0.02, Reorder: 0.05, Corrupt: 0.01}

// lossyAfterHandshake is a world whose wire turns to heavyLoss once the
// connection on port is up (ARP gives up after ARPRetries lost answers,
// as documented, which would make the run depend on the seed for reasons
// that are not the transfer's).
func lossyAfterHandshake(t *testing.T, o Options, port uint16) (w *world, ca, cb *Conn) {
	seed := memio.Seed(t)
	w = newWorld(t, memio.Options{Seed: seed}, o, o)
	ca, cb = w.connect(port)
	w.pa.SetImpairment(heavyLoss)
	w.pb.SetImpairment(heavyLoss)
	return w, ca, cb
}

// A bulk transfer each way through a wire losing one frame in ten
// completes byte-exact: recovery (RFC 6675, RFC 6582) and the
// retransmission timer with its backoff (RFC 6298 §5) always leave the
// connection a way forward.
func TestHeavyLossBulkRFC6298Sec5(t *testing.T) {
	for name, o := range map[string]Options{"sack": {}, "newreno": {NoSACK: true}, "cubic": {Congestion: CUBIC}} {
		t.Run(name, func(t *testing.T) {
			w, ca, cb := lossyAfterHandshake(t, o, 7000)
			n := 4 << 20
			if testing.Short() {
				n = 1 << 20
			}
			ab := newPipe(ca, cb, randBytes(uint64(n), n))
			ba := newPipe(cb, ca, randBytes(uint64(n)+1, n))
			w.until(2*time.Hour, "transfer", func() bool {
				ab.pump(t)
				ba.pump(t)
				return ab.done() && ba.done()
			})
			if !bytes.Equal(ab.got.Bytes(), ab.data) || !bytes.Equal(ba.got.Bytes(), ba.data) {
				t.Fatalf("data differs: %d/%d %d/%d", ab.got.Len(), len(ab.data), ba.got.Len(), len(ba.data))
			}
			t.Logf("engine time %v, timeouts %d/%d", w.clk.Now().Sub(time.Unix(1_000_000, 0)),
				counterOf(t, w.a, "tcp_timeouts"), counterOf(t, w.b, "tcp_timeouts"))
		})
	}
}

// RFC 9293 §3.10.7.4: "If the RCV.WND is zero, no segments will be
// acceptable, but special allowance should be made to accept valid ACKs".
// The io.Copy echo through a wire losing one frame in ten closes both
// windows at once, and a sender's ACKs are then numbered beyond the
// closed window (at the data it sent before it closed). The engine takes
// their ACKs (tcp_zero_window_acks_taken) and numbers its own pure ACKs no
// further right than the peer's window edge; before, the echo stalled for
// good with both sides backing off their timers.
func TestHeavyLossIOCopyZeroWindowACKRFC9293Sec3_10_7_4(t *testing.T) {
	w, ca, cb := lossyAfterHandshake(t, Options{SendBuf: 32 << 10, RecvBuf: 32 << 10}, 7000)
	n := 4 << 20
	if testing.Short() {
		n = 1 << 20
	}
	cl := newPipe(ca, ca, randBytes(uint64(n), n))
	echo := &copyEcho{c: cb, buf: make([]byte, 32<<10)}
	w.until(2*time.Hour, "echo", func() bool {
		cl.pump(t)
		echo.pump(t)
		return cl.done()
	})
	if !bytes.Equal(cl.got.Bytes(), cl.data) {
		t.Fatalf("echo differs: %d of %d bytes", cl.got.Len(), len(cl.data))
	}
	t.Logf("engine time %v; zero-window probes %d/%d, zero-window ACKs taken %d/%d",
		w.clk.Now().Sub(time.Unix(1_000_000, 0)),
		counterOf(t, w.a, "tcp_persist_probes"), counterOf(t, w.b, "tcp_persist_probes"),
		counterOf(t, w.a, "tcp_zero_window_acks_taken"), counterOf(t, w.b, "tcp_zero_window_acks_taken"))
}
