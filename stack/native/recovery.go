package native

// Congestion control and loss recovery: RFC 5681 slow start and
// congestion avoidance, RFC 6582 NewReno fast recovery, and with SACK the
// scoreboard and pipe of RFC 6675.

// ccAck grows cwnd for acked new bytes, or takes a partial ACK in
// recovery (recoveryAck, apart so that the common path is short). cwnd
// grows only while it is used (RFC 7661 §4.1, RFC 5681 §3.1's "(when)
// cwnd is fully utilized", Linux's tcp_is_cwnd_limited): in congestion
// avoidance when sending stopped at cwnd in the last window, in slow
// start also while the flight reached half of it. A sender limited by
// the application (requests and answers of a few segments) keeps the
// window it uses instead of growing one it never tried.
func (c *Conn) ccAck(acked uint32) {
	if c.inRecovery {
		c.recoveryAck(acked)
		return
	}
	if c.bbr != nil {
		return // bbrAck sets cwnd
	}
	mss := uint32(c.smss)
	if !c.cwndLimited && (c.cwnd >= c.ssthresh || c.cwnd >= 2*c.flightMax) {
		return
	}
	if c.cwnd < c.ssthresh {
		c.cwnd += c.hystartGrowth(min(acked, 2*mss)) // RFC 3465 with L = 2; RFC 9406's CSS a quarter
	} else if c.e.cubic {
		c.cubicAck(acked)
	} else {
		c.caAcc += acked
		if c.caAcc >= c.cwnd {
			c.caAcc -= c.cwnd
			c.cwnd += mss
		}
	}
	c.cwnd = min(c.cwnd, 1<<30)
}

// recoveryAck takes an ACK of new data during fast recovery: a full ACK
// ends it, a partial one moves the retransmissions on.
func (c *Conn) recoveryAck(acked uint32) {
	mss := uint32(c.smss)
	if seqGEQ(c.sndUna, c.recover) { // full ACK: RFC 6582 §3.2 step 3
		c.inRecovery, c.prr.on = false, false
		if c.bbr == nil { // BBR's cwnd grew in recovery and stays (bbrSetCwnd)
			c.cwnd = c.ssthresh
		}
		return
	}
	if c.sackOK {
		// RFC 6675 §5: cwnd stays at ssthresh and pipe, which the
		// ACK lowered, decides what leaves; the hole now at SND.UNA
		// goes again only if it was not retransmitted yet. Deflating
		// cwnd by the bytes acked (RFC 6582's rule, for ACKs that
		// cover one segment) brought it to one segment whenever a
		// retransmission filled a hole below SACKed data. The segment
		// at SND.UNA is a hole only with SACKed data above it (RFC 6675
		// §5 NextSeg: lost, not merely unacknowledged): a queue that
		// drains after a repaired loss acknowledges the flight a
		// segment at a time, and retransmitting at each of those
		// partial ACKs sent the whole queue twice.
		c.rtxOne = seqLEQ(c.rtxNext, c.sndUna) && c.nsacked > 0
		c.rtxNext = seqMax(c.rtxNext, c.sndUna)
		// Retransmitted at some time before now, it is dated now, so
		// that lostRetransmit waits a round trip more, never less.
		c.markUnaRtx(!c.rtxOne)
		return
	}
	// Partial ACK: the next hole is lost too (RFC 6582 §3.2 step 3).
	if acked >= c.cwnd {
		c.cwnd = mss
	} else {
		c.cwnd = c.cwnd - acked + mss
	}
	c.cwnd = max(c.cwnd, c.ssthresh)
	c.rtxOne = true
	c.rtxNext = seqMax(c.rtxNext, c.sndUna)
}

// dupThresh is RFC 5681's and RFC 6675's DupThresh.
const dupThresh = 3

// dupAck counts a duplicate ACK (RFC 5681 §2) and enters fast recovery on
// the third, or as soon as SACK shows SND.UNA lost (RFC 6675 §5 step 3,
// IsLost: a receiver that sends fewer ACKs than segments, such as
// Linux compressing its SACKs, may tell of three segments above a hole in
// one or two ACKs). Once reordering was seen (RACK.reordering_seen) a
// SACK connection leaves the start of recovery to RACK's reordering
// timer.
func (c *Conn) dupAck() {
	e := c.e
	mss := uint32(c.smss)
	c.dupacks++
	if c.inRecovery {
		if !c.sackOK || c.nsacked == 0 {
			c.cwnd += mss // RFC 6582 §3.2 step 4
		}
		e.markDirty(c)
		return
	}
	if c.sackOK && c.rk.reoSeen && !c.e.o.NoRACK {
		// RFC 8985 §6.2 (RACK.reo_wnd is 0 at DupThresh only while
		// RACK.reordering_seen is false), as Linux's tcp_rack_reo_wnd:
		// once the connection saw reordering, three segments SACKed
		// above the hole are no proof of its loss; RACK's reordering
		// timer (rack.go) calls it lost when the window has passed.
		// On the lossy wire (5% reordering) DupThresh made 40 to 120
		// spurious retransmissions an echo.
		return
	}
	if c.dupacks < dupThresh && !(c.sackOK && c.isLost(c.sndUna)) {
		return
	}
	if c.recoverSet && seqLT(c.sndUna, c.recover) {
		return // RFC 6582 §3.2 step 2: still inside the last recovery
	}
	c.startRecovery()
}

// startRecovery enters fast recovery: the third duplicate ACK or IsLost
// (dupAck), or RACK's reordering window passed (rack.go).
func (c *Conn) startRecovery() {
	e := c.e
	mss := uint32(c.smss)
	c.rackRecovery(true)
	c.inRecovery = true
	c.rtxBegin()
	c.recover, c.recoverSet = c.sndMax, true
	c.ssthresh = c.lossThreshold()
	if c.sackOK && c.nsacked > 0 {
		c.cwnd = c.ssthresh
		if c.bbr == nil { // BBR sets cwnd itself, as Linux skips PRR for it
			c.prrStart()
		}
	} else {
		c.cwnd = c.ssthresh + 3*mss
	}
	c.rtxOne = true
	c.rtxNext = c.sndUna
	e.cnt[cTCPFastRetransmits]++
	e.markDirty(c)
}

// cwndUse records, after a Flush sent what it could, how much of cwnd
// the connection used: the largest flight of the current window and
// whether cwnd held data back (limited). A window ends when SND.UNA passes
// the SND.NXT of its start; as Linux's tcp_cwnd_validate, a window that
// was cwnd-limited stays so until it ends.
func (c *Conn) cwndUse(limited bool) {
	flight := c.sndNxt - c.sndUna
	if seqGEQ(c.sndUna, c.cwndMark) || limited || !c.cwndLimited && flight > c.flightMax {
		c.cwndLimited, c.flightMax, c.cwndMark = limited, flight, c.sndNxt
	}
}

// cwndAfterIdle is RFC 5681 §4.1's restart after idle, as Linux's
// tcp_cwnd_restart does it (RFC 2861): a connection that sent nothing for
// more than an RTO has lost its measure of the path, so before it sends
// again cwnd is halved for each RTO of silence, down to the initial
// window, and ssthresh keeps three quarters of the old cwnd so that slow
// start climbs back fast. Without it an hour idle and then a large
// write left in one burst of the old cwnd.
func (c *Conn) cwndAfterIdle() {
	iw := initialWindow(c.smss)
	if c.cwnd <= iw {
		return // nothing to restart (the first data, or a window still small)
	}
	c.ssthresh = max(c.ssthresh, c.cwnd/4*3)
	idle := c.e.now - c.lastSend
	for idle -= c.rto; idle > 0 && c.cwnd > iw; idle -= c.rto {
		c.cwnd /= 2
	}
	c.cwnd = max(c.cwnd, iw)
	c.caAcc = 0
	c.cubic.epoch = 0
	c.e.cnt[cTCPCwndRestarts]++
}

// rtoThreshold is ssthresh at a retransmission timeout (onRTO counted it
// in retries first): the first one of an episode is a congestion event
// (lossThreshold); a repeated one, the same segment having gone by the
// timer already, holds ssthresh (RFC 5681 §3.1 after eq. 4; Linux's
// tcp_enter_loss): cwnd is one segment then, and CUBIC's 0.7 of it
// collapsed ssthresh to two segments, along with its W_max.
func (c *Conn) rtoThreshold() uint32 {
	if c.retries > 1 {
		return c.ssthresh
	}
	return c.lossThreshold()
}

// lossThreshold is the ssthresh after a congestion event: half the
// flight (RFC 5681 eq. 4), or CUBIC's 0.7 of cwnd (RFC 9438 §4.6).
func (c *Conn) lossThreshold() uint32 {
	c.hs.phase = hsOff // RFC 9406 §4.2: a loss ends slow start and CSS alike
	if c.bbr != nil {
		return c.bbrLoss()
	}
	if c.e.cubic {
		return c.cubicLoss()
	}
	return max((c.sndMax-c.sndUna)/2, 2*uint32(c.smss))
}

// maxBlocks bounds the SACK scoreboard and the blocks of out-of-order
// data a connection holds. Both start empty and grow (8, 16, ... 256) as
// a window with many holes needs them: a receiver that held only 8
// dropped the data beyond an eighth hole, and a sender that knew only 8
// blocks retransmitted SACKed data, on a long path with a few percent
// loss (hundreds of segments in flight, a hole every 30 or so). At 64,
// a window of 16 MiB at 3% loss (thousands of segments in flight under
// BBR) still had a hundred holes and more: the receiver dropped the data
// beyond the 64th (tcp_out_of_order_full), each drop one loss more, and
// the transfer collapsed (TestWideWindowHoldsEveryHoleRFC9293Sec3_10_7_4).
// A connection pays for the blocks it uses: 8 bytes each, walked in
// order by an ACK.
const maxBlocks = 256

// addBlock is insertBlock into *bs, which it grows up to maxBlocks.
func addBlock(bs *[]sackBlock, n int, b sackBlock) (int, bool) {
	if m, ok := insertBlock(*bs, n, b); ok || len(*bs) >= maxBlocks {
		return m, ok
	}
	nb := make([]sackBlock, min(max(2*len(*bs), 8), maxBlocks))
	copy(nb, (*bs)[:n])
	*bs = nb
	return insertBlock(nb, n, b)
}

// isLost is RFC 6675 §4's IsLost(seq): DupThresh discontiguous SACKed
// blocks above seq, or more than (DupThresh-1)*SMSS bytes SACKed above it.
func (c *Conn) isLost(seq uint32) bool {
	var n uint32
	blocks := 0
	for i := 0; i < c.nsacked; i++ {
		b := c.sacked[i]
		if seqLEQ(b.end, seq) {
			continue
		}
		blocks++
		n += b.end - seqMax(b.start, seq)
	}
	return blocks >= dupThresh || n > (dupThresh-1)*uint32(c.smss)
}

// sackedBytes is the sum of the scoreboard.
func (c *Conn) sackedBytes() uint32 {
	var n uint32
	for i := 0; i < c.nsacked; i++ {
		n += c.sacked[i].end - c.sacked[i].start
	}
	return n
}

// takeSACK merges the valid SACK blocks of s into the scoreboard (RFC
// 2018 §3; blocks outside SND.UNA..SND.MAX are ignored) and reports
// whether it learnt something.
func (c *Conn) takeSACK(s *segment) bool {
	before := c.sackedBytes()
	for i := 0; i < s.nsack; i++ {
		b := s.sacks[i]
		if !seqLT(b.start, b.end) || seqLEQ(b.end, c.sndUna) || seqGT(b.end, c.sndMax) {
			continue
		}
		b.start = seqMax(b.start, c.sndUna)
		n, ok := addBlock(&c.sacked, c.nsacked, b)
		if !ok {
			c.e.cnt[cTCPSACKFull]++ // the block is not recorded: its data counts as in flight
		}
		c.nsacked = n
	}
	return c.sackedBytes() != before
}

// dropSACKBelow removes what the cumulative ACK covers.
func (c *Conn) dropSACKBelow(una uint32) {
	k := 0
	for i := 0; i < c.nsacked; i++ {
		b := c.sacked[i]
		if seqLEQ(b.end, una) {
			continue
		}
		b.start = seqMax(b.start, una)
		c.sacked[k] = b
		k++
	}
	c.nsacked = k
}

// sackedAt returns the SACKed block holding seq.
func (c *Conn) sackedAt(seq uint32) (sackBlock, bool) {
	for i := 0; i < c.nsacked; i++ {
		if b := c.sacked[i]; seqLEQ(b.start, seq) && seqLT(seq, b.end) {
			return b, true
		}
	}
	return sackBlock{}, false
}

// nextSACKed returns the start of the first SACKed block above seq.
func (c *Conn) nextSACKed(seq uint32) (uint32, bool) {
	for i := 0; i < c.nsacked; i++ {
		if seqGT(c.sacked[i].start, seq) {
			return c.sacked[i].start, true
		}
	}
	return 0, false
}

// skipSACKed moves SND.NXT past a SACKed block when retransmitting.
func (c *Conn) skipSACKed() {
	for seqLT(c.sndNxt, c.sndMax) {
		b, ok := c.sackedAt(c.sndNxt)
		if !ok {
			return
		}
		c.sndNxt = b.end
	}
}

// sendHoles retransmits in fast recovery: the first unacknowledged
// segment at once (RFC 6675 §5 step 4.3, RFC 6582 §3.2), then, with SACK,
// the holes below the highest SACKed byte that IsLost calls lost while
// pipe is below cwnd (RFC 6675 §5 step 4.2 rule 1).
func (c *Conn) sendHoles() bool {
	if c.rtxOne {
		n := c.segData()
		if b, ok := c.nextSACKed(c.sndUna); ok {
			n = min(n, int(b-c.sndUna))
		}
		n = min(n, c.sLen)
		if n > 0 {
			if !c.sendSeg(c.sndUna, flagACK, 0, n) {
				return false
			}
			c.rtxNext = seqMax(c.rtxNext, c.sndUna+uint32(n))
			c.markUnaRtx(true)
			// The RTO runs from the retransmission of SND.UNA, as
			// Linux re-arms it for the head: one that RACK found lost
			// again (lostRetransmit) gets a round trip to be answered,
			// not what was left of a timer armed before.
			c.tRTO = c.e.now + c.queuedRTOWait()
		}
		c.rtxOne = false
	}
	// Retransmissions found lost again (lostrtx.go), below rtxNext.
	if !c.sendLostRtx() {
		return false
	}
	if !c.sackOK || c.nsacked == 0 {
		return true
	}
	high := c.sacked[c.nsacked-1].end
	at := seqMax(c.rtxNext, c.sndUna)
	for seqLT(at, high) && c.pipe() < c.cwnd && (c.bbr == nil || c.paceOK()) {
		if b, ok := c.sackedAt(at); ok {
			at = b.end
			continue
		}
		if !c.isLost(at) {
			// RFC 6675 §5 rule 1 (1.c): a hole that too little is SACKed
			// above is still on its way (reordered, or behind an ACK
			// that reported a later block first); the holes above it
			// have less above them.
			break
		}
		end, _ := c.nextSACKed(at)
		n := min(int(end-at), c.segData())
		if !c.sendSeg(at, flagACK, int(at-c.sndUna), n) {
			return false
		}
		if at == c.sndUna {
			c.markUnaRtx(true)
		}
		at += uint32(n)
		c.rtxNext = at
	}
	return true
}

// lostRetransmit finds a lost retransmission of the segment at SND.UNA in
// SACK recovery, as RACK does (RFC 8985 §6.2: a segment is lost when one
// sent after it was delivered and a round trip and a reordering window,
// a quarter of it, passed since it left): data sent after the
// retransmission is SACKed and SRTT*5/4 went by. RFC 6675 alone never
// sends a hole a second time, and the RTO was the only way out. The
// segment goes again at the next Flush.
//
// Under BBR the delivery-rate records date each transmission: the
// retransmission at SND.UNA is also lost when a segment sent after it
// was delivered, whatever its sequence number (rtxLostAt), and SRTT*5/4
// went by since it left. The recorded retransmissions (lostrtx.go) are
// found lost by RACK's rule wherever they lie; this rule is what is left
// for one the record could not hold.
func (c *Conn) lostRetransmit() {
	if !c.inRecovery || !c.sackOK || c.nsacked == 0 || !c.unaRtx || c.rtxOne {
		return
	}
	wait := c.srtt + c.srtt/4
	if !seqGT(c.sacked[c.nsacked-1].end, c.unaRtxMark) || c.e.now-c.unaRtxAt < wait {
		if c.bbr == nil || !c.bbr.rate.rtxLostAt(c.sndUna, c.e.now, wait) {
			return
		}
	}
	c.rtxOne, c.unaRtx = true, false
	c.e.cnt[cTCPLostRetransmits]++
	c.e.markDirty(c)
}

// markUnaRtx records whether, and that now, the segment at SND.UNA was
// retransmitted.
func (c *Conn) markUnaRtx(sent bool) {
	c.unaRtx, c.unaRtxAt, c.unaRtxMark = sent, c.e.now, c.sndMax
}

// rtxRanges is the data retransmitted since the last fast recovery
// began, kept so that a D-SACK of it can be told from one of the wire's
// duplicates: a D-SACK inside it is a spurious retransmission (RFC 3708
// §2, counted in tcp_spurious_retransmits), one of data sent once is the
// network's duplicate, which neither widens RACK's reordering window
// (rack.go) nor counts as spurious. It is a measurement: the io.Copy echo
// on the lossy wire finds 24 to 57 a run of 600 to 700 retransmissions,
// and undoing the cwnd reduction of an episode all of whose
// retransmissions were spurious (RFC 4015, 5 to 9 episodes a run of 430
// to 490) did not change the time, so the engine does not undo.
type rtxRanges struct {
	b [8]sackBlock // sorted, disjoint
	n int
	// unknown: a retransmission may be missing from b (a timeout's
	// go-back-N, or more ranges than b holds). The zero value, a
	// connection that has retransmitted nothing, knows every D-SACK for
	// the network's.
	unknown bool
}

// holds reports whether [d.start, d.end) was retransmitted as far as the
// record knows: in a range of it, or possibly when it is unknown.
func (r *rtxRanges) holds(d sackBlock) (in, known bool) {
	if r.unknown {
		return false, false
	}
	for i := 0; i < r.n; i++ {
		if seqLEQ(r.b[i].start, d.start) && seqLEQ(d.end, r.b[i].end) {
			return true, true
		}
	}
	return false, true
}

// mayHold reports whether [d.start, d.end) may have been retransmitted:
// it was, or the record cannot tell.
func (r *rtxRanges) mayHold(d sackBlock) bool {
	in, known := r.holds(d)
	return in || !known
}

// rtxBegin starts the record of a recovery episode.
func (c *Conn) rtxBegin() {
	c.rtxd = rtxRanges{}
	c.rtxTableReset() // lostrtx.go
}

// rtxTrack records the retransmission of [seq, end).
func (c *Conn) rtxTrack(seq, end uint32) {
	c.rtxRecord(seq, end) // lostrtx.go: when it left, for RACK
	r := &c.rtxd
	if r.unknown || !seqLT(seq, end) {
		return
	}
	var ok bool
	if r.n, ok = insertBlock(r.b[:], r.n, sackBlock{seq, end}); !ok {
		r.n, r.unknown = 0, true
	}
}

// takeDSACK counts a D-SACK block (RFC 2883 §4: the first block, when it
// lies below the cumulative ACK or inside the second block): data of ours
// that arrived twice, and of it, a spurious retransmission when it lies
// in what was retransmitted since the last recovery began.
func (c *Conn) takeDSACK(s *segment) {
	b, ok := dsackOf(s) // rack.go
	if !ok {
		return
	}
	e := c.e
	e.cnt[cTCPDSACKsIn]++
	if in, _ := c.rtxd.holds(b); in {
		e.cnt[cTCPSpuriousRtx]++
	}
}

// prrState is Proportional Rate Reduction's (RFC 6937) account of a SACK
// recovery: what the peer received since it began, what left since, and
// the flight when it began.
type prrState struct {
	on        bool // this recovery is PRR's (SACK, entered by startRecovery)
	delivered uint32
	out       uint32
	fs        uint32 // RecoverFS
}

// prrStart begins PRR at the start of a SACK recovery (RFC 6937 §3's
// initialization): RecoverFS is the flight.
func (c *Conn) prrStart() {
	c.prr = prrState{on: true, fs: max(c.sndMax-c.sndUna, 1)}
	c.e.cnt[cTCPPRRRecoveries]++
}

// prrAck sets cwnd for an ACK during a SACK recovery from the bytes it
// delivered (acknowledged or newly SACKed): RFC 6937 §3. While pipe is
// above ssthresh, what leaves is ssthresh/RecoverFS of what was
// delivered since recovery began (the reduction spread over the round
// trip, where RFC 6675 alone sent nothing for half of it and then a
// burst); below it, slow start up to ssthresh, at most one segment more
// than was delivered (PRR-SSRB), so that a recovery that lost much
// comes back to ssthresh without a burst. cwnd is pipe + sndcnt:
// sendHoles and sendData send while pipe is below it.
func (c *Conn) prrAck(delivered uint32) {
	p := &c.prr
	p.delivered += delivered
	pipe := c.pipe()
	var sndcnt uint32
	if pipe > c.ssthresh {
		want := uint32((uint64(p.delivered)*uint64(c.ssthresh) + uint64(p.fs) - 1) / uint64(p.fs))
		if want > p.out {
			sndcnt = want - p.out
		}
	} else {
		limit := delivered
		if p.delivered > p.out {
			limit = max(limit, p.delivered-p.out)
		}
		sndcnt = min(c.ssthresh-pipe, limit+uint32(c.smss))
	}
	c.cwnd = pipe + sndcnt
}

// peerDelAck is how long a Linux receiver holds the ACK of a lone
// segment (TCP_DELACK_MIN, 40 ms: its delayed-ACK timer on a path whose
// RTT is below that; RFC 5681 §4.2 lets a receiver delay the ACK of
// fewer than two full-sized segments, RFC 1122 §4.2.3.2 up to 0.5 s).
const peerDelAck = int64(40e6)

// rtoWait is how long the retransmission timer waits from now (RFC 6298
// §5.1, §5.3): the RTO; without timestamps, with at most one segment in
// flight, sent once, the RTO plus a peer's delayed ACK. The RTO's floor
// (MinRTO, 25 ms) is below a Linux peer's delayed-ACK timer, and the ACK
// of a lone segment (a request, the tail of a write) came after the RTO
// had sent it again, collapsed cwnd and gone back N. With timestamps
// such a timeout is told spurious at the ACK and undone (eifelCheck:
// one segment sent twice, nothing else lost), and waiting longer would
// only delay the repair of a lone segment really lost: on the model of
// the lossy wire at 3% loss (BenchmarkLossyWire) waiting cost 6%.
// Linux's own sender waits at least 200 ms (its RTO floor is in RTTVAR).
func (c *Conn) rtoWait() int64 {
	if c.tsOK || c.sndMax-c.sndUna > uint32(c.smss) || c.retries > 0 {
		return c.rto
	}
	return min(c.rto+peerDelAck, c.e.maxRTO)
}

// queuedRTOWait is rtoWait for a segment sent now behind what is in
// flight (a retransmission of SND.UNA, a tail loss probe). Its round trip
// is at least the time the flight ahead of it takes to drain at the
// bottleneck's rate, which SRTT, measured on segments sent when the
// queue was shorter, lags behind while BBR's Startup or ProbeBW's 5/4
// phase builds a queue: a timer of SRTT plus the variance term then
// fires before the retransmission can be answered (a spurious timeout,
// RFC 4015 §1), collapsing cwnd and resending the flight. Under BBR the
// wait is at least pipe over the bandwidth estimate (draft-cardwell-
// iccrg-bbr-congestion-control-00 §4.1.1: BtlBw, the rate the queue
// drains at) plus the variance term; other congestion controls have no
// rate estimate and keep rtoWait.
func (c *Conn) queuedRTOWait() int64 {
	w := c.rtoWait()
	b := c.bbr
	if b == nil || b.bw <= 0 {
		return w
	}
	drain := int64(min(float64(c.pipe())*1e9/b.bw, float64(c.e.maxRTO)))
	return min(max(w, drain+max(c.e.minRTO, 4*c.rttvar)), max(w, c.e.maxRTO))
}

// eifelState is what a retransmission timeout changed, kept until the
// first ACK after it tells whether it was spurious (RFC 3522, RFC 4015).
type eifelState struct {
	on       bool
	ts       uint32 // our timestamp clock at the timeout: the retransmission's TSval is no older
	cwnd     uint32 // before the timeout
	ssthresh uint32
}

// eifelArm is called at the first timeout of an episode (onRTO, before
// it collapses cwnd): with timestamps, the first ACK after it can tell
// the timeout spurious.
func (c *Conn) eifelArm() {
	if c.retries > 0 || !c.tsOK {
		return
	}
	c.eifel = eifelState{on: true, ts: c.tsNow(), cwnd: c.cwnd, ssthresh: max(c.ssthresh, c.cwnd/4*3)}
}

// eifelSACK takes a duplicate ACK with new SACK information after a
// timeout: one that echoes a timestamp older than the retransmission's
// was sent for an original segment that arrived after the timer fired,
// so the flight was alive and the timeout spurious (RFC 3522's
// detection, on the SACK of the ACK rather than its cumulative part, as
// RFC 5682's SACK-enhanced F-RTO tells a spurious timeout by SACKs of
// data that was not retransmitted). The response is eifelCheck's; the
// segment at SND.UNA, if lost, is repaired by SACK recovery. Without it,
// a pause of the path longer than the RTO (a loaded machine) came back
// as a burst of SACKs that grew cwnd while go-back-N resent the whole
// flight, which was on its way.
func (c *Conn) eifelSACK(s *segment) {
	if s.hasTS && s.tsEcr != 0 && seqLT(s.tsEcr, c.eifel.ts) {
		c.eifelCheck(s)
	}
}

// eifelCheck takes the first ACK of new data after a timeout. RFC 3522's
// detection: it echoes a timestamp older than the retransmission's, so
// the original segment arrived and the timeout was spurious (a peer's
// late ACK, a pause of the path, a queue). RFC 4015's response, as
// Linux's tcp_try_undo_loss: cwnd and ssthresh come back to what they
// were (ssthresh at least three quarters of cwnd, Linux's prior_ssthresh)
// and sending goes on after SND.MAX instead of going back N over data
// the peer holds.
func (c *Conn) eifelCheck(s *segment) {
	c.eifel.on = false
	if !s.hasTS || s.tsEcr == 0 || !seqLT(s.tsEcr, c.eifel.ts) {
		return
	}
	c.e.cnt[cTCPSpuriousRTOs]++
	c.cwnd = max(c.cwnd, c.eifel.cwnd)
	c.ssthresh = max(c.ssthresh, c.eifel.ssthresh)
	c.caAcc = 0
	c.sndNxt = c.sndMax
	c.recoverSet = false
}
