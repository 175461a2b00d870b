package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// RFC 9293 §3.10.7.4 (segments beyond RCV.NXT are held for later) and
// RFC 6675 §3 (the scoreboard) on a wide window: at 3% loss each way, 10
// ms of delay and a 60 MB/s bottleneck, with 16 MiB buffers, BBR keeps
// thousands of segments in flight and a window holds a hundred holes or
// more. The receiver holds the data above every one of them, the sender
// records every SACKed block and every retransmission of the recovery.
// With 64 blocks the receiver dropped what would have needed a 65th
// (tcp_out_of_order_full, about a thousand here), each drop a loss more, and
// the transfer collapsed to a third of its rate with timeouts.
func TestWideWindowHoldsEveryHoleRFC9293Sec3_10_7_4(t *testing.T) {
	o := Options{Congestion: BBR, SendBuf: 16 << 20, RecvBuf: 16 << 20}
	w := newWorld(t, memio.Options{Seed: 6, TxSlots: 4096, RxSlots: 4096}, o, o)
	ca, cb := w.connect(7100)
	w.pa.SetImpairment(memio.Impairment{Loss: 0.03, Delay: 10 * time.Millisecond, Rate: 60e6})
	w.pb.SetImpairment(memio.Impairment{Loss: 0.03, Delay: 10 * time.Millisecond})
	data := randBytes(6, 24<<20)
	p := newPipe(ca, cb, data)
	end := w.clk.Now().Add(time.Minute)
	for !p.done() {
		if w.clk.Now().After(end) {
			t.Fatalf("not done within a minute of engine time (%d of %d bytes)", p.got.Len(), len(data))
		}
		p.pump(t)
		if w.step() == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 {
			d := 10 * time.Microsecond
			if at, ok := w.a.NextTimer(); ok && at.Sub(w.clk.Now()) < d {
				d = max(at.Sub(w.clk.Now()), time.Microsecond)
			}
			w.clk.Advance(d)
		}
	}
	if !bytes.Equal(p.got.Bytes(), data) {
		t.Fatal("the data arrived altered")
	}
	if got := counterOf(t, w.b, "tcp_out_of_order_queued"); got == 0 {
		t.Fatal("set-up: no out-of-order data, no holes to hold")
	}
	if got := counterOf(t, w.a, "tcp_fast_retransmits"); got == 0 {
		t.Fatal("set-up: no recovery")
	}
	for _, c := range []struct {
		e    *Engine
		name string
	}{{w.b, "tcp_out_of_order_full"}, {w.a, "tcp_sack_scoreboard_full"}, {w.a, "tcp_lost_retransmit_untracked"}} {
		if got := counterOf(t, c.e, c.name); got != 0 {
			t.Errorf("%s %d, want 0", c.name, got)
		}
	}
}
