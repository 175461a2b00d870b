package native

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// tsOpt is a timestamps option (RFC 7323 §3).
func tsOpt(val, ecr uint32) []byte {
	o := []byte{optNOP, optNOP, optTimestamp, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(o[4:], val)
	binary.BigEndian.PutUint32(o[8:], ecr)
	return o
}

// RFC 5961 §3.2, §5.2 and §7, RFC 7323 §5.3: in-window RSTs and ACKs of
// data older than the window are challenged, at most one every half
// second per connection (Linux's tcp_send_challenge_ack); a segment with an old timestamp is dropped by PAWS. None of
// them harms the connection.
func TestChallengeACKAndPAWSRFC5961(t *testing.T) {
	o := Options{ChallengeACKLimit: 10}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	w.b.tick()
	for range 25 {
		w.b.input(segFrame(w, ca, cb.rcvNxt+100, cb.sndUna, flagRST, 1000, nil, nil))
	}
	if got, lim := counterOf(t, w.b, "tcp_challenge_acks"), counterOf(t, w.b, "tcp_challenge_acks_conn_limited"); got != 1 || lim != 24 {
		t.Errorf("challenge ACKs %d limited %d, want 1 and 24", got, lim)
	}
	w.clk.Advance(time.Second) // past the connection's interval
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndUna-1<<30, flagACK, 1000, tsOpt(cb.tsRecent+1, 0), nil))
	if counterOf(t, w.b, "tcp_ack_too_old") != 1 || counterOf(t, w.b, "tcp_challenge_acks") != 2 {
		t.Error("an ACK below SND.UNA-MAX.SND.WND was not challenged")
	}
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndUna, flagACK|flagPSH, 1000, tsOpt(cb.tsRecent-1000, 0), []byte("old")))
	if counterOf(t, w.b, "tcp_paws_rejected") != 1 || cb.rLen != 0 {
		t.Error("a segment with an old timestamp was taken")
	}
	if cb.State() != Established {
		t.Fatalf("the connection is %v", cb.State())
	}
	ca.Write([]byte("alive"))
	buf := make([]byte, 8)
	w.until(time.Second, "data", func() bool { n, _ := cb.Read(buf); return n == 5 })
}

// RFC 5961 §5.2 and §7: an ACK of data not yet sent is answered by a
// rate-limited (challenge) ACK. A segment injected in A's name, one byte
// beyond what A sent, puts B's RCV.NXT ahead of A's SND.MAX: B's ACKs then
// acknowledge data A never sent, and A's answers fall left of B's window,
// which B answers in turn. Unlimited, the two ACKs bounced for ever (found
// by FuzzSegmentOnLiveConnection).
func TestACKOfUnsentDataRateLimitedRFC5961Sec5_2(t *testing.T) {
	o := Options{MaxConns: 4, ChallengeACKLimit: 10}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	ca.Write([]byte("before")) // not sent yet: the injected byte is A's next
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt+6, cb.sndUna, flagACK, 1024, nil, []byte{0}))
	steps := 0
	for w.step() != 0 {
		if steps++; steps > 1000 {
			t.Fatalf("still %d frames a step after %d steps without the clock moving: an ACK storm", w.step(), steps)
		}
	}
	if got := counterOf(t, w.a, "tcp_ack_unsent_data"); got == 0 {
		t.Fatal("set-up: A saw no ACK of unsent data")
	}
	if got := counterOf(t, w.a, "tcp_challenge_acks"); got > 10 {
		t.Errorf("A sent %d challenge ACKs, above ChallengeACKLimit 10", got)
	}
}

// RFC 7323 §5.3 R1, RFC 9293 §3.10.7.4 and RFC 5961 §7: the ACK that
// answers a rejected segment without data is rate-limited. A segment
// injected in A's name with a timestamp far ahead puts B's TS.Recent
// beyond A's clock, so B rejects every segment of A's by PAWS, and a
// zero-window probe byte of B's puts A's RCV.NXT beyond B's ACKs, so A
// rejects those as out of its window: answered one for one, the two ACKs
// bounced for ever (found by FuzzSegmentOnLiveConnection).
func TestRejectedACKsRateLimitedRFC5961Sec7(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	ca.Write([]byte("before"))
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndUna, flagACK, 0, tsOpt(cb.tsRecent+1<<30, 0), []byte("1")))
	cb.Write([]byte("after"))
	steps := 0
	for i := 0; i < 20; i++ { // 20 rounds of timers
		for w.step() != 0 {
			if steps++; steps > 10000 {
				t.Fatalf("frames still flowing after %d steps with the clock at %v: an ACK loop",
					steps, w.clk.Now().Sub(time.Unix(1_000_000, 0)))
			}
		}
		if !w.idle() {
			break
		}
	}
	if counterOf(t, w.b, "tcp_paws_rejected") == 0 {
		t.Fatal("set-up: B rejected nothing by PAWS")
	}
	if counterOf(t, w.a, "tcp_reject_acks_limited")+counterOf(t, w.b, "tcp_reject_acks_limited") == 0 {
		t.Error("no rejected segment went unanswered")
	}
}
