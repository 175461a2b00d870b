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
	if l.synRcvd >= e.o.SYNBacklog || e.synRcvd >= e.o.MaxSYNReceived || len(e.free) == 0 {
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
// no state (RFC 4987 §3.6). Only the MSS survives: no window scale, SACK
// or timestamps on such a connection.
func (l *Listener) sendCookie(s *segment) {
	e := l.e
	mss := uint16(536)
	if s.hasMSS && s.mss != 0 { // 0: as absent (peerOptions)
		mss = s.mss
	}
	mss = min(mss, uint16(e.mssFor(s.src)))
	e.sendBare(s, e.cookie(s, mss), s.seq+1, flagSYN|flagACK, uint16(min(e.o.RecvBuf, 0xffff)), uint16(e.mssFor(s.src)))
	e.cnt[cTCPCookiesSent]++
	l.cookieAt = e.now + 1
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
	c.sndWS, c.rcvWS = 0, 0
	c.rcvCap = min(c.rcvCap, 0xffff)
	c.rcvAdv = c.rcvNxt + uint32(min(e.o.RecvBuf, 0xffff))
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
