package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// A bulk transfer each way through a wire that loses one frame in ten
// (and duplicates and reorders some) completes byte-exact: recovery
// (RFC 6675, RFC 6582) and the retransmission timer with backoff
// (RFC 6298 §5) never leave the connection without a way forward, and
// the ACK rules of RFC 9293 §3.10.7.4 take every acceptable segment.
func TestHeavyLossBulkRFC6298Sec5(t *testing.T) {
	imp := memio.Impairment{Loss: 0.10, Duplicate: 0.02, Reorder: 0.05}
	for name, o := range map[string]Options{"sack": {}, "newreno": {NoSACK: true}, "cubic": {Congestion: CUBIC}} {
		t.Run(name, func(t *testing.T) {
			seed := memio.Seed(t)
			w := newWorld(t, memio.Options{AtoB: imp, BtoA: imp, Seed: seed}, o, o)
			ca, cb := w.connect(7000)
			n := 2 << 20
			if testing.Short() {
				n = 512 << 10
			}
			ab := newPipe(ca, cb, randBytes(seed, n))
			ba := newPipe(cb, ca, randBytes(seed+1, n))
			w.until(2*time.Hour, "transfer", func() bool {
				ab.pump(t)
				ba.pump(t)
				return ab.done() && ba.done()
			})
			if !bytes.Equal(ab.got.Bytes(), ab.data) || !bytes.Equal(ba.got.Bytes(), ba.data) {
				t.Fatalf("data differs: %d/%d %d/%d", ab.got.Len(), len(ab.data), ba.got.Len(), len(ba.data))
			}
			t.Logf("engine time %v, steps %d, timeouts %d/%d", w.clk.Now().Sub(time.Unix(1_000_000, 0)), w.steps,
				counterOf(t, w.a, "tcp_timeouts"), counterOf(t, w.b, "tcp_timeouts"))
		})
	}
}
