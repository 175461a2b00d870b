package native

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestBBRInitPacingRateFromHandshakeRTTSec4_2_1 is
// draft-cardwell-iccrg-bbr-congestion-control-00 §4.2.1
// (BBRInitPacingRate): the initial pacing rate is Startup's gain times
// the initial window over SRTT, the nominal 1 ms only while no RTT is
// known. An active open is established before the SYN-ACK's RTT sample
// is taken; as Linux's has_seen_rtt, that first sample sets the rate,
// although Startup's rate otherwise only rises: over a 20 ms path the
// initial window leaves paced at about 17 Mbit/s, not at once at the
// 334 Mbit/s of the 1 ms default, and the first ACKs do not keep it there.
func TestBBRInitPacingRateFromHandshakeRTTSec4_2_1(t *testing.T) {
	o := Options{Congestion: BBR}
	w := newWorld(t, memio.Options{Seed: 1}, o, o)
	imp := memio.Impairment{Delay: 10 * time.Millisecond}
	w.pa.SetImpairment(imp)
	w.pb.SetImpairment(imp)
	l, err := w.b.Listen(7500, 0)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := w.a.Dial(netip.AddrPortFrom(families[0].b, 7500), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Small steps: the harness's until jumps to the next timer, past the
	// wire's delay, and the handshake's RTT would be the SYN's RTO.
	var cb *Conn
	for end := w.clk.Now().Add(time.Second); cb == nil || ca.State() != Established; {
		if w.clk.Now().After(end) {
			t.Fatal("no handshake within a second")
		}
		if cb == nil {
			cb, _ = l.Accept()
		}
		if w.step() == 0 {
			w.clk.Advance(50 * time.Microsecond)
		}
	}
	if !ca.hasRTT || ca.srtt < int64(19*time.Millisecond) {
		t.Fatalf("the SYN-ACK gave no RTT of the 20 ms path: srtt %v", time.Duration(ca.srtt))
	}
	mss := ca.segData()
	iw := initialWindow(ca.smss)
	want := bbrHighGain * float64(iw) * 1e9 / float64(ca.srtt)
	ca.Write(make([]byte, 64*mss))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	if r := ca.bbr.pace.rate; r < want*0.99 || r > want*1.01 {
		t.Fatalf("pacing rate %.1f Mbit/s at the first flight, want 2/ln2 x %d B / %v = %.1f Mbit/s",
			r*8/1e6, iw, time.Duration(ca.srtt), want*8/1e6)
	}
	if out := ca.sndNxt - ca.sndUna; out >= iw {
		t.Fatalf("the initial window (%d bytes) left at once at the first Flush (%d bytes out)", iw, out)
	}
	// The first flight's ACKs (the bandwidth they show is below the
	// initial rate) leave Startup's rate where the RTT put it, not at
	// the 1 ms default's.
	buf := make([]byte, 64<<10)
	for end := w.clk.Now().Add(25 * time.Millisecond); w.clk.Now().Before(end); {
		cb.Read(buf)
		if w.step() == 0 {
			w.clk.Advance(50 * time.Microsecond)
		}
	}
	if ca.bbr.rate.delivered == 0 {
		t.Fatal("nothing delivered in a round trip")
	}
	if r := ca.bbr.pace.rate; r > 2*want {
		t.Fatalf("pacing rate %.1f Mbit/s after the first ACKs, want about %.1f", r*8/1e6, want*8/1e6)
	}
}
