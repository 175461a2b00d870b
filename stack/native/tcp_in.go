package native

import "time"

// input runs segment s on the connection (RFC 9293 §3.10.7.3 for
// SYN-SENT, §3.10.7.4 for the other states), with RFC 5961's checks and
// RFC 7323's PAWS. The segment a busy established connection expects
// next (predicted) takes fastInput, which does what these steps do for
// it and skips the tests it is known to pass.
func (c *Conn) input(s *segment) {
	e := c.e
	if c.predicted(s) && !noFastPath {
		e.cnt[cTCPPredicted]++
		c.lastRx = e.now
		c.keepProbes = 0
		c.fastInput(s)
		return
	}
	if c.state == SynSent {
		c.synSentInput(s)
		return
	}
	if c.state == SynReceived && s.flags&(flagSYN|flagACK|flagRST) == flagSYN && s.seq == c.irs {
		c.needSyn = true // the peer's SYN again: our SYN-ACK was lost
		e.markDirty(c)
		return
	}
	if c.state == SynReceived && c.l == nil && s.flags&(flagSYN|flagACK|flagRST) == flagSYN|flagACK &&
		s.seq+1 == c.rcvNxt && seqLT(c.sndUna, s.ack) && seqLEQ(s.ack, c.sndNxt) {
		// Simultaneous open (RFC 9293 §3.5 figure 8, line 6): the
		// peer's SYN-ACK, its SYN again with the ACK of ours, completes
		// the handshake. Its SYN lies left of RCV.NXT, so the
		// acceptability test and §3.10.7.4's SYN check (a challenge
		// ACK for an actively opened SYN-RECEIVED) would drop it and
		// leave the connection waiting for the SYN-ACK's
		// retransmission; taken from its next number, as Linux takes it
		// (tcp_validate_incoming), it is the ACK that ends SYN-RECEIVED.
		s.flags &^= flagSYN
		s.seq++
	}
	// RFC 7323 §5.3: PAWS, unless the connection was idle so long that
	// TS.Recent is no longer valid (§5.5: 24 days).
	if c.tsOK && s.hasTS && s.flags&flagRST == 0 && seqLT(s.tsVal, c.tsRecent-pawsSlack) {
		if e.now-c.lastRx <= pawsIdle {
			e.cnt[cTCPPAWS]++
			c.rejectAck(s)
			return
		}
		e.cnt[cTCPPAWSIdle]++
		c.tsRecent = s.tsVal
	}
	if !c.acceptable(s) {
		if s.flags&flagRST == 0 {
			e.cnt[cTCPOutOfWindow]++
			if s.flags&flagSYN != 0 && c.state.synchronized() {
				// RFC 5961 §4.2: a SYN out of the window gets the
				// same rate-limited challenge ACK as one in it.
				c.challengeACK()
				return
			}
			if c.zeroWindowACK(s) && c.state == Closed {
				return
			}
			if c.state == TimeWait && s.flags&flagFIN != 0 {
				c.tWait = e.now + int64(e.o.TimeWait) // §3.10.7.4: restart the 2 MSL timeout
				e.arm(c)
			}
			c.rejectAck(s)
		} else {
			e.cnt[cTCPOutOfWindow]++
		}
		return
	}
	// Only a segment that passed PAWS and the acceptability test shows
	// the peer alive: keepalive is not fed by what anyone can inject
	// out of the window.
	c.lastRx = e.now
	c.keepProbes = 0
	if s.flags&flagRST != 0 {
		c.rstInput(s)
		return
	}
	if s.flags&flagSYN != 0 {
		if c.state == SynReceived && c.l != nil {
			// RFC 9293 §3.10.7.4 fourth: a SYN in the window of a
			// passively opened SYN-RECEIVED (not the peer's SYN again,
			// taken above) returns the connection to LISTEN. The peer
			// started over with another ISN; the half-open connection
			// is dropped and the SYN answered with a RST, as Linux
			// (tcp_check_req) and netstack do, so that the ACK of our
			// SYN-ACK opens nothing and the peer's next SYN starts clean.
			e.cnt[cTCPSynRcvdNewSyn]++
			e.resetFor(s)
			c.toClosed(ErrRefused)
			return
		}
		// RFC 5961 §4.2 (RFC 9293 §3.10.7.4): a SYN in a synchronized
		// state gets a challenge ACK, whatever its sequence number.
		c.challengeACK()
		return
	}
	if s.flags&flagACK == 0 {
		e.cnt[cTCPNoACK]++
		return
	}
	if c.state == SynReceived && !c.synRcvdAck(s) {
		return
	}
	if !c.ackInput(s) {
		return
	}
	if c.state == Closed {
		return
	}
	// RFC 7323 §4.3: TS.Recent from a segment that covers the last ACK
	// sent and is not older than TS.Recent (pawsSlack lets older ones in).
	if c.tsOK && s.hasTS && seqLEQ(s.seq, c.lastAckSent) && !seqLT(s.tsVal, c.tsRecent) {
		c.tsRecent = s.tsVal
	}
	switch c.state {
	case Established, FinWait1, FinWait2:
		if !c.user && !c.queued && len(s.payload) > 0 && seqGT(s.seq+uint32(len(s.payload)), c.rcvNxt) {
			// RFC 1122 §4.2.2.13, RFC 9293 §3.10.7.4: new data for a
			// connection the application closed cannot be delivered.
			c.sendRST(c.ackSeq())
			c.toClosed(ErrAborted)
			return
		}
		if len(s.payload) > 0 || s.flags&flagFIN != 0 {
			c.dataInput(s)
		}
	}
}

// noFastPath turns fastInput off, for the tests that compare the two
// paths frame by frame.
var noFastPath = false

// predicted reports whether s is the segment an established connection
// expects next, as BSD's and Linux's header prediction have it: an ACK
// without SYN, FIN, RST or URG, at RCV.NXT (acceptable, RFC 9293
// §3.10.7.4), passing PAWS (RFC 7323 §5.3), without SACK blocks,
// acknowledging nothing beyond SND.MAX and nothing below SND.UNA, either
// moving SND.UNA or carrying data (so not a duplicate ACK, RFC 5681 §2),
// with data that fits the receive buffer; and the connection has no
// data held out of order, no loss recovery, no persist timer and an
// owner (an application, or a listener's queue).
func (c *Conn) predicted(s *segment) bool {
	return c.state == Established && s.flags&^flagPSH == flagACK && s.seq == c.rcvNxt &&
		s.nsack == 0 && c.nooo == 0 && !c.oooFin && !c.inRecovery && c.tPersist == 0 &&
		(c.user || c.queued) && seqGEQ(s.ack, c.sndUna) && seqLEQ(s.ack, c.sndMax) &&
		(len(s.payload) > 0 || s.ack != c.sndUna) && len(s.payload) <= c.rcvCap-c.rLen &&
		(!c.tsOK || !s.hasTS || !seqLT(s.tsVal, c.tsRecent-pawsSlack))
}

// fastInput runs a predicted segment: the steps of input, ackInput and
// dataInput that such a segment takes, in their order.
func (c *Conn) fastInput(s *segment) {
	c.takeWindow(s)
	if s.ack != c.sndUna {
		una := c.sndUna
		c.newAck(s)
		c.rackAck(s, una) // rack.go
		if c.bbr != nil {
			c.bbrAck(s, una) // bbr.go
		}
	}
	if c.tsOK && s.hasTS && seqLEQ(s.seq, c.lastAckSent) && !seqLT(s.tsVal, c.tsRecent) {
		c.tsRecent = s.tsVal
	}
	if n := len(s.payload); n > 0 {
		c.writeRing(0, s.payload)
		c.rLen += n
		c.rcvNxt += uint32(n)
		c.e.markReadable(c)
		c.rcvRTTFromTS(s) // bufpool.go
		c.dataAcked(n, false)
	}
}

// oowAckInterval is the least time between two ACKs a connection sends
// in answer to segments without data that it rejects (out of the window,
// or by PAWS).
const oowAckInterval = int64(500 * time.Millisecond)

// rejectAck answers a segment that failed PAWS or the acceptability test
// with an ACK (RFC 7323 §5.3 R1, RFC 9293 §3.10.7.4), at most one per
// oowAckInterval when the segment carries no data, SYN or FIN, as Linux
// limits them (tcp_invalid_ratelimit) and in the spirit of RFC 5961 §7:
// two ends whose sequence or timestamp state went apart (a segment
// injected in the peer's name, a bogus timestamp taken into TS.Recent)
// each reject the other's ACKs, and answering every one of them bounced
// two ACKs between them for ever. A segment with data is always answered.
func (c *Conn) rejectAck(s *segment) {
	e := c.e
	if end := s.seq + uint32(len(s.payload)); len(s.payload) > 0 && seqLEQ(end, c.rcvNxt) {
		c.dupData(s.seq, end) // the peer's data again: D-SACK it (RFC 2883 §4)
	}
	if s.seqLen() == 0 {
		if c.oowAcked && e.now-c.oowAckAt < oowAckInterval {
			e.cnt[cTCPRejectAcksLimited]++
			return
		}
		c.oowAcked, c.oowAckAt = true, e.now
	}
	c.sendAckNow()
}

// pawsIdle is how long a connection may go without an acceptable
// segment before TS.Recent is taken as invalid and PAWS lets the next
// segment in (RFC 7323 §5.5: 24 days, at a timestamp clock of 1 ms a
// tick well below the 2^31 ticks that turn a newer timestamp into an
// older one).
const pawsIdle = int64(24 * 24 * time.Hour)

// pawsSlack is how many ticks of the peer's timestamp clock a segment
// may lag TS.Recent and still pass PAWS (RFC 7323 §5.3 R1 rejects any
// SEG.TSval < TS.Recent). A retransmission that fills the hole at RCV.NXT
// sets TS.Recent to its new timestamp (§4.3); the segments the peer sent
// just before it, still on the wire behind it (reordered) or its ACKs,
// carry the previous tick, and rejecting them dropped new in-window data
// and SACK information that the peer then had to send again (about 100 a
// run of the io.Copy echo against Linux on the lossy wire: most of them
// ACKs one tick old, the rest data). PAWS guards against segments from
// 2^31 bytes of sequence space ago; with a clock of at least one tick per
// millisecond, as RFC 7323 §5.4 recommends and Linux and this engine use,
// one tick is far below that (Linux allows the same tick, TCP_PAWS_WINDOW).
const pawsSlack = 1

// zeroWindowACK is the allowance RFC 9293 §3.10.7.4 makes for valid
// ACKs while RCV.WND is zero: a segment that fails the acceptability test
// while the window is closed has its ACK and window taken (ackInput, with
// RFC 5961 §5.2's check) if its number lies within a buffer's reach of
// RCV.NXT on either side; its data is dropped, and input then answers it
// with an ACK. Both sides of RCV.NXT occur:
//   - right of it by one: a peer that sent a zero-window probe byte numbers
//     its ACKs after it (this engine does). Further right no peer that
//     respects our window numbers its segments (everything it sent lies
//     below the right edge we advertised, RCV.NXT): taking such an ACK
//     gave a blind attacker a whole buffer of sequence numbers to hit
//     instead of RFC 9293's one (SEG.SEQ = RCV.NXT);
//   - left of it: a peer that believes our window closed numbers its ACKs
//     at its SND.UNA+SND.WND (as Linux does, tcp_acceptable_seq), which is
//     left of RCV.NXT when our ACKs of its data were lost.
//
// Without this, once data and window updates cross or ACKs are lost with
// both windows closed, each side drops the ACKs of the other, the
// retransmissions back off to MaxRTO and both directions stall for good.
// It reports whether the ACK was taken.
func (c *Conn) zeroWindowACK(s *segment) bool {
	reach := uint32(c.rcvCap)
	if c.rcvWnd() != 0 || !c.state.synchronized() || s.flags&(flagACK|flagSYN|flagRST) != flagACK ||
		seqLT(s.seq, c.rcvNxt-reach) || seqGT(s.seq, c.rcvNxt+1) {
		return false
	}
	c.e.cnt[cTCPZeroWindowACK]++
	c.ackInput(s)
	return true
}

// acceptable is the acceptability test of RFC 9293 §3.10.7.4. With a
// zero window, a segment at RCV.NXT is taken for its ACK and RST (its data
// is dropped by dataInput, which has no room for it); one on either side
// of it for its ACK only (zeroWindowACK).
//
// A segment without data is also taken at the window's right edge,
// RCV.NXT+RCV.WND, where the letter of §3.10.7.4 (SEG.SEQ <
// RCV.NXT+RCV.WND) would drop it. A peer that filled the window we
// advertised numbers its ACKs at its SND.NXT (§3.10.7.4's
// <SEQ=SND.NXT><ACK=RCV.NXT>), which is that right edge; when one of its
// segments before the edge was lost, RCV.WND is not zero (the allowance
// for a zero window does not apply) and every ACK it sends would be
// dropped unread until it retransmits: our own data then waits for RTOs
// the peer's ACKs had already made needless (Linux accepts
// SEG.SEQ = RCV.NXT+RCV.WND for the same reason, tcp_sequence).
func (c *Conn) acceptable(s *segment) bool {
	wnd := c.rcvWnd()
	n := s.seqLen()
	if s.flags&flagSYN != 0 && c.state != SynReceived {
		n-- // a SYN on a synchronized connection is judged at its number
	}
	switch {
	case wnd == 0:
		return s.seq == c.rcvNxt
	case n == 0:
		return seqLEQ(c.rcvNxt, s.seq) && seqLEQ(s.seq, c.rcvNxt+wnd)
	default:
		return seqLEQ(c.rcvNxt, s.seq) && seqLT(s.seq, c.rcvNxt+wnd) ||
			seqLEQ(c.rcvNxt, s.seq+n-1) && seqLT(s.seq+n-1, c.rcvNxt+wnd)
	}
}

// rcvWnd is the receive window: the advertised right edge, never less
// than what was advertised (RFC 9293 §3.8.6.2.2: no shrinking).
func (c *Conn) rcvWnd() uint32 {
	if seqLEQ(c.rcvAdv, c.rcvNxt) {
		return 0
	}
	return c.rcvAdv - c.rcvNxt
}

// rstInput takes an acceptable RST (RFC 5961 §3.2): exactly at RCV.NXT it
// resets the connection, elsewhere in the window it is challenged.
func (c *Conn) rstInput(s *segment) {
	e := c.e
	if s.seq != c.rcvNxt {
		c.challengeACK()
		return
	}
	e.cnt[cTCPResetsIn]++
	switch c.state {
	case SynReceived:
		if c.l != nil { // passive open: back to LISTEN, nothing for the user
			c.toClosed(ErrRefused)
			return
		}
		c.toClosed(ErrRefused)
	case Closing, LastAck, TimeWait:
		c.toClosed(nil)
	default:
		c.toClosed(ErrReset)
	}
}

// challengeACK sends an RFC 5961 §7 rate-limited challenge ACK: at most
// one per oowAckInterval per connection, shared with rejectAck's ACKs
// (as Linux's tcp_send_challenge_ack and tcp_invalid_ratelimit), and
// within the engine's budget for the second, which is drawn at random
// between half and one and a half ChallengeACKLimit each second. With
// one deterministic budget for the whole engine, an attacker counting
// the challenge ACKs its own connection gets learnt whether a spoofed
// segment landed in another connection's window (CVE-2016-5696); per
// connection, the answers it gets depend only on what it sends itself.
func (c *Conn) challengeACK() {
	e := c.e
	if c.oowAcked && e.now-c.oowAckAt < oowAckInterval {
		e.cnt[cTCPChallengeConnLimited]++
		return
	}
	sec := e.now / 1e9
	if sec != e.challengeSec || e.challengeMax == 0 {
		lim := uint64(e.o.ChallengeACKLimit)
		r := siphash(&e.secret, e.flowKey([4]byte{}, 0, 0, 4, uint32(sec)))
		e.challengeSec, e.challengeN = sec, 0
		e.challengeMax = int(lim/2 + r%(lim+1))
	}
	if e.challengeN >= e.challengeMax {
		e.cnt[cTCPChallengeLimited]++
		return
	}
	e.challengeN++
	c.oowAcked, c.oowAckAt = true, e.now
	e.cnt[cTCPChallengeACKs]++
	c.sendAckNow()
}

// synRcvdAck takes the ACK that completes a passive (or simultaneous)
// open; false when the segment is done with (RST sent for a bad ACK).
func (c *Conn) synRcvdAck(s *segment) bool {
	if !(seqLT(c.sndUna, s.ack) && seqLEQ(s.ack, c.sndNxt)) {
		c.e.resetFor(s) // RFC 9293 §3.10.7.4: <SEQ=SEG.ACK><CTL=RST>
		return false
	}
	if c.l != nil && c.l.full() {
		c.e.cnt[cTCPListenOverflow]++
		return false // keep SYN-RECEIVED; the peer's next segment may find room
	}
	c.establish(s)
	c.sndUna = c.iss + 1
	if c.sendable() {
		// Data written in SYN-RECEIVED of a simultaneous open (an
		// active open may write before its handshake completes) leaves
		// now, not with the next segment that happens to mark us.
		c.e.markDirty(c)
	}
	if c.l != nil {
		c.l.synRcvd--
		c.e.synRcvd--
		c.l.enqueue(c)
		c.e.cnt[cTCPPassiveOpens]++
	}
	return true
}

// establish moves to ESTABLISHED with the peer's window of s.
func (c *Conn) establish(s *segment) {
	c.buffers()
	c.state = Established
	c.sndWnd = uint32(s.wnd) << c.sndWS
	c.maxSndWnd = c.sndWnd
	c.sndWl1, c.sndWl2 = s.seq, s.ack
	c.retries = 0
	c.cwnd = initialWindow(c.smss)
	c.ssthresh = 1 << 30
	if c.e.o.Congestion == BBR {
		c.bbrInit()
	}
	c.hystartInit()
	c.needSyn = false
	c.armKeepalive()
}

// initialWindow is RFC 5681 §3.1's IW (RFC 6928 allows 10; we keep 10
// segments, as Linux does).
func initialWindow(mss int) uint32 { return uint32(10 * mss) }

// synSentInput is RFC 9293 §3.10.7.3.
func (c *Conn) synSentInput(s *segment) {
	e := c.e
	ack := s.flags&flagACK != 0
	if ack && (seqLEQ(s.ack, c.iss) || seqGT(s.ack, c.sndMax)) {
		if s.flags&flagRST == 0 {
			e.resetFor(s)
		}
		return
	}
	if s.flags&flagRST != 0 {
		if ack {
			e.cnt[cTCPResetsIn]++
			c.toClosed(ErrRefused)
		}
		return
	}
	if s.flags&flagSYN == 0 {
		return
	}
	c.setIRS(s.seq)
	c.peerOptions(s, c.sentWS())
	if ack {
		c.establish(s)
		c.sndUna = s.ack
		c.tRTO = 0
		c.rttSample(s)
		if c.tsOK {
			c.tsRecent = s.tsVal
		}
		c.quickAck = 2
		c.sendAckNow()
		if len(s.payload) > 0 || s.flags&flagFIN != 0 {
			s.seq++
			c.dataInput(s)
		}
		return
	}
	// Simultaneous open (§3.10.7.3 fifth step, RFC 9293 §3.5 figure 7).
	c.state = SynReceived
	if c.tsOK {
		c.tsRecent = s.tsVal
	}
	c.needSyn = true
	c.sndNxt = c.iss
	e.markDirty(c)
}

// setIRS takes the peer's initial sequence number.
func (c *Conn) setIRS(seq uint32) {
	c.irs, c.rcvNxt = seq, seq+1
	c.rcvAdv = c.rcvNxt
}

// segData is the most data one segment carries now: the peer's MSS less
// the options this segment has (RFC 6691 §2: the MSS does not count
// options, so a sender subtracts them).
func (c *Conn) segData() int {
	n := c.peerMSS
	if c.tsOK {
		n -= 12
	}
	return n - c.sackLen()
}

// sackLen is the length of the SACK option our next segment carries: a
// D-SACK block (RFC 2883 §4) and the out-of-order blocks, as many as fit
// in the 40 bytes of options beside the timestamps.
func (c *Conn) sackLen() int {
	if k := c.sackBlocks(); k > 0 {
		return 4 + 8*k
	}
	return 0
}

// sackBlocks is the number of SACK blocks the next segment carries.
func (c *Conn) sackBlocks() int {
	if !c.sackOK {
		return 0
	}
	n := c.nooo
	if c.dsackSet {
		n++
	}
	room := 40 - 4
	if c.tsOK {
		room -= 12
	}
	return min(n, room/8)
}

// dupData records [start, end), data that arrived a second time, for the
// D-SACK block of the next ACK (RFC 2883 §4: the first block, each
// duplicate reported once; a later duplicate replaces one not yet sent).
func (c *Conn) dupData(start, end uint32) {
	if c.sackOK && seqLT(start, end) {
		c.dsack, c.dsackSet = sackBlock{start, end}, true
	}
}

// sentWS says whether our SYN offered window scaling.
func (c *Conn) sentWS() bool { return !c.e.o.NoWindowScale }

// peerOptions takes the options of the peer's SYN (RFC 7323 §1.3: each is
// on only when both sides send it; RFC 6691 and RFC 9293 §3.7.1: 536 bytes
// when the peer sends no MSS, or an MSS of 0, which allows no segment at
// all: Linux takes it as absent too, tcp_parse_options). A small MSS is
// raised to 64 bytes, as Linux raises it to tcp_min_snd_mss (48): a peer
// cannot make us cut the stream into segments of a byte or two.
func (c *Conn) peerOptions(s *segment, offeredWS bool) {
	o := &c.e.o
	mss := 536
	if s.hasMSS && s.mss != 0 {
		mss = int(s.mss)
	}
	c.peerMSS = max(min(mss, c.e.mssFor(c.raddr)), 64)
	c.smss = c.peerMSS
	c.wsOK = s.hasWS && offeredWS && !o.NoWindowScale
	if c.wsOK {
		c.sndWS = s.wscale
	} else {
		c.sndWS, c.rcvWS = 0, 0
	}
	c.sackOK = s.sackOK && !o.NoSACK
	c.tsOK = s.hasTS && !o.NoTimestamps
	if c.tsOK {
		c.smss -= 12 // RFC 6691: the MSS does not count options
		c.rmss = c.e.mssFor(c.raddr) - 12
	}
}

// ackInput is the ACK step of RFC 9293 §3.10.7.4 with RFC 5961 §5.2's
// check; false when the segment is dropped.
func (c *Conn) ackInput(s *segment) bool {
	e := c.e
	if seqGT(s.ack, c.sndMax) {
		// §3.10.7.4: an ACK of something not yet sent is answered with an
		// ACK, rate-limited as RFC 5961 §5.2 and §7 have it: a peer whose
		// sequence space ran ahead of ours (data injected in our name)
		// answers that ACK as out of its window, and without the limit
		// the two ACKs bounced for ever.
		e.cnt[cTCPAckUnsent]++
		c.challengeACK()
		return false
	}
	if seqLT(s.ack, c.sndUna-max(c.maxSndWnd, uint32(c.smss))) {
		e.cnt[cTCPAckTooOld]++
		c.challengeACK() // RFC 5961 §5.2
		return false
	}
	c.persistProbes = 0 // the peer answers: persist goes on (RFC 1122 §4.2.2.17)
	grew := false
	var sacked0 uint32 // for PRR's DeliveredData (RFC 6937 §3)
	if c.sackOK && (c.nsacked > 0 || s.nsack > 0) {
		sacked0 = c.sackedBytes()
	}
	if c.sackOK && s.nsack > 0 {
		c.takeDSACK(s)
		grew = c.takeSACK(s)
	}
	wnd, oldWnd, persisted := c.takeWindow(s)
	dup := s.ack == c.sndUna // before newAck moves SND.UNA to it
	una := c.sndUna
	if seqGT(s.ack, c.sndUna) {
		c.newAck(s)
	}
	if persisted && seqLT(c.sndUna, c.sndNxt) {
		// The window opened after zero-window probes: a probe byte the
		// peer did not acknowledge fell outside its window and was
		// dropped, so sending resumes at SND.UNA, in order.
		c.sndNxt = c.sndUna
		e.markDirty(c)
	} else if dup && seqLT(c.sndUna, c.sndMax) && (grew || !c.sackOK &&
		len(s.payload) == 0 && s.flags&(flagSYN|flagFIN) == 0 && wnd == oldWnd) {
		// RFC 5681 §2's duplicate ACK; with SACK, only one with new SACK
		// information (RFC 6675 §2: data flowing back does not hide a
		// loss, and a duplicate of the wire or a D-SACK alone tells of
		// none). An ACK that moved SND.UNA is cumulative, never a
		// duplicate (§2 (d)).
		c.dupAck()
	}
	if c.rk.rtx != nil {
		c.lostRtxDetect() // lostrtx.go: before PRR counts pipe
	}
	if c.prr.on {
		if d := c.sndUna - una + c.sackedBytes() - sacked0; int32(d) > 0 {
			c.prrAck(d)
		} else {
			c.prrAck(0)
		}
	}
	if grew {
		c.lostRetransmit()
		if c.eifel.on && dup {
			c.eifelSACK(s) // recovery.go: SACKs of originals after a timeout
		}
	}
	c.rackAck(s, una) // rack.go: RACK-TLP, limited transmit
	if c.bbr != nil {
		// bbr.go: last, as Linux's cong_control after its loss
		// detection: a recovery that ended and began again on this ACK
		// is one recovery to BBR, not a new packet conservation.
		c.bbrAck(s, una)
	}
	return c.finAckedStep()
}

// takeWindow updates the send window from s unless s is older than the
// segment the window was last taken from (RFC 9293 §3.10.7.4, SND.WL1
// and SND.WL2), and from any ACK that moves SND.UNA forward (as Linux's
// tcp_may_update_window). SND.WL1 never goes beyond RCV.NXT: a segment
// right of RCV.NXT (in the window, out of order, or forged: a pure ACK
// with window 0 and any acceptable sequence number) would otherwise set
// it there, and every real ACK after it, numbered at RCV.NXT, would be
// too old to open the window again: the sender persisted for good. It
// returns the window s offers and the one before, and
// whether the window opened after zero-window probes.
func (c *Conn) takeWindow(s *segment) (wnd, oldWnd uint32, persisted bool) {
	wnd, oldWnd = uint32(s.wnd)<<c.sndWS, c.sndWnd
	if seqLT(c.sndWl1, s.seq) || c.sndWl1 == s.seq && seqLEQ(c.sndWl2, s.ack) || seqGT(s.ack, c.sndUna) {
		wl1 := s.seq
		if seqGT(wl1, c.rcvNxt) {
			wl1 = c.rcvNxt
		}
		c.sndWnd, c.sndWl1, c.sndWl2 = wnd, wl1, s.ack
		c.maxSndWnd = max(c.maxSndWnd, wnd)
		if wnd > 0 && c.tPersist != 0 {
			c.tPersist, c.persistShift, c.stallAt = 0, 0, 0
			persisted = true
		}
		if wnd > oldWnd && c.sendable() {
			c.e.markDirty(c)
		}
	}
	return wnd, oldWnd, persisted
}

// newAck takes an ACK that moves SND.UNA forward.
func (c *Conn) newAck(s *segment) {
	e := c.e
	if c.eifel.on {
		c.eifelCheck(s) // recovery.go: was the timeout spurious?
	}
	acked := s.ack - c.sndUna
	data := min(int(acked), c.sLen)
	if int(acked) > data && c.finSent {
		c.finAcked = true
	}
	if data > 0 {
		c.sHead = wrap(c.sHead+data, len(c.sbuf))
		c.sLen -= data
		c.sendHomeIfEmpty()
	}
	c.sndUna = s.ack
	if seqLT(c.sndNxt, c.sndUna) {
		c.sndNxt = c.sndUna
	}
	r := c.rttSample(s)
	c.retries = 0
	c.stallAt = 0
	c.dupacks = 0
	c.dropSACKBelow(c.sndUna)
	if c.hs.phase != hsOff {
		c.hystartAck(r) // hystart.go: RFC 9406
	}
	c.ccAck(acked)
	if c.sndUna == c.sndMax {
		c.tRTO = 0
	} else {
		c.tRTO = e.now + c.rtoWait() // RFC 6298 §5.3
		e.arm(c)
	}
	if c.sendable() {
		e.markDirty(c) // the ACK made room in the windows
	}
}

// finAckedStep moves the closing states on once our FIN is acknowledged.
func (c *Conn) finAckedStep() bool {
	if !c.finAcked {
		return true
	}
	e := c.e
	switch c.state {
	case FinWait1:
		c.state = FinWait2
		if !c.user {
			c.tWait = e.now + int64(e.o.TimeWait) // an orphan does not wait for ever
			e.arm(c)
		}
	case Closing:
		c.enterTimeWait()
	case LastAck:
		c.toClosed(nil)
		return false
	}
	return true
}

// enterTimeWait moves to TIME-WAIT for 2 MSL; a connection the
// application no longer holds moves to a TIME-WAIT record and gives its
// slot back (timewait.go).
func (c *Conn) enterTimeWait() {
	c.state = TimeWait
	c.tRTO, c.tPersist, c.tKeep, c.tDelack = 0, 0, 0, 0
	c.tWait = c.e.now + int64(c.e.o.TimeWait)
	if !c.user && !c.queued {
		c.e.toTimeWait(c)
		return
	}
	c.e.arm(c)
}

// rttSample measures the round trip from the echoed timestamp (RFC 7323
// §4.1) or the timed segment (Karn: never one that was retransmitted),
// and updates the RTO (RFC 6298 §2), whose variance term is at least
// MinRTO, as Linux's (tcp_rto_min bounds rttvar, not the sum): with
// MinRTO bounding only the sum, a path of 20 ms had an RTO of 25 ms,
// which a retransmission lost at SND.UNA tripped before RACK's
// SRTT*5/4 could find it (lostRetransmit), and any pause of 5 ms
// spuriously. It returns the sample (ns), -1 when s gave none.
func (c *Conn) rttSample(s *segment) int64 {
	e := c.e
	var r int64 = -1
	if c.tsOK && s.hasTS && s.tsEcr != 0 {
		r = int64(c.tsNow()-s.tsEcr) * 1e6
		if r < 0 || r > 1e12 {
			r = -1
		}
	} else if c.rttTiming && seqGT(s.ack, c.rttSeq) {
		r = e.now - c.rttAt
		c.rttTiming = false
	}
	if r < 0 {
		return -1
	}
	if !c.hasRTT {
		c.srtt, c.rttvar, c.hasRTT = r, r/2, true
	} else {
		d := c.srtt - r
		if d < 0 {
			d = -d
		}
		c.rttvar = (3*c.rttvar + d) / 4
		c.srtt = (7*c.srtt + r) / 8
	}
	c.rto = c.srtt + max(e.minRTO, 4*c.rttvar)
	c.rto = min(max(c.rto, e.minRTO), e.maxRTO)
	return r
}

// tsNow is our timestamp clock: milliseconds plus the connection's offset.
func (c *Conn) tsNow() uint32 { return uint32(c.e.wall()/1e6) + c.tsOff }

// dataInput queues the data of s: in order into the readable bytes,
// out of order into the ring at its offset (RFC 9293 §3.10.7.4 seventh
// step; RFC 5681 §4.2: out-of-order data and the filling of a hole are
// acknowledged at once).
func (c *Conn) dataInput(s *segment) {
	e := c.e
	seq, p, fin := s.seq, s.payload, s.flags&flagFIN != 0
	if seqLT(seq, c.rcvNxt) {
		skip := c.rcvNxt - seq
		c.dupData(seq, seq+min(skip, uint32(len(p))))
		if int(skip) >= len(p) {
			if len(p) > 0 {
				e.cnt[cTCPDupData]++
			}
			p = p[:0]
			if !fin || seq+uint32(len(s.payload)) != c.rcvNxt {
				fin = false
				c.sendAckNow()
			}
		} else {
			p = p[skip:]
		}
		seq = c.rcvNxt
	}
	// Bytes of the ring from RCV.NXT on: the buffer, or the window
	// advertised when rounding it up took some of the ring's slack.
	room := max(c.rcvCap-c.rLen, min(int(c.rcvWnd()), c.e.recvRingMax()-c.rLen))
	off := int(seq - c.rcvNxt)
	if off+len(p) > room {
		if off >= room {
			p = p[:0]
		} else {
			p = p[:room-off]
		}
		fin = false
		c.sendAckNow()
	}
	if len(p) > 0 {
		c.writeRing(off, p)
	}
	if off == 0 {
		filled := c.nooo > 0
		c.rLen += len(p)
		c.rcvNxt += uint32(len(p))
		c.mergeOOO()
		c.e.markReadable(c)
		if fin {
			c.finInput()
			return
		}
		if c.oooFin && c.rcvNxt == c.oooFinSeq {
			c.finInput()
			return
		}
		if len(p) > 0 {
			c.rcvRTTFromTS(s) // bufpool.go
			c.dataAcked(len(p), filled)
		}
		return
	}
	if c.oooHeld > 0 && !c.touchesLastOOO(seq, seq+uint32(len(p))) {
		// The held ACK stands for segments that all grew the block it
		// reports first (RFC 2018 §4). This one touches another block,
		// which the next ACK would report first, and it might have no
		// room for the first one's growth: the held ACK leaves now.
		c.sendAck()
	}
	if len(p) > 0 || fin {
		c.addOOO(seq, seq+uint32(len(p)), fin)
	}
	c.ackOOO()
}

// The ACKs of out-of-order data (ackOOO), with Linux's defaults for
// SACK compression (net.ipv4.tcp_comp_sack_nr, tcp_comp_sack_delay_ns).
const (
	// oooAcksNow duplicate ACKs of one RCV.NXT leave one per segment:
	// the sender's duplicate-ACK threshold (RFC 5681 §3.2, DupThresh).
	oooAcksNow = 3
	// oooHeldMax out-of-order segments at most share one held ACK.
	oooHeldMax = 44
	// oooDelayMax bounds how long an ACK is held; within it, a twentieth
	// of the round trip.
	oooDelayMax = int64(time.Millisecond)
)

// ackOOO acknowledges an out-of-order segment. RFC 5681 §4.2 asks for an
// immediate duplicate ACK, so that the sender counts three and
// retransmits: the first oooAcksNow at one RCV.NXT leave now, one per
// segment (an ACK owed until Flush would answer a whole batch of them
// once). Past them, while the hole stays, each further ACK would only
// repeat the SACK blocks with one more segment in them, and cost a frame
// each way: as Linux does (SACK compression), the ACK is held for up to
// oooHeldMax segments and a twentieth of the round trip (at most
// oooDelayMax), and one ACK then reports them all. An ACK with a D-SACK
// leaves at once (it tells the sender that a retransmission was
// spurious, RFC 2883 §4), and without SACK every duplicate ACK does: the
// sender has nothing else to count. The held segments all grew the block
// the ACK reports first: dataInput sends a held ACK before a segment that
// touches another block (each ACK reports the latest block first, RFC
// 2018 §4, and has room for three or four: a block whose growth no ACK
// reported is one the sender would take for lost).
func (c *Conn) ackOOO() {
	if c.oooAckNxt != c.rcvNxt {
		c.oooAckNxt, c.oooDupAcks = c.rcvNxt, 0
	}
	if c.sackOK && !c.dsackSet && c.oooDupAcks >= oooAcksNow && c.oooHeld < oooHeldMax {
		c.oooHeld++
		rtt := c.srtt
		if r := c.m.rcvRTT; r > 0 && (rtt == 0 || r < rtt) {
			rtt = r
		}
		if at := c.e.now + max(min(oooDelayMax, rtt/20), 1); c.tDelack == 0 || at < c.tDelack {
			c.tDelack = at
			c.e.arm(c)
		}
		return
	}
	if c.oooDupAcks < oooAcksNow {
		c.oooDupAcks++
	}
	if !c.sendAck() {
		c.sendAckNow()
	}
}

// touchesLastOOO reports whether data [seq, end) lies in, or next to,
// the out-of-order block that holds lastOOO (the block the next ACK
// reports first).
func (c *Conn) touchesLastOOO(seq, end uint32) bool {
	for i := 0; i < c.nooo; i++ {
		if b := c.ooo[i]; seqLEQ(b.start, c.lastOOO) && seqLT(c.lastOOO, b.end) {
			return seqLEQ(b.start, end) && seqLEQ(seq, b.end)
		}
	}
	return false
}

// writeRing copies p into the receive ring at offset off from RCV.NXT.
func (c *Conn) writeRing(off int, p []byte) {
	if need := c.rLen + off + len(p); need > len(c.rbuf) {
		c.recvRing(need) // bufpool.go
	}
	at := wrap(c.rHead+c.rLen+off, len(c.rbuf))
	toRing(c.rbuf, at, p)
}

// dataAcked decides when in-order data is acknowledged (RFC 1122
// §4.2.3.2): at once for the quick ACKs after the handshake, for every
// second full segment and when a hole was filled; otherwise within
// DelayedACK.
func (c *Conn) dataAcked(n int, filled bool) {
	e := c.e
	c.unackedBytes += n
	if c.m.rttAt == 0 || seqGEQ(c.rcvNxt, c.m.rttSeq) {
		c.rcvRTTMeasure() // bufpool.go
	}
	switch {
	case e.delack == 0, filled, c.quickAck > 0, c.unackedBytes >= 2*c.rmss:
		if c.quickAck > 0 {
			c.quickAck--
		}
		c.ackNow = true
		e.markDirty(c)
	case c.tDelack == 0:
		c.tDelack = e.now + e.delack
		e.arm(c)
	}
}

// addOOO records [start, end) as held out of order, merging ranges.
func (c *Conn) addOOO(start, end uint32, fin bool) {
	e := c.e
	if fin {
		c.oooFin, c.oooFinSeq = true, end
	}
	if c.nooo > 0 && !c.touchesLastOOO(start, end) {
		// Another block than the last one grows: the last one becomes
		// the most recent of the others (RFC 2018 §4, putSACK).
		c.oooRecent = [2]uint32{c.lastOOO, c.oooRecent[0]}
	}
	c.lastOOO = start
	if start == end {
		return
	}
	b := sackBlock{start, end}
	for i := 0; i < c.nooo; i++ {
		// RFC 2883 §4 (2): a duplicate above RCV.NXT is reported too, and
		// the block holding it (lastOOO) follows the D-SACK block.
		if o := c.ooo[i]; seqLT(o.start, end) && seqLT(start, o.end) {
			c.dupData(seqMax(start, o.start), seqMin(end, o.end))
			break
		}
	}
	n, ok := addBlock(&c.ooo, c.nooo, b)
	if !ok {
		e.cnt[cTCPOOOFull]++
		return
	}
	c.nooo = n
	e.cnt[cTCPOOOQueued]++
	c.oooGrow() // bufpool.go
}

// insertBlock merges b into the sorted, disjoint blocks bs[:n]; false when
// it would need a block more than bs holds.
func insertBlock(bs []sackBlock, n int, b sackBlock) (int, bool) {
	i := 0
	for i < n && seqLT(bs[i].end, b.start) {
		i++
	}
	j := i
	for j < n && seqLEQ(bs[j].start, b.end) {
		if seqLT(bs[j].start, b.start) {
			b.start = bs[j].start
		}
		if seqGT(bs[j].end, b.end) {
			b.end = bs[j].end
		}
		j++
	}
	if j == i { // no overlap: insert at i
		if n == len(bs) {
			return n, false
		}
		copy(bs[i+1:n+1], bs[i:n])
		bs[i] = b
		return n + 1, true
	}
	bs[i] = b
	copy(bs[i+1:], bs[j:n])
	return n - (j - i - 1), true
}

// mergeOOO makes held data readable once RCV.NXT reaches it.
func (c *Conn) mergeOOO() {
	k := 0
	for k < c.nooo && seqLEQ(c.ooo[k].start, c.rcvNxt) {
		if seqGT(c.ooo[k].end, c.rcvNxt) {
			d := c.ooo[k].end - c.rcvNxt
			c.rLen += int(d)
			c.rcvNxt += d
		}
		k++
	}
	if k > 0 {
		copy(c.ooo[:], c.ooo[k:c.nooo])
		c.nooo -= k
	}
}

// finInput takes the peer's FIN at RCV.NXT (RFC 9293 §3.10.7.4 eighth step).
func (c *Conn) finInput() {
	c.rcvNxt++
	c.finRcvd = true
	c.e.markReadable(c)
	c.oooFin = false
	if c.nooo > 0 {
		// Data held out of order beyond the FIN: the FIN ends the
		// stream (§3.10.7.4 eighth), so no byte after it can be
		// delivered, and a block left at or past RCV.NXT would never
		// merge (no text is taken after the FIN) and would go on being
		// reported in SACK blocks. It is dropped, as Linux drops its
		// out-of-order queue in tcp_fin.
		c.e.cnt[cTCPOOOAfterFIN]++
		c.nooo, c.oooHeld = 0, 0
	}
	c.sendAckNow()
	switch c.state {
	case SynReceived, Established:
		c.state = CloseWait
	case FinWait1:
		if c.finAcked {
			c.enterTimeWait()
		} else {
			c.state = Closing
		}
	case FinWait2:
		c.enterTimeWait()
	}
}

// sendAckNow has an ACK leave at the next Flush.
func (c *Conn) sendAckNow() {
	c.ackNow = true
	c.e.markDirty(c)
}

// windowOpened sends a window update after a Read when the window grew by
// two segments or half the buffer (RFC 9293 §3.8.6.2.2), or opened from
// (nearly) zero.
func (c *Conn) windowOpened() {
	if !c.state.synchronized() || c.finRcvd {
		return
	}
	free := uint32(max(c.rcvCap-c.rLen, 0)) // rounding up may have lent the ring's slack
	adv := c.rcvWnd()
	if free > adv && free-adv >= uint32(min(c.rcvCap/2, 2*c.rmss)) || adv < uint32(c.rmss) && free >= uint32(c.rmss) {
		c.sendAckNow()
	}
}
