package conformance

import (
	"bytes"
	"fmt"
	"time"
)

// fillWindow sends data on f, a segment at a time as the DUT's window
// allows, until the DUT (whose application does not read) advertises a
// zero window. It returns the bytes the DUT acknowledged. Bytes sent into
// the window but not acknowledged when it closed (a receiver short of
// memory may drop them, and Linux does) count as not sent: SndNxt goes
// back to the ACK, as a sender facing a shrunk window does (RFC 9293
// §3.8.6).
func fillWindow(e *Env, f *Flow) int {
	e.Helper()
	start := f.SndNxt
	acked := f.SndNxt
	for f.SndWnd > 0 {
		if f.SndNxt-start > 8<<20 {
			e.Fatalf("the window did not close after %d bytes", f.SndNxt-start)
		}
		if usable := int(int32(acked + uint32(f.SndWnd) - f.SndNxt)); usable > 0 {
			f.Send(ACK|PSH, Pattern(min(usable, 1000), f.SndNxt))
		}
		acked = f.Expect("ACK", Has(ACK)).TCP.Ack
	}
	if acked != f.SndNxt {
		e.Note("%d bytes sent into the window were not acknowledged when it closed", f.SndNxt-acked)
		f.SndNxt = acked
	}
	e.Note("window closed after %d bytes", acked-start)
	return int(acked - start)
}

// Window and timer cases.
func init() {
	register(
		Case{
			Name:  "tcp-zero-window-advertised",
			RFC:   "RFC 9293 §3.8.6 (the window falls to zero as the application stops reading)",
			Title: "data sent into the window of an application that does not read ends with ACKs advertising a zero window",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{RecvBuf: 16384}, 1000)
				start := f.SndNxt
				n := fillWindow(e, f)
				got := e.ReadAll(c, n)
				for off := 0; off < n; off += 1000 {
					want := Pattern(1000, start+uint32(off))[:min(1000, n-off)]
					if !bytes.Equal(got[off:off+len(want)], want) {
						e.Fatalf("data at offset %d differs", off)
					}
				}
			},
		},
		Case{
			Name:  "tcp-zero-window-probe-acked",
			RFC:   "RFC 9293 §3.8.6.1 (a receiver with a zero window acknowledges a probe with its next sequence number and zero window)",
			Title: "a one-byte probe into a zero window is answered with an ACK of RCV.NXT advertising window zero",
			Run: func(e *Env) {
				f, _ := e.Established(PlainOpts, SockOpts{RecvBuf: 16384}, 1000)
				fillWindow(e, f)
				f.SendRaw(f.SndNxt, f.RcvNxt, ACK, []byte{0x55})
				a := f.Expect("ACK of the probe", Has(ACK))
				if a.TCP.Ack != f.SndNxt || a.TCP.Window != 0 {
					e.Errorf("probe answered with ack %d win %d, want ack %d win 0", a.TCP.Ack, a.TCP.Window, f.SndNxt)
				}
			},
		},
		Case{
			Name:  "tcp-zero-window-ack-processed",
			RFC:   "RFC 9293 §3.10.7.4 (with RCV.WND zero no segment is acceptable, but special allowance should be made to accept valid ACKs)",
			Title: "with its window at zero, the DUT takes the ACK a window probe carries: the data it acknowledges is not retransmitted",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{RecvBuf: 16384}, 1000)
				fillWindow(e, f)
				e.Write(c, Pattern(500, 7))
				d := f.Expect("data from the DUT", IsData)
				end := d.TCP.Seq + uint32(len(d.Payload))
				// A one-byte probe at RCV.NXT (as the DUT's segment says
				// it) that acknowledges it.
				f.SendRaw(d.TCP.Ack, end, ACK, []byte{0x55})
				if a := f.Expect("ACK of the probe", Has(ACK)); a.TCP.Window != 0 {
					e.Note("the probe's answer advertises window %d", a.TCP.Window)
				}
				r := f.b.TryExpectTimer(3*time.Second, f.With(func(fr *Frame) bool {
					return IsData(fr) && int32(fr.TCP.Seq-end) < 0
				}))
				if r != nil {
					e.Errorf("the DUT retransmitted data the probe acknowledged (its ACK field was dropped with the probe): %v", r)
				}
			},
		},
		Case{
			Name:  "tcp-window-update-after-read",
			RFC:   "RFC 9293 §3.8.6.2.2 / RFC 1122 §4.2.3.3 (the receiver announces the window when the application frees buffer)",
			Title: "after a zero window, the application reads everything: the DUT sends a window update on its own",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{RecvBuf: 16384}, 1000)
				n := fillWindow(e, f)
				e.ReadAll(c, n)
				a := f.Expect("window update", func(fr *Frame) bool { return fr.TCP.ACK && fr.TCP.Window > 0 })
				if a.TCP.Ack != f.SndNxt {
					e.Errorf("window update acknowledges %d, want %d", a.TCP.Ack, f.SndNxt)
				}
				e.Note("window reopened to %d", a.TCP.Window)
				f.SendData([]byte("more"), 1000)
				f.ExpectAck(f.SndNxt)
			},
		},
		Case{
			Name:  "tcp-peer-window-respected",
			RFC:   "RFC 9293 §3.8.6 (a sender MUST NOT send data beyond the right edge of the peer's window)",
			Title: "the bench advertises a 1000-byte window: the DUT never sends beyond it, and sends more as the bench acknowledges",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Window = 1000
				f.Connect(PlainOpts)
				c := e.Accept(l)
				want := Pattern(5000, 60)
				e.Write(c, want)
				var got []byte
				for len(got) < len(want) {
					edge := f.RcvNxt + uint32(f.Window)
					for f.RcvNxt != edge && len(got) < len(want) {
						fr := f.Expect("data", IsData)
						if end := fr.TCP.Seq + uint32(len(fr.Payload)); int32(end-edge) > 0 {
							e.Fatalf("segment %d..%d goes beyond the window's right edge %d", fr.TCP.Seq, end, edge)
						}
						if fr.TCP.Seq == f.RcvNxt {
							got = append(got, fr.Payload...)
							f.RcvNxt += uint32(len(fr.Payload))
						}
					}
					beyond := f.b.TryExpect(Quiet, f.With(func(fr *Frame) bool {
						return IsData(fr) && int32(fr.TCP.Seq+uint32(len(fr.Payload))-edge) > 0
					}))
					if beyond != nil {
						e.Fatalf("data beyond the window's right edge %d: %v", edge, beyond)
					}
					f.Send(ACK, nil)
				}
				if !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
			},
		},
		Case{
			Name:  "tcp-persist-probes",
			RFC:   "RFC 9293 §3.8.6.1 / RFC 1122 §4.2.2.17 (zero-window probing, with exponential backoff)",
			Title: "facing a zero window the DUT sends at most one byte, as probes whose intervals grow; when the window opens it sends the rest",
			Setup: Setup{RTOMin: 50 * time.Millisecond},
			Run: func(e *Env) {
				l, f, _ := e.openSYN(PlainOpts, 1000)
				f.Window = 0
				f.Send(ACK, nil)
				c := e.Accept(l)
				want := Pattern(300, 61)
				e.Write(c, want)
				first := f.RcvNxt
				var at []time.Duration
				for len(at) < 4 {
					p := f.ExpectTimer(fmt.Sprintf("window probe %d", len(at)+1), time.Minute, func(*Frame) bool { return true })
					// A probe is an old byte, nothing, or the one next
					// byte: it must not reach past first+1.
					if end := p.TCP.Seq + uint32(len(p.Payload)); int32(end-(first+1)) > 0 {
						e.Fatalf("segment %d..%d into a zero window at %d: more than the one octet a probe may carry", p.TCP.Seq, end, first)
					}
					e.Note("probe %d: seq %d (SND.UNA%+d), %d bytes", len(at)+1, p.TCP.Seq, int32(p.TCP.Seq-first), len(p.Payload))
					at = append(at, p.At)
				}
				checkGrowing(e, "probe", at, 1.5)
				f.Window = 64240
				f.Send(ACK, nil)
				if got := f.ReadData(len(want), true); !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
			},
		},
		Case{
			Name:  "tcp-synack-retransmit",
			RFC:   "RFC 9293 §3.8.1 / RFC 6298 §5.5 (a SYN-ACK not acknowledged is retransmitted, with backoff)",
			Title: "a SYN-ACK the bench does not acknowledge is retransmitted unchanged, the second gap at least 1.5 times the first",
			Run: func(e *Env) {
				_, f, first := e.openSYN(PlainOpts, 1000)
				at := []time.Duration{first.At}
				for len(at) < 3 {
					r := f.ExpectTimer(fmt.Sprintf("SYN-ACK retransmission %d", len(at)), time.Minute, Has(SYN))
					if !r.TCP.ACK || r.TCP.Seq != first.TCP.Seq || r.TCP.Ack != first.TCP.Ack {
						e.Fatalf("retransmission %s seq %d ack %d, want S. seq %d ack %d", r.Flags(), r.TCP.Seq, r.TCP.Ack, first.TCP.Seq, first.TCP.Ack)
					}
					at = append(at, r.At)
				}
				checkGrowing(e, "SYN-ACK", at, 1.5)
				f.Send(ACK, nil)
				f.ExpectNothing("established")
			},
		},
		Case{
			Name:  "tcp-rto-backoff",
			RFC:   "RFC 6298 §5.4-5.5 (retransmit the earliest unacknowledged segment; double the RTO each time)",
			Title: "unacknowledged data is retransmitted from the same sequence number, each gap at least 1.5 times the one before",
			Setup: Setup{RTOMin: 50 * time.Millisecond},
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				want := Pattern(200, 62)
				e.Write(c, want)
				first := f.Expect("data", IsData)
				at := []time.Duration{first.At}
				for len(at) < 5 {
					r := f.ExpectTimer(fmt.Sprintf("retransmission %d", len(at)), time.Minute, IsData)
					if r.TCP.Seq != first.TCP.Seq || !bytes.HasPrefix(want, r.Payload) {
						e.Fatalf("retransmission at %d with %d bytes, want the first unacknowledged byte %d", r.TCP.Seq, len(r.Payload), first.TCP.Seq)
					}
					at = append(at, r.At)
				}
				checkGrowing(e, "retransmission", at, 1.5)
				e.CounterRose(CounterTCPRetransmits, 4)
				e.CounterRose(CounterTCPTimeouts, 3)
				f.RcvNxt = first.TCP.Seq + uint32(len(want))
				f.Send(ACK, nil)
				f.ExpectNothing("everything is acknowledged")
			},
		},
		Case{
			Name:  "tcp-fast-retransmit",
			RFC:   "RFC 5681 §3.2 (fast retransmit on the third duplicate ACK)",
			Title: "the second of six segments is lost: after three duplicate ACKs the DUT retransmits it without waiting for its RTO (5 s)",
			Setup: Setup{RTOMin: 5 * time.Second},
			Run: func(e *Env) {
				f, c := e.Established(SynOpts{MSS: 500, WScale: -1}, SockOpts{}, 1000)
				want := Pattern(3000, 63)
				e.Write(c, want)
				got := 0
				for got < len(want) {
					d := f.Expect("data", IsData)
					got += len(d.Payload)
				}
				// The first segment arrives; the second is lost; the four
				// after it each draw a duplicate ACK (three are enough).
				// (Losing the very first segment would not do: NewReno's
				// recover variable starts at ISS, RFC 6582 §3.2, and a
				// sender that follows it literally waits for its RTO.)
				f.RcvNxt += 500
				f.Send(ACK, nil)
				lost := f.RcvNxt
				for i := 0; i < 3; i++ {
					f.SendRaw(f.SndNxt, lost, ACK, nil)
				}
				r := f.Expect("fast retransmission", func(fr *Frame) bool { return IsData(fr) && fr.TCP.Seq == lost })
				e.Note("retransmitted %d bytes at %v", len(r.Payload), r.At)
				f.RcvNxt = lost + uint32(len(want))
				f.Send(ACK, nil)
				e.CounterRose(CounterTCPFastRetrans, 1)
				e.CounterStill(CounterTCPTimeouts)
			},
		},
		Case{
			Name:  "tcp-keepalive",
			RFC:   "RFC 1122 §4.2.3.6 (keepalive: a probe after the idle time, SEG.SEQ = SND.NXT-1; the connection dropped after unanswered probes)",
			Title: "an idle connection with keepalive gets probes at SND.NXT-1 after the idle time; answered it lives; unanswered it is dropped",
			Run:   func(e *Env) { keepalive(e, true) },
		},
		Case{
			Name:  "tcp-keepalive-idle-from-handshake",
			RFC:   "RFC 1122 §4.2.3.6 (probe when nothing was received for the idle time)",
			Title: "a connection with keepalive that stays idle from its handshake on is probed after the idle time",
			Run:   func(e *Env) { keepalive(e, false) },
		},
	)
}

// keepalive runs the keepalive cases: the DUT connects with keepalive on
// (idle 1 s, interval 1 s, 2 probes); with traffic, the bench first sends
// data; then the first probe must come after the idle time, an answered
// one keeps the connection, and after the unanswered ones it is dropped.
func keepalive(e *Env, traffic bool) {
	e.Helper()
	ka := &KeepAlive{Idle: time.Second, Interval: time.Second, Count: 2}
	c, f, syn := e.dutConnects(SockOpts{KeepAlive: ka}, 5000)
	f.Accept(syn, PlainOpts)
	last := f.Expect("ACK of the SYN-ACK", Has(ACK)).At
	if traffic {
		f.SendData([]byte("ping"), 1000)
		last = f.ExpectAck(f.SndNxt).At
		e.ReadAll(c, 4)
	}
	isProbe := func(fr *Frame) bool { return fr.TCP.ACK && len(fr.Payload) <= 1 && fr.TCP.Seq == f.RcvNxt-1 }
	p1 := f.ExpectTimer("first keepalive probe", time.Minute, isProbe)
	if gap := p1.At - last; gap < ka.Idle*9/10 {
		e.Errorf("first probe %v after the last segment, before the idle time %v", gap, ka.Idle)
	}
	if !traffic {
		return
	}
	f.Send(ACK, nil) // answered: the connection lives
	answered := e.Clock().Now()
	p2 := f.ExpectTimer("keepalive probe after the answer", time.Minute, isProbe)
	if gap := p2.At - answered; gap < ka.Idle*9/10 {
		e.Errorf("probe %v after the answer, before the idle time %v", gap, ka.Idle)
	}
	prev := p2.At
	for i := 1; i < ka.Count; i++ {
		p := f.ExpectTimer("unanswered keepalive probe", time.Minute, isProbe)
		if gap := p.At - prev; gap < ka.Interval*9/10 {
			e.Errorf("probe %v after the previous one, before the interval %v", gap, ka.Interval)
		}
		prev = p.At
	}
	e.Pass(ka.Interval*2, func(fr *Frame) {
		if f.Mine(fr) && fr.TCP.RST {
			e.Note("the DUT reset the connection it gave up: %v", fr)
		}
	})
	buf := make([]byte, 16)
	if n, err := c.Read(buf, e.Answer()); err != ErrTimedOut {
		e.Errorf("read after %d unanswered probes: %d bytes, %v; want a timeout", ka.Count, n, err)
	}
}

// checkGrowing asserts that the gaps between successive times at grow,
// each at least ratio times the one before.
func checkGrowing(e *Env, what string, at []time.Duration, ratio float64) {
	e.Helper()
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i]-at[i-1])
	}
	e.Note("%s gaps %v", what, gaps)
	for i := 1; i < len(gaps); i++ {
		if float64(gaps[i]) < ratio*float64(gaps[i-1]) {
			e.Errorf("%s gap %d is %v after %v: want at least %.1f times the previous one (exponential backoff)", what, i+1, gaps[i], gaps[i-1], ratio)
		}
	}
}
