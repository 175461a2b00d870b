package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// RFC 9293 §3.10.7.4: a peer that filled our receive window numbers its
// ACKs at its SND.NXT, the window's right edge (RCV.NXT+RCV.WND). When
// one of its segments before the edge is lost, RCV.WND is not zero, and
// such an ACK of our data must still be taken: dropping it left our data
// to be retransmitted by RTO after RTO, each answered by an ACK that was
// dropped again, until the peer retransmitted its own lost segment
// (against Linux on a lossy wire, the 25, 50 and 100 ms RTO chains of
// the io.Copy echo).
func TestACKAtRightEdgeTakenRFC9293Sec3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)

	// B sends; A receives it, but A's ACKs are lost.
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	end := cb.sndMax + uint32(cb.Write([]byte("the answer")))
	w.until(time.Second, "A to receive B's data", func() bool { return ca.rcvNxt == end })
	if cb.sndUna == cb.sndMax || cb.rcvWnd() == 0 {
		t.Fatalf("set-up: B's data acknowledged (%v) or its window closed (%d)", cb.sndUna == cb.sndMax, cb.rcvWnd())
	}
	w.pa.SetImpairment(memio.Impairment{})

	// A's ACK of it, numbered at the right edge of B's window: A sent up
	// to the edge and its data before the edge was lost.
	edge := cb.rcvNxt + cb.rcvWnd()
	out := counterOf(t, w.b, "tcp_out_of_window")
	w.b.tick()
	w.b.input(segFrame(w, ca, edge, cb.sndMax, flagACK, 1024, nil, nil))
	if cb.sndUna != cb.sndMax {
		t.Fatalf("B's SND.UNA %d, want %d: the ACK at the window's right edge was dropped", cb.sndUna, cb.sndMax)
	}
	if got := counterOf(t, w.b, "tcp_out_of_window"); got != out {
		t.Errorf("tcp_out_of_window %d, want %d", got, out)
	}

	// One byte beyond the edge is still out of the window.
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	end = cb.sndMax + uint32(cb.Write([]byte("more")))
	w.until(time.Second, "A to receive more", func() bool { return ca.rcvNxt == end })
	w.pa.SetImpairment(memio.Impairment{})
	una := cb.sndUna
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt+cb.rcvWnd()+1, cb.sndMax, flagACK, 1024, nil, nil))
	if cb.sndUna != una {
		t.Fatal("an ACK numbered beyond the window's right edge was taken")
	}
	if got := counterOf(t, w.b, "tcp_out_of_window"); got != out+1 {
		t.Errorf("tcp_out_of_window %d, want %d", got, out+1)
	}
}
