package native

import "math"

// CUBIC (RFC 9438): the window after a congestion event grows as a cubic
// function of the time since the event, W_cubic(t) = C*(t-K)^3 + W_max,
// with the Reno-friendly estimate W_est as its floor (§4.3) and fast
// convergence (§4.7). Windows are in segments, time in seconds, as the
// RFC writes them.
const (
	cubicC     = 0.4
	cubicBeta  = 0.7
	cubicAlpha = 3 * (1 - cubicBeta) / (1 + cubicBeta) // §4.3
)

// cubicState is a connection's CUBIC state.
type cubicState struct {
	wMax, wLastMax float64
	k              float64
	wEst           float64
	epoch          int64 // start of the congestion avoidance stage; 0 before it
}

// cubicLoss is the congestion event of §4.6 and §4.7: it returns the new
// ssthresh in bytes.
func (c *Conn) cubicLoss() uint32 {
	mss := float64(c.smss)
	w := float64(c.cwnd) / mss
	s := &c.cubic
	if w < s.wLastMax { // §4.7 fast convergence
		s.wLastMax = w
		s.wMax = w * (1 + cubicBeta) / 2
	} else {
		s.wLastMax = w
		s.wMax = w
	}
	s.epoch = 0
	return max(uint32(w*cubicBeta*mss), 2*uint32(c.smss))
}

// cubicAck grows cwnd in congestion avoidance for acked bytes (§4.2–4.5).
func (c *Conn) cubicAck(acked uint32) {
	e := c.e
	mss := float64(c.smss)
	s := &c.cubic
	cwnd := float64(c.cwnd) / mss
	if s.epoch == 0 {
		s.epoch = e.now
		if s.wMax < cwnd { // no loss yet, or the window grew past W_max
			s.wMax = cwnd
		}
		s.k = math.Cbrt(s.wMax * (1 - cubicBeta) / cubicC) // §4.2 eq. 2
		if cwnd >= s.wMax {
			s.k = 0
		}
		s.wEst = cwnd
	}
	rtt := float64(c.srtt) / 1e9
	t := float64(e.now-s.epoch) / 1e9
	segs := float64(acked) / mss
	s.wEst += cubicAlpha * segs / cwnd // §4.3
	wt := cubicC*math.Pow(t-s.k, 3) + s.wMax
	if wt < s.wEst { // Reno-friendly region
		c.cwnd = max(c.cwnd, uint32(s.wEst*mss))
		return
	}
	target := cubicC*math.Pow(t+rtt-s.k, 3) + s.wMax // §4.4/4.5, W_cubic(t+RTT)
	target = min(max(target, cwnd), 1.5*cwnd)
	c.caAcc += uint32((target - cwnd) / cwnd * segs * mss)
	if c.caAcc >= uint32(c.smss) {
		c.cwnd += c.caAcc
		c.caAcc = 0
	}
}
