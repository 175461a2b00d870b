package native

import "math/rand/v2"

// BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00, as Linux's
// tcp_bbr.c runs it): a model of the path, not a reaction to loss. Each
// ACK's delivery-rate sample (ratesample.go) feeds a windowed maximum of
// the bottleneck bandwidth over 10 round trips (§4.1.1), each RTT sample
// a minimum RTT over 10 seconds (§4.1.2); data leaves paced at
// pacing_gain × bw (§4.2.1, pacing.go), and cwnd is cwnd_gain × the BDP
// (bw × min RTT) plus what ACK aggregation and the pacing quantum need
// (§4.2.3). A state machine sets the gains: Startup doubles the rate each
// round trip (gain 2/ln 2) until the bandwidth grew less than 25% in
// three rounds (§4.3.2.2), Drain empties the queue it built (§4.3.3),
// ProbeBW cycles its pacing gain through 5/4, 3/4 and six rounds of 1
// (§4.3.4), and ProbeRTT, when no new minimum RTT came for 10 s, holds
// the flight at four segments for 200 ms and a round trip so that the
// queue drains and the minimum can be seen again (§4.3.5).
//
// Loss recovery (RACK, the retransmissions of sendHoles) is the
// engine's; BBR replaces PRR's and the RTO's cwnd: on entering fast
// recovery cwnd is what is in flight plus what this ACK delivered
// (packet conservation, one round trip), after it grows back to its
// target, and when recovery ends it is at least what it was before
// (§4.2.3.4, Linux's bbr_set_cwnd_to_recover_or_restore). A random loss
// therefore costs a retransmission, not half the window.

// BBR's modes (§4.3).
const (
	bbrStartup uint8 = iota
	bbrDrain
	bbrProbeBW
	bbrProbeRTT
)

// BBR's parameters (§2, Linux's tcp_bbr.c).
const (
	bbrHighGain      = 2.885 // 2/ln(2): Startup's pacing and cwnd gain
	bbrDrainGain     = 1 / bbrHighGain
	bbrCwndGain      = 2.0 // ProbeBW's cwnd gain
	bbrBwRounds      = 10  // the bandwidth filter's window, in round trips
	bbrMinRTTWindow  = int64(10e9)
	bbrProbeRTTTime  = int64(200e6)
	bbrMinCwndSegs   = 4
	bbrFullBwThresh  = 1.25 // Startup's growth that counts as growing
	bbrFullBwRounds  = 3
	bbrCycleLen      = 8
	bbrPacingMargin  = 0.99 // pace 1% below the estimate, as Linux does
	bbrAggrRounds    = 5    // the ACK-aggregation filter's window
	bbrAggrMaxTime   = 100e6
	bbrAggrResetSize = 1 << 20
)

// bbrPacingGains is ProbeBW's cycle (§4.3.4.3).
var bbrPacingGains = [bbrCycleLen]float64{1.25, 0.75, 1, 1, 1, 1, 1, 1}

// bbrState is a connection's BBR state, allocated when a BBR
// connection is established.
type bbrState struct {
	rate rateState

	mode       uint8
	pacingGain float64
	cwndGain   float64

	// §4.1.1: the maximum bandwidth of each of the last bbrBwRounds
	// rounds, in bytes per second.
	bwRound [bbrBwRounds]float64
	bw      float64

	// §4.1.2
	minRTT   int64 // ns; 0 before a sample
	minRTTAt int64

	// Round counting (§4.1.1.3).
	rounds        uint64
	nextRoundDlvd uint64
	roundStart    bool

	// §4.3.2.2
	filledPipe bool
	fullBw     float64
	fullBwCnt  int

	// §4.3.4
	cycleIdx int
	cycleAt  int64

	// §4.3.5
	probeRTTDone      int64
	probeRTTRoundDone bool
	idleRestart       bool

	// §4.2.3.4
	priorCwnd    uint32
	conserve     bool
	prevRecovery bool
	lossMode     bool   // after a retransmission timeout, until SND.UNA passes lossRecover
	lossRecover  uint32 // SND.MAX at the timeout

	// ACK aggregation (Linux's bbr_update_ack_aggregation).
	aggrEpochAt    int64
	aggrEpochAcked uint64
	aggrMax        [2]uint64
	aggrIdx        int
	aggrRounds     int

	pace    paceState
	seenRTT bool // the pacing rate was set from an RTT sample (bbrInitPacing)

	// bbrBDP's bw × minRTT, kept for the bw and minRTT it was computed
	// from: a request and its answer see the same ones ACK after ACK.
	bdp    float64
	bdpBw  float64
	bdpRTT int64
}

// bbrInit starts BBR on a connection being established (§4.3.1).
func (c *Conn) bbrInit() {
	b := c.bbr
	if b == nil {
		b = new(bbrState)
		c.bbr = b
	} else {
		*b = bbrState{rate: b.rate}
	}
	b.rate.init()
	b.minRTTAt = c.e.now
	if c.hasRTT {
		b.minRTT = max(c.srtt, 1)
	}
	b.cycleIdx = rand.IntN(bbrCycleLen)
	c.bbrEnterStartup()
	c.bbrInitPacing()
}

// bbrInitPacing sets §4.2.1's BBRInitPacingRate: cwnd over SRTT (1 ms
// without one), at Startup's gain. An active open is established before
// the SYN-ACK's RTT is taken; as Linux's has_seen_rtt, the first RTT
// sample sets the rate again (bbrSent, bbrSetPacing), lower too:
// Startup's rate only rises, and a rate from the nominal 1 ms (334
// Mbit/s for ten segments) would leave a longer path's Startup unpaced,
// its flights in bursts, until the estimate caught up with it.
func (c *Conn) bbrInitPacing() {
	b := c.bbr
	rtt := int64(1e6)
	if c.hasRTT && c.srtt > 0 {
		rtt, b.seenRTT = c.srtt, true
	}
	b.pace.setRate(bbrHighGain * float64(c.cwnd) * 1e9 / float64(rtt))
}

func (c *Conn) bbrEnterStartup() {
	b := c.bbr
	b.mode, b.pacingGain, b.cwndGain = bbrStartup, bbrHighGain, bbrHighGain
}

func (c *Conn) bbrEnterProbeBW() {
	b := c.bbr
	b.mode, b.pacingGain, b.cwndGain = bbrProbeBW, 1, bbrCwndGain
	// Linux starts at a random phase other than the 3/4 one, so that
	// flows do not probe in step.
	b.cycleIdx = bbrCycleLen - 1 - rand.IntN(bbrCycleLen-1)
	c.bbrAdvanceCycle()
	c.e.cnt[cTCPBBRProbeBW]++
}

// bbrSent is called for every segment of n bytes of data that leaves
// (sendSeg, before SND.NXT moves).
func (c *Conn) bbrSent(seq uint32, n int) {
	b := c.bbr
	if !b.seenRTT && c.hasRTT && c.srtt > 0 {
		c.bbrInitPacing() // an active open's first flight: the SYN-ACK's RTT
	}
	if c.sndMax == c.sndUna {
		// Nothing in flight: the departure times of the last flight are
		// no credit for a burst now (pacedSent lets a late loop catch
		// up, not an idle one).
		b.pace.next = c.e.now
	}
	if c.sndMax == c.sndUna && b.mode == bbrProbeBW {
		// Restart after idle (Linux's CA_EVENT_TX_START): pace at the
		// estimate, not a gain of the old cycle.
		b.idleRestart = true
		b.aggrEpochAt, b.aggrEpochAcked = c.e.now, 0
		c.bbrSetPacing(1)
	}
	c.rateSent(&b.rate, seq, n)
	c.pacedSent(&b.pace, n)
}

// bbrAck runs BBR for an ACK s (after SACK and loss detection took it):
// una is SND.UNA before it.
func (c *Conn) bbrAck(s *segment, una uint32) {
	b := c.bbr
	var rs rateSample
	c.rateAck(&rs, &b.rate, s, una, b.minRTT)
	pipe := c.pipe()
	c.bbrUpdateBw(&rs)
	c.bbrUpdateAggr(&rs)
	c.bbrUpdateCycle(pipe)
	c.bbrCheckFullPipe(&rs)
	c.bbrCheckDrain(pipe)
	c.bbrUpdateMinRTT(&rs, pipe)
	c.bbrSetPacing(b.pacingGain)
	c.bbrSetCwnd(&rs, pipe)
}

// bbrUpdateBw counts round trips and feeds the bandwidth filter
// (§4.1.1).
func (c *Conn) bbrUpdateBw(rs *rateSample) {
	b := c.bbr
	b.roundStart = false
	if !rs.ok {
		return
	}
	// §4.1.1.3: a round ends when a segment sent after the last round's
	// end is delivered.
	prev := b.bw // the estimate an app-limited sample is weighed against
	if rs.priorDelivered >= b.nextRoundDlvd {
		b.nextRoundDlvd = b.rate.delivered
		b.rounds++
		b.roundStart = true
		b.conserve = false
		i := b.rounds % bbrBwRounds
		if b.bwRound[i] == b.bw {
			// The round that leaves the window held the maximum: the
			// others say what it is now.
			b.bwRound[i] = 0
			bw := 0.0
			for _, v := range b.bwRound {
				if v > bw {
					bw = v
				}
			}
			b.bw = bw
		} else {
			b.bwRound[i] = 0
		}
	}
	// An app-limited sample only counts when it raises the estimate:
	// it shows at least that rate, never that the path has no more.
	if !rs.appLimited || rs.bw >= prev {
		i := b.rounds % bbrBwRounds
		if rs.bw > b.bwRound[i] {
			b.bwRound[i] = rs.bw
			if rs.bw > b.bw {
				b.bw = rs.bw // the windowed maximum, kept as it moves
			}
		}
	}
}

// bbrUpdateAggr measures ACK aggregation: how many bytes ACKs delivered
// above what the estimated bandwidth explains since an epoch began, the
// largest over bbrAggrRounds round trips. cwnd keeps that much more, so
// that a receiver (or a scheduler) that sends ACKs in bursts does not
// leave the sender cwnd-limited between them.
func (c *Conn) bbrUpdateAggr(rs *rateSample) {
	b := c.bbr
	if rs.newly == 0 || !rs.ok {
		return
	}
	now := c.e.now
	if b.roundStart {
		if b.aggrRounds++; b.aggrRounds >= bbrAggrRounds {
			b.aggrRounds = 0
			b.aggrIdx ^= 1
			b.aggrMax[b.aggrIdx] = 0
		}
	}
	expected := uint64(b.bw * float64(now-b.aggrEpochAt) / 1e9)
	if b.aggrEpochAcked <= expected || b.aggrEpochAcked+uint64(rs.newly) >= bbrAggrResetSize {
		b.aggrEpochAcked, b.aggrEpochAt, expected = 0, now, 0
	}
	b.aggrEpochAcked += uint64(rs.newly)
	extra := min(b.aggrEpochAcked-min(expected, b.aggrEpochAcked), uint64(c.cwnd))
	b.aggrMax[b.aggrIdx] = max(b.aggrMax[b.aggrIdx], extra)
}

// bbrUpdateCycle moves ProbeBW's gain cycle on (§4.3.4.4): a phase lasts
// a minimum RTT; the 5/4 one until the flight reached 5/4 of the BDP or
// a loss came, the 3/4 one ends early once the flight is down to the
// BDP.
func (c *Conn) bbrUpdateCycle(pipe uint32) {
	b := c.bbr
	if b.mode != bbrProbeBW {
		return
	}
	now := c.e.now
	full := now-b.cycleAt > b.minRTT
	next := full
	switch g := b.pacingGain; {
	case g > 1:
		next = full && (c.inRecovery || pipe >= c.bbrInflight(g))
	case g < 1:
		next = full || pipe <= c.bbrInflight(1)
	}
	if next {
		c.bbrAdvanceCycle()
	}
}

func (c *Conn) bbrAdvanceCycle() {
	b := c.bbr
	b.cycleIdx = (b.cycleIdx + 1) % bbrCycleLen
	b.cycleAt = c.e.now
	b.pacingGain = bbrPacingGains[b.cycleIdx]
}

// bbrCheckFullPipe ends Startup when the bandwidth grew less than 25% in
// three rounds without app-limited samples (§4.3.2.2).
func (c *Conn) bbrCheckFullPipe(rs *rateSample) {
	b := c.bbr
	if b.filledPipe || !b.roundStart || rs.appLimited {
		return
	}
	if b.bw >= b.fullBw*bbrFullBwThresh {
		b.fullBw, b.fullBwCnt = b.bw, 0
		return
	}
	if b.fullBwCnt++; b.fullBwCnt >= bbrFullBwRounds {
		b.filledPipe = true
	}
}

// bbrCheckDrain leaves Startup for Drain once the pipe is full, and
// Drain for ProbeBW once the flight is down to the BDP (§4.3.3).
func (c *Conn) bbrCheckDrain(pipe uint32) {
	b := c.bbr
	if b.mode == bbrStartup && b.filledPipe {
		b.mode, b.pacingGain, b.cwndGain = bbrDrain, bbrDrainGain, bbrHighGain
		c.e.cnt[cTCPBBRDrain]++
	}
	if b.mode == bbrDrain && pipe <= c.bbrInflight(1) {
		c.bbrEnterProbeBW()
	}
}

// bbrUpdateMinRTT keeps the minimum RTT of the last 10 s, and runs
// ProbeRTT (§4.1.2, §4.3.5).
func (c *Conn) bbrUpdateMinRTT(rs *rateSample, pipe uint32) {
	b := c.bbr
	e := c.e
	now := e.now
	expired := now > b.minRTTAt+bbrMinRTTWindow
	if rs.rtt >= 0 && (b.minRTT == 0 || rs.rtt < b.minRTT || expired) {
		b.minRTT, b.minRTTAt = max(rs.rtt, 1), now
	}
	if expired && !b.idleRestart && b.mode != bbrProbeRTT {
		// §4.3.5.1: 10 s without a lower RTT; drain the queue to see it.
		b.mode, b.pacingGain, b.cwndGain = bbrProbeRTT, 1, 1
		c.bbrSaveCwnd()
		b.probeRTTDone = 0
		e.cnt[cTCPBBRProbeRTT]++
	}
	if b.mode == bbrProbeRTT {
		b.rate.appLimited = max(b.rate.delivered+uint64(pipe), 1) // the low flight is ours, not the path's
		if b.probeRTTDone == 0 && pipe <= bbrMinCwndSegs*uint32(c.smss) {
			b.probeRTTDone = now + bbrProbeRTTTime
			b.probeRTTRoundDone = false
			b.nextRoundDlvd = b.rate.delivered
		} else if b.probeRTTDone != 0 {
			if b.roundStart {
				b.probeRTTRoundDone = true
			}
			if b.probeRTTRoundDone && now > b.probeRTTDone {
				b.minRTTAt = now
				c.cwnd = max(c.cwnd, b.priorCwnd)
				if b.filledPipe {
					c.bbrEnterProbeBW()
				} else {
					c.bbrEnterStartup()
				}
			}
		}
	}
	if rs.newly > 0 {
		b.idleRestart = false
	}
}

// bbrBDP is the bandwidth-delay product times gain, in bytes; the
// initial window before an RTT is known.
func (c *Conn) bbrBDP(gain float64) uint32 {
	b := c.bbr
	if b.minRTT == 0 || b.bw == 0 {
		return initialWindow(c.smss)
	}
	if b.bw != b.bdpBw || b.minRTT != b.bdpRTT {
		b.bdp, b.bdpBw, b.bdpRTT = b.bw*float64(b.minRTT)/1e9, b.bw, b.minRTT
	}
	return uint32(min(b.bdp*gain, 1<<30))
}

// bbrInflight is the flight a gain aims at: its BDP plus the pacing
// quanta the sender puts out at once (Linux's bbr_quantization_budget).
func (c *Conn) bbrInflight(gain float64) uint32 {
	b := c.bbr
	t := c.bbrBDP(gain) + 3*c.paceQuantum(&b.pace)
	if b.mode == bbrProbeBW && b.cycleIdx == 0 {
		t += 2 * uint32(c.smss) // the 5/4 phase reaches its flight
	}
	return t
}

// bbrSetPacing sets the pacing rate to gain × bw (§4.2.1): in Startup
// only upwards, so that a low early sample does not slow it.
func (c *Conn) bbrSetPacing(gain float64) {
	b := c.bbr
	if !b.seenRTT && c.hasRTT && c.srtt > 0 {
		c.bbrInitPacing()
	}
	if b.bw == 0 {
		return
	}
	r := gain * b.bw * bbrPacingMargin
	if r != b.pace.rate && (b.filledPipe || r > b.pace.rate) {
		b.pace.setRate(r)
	}
}

// bbrSaveCwnd remembers cwnd before recovery or ProbeRTT cut it.
func (c *Conn) bbrSaveCwnd() {
	b := c.bbr
	if !b.prevRecovery && !b.lossMode && b.mode != bbrProbeRTT {
		b.priorCwnd = c.cwnd
	} else {
		b.priorCwnd = max(b.priorCwnd, c.cwnd)
	}
}

// bbrLoss is lossThreshold for BBR: a congestion event does not cut
// cwnd (bbrSetCwnd sets it, with packet conservation): ssthresh, which
// the end of recovery sets cwnd to before bbrSetCwnd restores it, is
// cwnd; cwnd is saved to come back to.
func (c *Conn) bbrLoss() uint32 {
	c.bbrSaveCwnd()
	return c.cwnd
}

// bbrRTO is called at a retransmission timeout, cwnd having gone to one
// segment: it grows back by what each ACK delivers, and the cwnd before
// the timeout comes back when what was in flight is acknowledged.
func (c *Conn) bbrRTO() {
	b := c.bbr
	b.lossMode, b.lossRecover = true, c.sndMax
	// Linux's Loss state is past Recovery: leaving fast recovery for it
	// is no end of a recovery (bbrSetCwnd would restore the cwnd of
	// before it, and go-back-N would resend the whole flight at once).
	b.conserve, b.prevRecovery = false, true
}

// bbrSetCwnd sets cwnd (§4.2.3): in recovery with packet conservation
// and restored when it ends (§4.2.3.4); otherwise towards the target,
// growing by what was delivered; at most four segments in ProbeRTT
// (§4.2.3.5).
func (c *Conn) bbrSetCwnd(rs *rateSample, pipe uint32) {
	b := c.bbr
	mss := uint32(c.smss)
	acked := rs.newly
	if b.lossMode && !seqLT(c.sndUna, b.lossRecover) {
		b.lossMode = false // what was in flight at the timeout is acknowledged
	}
	rec := c.inRecovery || b.lossMode // Linux's Recovery or Loss
	switch {
	case c.inRecovery && !b.prevRecovery:
		// §4.2.3.4: entering recovery, send one segment per segment
		// delivered for a round trip.
		b.conserve = true
		b.nextRoundDlvd = b.rate.delivered
		c.cwnd = pipe + acked
	case !rec && b.prevRecovery:
		b.conserve = false
		c.cwnd = max(c.cwnd, b.priorCwnd)
	}
	b.prevRecovery = rec
	if b.conserve {
		c.cwnd = max(c.cwnd, pipe+acked)
	} else if acked > 0 {
		if b.filledPipe {
			target := c.bbrInflight(b.cwndGain) + c.bbrAggrCwnd()
			c.cwnd = min(c.cwnd+acked, target)
		} else if b.rate.delivered < uint64(initialWindow(c.smss)) || c.cwnd < c.bbrInflight(b.cwndGain) {
			c.cwnd += acked
		}
	}
	c.cwnd = min(max(c.cwnd, bbrMinCwndSegs*mss), 1<<30)
	if b.mode == bbrProbeRTT {
		c.cwnd = min(c.cwnd, bbrMinCwndSegs*mss)
	}
}

// bbrAggrCwnd is the cwnd ACK aggregation calls for (at most 100 ms of
// the bandwidth).
func (c *Conn) bbrAggrCwnd() uint32 {
	b := c.bbr
	return uint32(min(float64(max(b.aggrMax[0], b.aggrMax[1])), b.bw*bbrAggrMaxTime/1e9))
}
