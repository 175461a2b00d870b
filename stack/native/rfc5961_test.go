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
// data older than the window are challenged, at most ChallengeACKLimit a
// second; a segment with an old timestamp is dropped by PAWS. None of
// them harms the connection.
func TestChallengeACKAndPAWSRFC5961(t *testing.T) {
	o := Options{ChallengeACKLimit: 10}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	w.b.tick()
	for range 25 {
		w.b.input(segFrame(w, ca, cb.rcvNxt+100, cb.sndUna, flagRST, 1000, nil, nil))
	}
	if got, lim := counterOf(t, w.b, "tcp_challenge_acks"), counterOf(t, w.b, "tcp_challenge_acks_limited"); got != 10 || lim != 15 {
		t.Errorf("challenge ACKs %d limited %d, want 10 and 15", got, lim)
	}
	w.clk.Advance(time.Second) // a new second, a new budget
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndUna-1<<30, flagACK, 1000, tsOpt(cb.tsRecent+1, 0), nil))
	if counterOf(t, w.b, "tcp_ack_too_old") != 1 || counterOf(t, w.b, "tcp_challenge_acks") != 11 {
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
