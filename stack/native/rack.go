package native

// RACK-TLP (RFC 8985) and limited transmit: the loss detection that does
// not wait for three duplicate ACKs or for the RTO.
//
//   - Limited transmit (RFC 3042, as RFC 6675 §4's pipe has it): outside
//     recovery the bytes the peer SACKed are not in flight, so every ACK
//     that SACKs a segment lets a new one leave, and a loss near the end
//     of a small flight still gets the SACKs that start recovery.
//   - RACK's reordering window (RFC 8985 §6.2): a hole at SND.UNA below
//     SACKed data that is not yet lost by DupThresh (RFC 6675 IsLost) is
//     lost once the reordering window passed since data above it was
//     first SACKed; the reordering timer starts recovery then. Once the
//     connection saw reordering (RACK.reordering_seen), DupThresh no
//     longer starts recovery (recovery.go's dupAck): every hole waits the
//     window, as §6.2's reo_wnd is zero at DupThresh only before. The window
//     is a quarter of the minimum RTT (measured in ns on a segment a
//     round trip, never a retransmitted one); each round trip with a
//     D-SACK widens it by a quarter of the minimum RTT (up to SRTT), for
//     16 recoveries (§6.2 step 4). It is never below 1 ms (reoMin).
//   - Tail loss probes (RFC 8985 §7): with data in flight and no
//     recovery, a probe timeout (PTO, 2*SRTT plus 2 ms, plus the peer's
//     worst delayed ACK when one segment is in flight) sends one new
//     segment, or the last one again, so that a loss at the end of a
//     flight gets SACKs and fast recovery instead of the RTO. A lone
//     segment's PTO later than the RTO is the RTO's time, and the probe
//     goes in its place (§7.2). A probe that repaired a loss (its ACK
//     covers it, no D-SACK of it) is a congestion event (§7.4).
//
// The engine's sequence-space scoreboard has no per-segment send times:
// RACK's "sent RTT+reo_wnd ago" is taken from the first SACK above the
// hole (the hole left before the data SACKed above it), which waits the
// whole reordering window, never less. Retransmissions in recovery are
// the exception: lostrtx.go records when each left, and RACK's rule
// finds one lost again wherever it lies (§6.2 step 5, its timer §6.3).

// Kinds of the loss timer (rackState.tLoss).
const (
	lossReo uint8 = 1 + iota // RACK's reordering timer
	lossTLP                  // the tail loss probe's PTO
	lossRtx                  // a recorded retransmission may be lost (lostrtx.go)
)

// wcDelAck is RFC 8985 §7.2's WCDelAckT: the longest a peer may hold
// the ACK of a lone segment.
const wcDelAck = int64(200e6)

// ptoExtra is added to 2*SRTT for the PTO (Linux's TCP_TIMEOUT_MIN): a
// peer's ACK of several segments is not late by a scheduling delay.
const ptoExtra = int64(2e6)

// rackState is a connection's RACK-TLP state.
type rackState struct {
	tLoss      int64 // deadline of the loss timer, 0 when off
	kind       uint8 // lossReo or lossTLP
	tlpOut     bool  // a probe is out (§7: TLP.end_seq valid)
	tlpRtx     bool  // the probe was a retransmission
	reoSeen    bool  // reordering seen (§6.2 RACK.reordering_seen)
	reoMult    uint8 // RACK.reo_wnd_mult
	reoPersist uint8 // RACK.reo_wnd_persist
	timing     bool  // timeSeq is being timed
	inRec      bool  // the connection was in recovery at the last ACK
	hole       bool  // data above a hole at SND.UNA is SACKed
	holeAt     int64 // when hole was first seen
	tlpHigh    uint32
	dsackRound uint32 // SND.MAX when reoMult last grew: once a round trip
	timeSeq    uint32 // a byte sent at timeAt, for minRTT (Karn: never retransmitted)
	timeAt     int64
	minRTT     int64     // ns, 0 when not measured
	rtx        *rtxTable // the recovery's retransmissions (lostrtx.go), nil until one
}

// pipeOpen is pipe outside recovery with the peer's SACKs (limited
// transmit): what was sent and is not acknowledged or SACKed.
func (c *Conn) pipeOpen() uint32 {
	p := c.sndNxt - c.sndUna
	if c.e.o.NoRACK {
		return p
	}
	for i := 0; i < c.nsacked; i++ {
		b := c.sacked[i]
		if seqGEQ(b.start, c.sndNxt) {
			break
		}
		p -= seqMin(b.end, c.sndNxt) - b.start
	}
	return p
}

// reoMin is the least reordering window: the granularity of Linux's RACK
// timer (a jiffy), and what keeps a connection without an RTT sample from
// calling every hole lost at once.
const reoMin = int64(1e6)

// reoWnd is RACK.reo_wnd (§6.2 step 4) for a hole that DupThresh does
// not call lost yet, or for any hole once reordering was seen: reoMult (at least 1) quarters of the minimum RTT, at
// most SRTT, at least reoMin.
func (c *Conn) reoWnd() int64 {
	r := &c.rk
	m := r.minRTT
	if m == 0 {
		m = c.srtt
	}
	return max(min(int64(max(r.reoMult, 1))*m/4, max(c.srtt, m/4)), reoMin)
}

// rackSent is called after output sent: it starts timing a byte for the
// minimum RTT and arms the PTO.
func (c *Conn) rackSent() {
	r := &c.rk
	if c.sndUna == c.sndMax || c.e.o.NoRACK {
		return
	}
	if !r.timing && !c.inRecovery && c.sndNxt == c.sndMax {
		r.timing, r.timeSeq, r.timeAt = true, c.sndMax-1, c.e.now
	}
	c.armPTO()
}

// armPTO schedules the tail loss probe (§7.2) while data is in flight,
// in the open state (not in fast recovery, not after an RTO until what was
// in flight then is acknowledged), with no probe out and no reordering
// timer pending.
func (c *Conn) armPTO() {
	r := &c.rk
	if c.inRecovery || r.tlpOut || c.sndUna == c.sndMax || r.kind == lossReo && r.tLoss != 0 ||
		!c.sackOK || c.tPersist != 0 || c.retries > 0 || c.recoverSet && seqLT(c.sndUna, c.recover) ||
		c.e.o.NoRACK {
		if r.kind == lossTLP {
			r.tLoss = 0
		}
		return
	}
	pto := int64(1e9) // §7.2: no RTT sample yet
	if c.hasRTT {
		pto = 2*c.srtt + ptoExtra
		if c.sndMax-c.sndUna <= uint32(c.smss) {
			pto += wcDelAck
		}
	}
	at := c.e.now + pto
	if c.tRTO != 0 && at > c.tRTO {
		if c.sndMax-c.sndUna > uint32(c.smss) || c.tRTO <= c.e.now {
			// An earlier PTO stands, or the RTO comes first. Moving an
			// armed PTO to the RTO's time at every send (§7.2's restart
			// with its cap) cost 2-3% of the model's 16 BBR connections
			// at 1% loss (BenchmarkLossyWireConns), for no fewer RTOs.
			return
		}
		// A lone segment's PTO (with WCDelAckT) is past an RTO of SRTT
		// plus MinRTO: §7.2 caps it there (TLP_calc_PTO), and the probe
		// goes in the RTO's place (timers runs it first; it re-arms the
		// RTO, §7.3), as Linux's tcp_schedule_loss_probe. Left to the
		// RTO, the loss of a lone segment collapsed cwnd.
		at = c.tRTO
	}
	r.kind, r.tLoss = lossTLP, at
	c.e.arm(c)
}

// rackAck is called after an ACK was taken (ackInput): una is SND.UNA
// before it, dsack whether it carried a D-SACK of ours and d that block.
func (c *Conn) rackAck(s *segment, una uint32) {
	r := &c.rk
	e := c.e
	if e.o.NoRACK {
		return
	}
	if r.inRec && !c.inRecovery {
		c.rackRecovery(false)
	}
	r.inRec = c.inRecovery
	advanced := seqGT(c.sndUna, una)
	d, dsack := dsackOf(s)
	if r.timing && seqGT(c.sndUna, r.timeSeq) {
		r.timing = false
		if rtt := e.now - r.timeAt; rtt > 0 && (r.minRTT == 0 || rtt < r.minRTT) {
			r.minRTT = rtt
		}
	}
	if dsack && c.rtxd.mayHold(d) {
		// §6.2 step 4 (and §3.4): a D-SACK of a retransmission says it
		// was spurious, the reordering window too small; widen it, once
		// a round trip. A D-SACK of data sent once is the network's
		// duplicate (RFC 3708 §2), no sign of reordering: on the lossy
		// wire, which duplicates 1% of segments, such D-SACKs came about
		// every round trip, renewed reo_wnd_persist each time and
		// widened the window 70 to 110 times a 64 MiB echo instead of
		// 20 to 30, to SRTT, which a lost retransmission waits for on top
		// of SRTT (lostrtx.go).
		r.reoSeen = true
		if r.reoMult <= 1 || seqGEQ(c.sndUna, r.dsackRound) {
			r.reoMult = min(max(r.reoMult, 1)+1, 255)
			r.dsackRound = c.sndMax
			e.cnt[cTCPRACKReoWiden]++
		}
		r.reoPersist = 16
	}
	if r.tlpOut {
		c.tlpAck(s, d, dsack)
	}
	if advanced && r.hole && !c.inRecovery {
		// The hole at SND.UNA filled by itself, not retransmitted: the
		// network reordered it (§6.2 step 2).
		if !r.reoSeen {
			r.reoSeen = true
			e.cnt[cTCPRACKReorder]++
		}
		r.hole = false
	}
	if c.inRecovery || c.nsacked == 0 || c.sackedAt1(c.sndUna) {
		r.hole = false
		if r.kind == lossReo {
			r.tLoss = 0
		}
	} else {
		if !r.hole {
			r.hole, r.holeAt = true, e.now
		}
		c.reoCheck()
		if !c.inRecovery && (r.kind != lossReo || r.tLoss == 0) {
			r.kind, r.tLoss = lossReo, max(r.holeAt+c.reoWnd(), e.now+1)
			e.arm(c)
		}
	}
	if c.sndUna == c.sndMax {
		r.tLoss, r.tlpOut = 0, false
	} else if advanced {
		c.armPTO() // §7.2: re-armed on an ACK that moved SND.UNA
	}
	if c.nsacked > 0 && !c.inRecovery && c.sendable() {
		e.markDirty(c) // limited transmit: SACKed bytes left pipe
	}
}

// sackedAt1 reports whether seq is SACKed (the scoreboard has no hole
// there).
func (c *Conn) sackedAt1(seq uint32) bool {
	_, ok := c.sackedAt(seq)
	return ok
}

// reoCheck starts recovery when the hole at SND.UNA has been lost for the
// reordering window (RFC 8985 §6.2 step 5).
func (c *Conn) reoCheck() {
	r := &c.rk
	if c.inRecovery || !r.hole || c.e.now-r.holeAt < c.reoWnd() {
		return
	}
	if c.recoverSet && seqLT(c.sndUna, c.recover) {
		return // still inside the last recovery (RFC 6582 §3.2 step 2)
	}
	r.hole, r.tLoss = false, 0
	c.e.cnt[cTCPRACKRecoveries]++
	c.startRecovery()
	r.inRec = true
}

// onLossTimer runs the loss timer: the reordering timer or the PTO.
func (c *Conn) onLossTimer() {
	r := &c.rk
	r.tLoss = 0
	switch r.kind {
	case lossReo:
		c.reoCheck()
	case lossTLP:
		c.sendProbe()
	case lossRtx:
		c.lostRtxDetect()
	}
}

// sendProbe sends the tail loss probe (§7.3): a new segment if the
// windows of the peer allow one, else the last segment again; then the
// RTO is armed afresh.
func (c *Conn) sendProbe() {
	r := &c.rk
	e := c.e
	if c.inRecovery || r.tlpOut || c.sndUna == c.sndMax || !c.state.synchronized() {
		return
	}
	off := int(c.sndMax - c.sndUna)
	n := min(c.sLen-off, c.segData())
	if room := int(int32(c.sndUna + c.sndWnd - c.sndMax)); n > room || c.finSent {
		n = 0
	}
	r.tlpRtx = false
	if n > 0 && c.sndNxt == c.sndMax {
		flags := uint8(flagACK)
		if n == c.sLen-off {
			flags |= flagPSH
		}
		if !c.sendSeg(c.sndMax, flags, off, n) {
			return
		}
	} else {
		// The last segment again, its FIN with it.
		end := c.sndMax
		flags := uint8(flagACK)
		if c.finSent && !c.finAcked {
			end--
			flags |= flagFIN
		}
		n = min(int(end-c.sndUna), c.segData())
		seq := end - uint32(n)
		if !c.sendSeg(seq, flags, int(seq-c.sndUna), n) {
			return
		}
		r.tlpRtx = true
	}
	r.tlpOut, r.tlpHigh = true, c.sndMax
	if r.kind == lossTLP {
		r.tLoss = 0 // the probe's send armed a PTO (rackSent): one probe at a time
	}
	e.cnt[cTCPTLPProbes]++
	// §7.3: the RTO after the probe, behind the flight. A probe that is
	// the whole flight is answered by the peer's delayed ACK (§7.2 adds
	// WCDelAckT to such a PTO): an RTO of SRTT plus the 25 ms MinRTO
	// fired before a Linux peer's 40 ms one, a second retransmission and
	// a timeout that the ACK then told spurious.
	w := c.queuedRTOWait()
	if c.sndMax-c.sndUna <= uint32(c.smss) {
		w = max(w, min(c.rto+peerDelAck, e.maxRTO))
	}
	c.tRTO = e.now + w
	e.arm(c)
}

// tlpAck takes an ACK while a probe is out (§7.4): a D-SACK of the probe
// says it was not needed; an ACK at or past the probe without one says
// that it repaired a loss, a congestion event whose window reduction
// the probe's retransmission would otherwise have hidden.
func (c *Conn) tlpAck(s *segment, d sackBlock, dsack bool) {
	r := &c.rk
	if dsack && seqLEQ(d.end, r.tlpHigh) && seqGEQ(d.end, r.tlpHigh-uint32(c.segData())-1) {
		r.tlpOut = false
		c.e.cnt[cTCPTLPSpurious]++
		return
	}
	if !seqGEQ(s.ack, r.tlpHigh) {
		return
	}
	r.tlpOut = false
	if !r.tlpRtx {
		return // a new-data probe: the SACKs told of any loss
	}
	if c.inRecovery {
		return
	}
	c.e.cnt[cTCPTLPRecoveries]++
	c.ssthresh = c.lossThreshold()
	c.cwnd = c.ssthresh
}

// rackRTO is called at the RTO: the probe and the timing are over.
func (c *Conn) rackRTO() {
	r := &c.rk
	r.tlpOut, r.timing, r.hole, r.tLoss, r.inRec = false, false, false, 0, false
	c.rtxTableReset()
	if c.bbr != nil {
		c.bbrRTO()
	}
}

// rackRecovery is called when fast recovery starts, and when it ends
// (rackAck finds it over).
func (c *Conn) rackRecovery(start bool) {
	r := &c.rk
	r.timing, r.hole, r.tlpOut = false, false, false
	if r.kind == lossReo || start {
		r.tLoss = 0
	}
	if !start && r.reoPersist > 0 {
		if r.reoPersist--; r.reoPersist == 0 {
			r.reoMult = 1
		}
	}
}

// dsackOf returns the D-SACK block of s (RFC 2883 §4: the first block,
// below the cumulative ACK or inside the second block).
func dsackOf(s *segment) (sackBlock, bool) {
	if s.nsack == 0 {
		return sackBlock{}, false
	}
	b := s.sacks[0]
	if !seqLT(b.start, b.end) {
		return b, false
	}
	ok := seqLEQ(b.end, s.ack) || s.nsack > 1 && seqGEQ(b.start, s.sacks[1].start) && seqLEQ(b.end, s.sacks[1].end)
	return b, ok
}
