package native

// Pacing: a BBR connection's data leaves at its pacing rate, not in
// bursts of cwnd (draft-cardwell-iccrg-bbr-congestion-control-00 §4.2.1).
// As Linux's internal pacing (tcp_wstamp_ns, EDT), each segment moves
// the connection's next departure time on by its size over the rate;
// a segment may leave while that time is less than a quantum ahead of
// now (a Flush for an ACK sends what that allows), and a connection held
// back arms its pacing timer for the departure time itself, so that the
// timer's Flush sends a whole quantum, about a millisecond of data (BBR's
// send quantum; Linux's tcp_tso_autosize: rate >> 10, at least two
// segments, at most 64 KiB): each Flush that sends costs the FrameIO a
// kick (a system call over AF_XDP), and a timer for the first segment
// that may leave, a segment or two a kick, took a sixth of a paced
// sender's CPU.
// A connection that has been idle (departure time in the past) sends at
// once: pacing costs a request-and-answer exchange nothing. A loop that
// comes late (a timer that fired after the departure time, a busy
// machine) may catch up two quanta at once, as Linux's credit forgives
// part of the next gap: a coarse timer does not lower the rate.

// paceState is a connection's pacing.
type paceState struct {
	rate  float64 // bytes per second; 0: not paced (set by setRate)
	next  int64   // departure time of the next byte (engine ns)
	quant uint32  // a millisecond at rate, at most paceMaxQuantum (setRate)
}

// setRate sets the pacing rate to r bytes per second, and what one
// quantum of it is.
func (p *paceState) setRate(r float64) {
	p.rate = r
	p.quant = uint32(min(r/1024, paceMaxQuantum))
}

// paceMaxQuantum bounds the quantum (Linux's GSO maximum).
const paceMaxQuantum = 64 << 10

// paceQuantum is what leaves at once at the pacing rate: a millisecond
// of it, between two segments and paceMaxQuantum.
func (c *Conn) paceQuantum(p *paceState) uint32 {
	return max(p.quant, 2*uint32(c.smss))
}

// paceAhead is how far ahead of now the departure time may be for a
// segment to leave: one quantum at the pacing rate.
func (c *Conn) paceAhead(p *paceState) int64 {
	return int64(float64(c.paceQuantum(p)) * 1e9 / p.rate)
}

// paceOK reports whether the next segment may leave now; if not, it
// arms the pacing timer for the departure time, when a whole quantum
// may leave.
func (c *Conn) paceOK() bool {
	p := &c.bbr.pace
	if p.rate <= 0 {
		return true
	}
	now := c.e.now
	if p.next <= now {
		return true // idle, or behind: no need to weigh the quantum
	}
	ahead := c.paceAhead(p)
	if p.next < now+ahead {
		return true
	}
	if at := p.next; c.tPace == 0 || at < c.tPace {
		c.tPace = at
		c.e.arm(c)
	}
	c.e.cnt[cTCPPacingDelays]++
	return false
}

// pacedSent moves the departure time on for n bytes sent.
func (c *Conn) pacedSent(p *paceState, n int) {
	if p.rate <= 0 {
		return
	}
	now := c.e.now
	gap := int64(float64(n) * 1e9 / p.rate)
	// A departure time in the past is what a late timer or a busy
	// loop left unsent: up to two quanta of it may go at once, so that
	// wake-ups a millisecond late do not lower the rate.
	if p.next < now {
		p.next = max(p.next, now-2*c.paceAhead(p))
	}
	p.next += gap
}

// onPaceTimer runs when a paced connection may send again.
func (c *Conn) onPaceTimer() {
	c.tPace = 0
	if c.sendable() {
		c.e.markDirty(c)
	}
}
