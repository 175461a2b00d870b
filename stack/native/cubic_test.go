package native

import (
	"math"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// RFC 9438 §4.2, §4.6: after a congestion event cwnd drops to 0.7 of its
// size and then follows W_cubic(t) = C*(t-K)^3 + W_max: back at W_max
// near t = K, above it by C*K^3 at t = 2K (a 100 ms RTT keeps the
// Reno-friendly estimate, §4.3, below the curve there).
func TestCUBICGrowthRFC9438Sec4_2(t *testing.T) {
	o := Options{Congestion: CUBIC}
	w := newWorld(t, memio.Options{}, o, o)
	ca, _ := w.connect(7000)
	mss := float64(ca.smss)
	ca.cwnd = uint32(100 * mss)
	ca.ssthresh = ca.lossThreshold()
	if got := float64(ca.ssthresh) / mss; math.Abs(got-70) > 0.5 {
		t.Fatalf("ssthresh %.1f segments after the loss, want 70 (beta 0.7)", got)
	}
	ca.cwnd = ca.ssthresh
	ca.cwndLimited = true // a sender that fills cwnd every round trip (RFC 7661: else it does not grow)
	ca.srtt = int64(100 * time.Millisecond)
	k := math.Cbrt(100 * (1 - cubicBeta) / cubicC)
	at := func(sec float64) float64 {
		for float64(w.a.now-ca.cubic.epoch)/1e9 < sec || ca.cubic.epoch == 0 {
			ca.ccAck(ca.cwnd) // one window acknowledged per RTT
			w.clk.Advance(100 * time.Millisecond)
			w.a.tick()
		}
		return float64(ca.cwnd) / mss
	}
	half := at(k / 2)
	atK := at(k)
	at2K := at(2 * k)
	t.Logf("K %.2f s: cwnd %.1f at K/2, %.1f at K, %.1f at 2K (segments)", k, half, atK, at2K)
	if atK < 90 || atK > 110 {
		t.Errorf("cwnd %.1f at K, want about W_max 100", atK)
	}
	if want := cubicC*k*k*k + 100; math.Abs(at2K-want) > 0.15*want {
		t.Errorf("cwnd %.1f at 2K, want about %.1f", at2K, want)
	}
	if half-70 < atK-half {
		t.Errorf("growth not concave before K: +%.1f then +%.1f", half-70, atK-half)
	}
}
