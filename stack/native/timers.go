package native

// Timers are data: each connection keeps its deadlines (RTO, delayed ACK,
// persist, keepalive, TIME-WAIT) and sits in the engine's min-heap under
// the earliest. Moving a deadline later leaves the heap alone (the entry
// fires early and is put back at the right time), so the per-segment RTO
// restart costs nothing; moving one earlier sifts the entry up.

// earliest is the connection's first deadline, 0 when none is armed.
func (c *Conn) earliest() int64 {
	// Deadlines are positive (the engine's time plus a positive
	// duration: New refuses a negative one): t-1 as unsigned puts an
	// unarmed 0 above every armed one, and the +1 turns "none" back
	// into 0.
	m := min(uint64(c.tRTO-1), uint64(c.tDelack-1), uint64(c.tPersist-1),
		uint64(c.tKeep-1), uint64(c.tWait-1), uint64(c.rk.tLoss-1), uint64(c.tPace-1))
	return int64(m + 1)
}

// arm makes sure the heap holds c no later than its earliest deadline.
func (e *Engine) arm(c *Conn) {
	at := c.earliest()
	if at == 0 {
		return
	}
	if c.heapIdx < 0 {
		c.heapAt = at
		c.heapIdx = int32(len(e.heap))
		e.heap = append(e.heap, c.idx)
		e.siftUp(int(c.heapIdx))
		e.top = min(e.top, at)
		return
	}
	if at < c.heapAt {
		c.heapAt = at
		e.siftUp(int(c.heapIdx))
		e.top = min(e.top, at)
	}
}

// noTimer is top with the heap empty.
const noTimer = int64(^uint64(0) >> 1)

// setTop reads the earliest deadline of the heap and of the TIME-WAIT
// records into top after a removal.
func (e *Engine) setTop() {
	e.top = noTimer
	if len(e.heap) > 0 {
		e.top = e.conns[e.heap[0]].heapAt
	}
	if at, ok := e.tw.nextAt(); ok && at < e.top {
		e.top = at
	}
	if e.six != nil && e.six.due < e.top {
		e.top = e.six.due // engine6.go: neighbour and reassembly timers
	}
	if at := e.pool.trimAt; at != 0 && at < e.top {
		e.top = at
	}
}

func (e *Engine) heapRemove(c *Conn) {
	i := int(c.heapIdx)
	if i < 0 {
		return
	}
	last := len(e.heap) - 1
	e.swap(i, last)
	e.heap = e.heap[:last]
	c.heapIdx = -1
	if i < last {
		e.siftDown(i)
		e.siftUp(i)
	}
	e.setTop()
}

func (e *Engine) less(i, j int) bool {
	return e.conns[e.heap[i]].heapAt < e.conns[e.heap[j]].heapAt
}

func (e *Engine) swap(i, j int) {
	h := e.heap
	h[i], h[j] = h[j], h[i]
	e.conns[h[i]].heapIdx = int32(i)
	e.conns[h[j]].heapIdx = int32(j)
}

func (e *Engine) siftUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(i, p) {
			return
		}
		e.swap(i, p)
		i = p
	}
}

func (e *Engine) siftDown(i int) {
	n := len(e.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && e.less(r, l) {
			m = r
		}
		if !e.less(m, i) {
			return
		}
		e.swap(i, m)
		i = m
	}
}

// runTimers fires what is due: ARP retries, the TIME-WAIT records whose
// 2 MSL is over (top covers them) and every connection whose heap
// entry's time has come. Its test inlines into PollAt and FlushAt,
// which call it on every poll: the call happens only with a connection
// timer due, an ARP request or a reassembly pending.
func (e *Engine) runTimers() {
	if e.top <= e.now || e.arp.asking > 0 || e.reasmUsed > 0 {
		e.runDue()
	}
}

// runDue is runTimers past its test.
func (e *Engine) runDue() {
	if at, ok := e.arp.next(); ok && at <= e.now {
		e.arpTimers()
	}
	if at, ok := e.reasmNext(); ok && at <= e.now {
		e.reasmTimers()
	}
	if at, ok := e.tw.nextAt(); ok && at <= e.now {
		e.twExpire()
	}
	if e.six != nil && e.six.due <= e.now {
		e.timers6()
	}
	if at := e.pool.trimAt; at != 0 && at <= e.now {
		e.trim() // bufpool.go
	}
	for len(e.heap) > 0 && e.conns[e.heap[0]].heapAt <= e.now {
		c := &e.conns[e.heap[0]]
		e.heapRemove(c)
		c.timers()
		if c.state != Closed {
			e.arm(c)
		}
	}
	e.setTop()
}

// timers runs the connection's deadlines that passed.
func (c *Conn) timers() {
	now := c.e.now
	if c.tWait != 0 && c.tWait <= now {
		c.toClosed(nil) // TIME-WAIT over, or an orphan's FIN-WAIT-2
		return
	}
	if c.rk.kind == lossTLP && c.rk.tLoss != 0 && c.rk.tLoss <= now {
		c.onLossTimer() // RFC 8985 §7.2: a PTO capped at the RTO goes in its place
	}
	if c.tRTO != 0 && c.tRTO <= now {
		c.onRTO()
		if c.state == Closed {
			return
		}
	}
	if c.rk.tLoss != 0 && c.rk.tLoss <= now {
		c.onLossTimer() // rack.go: RACK's reordering timer, TLP's PTO
	}
	if c.tPersist != 0 && c.tPersist <= now {
		c.onPersist()
	}
	if c.tPace != 0 && c.tPace <= now {
		c.onPaceTimer() // pacing.go
	}
	if c.tDelack != 0 && c.tDelack <= now {
		c.tDelack = 0
		c.sendAckNow()
	}
	if c.tKeep != 0 && c.tKeep <= now {
		c.onKeepalive()
	}
}

// onRTO is RFC 6298 §5.4–5.7: retransmit from SND.UNA, back the timer
// off, collapse cwnd (RFC 5681 §3.1), give up after MaxRetries.
func (c *Conn) onRTO() {
	e := c.e
	c.tRTO = 0
	mss := uint32(c.smss)
	if c.state == SynSent || c.state == SynReceived {
		limit := e.o.SYNRetries
		if c.l != nil {
			limit = e.o.SYNACKRetries // a passive open: Linux's tcp_synack_retries
		}
		if c.retries >= limit {
			c.fail(ErrTimedOut)
			return
		}
		c.retries++
		e.cnt[cTCPTimeouts]++
		c.rto = min(2*c.rto, e.maxRTO)
		c.needSyn = true
		e.markDirty(c)
		return
	}
	if c.sndUna == c.sndMax {
		return
	}
	if c.retries >= e.o.MaxRetries {
		c.fail(ErrTimedOut)
		return
	}
	if c.userTimedOut() {
		return
	}
	c.eifelArm()
	c.retries++
	e.cnt[cTCPTimeouts]++
	c.ssthresh = c.rtoThreshold()
	c.cwnd, c.caAcc = mss, 0
	c.inRecovery, c.rtxOne, c.dupacks, c.prr.on = false, false, 0, false
	c.rackRTO()
	c.rtxd.unknown = true // go-back-N: D-SACKs after it prove no single retransmission spurious
	if c.retries > 1 {
		// RFC 6675 §5.1: the peer may have reneged on its SACKs. The
		// first timeout keeps them, as Linux's tcp_enter_loss does
		// unless it saw the peer renege: the go-back-N that follows
		// steps over SACKed data (skipSACKed) instead of sending the
		// whole flight again, which at a few percent loss and hundreds
		// of segments in flight cost more than the loss. A peer that
		// did renege costs one timeout more.
		c.nsacked = 0
	}
	c.recover, c.recoverSet = c.sndMax, true
	c.rto = min(2*c.rto, e.maxRTO)
	c.rttTiming = false
	c.sndNxt = c.sndUna
	e.markDirty(c)
}

// armPersist starts the persist timer when the peer's window is closed
// and nothing is in flight (RFC 9293 §3.8.6.1).
func (c *Conn) armPersist() {
	if c.tPersist != 0 {
		return
	}
	c.tRTO = 0
	c.tPersist = c.e.now + backoff(c.rto, c.persistShift, c.e.maxRTO)
	c.e.arm(c)
}

// onPersist sends a zero-window probe: one byte beyond the window, again
// with an exponentially backed-off timer for as long as the peer keeps
// answering (RFC 1122 §4.2.2.17). It gives up, as Linux's
// tcp_probe_timer does, after MaxRetries probes without any ACK (the
// peer vanished with its window closed: ErrTimedOut), after
// OrphanRetries probes of a connection the application closed (a peer
// that keeps its window shut cannot hold an orphan: RST, ErrAborted),
// and after UserTimeout without progress.
func (c *Conn) onPersist() {
	e := c.e
	c.tPersist = 0
	if c.sndWnd != 0 || c.sLen == 0 {
		e.markDirty(c)
		return
	}
	if int(c.persistProbes) >= e.o.MaxRetries {
		e.cnt[cTCPPersistTimeouts]++
		c.fail(ErrTimedOut)
		return
	}
	if !c.user && !c.queued && c.persistShift >= e.o.OrphanRetries {
		e.cnt[cTCPOrphanAborts]++
		// At the window's right edge, SND.UNA+SND.WND = SND.UNA here, as
		// Linux's tcp_acceptable_seq: the peer's RCV.NXT, which a RST
		// at SND.MAX (after the probe byte) would miss (RFC 5961 §3.2).
		c.sendRST(c.sndUna + c.sndWnd)
		c.fail(ErrAborted)
		return
	}
	if c.userTimedOut() {
		return
	}
	c.persistProbes++
	e.cnt[cTCPPersistProbes]++
	if c.persistShift < 30 {
		c.persistShift++
	}
	c.tPersist = e.now + backoff(c.rto, c.persistShift, e.maxRTO)
	if c.sndNxt == c.sndUna {
		c.sendSeg(c.sndUna, flagACK, 0, 1)
	} else {
		c.emit(c.sndUna, flagACK, 0, 1)
	}
}

// userTimedOut applies Options.UserTimeout when a retransmission or a
// probe is due: the first one starts the clock (stallAt, cleared by an
// ACK that moves SND.UNA or opens the window), and one due UserTimeout
// after it ends the connection. It reports whether it did.
func (c *Conn) userTimedOut() bool {
	e := c.e
	if e.o.UserTimeout <= 0 {
		return false
	}
	if c.stallAt == 0 {
		c.stallAt = e.now + 1
		return false
	}
	if e.now+1-c.stallAt < int64(e.o.UserTimeout) {
		return false
	}
	e.cnt[cTCPUserTimeouts]++
	c.fail(ErrTimedOut)
	return true
}

// armKeepalive starts keepalive from now (the handshake, RFC 1122
// §4.2.3.6).
func (c *Conn) armKeepalive() {
	if c.keepIdle <= 0 || !c.state.synchronized() {
		c.tKeep = 0
		return
	}
	c.lastRx = c.e.now
	c.tKeep = c.e.now + int64(c.keepIdle)
	c.e.arm(c)
}

// onKeepalive probes an idle connection (SEG.SEQ = SND.NXT-1, no data)
// and resets it after keepCnt unanswered probes.
func (c *Conn) onKeepalive() {
	e := c.e
	c.tKeep = 0
	if c.keepIdle <= 0 || c.state == TimeWait || !c.state.synchronized() {
		return
	}
	if c.keepProbes == 0 && e.now-c.lastRx < int64(c.keepIdle) {
		c.tKeep = c.lastRx + int64(c.keepIdle)
		return
	}
	if c.keepProbes >= c.keepCnt {
		c.sendRST(c.ackSeq())
		c.fail(ErrTimedOut)
		return
	}
	if c.sndUna != c.sndMax {
		c.tKeep = e.now + int64(c.keepIdle) // the RTO covers data in flight
		return
	}
	c.emit(c.sndNxt-1, flagACK, 0, 0)
	e.cnt[cTCPKeepaliveProbes]++
	c.keepProbes++
	c.tKeep = e.now + int64(c.keepIntvl)
}
