package native

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestZeroWindowTakesACKLeftOfRcvNxtRFC9293Sec3_10_7_4: with our receive
// window closed, a valid ACK numbered left of RCV.NXT is taken (RFC 9293
// §3.10.7.4: "special allowance should be made to accept valid ACKs"). A
// peer that believes our window is zero numbers its ACKs at SND.UNA+SND.WND
// (Linux's tcp_acceptable_seq), which falls left of our RCV.NXT when our
// ACKs of its data were lost; dropping them left both windows shut and
// both engines retransmitting for ever (seen at 200k records a second
// over veth with both send buffers full).
func TestZeroWindowTakesACKLeftOfRcvNxtRFC9293Sec3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 4 << 10}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)

	// A fills B's receive buffer; B does not read, so its window closes.
	ca.Write(make([]byte, 8<<10))
	w.until(time.Minute, "B's window to close", func() bool { return cb.rLen == cb.rcvCap && cb.rcvWnd() == 0 })

	// B sends; A receives it, but every frame of A's is lost from now on.
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	end := cb.sndMax + uint32(cb.Write([]byte("the answer")))
	w.until(time.Second, "A to receive B's data", func() bool { return ca.rcvNxt == end })
	if cb.sndUna == cb.sndMax {
		t.Fatal("B's data was acknowledged although A's frames are lost")
	}
	w.pa.SetImpairment(memio.Impairment{})

	// A's ACK of B's data, numbered left of B's RCV.NXT.
	before := counterOf(t, w.b, "tcp_zero_window_acks_taken")
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt-1000, cb.sndMax, flagACK, 1024, nil, nil))
	if cb.sndUna != cb.sndMax {
		t.Fatalf("B's SND.UNA %d, want %d: the ACK left of RCV.NXT was dropped", cb.sndUna, cb.sndMax)
	}
	if got := counterOf(t, w.b, "tcp_zero_window_acks_taken"); got != before+1 {
		t.Errorf("tcp_zero_window_acks_taken %d, want %d", got, before+1)
	}

	// Beyond a buffer's reach it is not taken (RFC 5961's blind-injection
	// concern): nothing changes.
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	end = cb.sndMax + uint32(cb.Write([]byte("more")))
	w.until(time.Second, "A to receive more", func() bool { return ca.rcvNxt == end })
	una := cb.sndUna
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt-uint32(cb.rcvCap)-1, cb.sndMax, flagACK, 1024, nil, nil))
	if cb.sndUna != una {
		t.Fatalf("an ACK numbered beyond the buffer's reach was taken")
	}
}
