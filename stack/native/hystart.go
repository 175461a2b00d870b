package native

// HyStart++ (RFC 9406): the first slow start of CUBIC watches the round
// trip; when a round's minimum RTT has risen over the previous round's
// by a threshold, a queue is building, and slow start hands over to
// Conservative Slow Start (CSS), which grows cwnd a quarter as fast. If CSS sees the RTT
// fall back below the minimum that started it, the rise was jitter and
// slow start resumes; after CSS_ROUNDS rounds of CSS the connection
// enters congestion avoidance with ssthresh at cwnd. A loss during
// either ends them as any loss ends slow start (lossThreshold). It runs
// under CUBIC only, as Linux runs its HyStart in CUBIC only: NewReno,
// the default, keeps RFC 5681's slow start (with a queue of about one
// round trip, and on a loaded host whose scheduling moves the RTT by
// milliseconds, HyStart++ cost NewReno more than it saved:
// BENCHMARKS.md); BBR has its own Startup.
//
// RTT samples are rttSample's: the echoed timestamp (1 ms steps), one
// per ACK. Without timestamps the timed segment gives one a round trip,
// never N_RTT_SAMPLE, and slow start stays as it was. A round
// ends when the ACK covers windowEnd, SND.MAX when the round began
// (§4.2). L, the growth one ACK may give (§4.2), stays the engine's
// RFC 3465 limit of two segments: the engine paces only under BBR, and
// two is within the RFC's eight for an unpaced sender.
//
// Per §4.3 only the initial slow start (ssthresh still arbitrarily
// high) runs it; slow starts after a congestion event are bounded by
// the ssthresh that event found.

// RFC 9406 §4.3's constants; RTTs in µs.
const (
	hsMinRTTThresh        = 4000  // MIN_RTT_THRESH, 4 ms
	hsMaxRTTThresh        = 16000 // MAX_RTT_THRESH, 16 ms
	hsMinRTTDivisor       = 8     // MIN_RTT_DIVISOR
	hsNRTTSample          = 8     // N_RTT_SAMPLE
	hsCSSGrowthDiv        = 4     // CSS_GROWTH_DIVISOR
	hsCSSRounds           = 5     // CSS_ROUNDS
	hsInf                 = ^uint32(0)
	hsOff           uint8 = 0 // not running: not CUBIC, NoHyStart, or over
	hsSlowStart     uint8 = 1 // standard slow start, watching the RTT
	hsCSS           uint8 = 2 // Conservative Slow Start
)

// hyState is a connection's HyStart++ state (§4.2's variables), 20
// bytes: it fills what were holes in Conn's slot.
type hyState struct {
	windowEnd uint32 // the round ends when SND.UNA reaches it
	lastMin   uint32 // lastRoundMinRTT, µs; hsInf when unknown
	curMin    uint32 // currentRoundMinRTT, µs
	baseMin   uint32 // cssBaselineMinRtt, µs
	samples   uint8  // rttSampleCount, saturating
	rounds    uint8  // rounds of CSS completed
	phase     uint8
}

// hystartInit starts HyStart++ for a connection entering ESTABLISHED
// with the initial ssthresh, under CUBIC unless Options.NoHyStart.
func (c *Conn) hystartInit() {
	c.hs = hyState{phase: hsOff}
	if c.e.o.Congestion != CUBIC || c.e.o.NoHyStart {
		return
	}
	c.hs = hyState{windowEnd: c.sndMax, lastMin: hsInf, curMin: hsInf, baseMin: hsInf, phase: hsSlowStart}
}

// hystartAck takes an ACK of new data with its RTT sample r (ns, -1 for
// none), before ccAck grows cwnd for it (§4.2); newAck calls it only
// while HyStart++ runs.
func (c *Conn) hystartAck(r int64) {
	h := &c.hs
	if c.inRecovery || c.cwnd >= c.ssthresh {
		return
	}
	if r >= 0 {
		us := uint32(min(r/1e3, int64(hsInf-1)))
		h.curMin = min(h.curMin, us)
		h.samples = min(h.samples+1, 255)
	}
	e := c.e
	switch h.phase {
	case hsSlowStart:
		if h.samples >= hsNRTTSample && h.curMin != hsInf && h.lastMin != hsInf {
			thresh := max(hsMinRTTThresh, min(h.lastMin/hsMinRTTDivisor, hsMaxRTTThresh))
			if uint64(h.curMin) >= uint64(h.lastMin)+uint64(thresh) {
				h.baseMin, h.phase, h.rounds = h.curMin, hsCSS, 0
				e.cnt[cTCPHyStartCSS]++
			}
		}
	case hsCSS:
		if h.samples >= hsNRTTSample && h.curMin < h.baseMin {
			// The rise was jitter: back to slow start (§4.2).
			h.baseMin, h.phase = hsInf, hsSlowStart
			e.cnt[cTCPHyStartSpurious]++
		}
	}
	if seqLT(c.sndUna, h.windowEnd) {
		return
	}
	// The round is over; the next one begins (§4.2).
	if h.phase == hsCSS {
		h.rounds++
		if h.rounds >= hsCSSRounds {
			c.ssthresh = max(c.cwnd, 2*uint32(c.smss))
			h.phase = hsOff
			e.cnt[cTCPHyStartCA]++
			return
		}
	}
	h.lastMin, h.curMin, h.samples = h.curMin, hsInf, 0
	h.windowEnd = c.sndMax
}

// hystartGrowth is what slow start adds to cwnd for inc bytes: all of
// them, a quarter in CSS (§4.2 CSS_GROWTH_DIVISOR).
func (c *Conn) hystartGrowth(inc uint32) uint32 {
	if c.hs.phase == hsCSS {
		return inc / hsCSSGrowthDiv
	}
	return inc
}
