package conformance

import (
	"bytes"
	"time"
)

// Cases of blind injection (RFC 5961) that show on the wire: what a
// stack does with segments an attacker off the path can send.
func init() {
	register(
		Case{
			Name:  "tcp-syn-out-of-window-challenge-rate-limited",
			RFC:   "RFC 5961 §4.2 and §7 (a SYN on a synchronized connection, in the window or not: a rate-limited challenge ACK)",
			Title: "ten SYNs far outside the window, back to back, and one more after the answer get one challenge ACK, and the connection stays",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				for i := range 10 {
					f.SendRaw(f.SndNxt+1<<30+uint32(i), 0, SYN, nil)
				}
				a := f.Expect("challenge ACK", func(*Frame) bool { return true })
				if a.TCP.RST || a.TCP.SYN || !a.TCP.ACK || a.TCP.Ack != f.SndNxt || a.TCP.Seq != f.RcvNxt {
					e.Errorf("got %s seq %d ack %d, want . seq %d ack %d", a.Flags(), a.TCP.Seq, a.TCP.Ack, f.RcvNxt, f.SndNxt)
				}
				// A stack that takes a burst in one poll answers it once
				// anyway: one more SYN, sent once the answer came, tells
				// whether the answers are limited.
				f.SendRaw(f.SndNxt+1<<30+10, 0, SYN, nil)
				f.ExpectNothing("the SYNs after the first are not answered (rate limit)")
				e.alive(f, c)
			},
		},
		Case{
			Name: "tcp-blind-zero-window-ack-right-of-rcvnxt",
			RFC: "RFC 9293 §3.10.7.4 (SND.WL1/SND.WL2) / RFC 5961 §5 (blind data and ACK injection): " +
				"a forged pure ACK right of RCV.NXT with window 0 must not close the send window for good",
			Title: "after a forged zero-window ACK numbered 1000 right of RCV.NXT, the bench's real ACK at RCV.NXT opens the window again and the DUT's data flows",
			Setup: Setup{RTOMin: 50 * time.Millisecond},
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				win := f.Window
				f.Window = 0
				f.SendRaw(f.SndNxt+1000, f.RcvNxt, ACK, nil) // the forgery: in the window, right of RCV.NXT
				f.ExpectNothing("a pure ACK is not answered")
				f.Window = win
				f.Send(ACK, nil) // the real peer's window update, at RCV.NXT
				want := Pattern(300, 35)
				e.Write(c, want)
				if got := f.ReadData(len(want), true); !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
			},
		},
	)
}

// The differences of these cases between our stack (netstack) and Linux.
// The native engine passes both.
func init() {
	accepted = append(accepted,
		Difference{
			Case: "tcp-syn-out-of-window-challenge-rate-limited", Ours: Fail, Linux: Pass,
			RFC: "RFC 5961 §4.2 and §7",
			Reason: "gVisor netstack answers more than one of ten back-to-back out-of-window SYNs with an ACK: it has no " +
				"per-connection limit on them as Linux has (tcp_invalid_ratelimit, one per 500 ms). Both answer; the " +
				"limit is what RFC 5961 §7 asks to keep ACK storms and side channels down. Fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-blind-zero-window-ack-right-of-rcvnxt", Ours: Pass, Linux: Fail,
			RFC: "RFC 9293 §3.10.7.4 / RFC 5961 §5",
			Reason: "Linux (6.18 here) takes the window of any acceptable segment numbered after SND.WL1 " +
				"(tcp_may_update_window), so the forged ACK sets SND.WL1 1000 past RCV.NXT with window 0; the real ACKs at " +
				"RCV.NXT are older and move nothing, and Linux probes a window it believes shut until the peer's sequence " +
				"number passes the forged one. A blind attacker needs only a number inside the receive window. The native " +
				"engine keeps SND.WL1 at or left of RCV.NXT (and netstack takes the real ACK), so both pass.",
		},
	)
}
