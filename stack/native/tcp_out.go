package native

import "encoding/binary"

// output sends what the connection has due: its SYN or SYN-ACK, data and
// FIN as the windows allow, retransmissions, and an ACK when one is owed
// and nothing else carried it. It returns false when the TX ring filled
// (the connection stays dirty for the next Flush).
func (c *Conn) output() bool {
	if c.state < Established || c.state == TimeWait {
		return c.controlOutput()
	}
	if c.inRecovery && !c.sendHoles() {
		return false
	}
	if !c.sendData() {
		return false
	}
	c.rackSent() // rack.go: minimum RTT, PTO
	if c.ackNow {
		return c.sendAck()
	}
	return true
}

// controlOutput is output for the states that send no data: the SYN or
// SYN-ACK and its ACK, TIME-WAIT's ACK. Apart from output, so that the
// data states' path is a few instructions in a row.
func (c *Conn) controlOutput() bool {
	switch c.state {
	case Closed, Listen:
		return true
	case SynSent, SynReceived:
		if c.needSyn {
			if !c.sendSyn() {
				return false
			}
		}
		if c.state == SynSent {
			return true
		}
		if c.ackNow && !c.needSyn {
			return c.sendAck()
		}
		return true
	case TimeWait:
		if c.ackNow {
			return c.sendAck()
		}
	}
	return true
}

// sendable reports whether the connection has segments that an ACK
// opening the windows may let out: data not sent yet, a FIN not in
// flight, or the retransmissions of loss recovery. An ACK for a
// connection without any leaves it out of the next Flush, which would
// find nothing to send (what owes an ACK marks it itself).
func (c *Conn) sendable() bool {
	inFlight := int(c.sndNxt - c.sndUna)
	return c.inRecovery || c.sLen > inFlight || c.finQueued && !c.finAcked && inFlight == c.sLen
}

// sendSyn sends our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED), once the
// next hop's MAC is known.
func (c *Conn) sendSyn() bool {
	e := c.e
	if !c.macOK {
		mac, ok := e.resolve(c.hop)
		if !ok {
			if e.noNeighbour(c.hop) {
				c.fail(ErrHostUnreachable) // the cache is full of requests in flight
				return true
			}
			c.needSyn = true
			e.arpAwait(c)
			return true
		}
		c.mac, c.macOK, c.arpEpoch = mac, true, e.arpEpoch
	}
	flags := uint8(flagSYN)
	if c.state == SynReceived {
		flags |= flagACK
	}
	if !c.emit(c.iss, flags, 0, 0) {
		return false
	}
	if c.retries > 0 && c.state == SynSent {
		// Our SYN again after a timeout: is the next hop still there?
		// A neighbour whose probes went unanswered is resolved again
		// (RFC 4861 §7.3.3). Not for a SYN-ACK: a SYN's source is no
		// neighbour of ours until it answers.
		c.neighbourSuspect()
	}
	c.needSyn = false
	c.sndNxt = c.iss + 1
	c.sndMax = seqMax(c.sndMax, c.sndNxt)
	if c.tRTO == 0 {
		c.tRTO = e.now + c.rto
		e.arm(c)
	}
	return true
}

// pipe estimates the bytes in flight (RFC 6675 §4): outside recovery what
// was sent and not acknowledged; in SACK recovery less what the peer
// SACKed and what is deemed lost and not yet retransmitted.
func (c *Conn) pipe() uint32 {
	if c.nsacked == 0 {
		return c.sndNxt - c.sndUna
	}
	if !c.inRecovery {
		return c.pipeOpen() // rack.go: limited transmit
	}
	p := c.sndMax - c.sndUna
	high := c.sacked[c.nsacked-1].end
	for i := 0; i < c.nsacked; i++ {
		p -= c.sacked[i].end - c.sacked[i].start
	}
	// Holes below the highest SACK and above rtxNext that IsLost calls
	// lost are not in flight (RFC 6675 §4 SetPipe); the others still are,
	// but for retransmissions found lost again (lostrtx.go).
	at := seqMax(c.rtxNext, c.sndUna)
	p -= min(c.lostRtxPipe(at), p)
	for i := 0; i < c.nsacked && seqLT(at, high); i++ {
		b := c.sacked[i]
		if seqLT(at, b.start) {
			if !c.isLost(at) {
				break // nor any hole above it: less is SACKed above those
			}
			p -= b.start - at
		}
		at = seqMax(at, b.end)
	}
	return p
}

// sendData sends new data (and retransmits after a timeout, SND.NXT having
// gone back to SND.UNA) within min(cwnd, the peer's window), then FIN.
func (c *Conn) sendData() bool {
	if c.sndUna == c.sndMax && c.sLen > 0 && c.e.now-c.lastSend > c.rto && !c.e.o.NoSlowStartAfterIdle {
		c.cwndAfterIdle()
	}
	e := c.e
	limited := false // cwnd held data back (cwndUse)
	for {
		if seqLT(c.sndNxt, c.sndMax) { // retransmitting: step over what the peer SACKed
			c.skipSACKed()
		}
		off := int(c.sndNxt - c.sndUna)
		avail := c.sLen - off
		if avail <= 0 {
			break
		}
		if c.bbr != nil && !c.paceOK() {
			break // pacing.go: the departure time is not yet
		}
		wndEnd := c.sndUna + c.sndWnd
		room := int(int32(wndEnd - c.sndNxt))
		croom := 0
		if inflight := c.pipe(); c.cwnd > inflight {
			croom = int(c.cwnd - inflight)
		}
		n := min(avail, c.segData())
		if croom < n && croom <= room {
			limited = true // cwnd, not the peer's window, holds data back
		}
		room = min(room, croom)
		if room < n {
			if c.sndWnd == 0 || room <= 0 {
				if c.sndNxt == c.sndUna && c.sndWnd < uint32(n) {
					c.armPersist()
				}
				break
			}
			// RFC 9293 §3.8.6.2.1: send less than a segment only when it is
			// at least half the largest window the peer offered.
			if room < int(c.maxSndWnd/2) && c.sndNxt != c.sndUna {
				break
			}
			n = room
		}
		if e.nagle && n < c.segData() && c.sndNxt != c.sndUna && !c.finQueued {
			break // RFC 896
		}
		if seqLT(c.sndNxt, c.sndMax) {
			// a retransmission: do not cross a SACKed block
			if bnd, ok := c.nextSACKed(c.sndNxt); ok && int(bnd-c.sndNxt) < n {
				n = int(bnd - c.sndNxt)
			}
		}
		flags := uint8(flagACK)
		fin := c.finQueued && !c.finAcked && n == avail
		if fin {
			flags |= flagFIN
		}
		if n == avail {
			flags |= flagPSH
		}
		if !c.sendSeg(c.sndNxt, flags, off, n) {
			c.cwndUse(limited)
			return false
		}
		if fin {
			c.sentFIN()
		}
	}
	if c.finQueued && !c.finAcked && int(c.sndNxt-c.sndUna) == c.sLen {
		if !c.sendSeg(c.sndNxt, flagACK|flagFIN, c.sLen, 0) {
			c.cwndUse(limited)
			return false
		}
		c.sentFIN()
	}
	if c.bbr != nil {
		c.rateAppLimited(&c.bbr.rate) // ratesample.go
	}
	c.cwndUse(limited)
	return true
}

// sendSeg sends n bytes from buffer offset off at seq with flags and
// accounts for them: SND.NXT, SND.MAX, the RTO, the RTT timing and the
// retransmission counter.
func (c *Conn) sendSeg(seq uint32, flags uint8, off, n int) bool {
	e := c.e
	if !c.emit(seq, flags, off, n) {
		return false
	}
	end := seq + uint32(n)
	if flags&flagFIN != 0 {
		end++
	}
	if seqLT(seq, c.sndMax) {
		e.cnt[cTCPRetransmits]++
		c.rtxTrack(seq, seqMin(end, c.sndMax))
		if c.retries > 0 && seq == c.sndUna {
			c.neighbourSuspect() // after a timeout: is the next hop still there?
		}
	} else if !c.rttTiming && !c.tsOK {
		c.rttTiming, c.rttSeq, c.rttAt = true, seq, e.now
	}
	if seqLT(seq, c.sndMax) && c.rttTiming && seqLEQ(seq, c.rttSeq) {
		c.rttTiming = false // Karn: the timed segment was retransmitted
	}
	if n > 0 {
		c.lastSend = e.now
		if c.prr.on {
			c.prr.out += uint32(n)
		}
		if c.bbr != nil {
			c.bbrSent(seq, n) // bbr.go: delivery-rate record, pacing
		}
	}
	if seqGT(end, c.sndNxt) {
		c.sndNxt = end
	}
	c.sndMax = seqMax(c.sndMax, c.sndNxt)
	if c.tRTO == 0 && c.tPersist == 0 {
		c.tRTO = e.now + c.rtoWait()
		e.arm(c)
	}
	return true
}

// backoff is rto doubled shift times, at most max: rto<<shift overflows
// int64 for a large RTO and shift (a minute's RTO past shift 37), and
// the negative result made a timer that fired at once, for ever.
func backoff(rto int64, shift int, max int64) int64 {
	if shift >= 62 || rto > max>>shift {
		return max
	}
	return rto << shift
}

// sentFIN moves to FIN-WAIT-1 or LAST-ACK once our FIN is out.
func (c *Conn) sentFIN() {
	if !c.finSent {
		c.finSent = true
		c.finSeq = c.sndNxt - 1
	}
	switch c.state {
	case Established, SynReceived:
		c.state = FinWait1
	case CloseWait:
		c.state = LastAck
	}
}

// sendAck sends a pure ACK at ackSeq.
func (c *Conn) sendAck() bool { return c.emit(c.ackSeq(), flagACK, 0, 0) }

// ackSeq is the sequence number of a pure ACK: the highest sent, not
// SND.NXT (after a timeout SND.NXT goes back to SND.UNA, and an ACK
// numbered there falls left of the peer's window, fails its acceptability
// test and is dropped unread; if both sides are retransmitting, each then
// drops the other's ACKs for ever), but never right of the peer's window
// (SND.UNA+SND.WND): data sent before the window closed, or a probe byte,
// puts SND.MAX beyond a zero window, and a receiver that applies the
// acceptability test of RFC 9293 §3.10.7.4 to the letter (only SEG.SEQ =
// RCV.NXT fits a zero window) drops such an ACK unread, so the ACK that
// would let it send again never counts.
func (c *Conn) ackSeq() uint32 {
	if edge := c.sndUna + c.sndWnd; seqLT(edge, c.sndMax) && c.state.synchronized() {
		return edge
	}
	return c.sndMax
}

// sendRST sends a RST at seq (Abort, keepalive timeout). A synchronized
// connection's RST goes at ackSeq, for the reason given there: a RST at
// SND.MAX beyond a zero window would fail the peer's acceptability test
// (RFC 9293 §3.10.7.4, RFC 5961 §3.2) and leave it waiting.
func (c *Conn) sendRST(seq uint32) {
	if c.macOK {
		c.emit(seq, flagRST|flagACK, 0, 0)
		c.e.cnt[cTCPResetsSent]++
	}
}

// emit builds one segment of the connection into a TX slot: headers, the
// options its state calls for, n bytes of the send buffer from offset off,
// and the window. Every segment but a SYN carries the ACK, so it clears
// what was owed (delayed ACK, ackNow).
func (c *Conn) emit(seq uint32, flags uint8, off, n int) bool {
	e := c.e
	// The options go where they will be sent; tcpFrame writes the
	// headers before them and sizes the frame around them.
	const at, at6 = ethLen + ipLen + tcpLen, ethLen + ip6Len + tcpLen
	if c.arpEpoch != e.arpEpoch {
		c.refreshMAC() // a neighbour's MAC changed: perhaps ours
	}
	e.takeSlot() // build the segment where it is sent (txslot.go)
	o := e.tx[at : at+40]
	if c.raddr[0] == 0 { // IPv6 (engine6.go)
		o = e.tx[at6 : at6+40]
	}
	ol := c.options(o, flags)
	hl := tcpLen + ol
	ack := uint32(0)
	if flags&flagACK != 0 {
		ack = c.rcvNxt
	}
	t := e.tcpFrame(c.mac, c.raddr, hl+n)
	putTCP(t, c.lport, c.rport, seq, ack, hl, flags, c.window(flags))
	if n > 0 {
		at := wrap(c.sHead+off, len(c.sbuf))
		fromRing(t[hl:hl+n], c.sbuf, at)
	}
	var sum uint64
	if c.raddr[0] != 0 {
		sum = pseudo(e.addr, c.raddr, protoTCP, hl+n)
	} else {
		sum = e.pseudoTo6(c.raddr, hl+n)
	}
	binary.BigEndian.PutUint16(t[16:], fold(csum(sum, t[:hl+n])))
	if !e.send() {
		return false
	}
	e.cnt[cTCPSegmentsOut]++
	if flags&flagACK != 0 {
		c.ackNow, c.unackedBytes, c.tDelack, c.oooHeld = false, 0, 0, 0
		c.lastAckSent = c.rcvNxt
		if c.dsackSet && flags&(flagSYN|flagRST) == 0 {
			c.dsackSet = false // reported once (RFC 2883 §4)
			e.cnt[cTCPDSACKsSent]++
		}
	}
	return true
}

// window is the window field: the free receive buffer, scaled (not in a
// SYN, RFC 7323 §2.2), never moving the right edge back (RFC 9293
// §3.8.6.2.2, with the receiver's SWS avoidance: the edge moves only by a
// segment or half the buffer).
func (c *Conn) window(flags uint8) uint16 {
	free := uint32(max(c.rcvCap-c.rLen, 0))
	if c.finRcvd {
		free = 0
	}
	adv := c.rcvWnd()
	w := adv
	if free > adv && (free-adv >= uint32(min(c.rcvCap/2, c.rmss)) || adv == 0 && free > 0) {
		w = free
	}
	if c.finRcvd {
		w = adv
	}
	shift := c.rcvWS
	if flags&flagSYN != 0 {
		shift = 0
	}
	// Rounded up, as Linux does (__tcp_select_window's ALIGN): rounded
	// down, up to 2^shift-1 free bytes went unannounced, and a buffer
	// with less than 2^shift free announced a zero window. The bytes
	// beyond the buffer go to the ring's slack (rcvSlack).
	v := w >> shift
	if w&(1<<shift-1) != 0 && c.rLen+int(v+1)<<shift <= c.e.recvRingMax() {
		v++
	}
	if v > 0xffff {
		v = 0xffff
	}
	if edge := c.rcvNxt + v<<shift; seqGT(edge, c.rcvAdv) {
		c.rcvAdv = edge
	}
	return uint16(v)
}

// rcvSlack is the bytes a receive ring of a buffer of n bytes has beyond
// it: what rounding the window up to the scale (at most wscaleFor(n))
// may announce past the buffer.
func rcvSlack(n int) int { return 1<<wscaleFor(n) - 1 }

// options writes the options of a segment with flags into o and returns
// their length: MSS, SACK-permitted, timestamps and window scale in a SYN
// (only those the peer offered, in a SYN-ACK: RFC 7323 §1.3, RFC 2018
// §2); timestamps and SACK blocks afterwards.
func (c *Conn) options(o []byte, flags uint8) int {
	e := c.e
	n := 0
	if flags&flagSYN != 0 {
		syn := c.state == SynSent
		o[0], o[1] = optMSS, 4
		binary.BigEndian.PutUint16(o[2:], uint16(e.mssFor(c.raddr)))
		n = 4
		sack := syn && !e.o.NoSACK || !syn && c.sackOK
		ts := syn && !e.o.NoTimestamps || !syn && c.tsOK
		switch {
		case sack && ts: // SACK-permitted then timestamps: 12 bytes, aligned
			o[n], o[n+1] = optSACKPerm, 2
			n = c.putTS(o, n+2)
		case sack:
			o[n], o[n+1], o[n+2], o[n+3] = optNOP, optNOP, optSACKPerm, 2
			n += 4
		case ts:
			o[n], o[n+1] = optNOP, optNOP
			n = c.putTS(o, n+2)
		}
		if syn && !e.o.NoWindowScale || !syn && c.wsOK {
			o[n], o[n+1], o[n+2], o[n+3] = optNOP, optWScale, 3, c.rcvWS
			n += 4
		}
		return n
	}
	if c.tsOK {
		o[0], o[1] = optNOP, optNOP
		n = c.putTS(o, 2)
	}
	if flags&flagRST == 0 && (c.nooo > 0 || c.dsackSet) {
		n = c.putSACK(o, n)
	}
	return n
}

func (c *Conn) putTS(o []byte, n int) int {
	o[n], o[n+1] = optTimestamp, 10
	binary.BigEndian.PutUint32(o[n+2:], c.tsNow())
	binary.BigEndian.PutUint32(o[n+6:], c.tsRecent)
	return n + 10
}

// putSACK writes SACK blocks (RFC 2018 §4): a D-SACK block first when
// data arrived twice (RFC 2883 §4), then the block holding the latest
// out-of-order segment, then the others, as many as fit (sackBlocks).
func (c *Conn) putSACK(o []byte, n int) int {
	k := c.sackBlocks()
	if k <= 0 {
		return n
	}
	o[n], o[n+1], o[n+2], o[n+3] = optNOP, optNOP, optSACK, uint8(2+8*k)
	n += 4
	put := func(b sackBlock) {
		binary.BigEndian.PutUint32(o[n:], b.start)
		binary.BigEndian.PutUint32(o[n+4:], b.end)
		n += 8
	}
	if c.dsackSet {
		put(c.dsack)
		if k--; k == 0 {
			return n
		}
	}
	// The block of the latest segment first, then those that grew
	// before it, latest first (RFC 2018 §4: an ACK repeats the most
	// recently reported blocks, so that one lost ACK does not hide a
	// block's growth), then the others in sequence order.
	var done [4]int
	nd := 0
	putAt := func(seq uint32) {
		for i := 0; i < c.nooo; i++ {
			if b := c.ooo[i]; seqLEQ(b.start, seq) && seqLT(seq, b.end) {
				for _, d := range done[:nd] {
					if d == i {
						return
					}
				}
				put(b)
				done[nd] = i
				nd++
				k--
				return
			}
		}
	}
	putAt(c.lastOOO)
	for _, seq := range c.oooRecent {
		if k > 0 && nd < len(done) {
			putAt(seq)
		}
	}
	for i := 0; i < c.nooo && k > 0; i++ {
		if b := c.ooo[i]; nd < len(done) {
			putAt(b.start)
		}
	}
	return n
}

// resetFor answers segment s, which has no connection, with a RST (RFC
// 9293 §3.10.7.1): <SEQ=SEG.ACK><CTL=RST> when it has an ACK, else
// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. A RST is never answered.
func (e *Engine) resetFor(s *segment) {
	if s.flags&flagRST != 0 {
		return
	}
	seq, ack, flags := s.ack, uint32(0), uint8(flagRST)
	if s.flags&flagACK == 0 {
		seq, ack, flags = 0, s.seq+s.seqLen(), flagRST|flagACK
	}
	e.sendBare(s, seq, ack, flags, 0, nil)
	e.cnt[cTCPResetsSent]++
}

// sendBare sends a segment without a connection (RST, SYN cookie
// SYN-ACK) back to where s came from, with the options opt (a multiple
// of four bytes).
func (e *Engine) sendBare(s *segment, seq, ack uint32, flags uint8, wnd uint16, opt []byte) {
	hl := tcpLen + len(opt)
	t := e.tcpFrame(s.srcMAC, s.src, hl)
	putTCP(t, s.dport, s.sport, seq, ack, hl, flags, wnd)
	copy(t[tcpLen:], opt)
	binary.BigEndian.PutUint16(t[16:], fold(csum(e.pseudoTo(s.src, hl), t[:hl])))
	if e.send() {
		e.cnt[cTCPSegmentsOut]++
	}
}

// cookieSynAckOptions writes into o the options of the SYN-ACK of a SYN
// cookie answering SYN s, and returns their length: our MSS, and when s
// offered timestamps the SACK-permitted and window scale options it
// offered (ours the scale newConn will give the connection) and
// timestamps whose TSval carries which (cookieTS), laid out as options
// lays out a SYN-ACK's.
func (e *Engine) cookieSynAckOptions(o *[20]byte, s *segment, mss uint16) int {
	o[0], o[1] = optMSS, 4
	binary.BigEndian.PutUint16(o[2:], mss)
	if !s.hasTS || e.o.NoTimestamps {
		return 4 // the MSS alone, as Linux's cookies without timestamps
	}
	tsval := e.cookieTS(s)
	if tsval&cookieSACK != 0 {
		o[4], o[5] = optSACKPerm, 2
	} else {
		o[4], o[5] = optNOP, optNOP
	}
	o[6], o[7] = optTimestamp, 10
	binary.BigEndian.PutUint32(o[8:], tsval)
	binary.BigEndian.PutUint32(o[12:], s.tsVal)
	if tsval&cookieWSMask == cookieNoWS {
		return 16
	}
	o[16], o[17], o[18], o[19] = optNOP, optWScale, 3, wscaleFor(e.o.RecvBuf)
	return 20
}

// tcpFrame sizes e.tx for an IP packet carrying n bytes of TCP to dst
// (at dstMAC), writes its Ethernet and IP headers and returns the TCP
// part: IPv4, or IPv6 for an IPv6 peer's alias (engine6.go).
func (e *Engine) tcpFrame(dstMAC [6]byte, dst [4]byte, n int) []byte {
	if dst[0] == 0 {
		return e.tcpFrame6(dstMAC, dst, n)
	}
	tot := ipLen + n
	e.tx = e.tx[:ethLen+tot]
	putEth(e.tx, dstMAC, e.mac, etherIPv4)
	putIPv4(e.tx[ethLen:], e.nextID(), protoTCP, e.addr, dst, tot)
	return e.tx[ethLen+ipLen:]
}

// putTCP writes the fixed TCP header (RFC 9293 §3.1) of a segment whose
// header, options included, is hl bytes, with a zero checksum.
func putTCP(b []byte, sport, dport uint16, seq, ack uint32, hl int, flags uint8, wnd uint16) {
	t := (*[tcpLen]byte)(b)
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12], t[13] = uint8(hl/4)<<4, flags
	binary.BigEndian.PutUint16(t[14:], wnd)
	binary.BigEndian.PutUint32(t[16:], 0) // checksum and urgent pointer
}
