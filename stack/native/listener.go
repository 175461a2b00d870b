package native

import "time"

// Listener is a listening port of an Engine (RFC 9293 LISTEN). Use it
// from the engine's goroutine only.
type Listener struct {
	e       *Engine
	port    uint16
	backlog int
	queue   []int32 // established, not yet accepted
	synRcvd int
	closed  bool
	// cookieAt is 1 + when the listener last sent a SYN cookie (0:
	// never): a bare ACK is tried as a cookie only within cookieValid of
	// it (Linux: tcp_synq_no_recent_overflow).
	cookieAt int64

	recvBuf             int
	keepIdle, keepIntvl time.Duration
	keepCnt             int
}

// Listen opens port for connections; backlog bounds the connections that
// completed their handshake and wait for Accept (default SYNBacklog).
func (e *Engine) Listen(port uint16, backlog int) (*Listener, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if port == 0 || e.listeners[port] != nil {
		return nil, ErrPortInUse
	}
	if backlog <= 0 {
		backlog = e.o.SYNBacklog
	}
	l := &Listener{e: e, port: port, backlog: backlog, queue: make([]int32, 0, backlog)}
	e.listeners[port] = l
	return l, nil
}

// Port returns the listening port.
func (l *Listener) Port() uint16 { return l.port }

// SetRecvBuf limits the receive window of the connections accepted from
// now on (see Conn.SetRecvBuf).
func (l *Listener) SetRecvBuf(n int) { l.recvBuf = n }

// SetKeepalive turns keepalive on for the connections accepted from now
// on, armed from their handshake (see Conn.SetKeepalive).
func (l *Listener) SetKeepalive(idle, interval time.Duration, count int) {
	l.keepIdle, l.keepIntvl, l.keepCnt = idle, interval, count
}

// Accept returns the next connection that completed its handshake, and
// false when none is waiting. The connection may already have been reset
// by its peer (Read returns its error).
func (l *Listener) Accept() (*Conn, bool) {
	if len(l.queue) == 0 {
		return nil, false
	}
	c := &l.e.conns[l.queue[0]]
	copy(l.queue, l.queue[1:])
	l.queue = l.queue[:len(l.queue)-1]
	c.queued, c.user = false, true
	return c, true
}

// Pending returns how many connections wait for Accept.
func (l *Listener) Pending() int { return len(l.queue) }

// Close stops listening: connections not accepted yet are reset, the port
// answers RST from now on.
func (l *Listener) Close() {
	if l.closed {
		return
	}
	l.closed = true
	e := l.e
	delete(e.listeners, l.port)
	for _, i := range l.queue {
		c := &e.conns[i]
		c.queued = false
		if c.state != Closed {
			c.Abort()
		} else {
			e.release(c)
		}
	}
	l.queue = l.queue[:0]
	for i := range e.conns {
		if c := &e.conns[i]; c.l == l && c.state == SynReceived {
			c.sendRST(c.sndMax)
			c.toClosed(ErrAborted)
		}
	}
}

func (l *Listener) full() bool { return len(l.queue) >= l.backlog }

func (l *Listener) enqueue(c *Conn) {
	c.queued = true
	l.queue = append(l.queue, c.idx)
}

// input is RFC 9293 §3.10.7.2 for a segment to the listening port.
func (l *Listener) input(s *segment) {
	e := l.e
	switch {
	case s.flags&flagRST != 0:
		return
	case s.flags&flagACK != 0:
		if s.flags&flagSYN == 0 && !e.o.NoSYNCookies {
			if l.cookieAt == 0 || e.now+1-l.cookieAt > cookieValid {
				e.cnt[cTCPCookiesUnsolicited]++ // no cookie went out lately: not one of ours
			} else if l.cookieAck(s) {
				return
			}
		}
		e.resetFor(s)
		return
	case s.flags&flagSYN == 0:
		e.cnt[cTCPNoACK]++ // no SYN, no ACK, no RST: dropped (§3.10.7.2 fourth)
		return
	case s.flags&flagFIN != 0:
		e.cnt[cTCPSynFin]++ // SYN+FIN: no host takes it
		return
	}
	if l.full() {
		e.cnt[cTCPListenOverflow]++
		return
	}
	if l.synRcvd >= e.o.SYNBacklog || e.synRcvd >= e.o.MaxSYNReceived || len(e.free) == 0 || e.o.AlwaysSYNCookies && !e.o.NoSYNCookies {
		if e.synRcvd >= e.o.MaxSYNReceived {
			e.cnt[cTCPSynRcvdOverflow]++
		}
		if e.o.NoSYNCookies {
			e.cnt[cTCPListenOverflow]++
			return
		}
		l.sendCookie(s)
		return
	}
	c := e.newConn(s.src, s.dport, s.sport)
	if c == nil {
		return
	}
	c.l, c.state = l, SynReceived
	l.synRcvd++
	e.synRcvd++
	e.passiveHop(c, s)
	if l.recvBuf > 0 {
		c.SetRecvBuf(l.recvBuf)
	}
	if l.keepIdle > 0 {
		c.keepIdle, c.keepIntvl, c.keepCnt = l.keepIdle, l.keepIntvl, l.keepCnt
		if c.keepIntvl <= 0 {
			c.keepIntvl = e.o.KeepaliveInterval
		}
		if c.keepCnt <= 0 {
			c.keepCnt = e.o.KeepaliveCount
		}
	}
	c.setIRS(s.seq)
	c.peerOptions(s, true)
	if c.tsOK {
		c.tsRecent = s.tsVal
	}
	c.sndUna, c.sndNxt, c.sndMax = c.iss, c.iss, c.iss
	c.sndWnd = uint32(s.wnd) // unscaled in a SYN (RFC 7323 §2.2)
	c.needSyn = true
	e.markDirty(c)
	// Data in the SYN is not taken before the handshake completes: the
	// peer sends it again (RFC 9293 §3.10.7.2 allows queuing it; Linux
	// drops it too).
}

// sendCookie answers SYN s with a SYN-ACK whose ISN is a cookie, keeping
// no state (RFC 4987 §3.6). The ISN holds the MSS. The other options of
// the SYN, which RFC 4987 §3.6 notes a cookie loses, come back in the
// peer's timestamp echo when the SYN offered timestamps (RFC 7323 §3.2:
// every segment after the SYN-ACK echoes its TSval): the SYN-ACK then
// offers timestamps, the window scale and SACK the SYN offered, and its
// TSval's low bits say which (cookieTS). Without timestamps the
// connection has none of them, as on Linux.
func (l *Listener) sendCookie(s *segment) {
	e := l.e
	mss := uint16(536)
	if s.hasMSS && s.mss != 0 { // 0: as absent (peerOptions)
		mss = s.mss
	}
	mss = min(mss, uint16(e.mssFor(s.src)))
	var opt [20]byte
	n := e.cookieSynAckOptions(&opt, s, uint16(e.mssFor(s.src)))
	e.sendBare(s, e.cookie(s, mss), s.seq+1, flagSYN|flagACK, uint16(min(e.o.RecvBuf, 0xffff)), opt[:n])
	e.cnt[cTCPCookiesSent]++
	l.cookieAt = e.now + 1
}

// The low bits of a cookie SYN-ACK's TSval (cookieTS): the peer's window
// scale (0–14; cookieNoWS when it offered none or we take none) and
// whether SACK is on. The bits above are the connection's timestamp
// clock, rounded down so that the TSval is never ahead of the clock the
// connection goes on with: its timestamps never go back (RFC 7323 §5.3's
// monotonic TSval, which the peer's PAWS holds us to).
const (
	cookieTSMask = 0x1f
	cookieWSMask = 0xf
	cookieNoWS   = 0xf
	cookieSACK   = 0x10
)

// flowTSClock is the timestamp clock of the connection segment s would
// make (its 4-tuple's tsOffset, as newConn sets it; Conn.tsNow).
func (e *Engine) flowTSClock(s *segment) uint32 {
	return uint32(e.wall()/1e6) + e.tsOffset(s.src, s.dport, s.sport)
}

// cookieTS is the TSval of a cookie SYN-ACK answering SYN s: the clock of
// the connection s would make (tsOffset of its 4-tuple, as newConn sets
// it), its low bits the options the connection takes.
func (e *Engine) cookieTS(s *segment) uint32 {
	bits := uint32(cookieNoWS)
	if s.hasWS && !e.o.NoWindowScale {
		bits = uint32(s.wscale) // at most 14 (parse)
	}
	if s.sackOK && !e.o.NoSACK {
		bits |= cookieSACK
	}
	clock := e.flowTSClock(s)
	ts := clock&^cookieTSMask | bits
	if seqGT(ts, clock) {
		ts -= cookieTSMask + 1
	}
	return ts
}

// cookieTSOptions reads the options of a cookie connection from the
// timestamp echo of its ACK s: the peer's window scale (cookieNoWS: none)
// and SACK. false when s has no timestamps, or its echo is no TSval of
// ours from the cookie's lifetime (a peer that never saw our clock: it
// is keyed by the flow, RFC 7323 §5.4, and cannot be guessed).
func (e *Engine) cookieTSOptions(s *segment) (ws uint8, sack, ok bool) {
	if !s.hasTS || e.o.NoTimestamps {
		return 0, false, false
	}
	if e.flowTSClock(s)-s.tsEcr > uint32(cookieValid/1e6) { // not sent, or too long ago
		return 0, false, false
	}
	ws = uint8(s.tsEcr & cookieWSMask)
	if ws > 14 && ws != cookieNoWS || ws != cookieNoWS && e.o.NoWindowScale {
		return 0, false, false
	}
	return ws, s.tsEcr&cookieSACK != 0 && !e.o.NoSACK, true
}

// cookieValid is how long after the last cookie a listener checks bare
// ACKs as cookies: the two counter steps a cookie is good for.
const cookieValid = 2 * cookieStep

// cookieAck makes a connection from the ACK of a cookie SYN-ACK; false
// when it is not one.
func (l *Listener) cookieAck(s *segment) bool {
	e := l.e
	mss, ok := e.checkCookie(s)
	if !ok {
		e.cnt[cTCPCookiesBad]++
		return false
	}
	if l.full() {
		e.cnt[cTCPListenOverflow]++
		return true
	}
	c := e.newConn(s.src, s.dport, s.sport)
	if c == nil {
		// No slot: dropped, as Linux does with tcp_abort_on_overflow 0,
		// so that a client of a burst gets in on a retransmission once a
		// slot frees. It is not left hanging: once the cookie is past its
		// two counter steps, its next segment fails the check and is
		// answered with a RST.
		e.cnt[cTCPCookiesNoSlot]++
		return true
	}
	e.cnt[cTCPCookiesOK]++
	c.l = l
	e.passiveHop(c, s)
	c.iss = s.ack - 1
	c.setIRS(s.seq - 1)
	c.peerMSS = int(min(mss, uint16(e.mssFor(s.src))))
	c.smss = c.peerMSS
	c.rcvAdv = c.rcvNxt + uint32(min(e.o.RecvBuf, 0xffff)) // the SYN-ACK's window
	if ws, sack, ok := e.cookieTSOptions(s); ok {
		// The options the SYN-ACK offered back (sendCookie), as
		// peerOptions takes them from a SYN.
		e.cnt[cTCPCookiesTSOptions]++
		c.tsOK, c.tsRecent, c.sackOK = true, s.tsVal, sack
		c.smss -= 12 // RFC 6691
		c.rmss = e.mssFor(s.src) - 12
		c.wsOK = ws != cookieNoWS
		if c.wsOK {
			c.sndWS = ws // c.rcvWS is newConn's, the scale the SYN-ACK offered
		}
	}
	if !c.wsOK {
		c.sndWS, c.rcvWS = 0, 0
		c.rcvCap = min(c.rcvCap, 0xffff)
	}
	c.establish(s)
	c.sndUna, c.sndNxt, c.sndMax = s.ack, s.ack, s.ack
	l.enqueue(c)
	e.cnt[cTCPPassiveOpens]++
	if len(s.payload) > 0 || s.flags&flagFIN != 0 {
		c.dataInput(s)
	}
	return true
}

// twReusable reports whether SYN s may end TIME-WAIT connection c (RFC
// 1122 §4.2.2.13: its sequence number is above the old connection's; RFC
// 6191: or its timestamp is newer).
func (e *Engine) twReusable(c *Conn, s *segment) bool {
	if c.tsOK && s.hasTS {
		return seqGT(s.tsVal, c.tsRecent)
	}
	return seqGT(s.seq, c.rcvNxt)
}
