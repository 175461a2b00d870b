package conformance

import (
	"bytes"
	"io"
	"time"
)

// expectReadErr makes the DUT read, waiting for want: io.EOF after the
// peer's FIN, ErrReset after a RST (after names what the bench sent).
func (e *Env) expectReadErr(c Conn, want error, after string) {
	e.Helper()
	buf := make([]byte, 4096)
	if n, err := c.Read(buf, e.Answer()); err != want {
		e.Errorf("DUT read after %s: %d bytes, %v; want %v", after, n, err, want)
	}
}

// RST and connection close cases.
func init() {
	register(
		Case{
			Name:  "tcp-rst-exact-resets",
			RFC:   "RFC 5961 §3.2 (RST with SEG.SEQ = RCV.NXT: reset the connection) / RFC 9293 §3.10.7.4",
			Title: "a RST at exactly RCV.NXT resets the connection: the application sees a reset",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt, 0, RST, nil)
				e.expectReadErr(c, ErrReset, "the RST")
				f.ExpectNothing("no answer to an acceptable RST")
			},
		},
		Case{
			Name:  "tcp-rst-in-window-challenge-ack",
			RFC:   "RFC 5961 §3.2 (RST inside the window but not at RCV.NXT: challenge ACK <SEQ=SND.NXT><ACK=RCV.NXT>)",
			Title: "a RST inside the window but not at RCV.NXT gets a challenge ACK and the connection stays",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt+100, 0, RST, nil)
				a := f.Expect("challenge ACK", Has(ACK))
				if a.TCP.RST || a.TCP.Ack != f.SndNxt || a.TCP.Seq != f.RcvNxt {
					e.Errorf("got %s seq %d ack %d, want . seq %d ack %d", a.Flags(), a.TCP.Seq, a.TCP.Ack, f.RcvNxt, f.SndNxt)
				}
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-rst-out-of-window",
			RFC:   "RFC 5961 §3.2 (RST outside the window: silently drop)",
			Title: "a RST outside the window is dropped without an answer and the connection stays",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt+1<<31-1, 0, RST, nil)
				f.SendRaw(f.SndNxt-1<<20, 0, RST, nil)
				f.ExpectNothing("an out-of-window RST is dropped silently")
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-syn-established-challenge-ack",
			RFC:   "RFC 5961 §4.2 (SYN on a synchronized connection: challenge ACK, whatever its sequence number)",
			Title: "a SYN on an established connection gets a challenge ACK and the connection stays",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt+10, 0, SYN, nil)
				a := f.Expect("challenge ACK", func(fr *Frame) bool { return true })
				if a.TCP.RST || a.TCP.SYN || !a.TCP.ACK || a.TCP.Ack != f.SndNxt || a.TCP.Seq != f.RcvNxt {
					e.Errorf("got %s seq %d ack %d, want . seq %d ack %d", a.Flags(), a.TCP.Seq, a.TCP.Ack, f.RcvNxt, f.SndNxt)
				}
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-passive-close",
			RFC:   "RFC 9293 §3.6 (closing: FIN acknowledged, CLOSE-WAIT, then the application's FIN)",
			Title: "the bench's FIN is acknowledged and read as EOF; the application's close sends a FIN after its data",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				e.expectReadErr(c, io.EOF, "the FIN")
				e.Write(c, []byte("last words"))
				if err := c.Close(); err != nil {
					e.Fatalf("close: %v", err)
				}
				if got := f.ReadData(10, false); string(got) != "last words" {
					e.Errorf("bench read %q after its FIN (CLOSE-WAIT may send)", got)
				}
				f.ExpectFIN()
				f.Send(ACK, nil)
				f.ExpectNothing("the connection is closed")
			},
		},
		Case{
			Name:  "tcp-fin-with-data",
			RFC:   "RFC 9293 §3.10.7.4 (eighth: FIN after the segment's text)",
			Title: "data and FIN in one segment: both acknowledged; the application reads the data, then EOF",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.Send(ACK|PSH|FIN, []byte("data+fin"))
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, 8); string(got) != "data+fin" {
					e.Errorf("DUT read %q", got)
				}
				e.expectReadErr(c, io.EOF, "the FIN")
			},
		},
		Case{
			Name:  "tcp-active-close-time-wait",
			RFC:   "RFC 9293 §3.6 (FIN-WAIT-1/2, TIME-WAIT) / §3.10.7.4 (TIME-WAIT: acknowledge a retransmitted FIN)",
			Title: "the application closes: FIN; the bench's FIN is acknowledged; a retransmission of it is acknowledged again in TIME-WAIT",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				if err := c.Close(); err != nil {
					e.Fatalf("close: %v", err)
				}
				f.ExpectFIN()
				f.Send(ACK, nil)
				f.ExpectNothing("FIN-WAIT-2: nothing to send")
				finSeq := f.SndNxt
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				f.SendRaw(finSeq, f.RcvNxt, ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
			},
		},
		Case{
			Name:  "tcp-time-wait-expiry",
			RFC:   "RFC 9293 §3.10.7.4 (TIME-WAIT lasts 2 MSL, then the connection is CLOSED) / §3.10.7.1",
			Title: "after 2 MSL in TIME-WAIT the connection is gone: a segment on it is answered by a RST",
			Needs: []Cap{CapFastTimeWait},
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				c.Close()
				f.ExpectFIN()
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				// Within 2 MSL the retransmitted FIN is still acknowledged
				// (it is TIME-WAIT, not CLOSED).
				e.Pass(5*time.Second, nil)
				f.SendRaw(f.SndNxt-1, f.RcvNxt, ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				e.Pass(2*time.Minute, nil)
				f.SendRaw(f.SndNxt, f.RcvNxt, ACK|PSH, []byte("late"))
				r := f.ExpectRST()
				if r.TCP.Seq != f.RcvNxt {
					e.Errorf("RST seq %d, want the segment's ACK %d", r.TCP.Seq, f.RcvNxt)
				}
			},
		},
		Case{
			Name:  "tcp-simultaneous-close",
			RFC:   "RFC 9293 §3.6 (simultaneous close: FIN-WAIT-1 → CLOSING → TIME-WAIT)",
			Title: "FINs cross: the DUT acknowledges the bench's FIN, takes the ACK of its own and acknowledges a retransmitted FIN",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				c.Close()
				fin := f.Expect("FIN", Has(FIN))
				// The bench's FIN does not acknowledge the DUT's: they
				// crossed.
				finSeq := f.SndNxt
				f.Send(ACK|FIN, nil)
				a := f.ExpectAck(f.SndNxt)
				if a.TCP.Seq != fin.TCP.Seq+1 {
					e.Errorf("ACK of the bench's FIN has seq %d, want %d (after the DUT's FIN)", a.TCP.Seq, fin.TCP.Seq+1)
				}
				f.RcvNxt = fin.TCP.Seq + 1
				f.Send(ACK, nil)
				f.ExpectNothing("TIME-WAIT: nothing to send")
				f.SendRaw(finSeq, f.RcvNxt, ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
			},
		},
		Case{
			Name:  "tcp-close-unread-data-rst",
			RFC:   "RFC 1122 §4.2.2.13 (CLOSE with received data pending: send a RST to show that data was lost)",
			Title: "the application closes without reading what arrived: the DUT resets the connection instead of sending a FIN",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendData([]byte("never read"), 1000)
				f.ExpectAck(f.SndNxt)
				if err := c.Close(); err != nil {
					e.Fatalf("close: %v", err)
				}
				r := f.Expect("RST or FIN", Has(0))
				if !r.TCP.RST {
					e.Fatalf("got %s, want a RST", r.Flags())
				}
				if r.TCP.Seq != f.RcvNxt {
					e.Errorf("RST seq %d, want SND.NXT %d", r.TCP.Seq, f.RcvNxt)
				}
			},
		},
		Case{
			Name:  "tcp-data-after-close-rst",
			RFC:   "RFC 1122 §4.2.2.13 (new data received after CLOSE: send a RST)",
			Title: "after the application closed (FIN sent and acknowledged), data from the bench is answered by a RST",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				c.Close()
				f.ExpectFIN()
				f.Send(ACK, nil)
				f.ExpectNothing("FIN-WAIT-2: nothing to send")
				f.SendData([]byte("too late"), 1000)
				r := f.Expect("RST", Has(0))
				if !r.TCP.RST {
					e.Fatalf("data after close answered with %s, want a RST", r.Flags())
				}
			},
		},
		Case{
			Name:  "tcp-half-close",
			RFC:   "RFC 9293 §3.6 (after the peer's FIN, CLOSE-WAIT still sends)",
			Title: "after the bench's FIN the application still writes: the data reaches the bench, then the FIN",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				e.expectReadErr(c, io.EOF, "the FIN")
				want := Pattern(5000, 50)
				e.Write(c, want)
				if err := c.Shutdown(); err != nil {
					e.Fatalf("shutdown: %v", err)
				}
				got := f.ReadData(len(want), true)
				if !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
				f.ExpectFIN()
			},
		},
	)
}
