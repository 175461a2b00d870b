package netconn

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// asleep waits until s's poller sleeps with the engine free (a Write now
// sends inline).
func asleep(t *testing.T, s *Service) {
	t.Helper()
	waitFor(t, 20*time.Second, func() bool {
		return s.nat.own.Load() == ownFree && s.nat.sleeping.Load()
	}, func() string { return "the poller never slept" })
}

// TestInlineSend: a Write made while the poller sleeps sends from the
// writer's goroutine (as a kernel socket's write does) and leaves the
// poller asleep; the exchange is byte-exact either way.
func TestInlineSend(t *testing.T) {
	p := newPair(t, memio.Options{}, Options{Poll: PollSleep}, onEngine(dgramio.TCPStackNative))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	buf := make([]byte, 64)
	n := p.B.nat
	for i := 0; i < 20; i++ {
		// Quiet: the last answer acknowledged (no ACK on its way to
		// wake the poller), then asleep. The Service's own counter is
		// read directly: Stats runs on the poller and would wake it.
		waitFor(t, 20*time.Second, func() bool {
			quiet := false
			n.do(func() { quiet = a.nc.ec != nil && a.nc.ec.Buffered() == 0 && n.e.Idle() })
			return quiet
		}, func() string { return "the answer was never acknowledged" })
		asleep(t, p.B)
		before := p.B.n.inlineSends.Load()
		msg := fmt.Sprintf("answer %02d", i)
		if _, err := a.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := p.B.n.inlineSends.Load(); got != before+1 {
			t.Fatalf("write %d: inline_sends %d -> %d, want one more", i, before, got)
		}
		d.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(d, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if string(buf[:len(msg)]) != msg {
			t.Fatalf("read %q, want %q", buf[:len(msg)], msg)
		}
	}
}

// TestInlineSendRetransmits: RFC 6298 §5.1, the retransmission timer runs
// from the send of data. A segment sent inline while the poller sleeps
// with no timer of its own, and lost, is retransmitted: the inline send
// moves the sleeping poller's wake-up to the timer it armed.
func TestInlineSendRetransmits(t *testing.T) {
	p := newPair(t, memio.Options{}, Options{Poll: PollSleep}, onEngine(dgramio.TCPStackNative))
	ln := listen(t, p.B, testPort)
	d, a := connect(t, p, ln)
	// Asleep with no timer due for a while (the handshake's are done):
	// only the inline send's own timer can bring the data back.
	n := p.B.nat
	waitFor(t, 30*time.Second, func() bool {
		if n.own.Load() != ownFree || !n.sleeping.Load() {
			return false
		}
		var at time.Time
		if !n.do(func() { at = n.wakeAt }) {
			return false
		}
		return at.IsZero() || time.Until(at) > time.Minute
	}, func() string { return "the poller never slept without a timer" })
	asleep(t, p.B)
	p.pb.SetImpairment(memio.Impairment{Loss: 1}) // what B sends
	if _, err := a.Write([]byte("lost once")); err != nil {
		t.Fatal(err)
	}
	// The Service's own counter: Stats would wake the poller (it runs
	// on the poller), which would then find the timer by itself.
	if p.B.n.inlineSends.Load() == 0 {
		t.Fatal("the write was not sent inline")
	}
	p.pb.SetImpairment(memio.Impairment{})
	buf := make([]byte, 9)
	d.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(d, buf); err != nil {
		t.Fatalf("read: %v (B retransmitted %d)", err, counter(p.B.Stats(), "native", "tcp_retransmits"))
	}
	if string(buf) != "lost once" {
		t.Fatalf("read %q", buf)
	}
	if r := counter(p.B.Stats(), "native", "tcp_retransmits") + counter(p.B.Stats(), "native", "tcp_tlp_probes"); r == 0 {
		t.Error("the data arrived without a retransmission or probe: the loss was not simulated")
	}
}
