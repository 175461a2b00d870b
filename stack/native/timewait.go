package native

import "encoding/binary"

// TIME-WAIT records. A connection in TIME-WAIT that the application no
// longer holds keeps nothing of its slot but what TIME-WAIT needs (RFC
// 9293 §3.10.7.4: acknowledge a retransmitted FIN and restart the 2 MSL
// timeout; RFC 1122 §4.2.2.13 and RFC 6191: let a new SYN with a higher
// sequence number or a newer timestamp in), in a small record, as Linux
// keeps its inet_timewait_sock: the slot and its buffers go to the next
// connection at once. Otherwise the side that closes first sustained
// MaxConns connections per 2 MSL. The records are bounded by
// Options.MaxTimeWait; with all of them in use a connection skips
// TIME-WAIT (Linux's tcp_max_tw_buckets), counted in
// tcp_timewait_overflow.
//
// A record's tuple is in the engine's table under a negative index, ^k
// for record k, so one lookup finds a connection or a record, and the
// ephemeral port choice skips both. The records sit in a list in the
// order their 2 MSL ends (most join at the end: the timeout is one
// constant), whose head is one more deadline of the timer heap's top.

// twRec is one TIME-WAIT record.
type twRec struct {
	t              tuple
	at             int64  // when 2 MSL ends
	ackAt          int64  // 1 + when the last rate-limited ACK left (0: none)
	sndNxt, rcvNxt uint32 // our sequence number after our FIN, the peer's after its FIN
	tsRecent       uint32
	tsOff          uint32
	prev, next     int32 // the expiry list; next links the free list
	wnd            uint16
	tsOK           bool
}

// twTable holds the records: grown up to Options.MaxTimeWait, then
// reused through the free list.
type twTable struct {
	recs       []twRec
	free       int32 // first free record, -1: none
	head, tail int32 // the expiry list, -1: empty
	n          int   // records in use
}

func (tw *twTable) init() { tw.free, tw.head, tw.tail = -1, -1, -1 }

// nextAt is the earliest end of 2 MSL, and false when no record is used.
func (tw *twTable) nextAt() (int64, bool) {
	if tw.head < 0 {
		return 0, false
	}
	return tw.recs[tw.head].at, true
}

// TimeWaits returns the number of TIME-WAIT records in use.
func (e *Engine) TimeWaits() int { return e.tw.n }

// toTimeWait moves connection c, in TIME-WAIT and held by no one, to a
// record, and gives its slot back. An ACK the connection owes (the one
// of the peer's FIN) leaves first.
func (e *Engine) toTimeWait(c *Conn) {
	if c.ackNow && c.macOK {
		c.sendAck()
	}
	tw := &e.tw
	k := tw.free
	switch {
	case k >= 0:
		tw.free = tw.recs[k].next
	case len(tw.recs) < e.o.MaxTimeWait:
		tw.recs = append(tw.recs, twRec{})
		k = int32(len(tw.recs) - 1)
	default:
		e.cnt[cTCPTimeWaitOverflow]++
		c.toClosed(nil)
		return
	}
	tw.n++
	e.cnt[cTCPTimeWaitRecords]++
	r := &tw.recs[k]
	*r = twRec{t: tuple{c.raddr, c.lport, c.rport}, at: c.tWait, sndNxt: c.sndMax, rcvNxt: c.rcvNxt,
		tsRecent: c.tsRecent, tsOff: c.tsOff, tsOK: c.tsOK,
		wnd: uint16(min(c.rcvWnd()>>c.rcvWS, 0xffff)), prev: -1, next: -1}
	e.peerRef(r.t.raddr) // the record holds the connection's IPv6 alias (engine6.go)
	c.toClosed(nil)
	e.table[r.t] = ^k
	e.twLink(k)
	e.top = min(e.top, tw.recs[tw.head].at)
}

// twLink puts record k into the expiry list by its time, searching from
// the end.
func (e *Engine) twLink(k int32) {
	tw := &e.tw
	r := &tw.recs[k]
	p := tw.tail
	for p >= 0 && tw.recs[p].at > r.at {
		p = tw.recs[p].prev
	}
	r.prev = p
	if p < 0 {
		r.next, tw.head = tw.head, k
	} else {
		r.next, tw.recs[p].next = tw.recs[p].next, k
	}
	if r.next < 0 {
		tw.tail = k
	} else {
		tw.recs[r.next].prev = k
	}
}

// twUnlink takes record k out of the expiry list.
func (e *Engine) twUnlink(k int32) {
	tw := &e.tw
	r := &tw.recs[k]
	if r.prev < 0 {
		tw.head = r.next
	} else {
		tw.recs[r.prev].next = r.next
	}
	if r.next < 0 {
		tw.tail = r.prev
	} else {
		tw.recs[r.next].prev = r.prev
	}
	r.prev, r.next = -1, -1
}

// twFree ends record k: its tuple is free again.
func (e *Engine) twFree(k int32) {
	tw := &e.tw
	e.twUnlink(k)
	e.unlist(tw.recs[k].t)
	tw.recs[k] = twRec{next: tw.free}
	tw.free = k
	tw.n--
}

// twExpire ends the records whose 2 MSL is over.
func (e *Engine) twExpire() {
	tw := &e.tw
	for tw.head >= 0 && tw.recs[tw.head].at <= e.now {
		e.twFree(tw.head)
	}
}

// twInput runs segment s on record k, and reports whether it is done
// with: false when s is a SYN that ends TIME-WAIT (the listener takes it).
func (e *Engine) twInput(k int32, s *segment) bool {
	r := &e.tw.recs[k]
	switch {
	case s.flags&(flagSYN|flagACK|flagRST) == flagSYN && r.reusable(s):
		e.twFree(k) // RFC 9293 §3.10.7.4 note, RFC 6191: a new SYN ends TIME-WAIT
		return false
	case s.flags&flagRST != 0:
		if s.seq == r.rcvNxt {
			e.twFree(k) // as a connection in TIME-WAIT takes an exact RST
		}
		return true
	}
	if s.flags&flagFIN != 0 {
		// The peer's FIN again: our ACK was lost. Acknowledge it and
		// restart the 2 MSL timeout (§3.10.7.4).
		r.at = e.now + int64(e.o.TimeWait)
		e.twUnlink(k)
		e.twLink(k)
		e.twAck(r, s)
		return true
	}
	if s.seqLen() == 0 && s.seq == r.rcvNxt {
		return true // an ACK: nothing to answer
	}
	// Anything else is answered with an ACK, at most one per
	// oowAckInterval (rejectAck's rule).
	if r.ackAt != 0 && e.now+1-r.ackAt < oowAckInterval {
		e.cnt[cTCPRejectAcksLimited]++
		return true
	}
	r.ackAt = e.now + 1
	e.twAck(r, s)
	return true
}

// reusable is twReusable for a record.
func (r *twRec) reusable(s *segment) bool {
	if r.tsOK && s.hasTS {
		return seqGT(s.tsVal, r.tsRecent)
	}
	return seqGT(s.seq, r.rcvNxt)
}

// twAck sends record r's ACK back to where s came from, with timestamps
// when the connection had them.
func (e *Engine) twAck(r *twRec, s *segment) {
	hl := tcpLen
	if r.tsOK {
		hl += 12
	}
	t := e.tcpFrame(s.srcMAC, s.src, hl)
	putTCP(t, r.t.lport, r.t.rport, r.sndNxt, r.rcvNxt, hl, flagACK, r.wnd)
	if r.tsOK {
		binary.BigEndian.PutUint32(t[20:], tsLayout)
		binary.BigEndian.PutUint32(t[24:], uint32(e.wall()/1e6)+r.tsOff)
		binary.BigEndian.PutUint32(t[28:], r.tsRecent)
	}
	binary.BigEndian.PutUint16(t[16:], fold(csum(e.pseudoTo(s.src, hl), t[:hl])))
	if e.send() {
		e.cnt[cTCPSegmentsOut]++
	}
}
