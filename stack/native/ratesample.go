package native

// Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation,
// as Linux's tcp_rate.c): BBR's measure of the path. The connection
// counts the bytes the peer received (delivered: acknowledged
// cumulatively or SACKed) and when the last of them was known
// (deliveredAt); each segment it sends records those two and the start
// of its flight (firstSentAt), and an ACK that delivers segments makes
// one rate sample from the latest sent of them: the bytes delivered
// since it left over the longer of its send and ACK intervals (§3.3).
// A sample taken while the application had nothing more to send is
// app-limited (§3.4): it says the path was not filled, not how much it
// holds.

// txRec is one transmission's snapshot (§3.2).
type txRec struct {
	start, end  uint32
	delivered   uint64 // C.delivered when it left
	deliveredAt int64  // C.delivered_time then
	firstSentAt int64  // C.first_sent_time then
	sentAt      int64
	appLimited  bool
	rtx         bool // sent again: its RTT is not its own (Karn)
	done        bool // delivered (SACKed; cumulatively acknowledged records leave)
}

// rateState is a connection's delivery-rate estimation: the counters
// of §2 and its transmissions in sequence order in a ring whose length
// is a power of two.
type rateState struct {
	delivered   uint64 // C.delivered, bytes
	deliveredAt int64  // C.delivered_time
	firstSentAt int64  // C.first_sent_time
	appLimited  uint64 // C.app_limited: 0, or the delivered count that ends the app-limited phase
	// xmitTs is RFC 8985 §6.2's RACK.xmit_ts: the latest send time of
	// a segment known delivered (a retransmission only when its ACK
	// came at least a minimum RTT after it left, so that it was not
	// the original's).
	xmitTs  int64
	recs    []txRec
	head, n int
}

// rateSample is what one ACK tells (§3.3's rs).
type rateSample struct {
	ok             bool    // a valid sample: bw is set
	bw             float64 // bytes per second
	rtt            int64   // ns, -1 when unknown
	priorDelivered uint64  // P.delivered: for BBR's round counting
	appLimited     bool
	newly          uint32 // bytes delivered by this ACK
}

// rateMinRecs is the ring a connection starts with: a flight of 64
// segments (it grows when more are in flight).
const rateMinRecs = 64

// init starts the ring at rateMinRecs, reusing r's if it has one: it
// grows with the flight (grow), up to rateMaxRecs, so that a connection
// that exchanges requests and answers holds 3 KiB of records, not one
// per segment of its send buffer, and its records stay in the cache.
func (r *rateState) init() {
	recs := r.recs
	if recs == nil {
		recs = make([]txRec, rateMinRecs)
	}
	clear(recs)
	*r = rateState{recs: recs}
}

// rateSent records a transmission of [seq, seq+n) (§3.2): new data at
// the ring's tail, a retransmission in place of the record it repeats.
func (c *Conn) rateSent(r *rateState, seq uint32, n int) {
	now := c.e.now
	if c.sndMax == c.sndUna {
		// Nothing was in flight before this segment: a new flight
		// starts, and its intervals are measured from now.
		r.firstSentAt, r.deliveredAt = now, now
	}
	snap := txRec{delivered: r.delivered, deliveredAt: r.deliveredAt, firstSentAt: r.firstSentAt,
		sentAt: now, appLimited: r.appLimited != 0}
	end := seq + uint32(n)
	if seqLT(seq, c.sndMax) {
		for i := r.find(seq); i < r.n; i++ {
			p := r.at(i)
			if !seqLT(p.start, end) {
				break
			}
			if seqLT(seq, p.end) {
				s, e := p.start, p.end
				*p = snap
				p.start, p.end, p.rtx = s, e, true
			}
		}
		if !seqLT(c.sndMax, end) {
			return
		}
		seq = c.sndMax // the rest is new data
	}
	if r.n == len(r.recs) && !r.grow() {
		c.e.cnt[cTCPRateUnrecorded]++
		return
	}
	snap.start, snap.end = seq, end
	r.recs[(r.head+r.n)&(len(r.recs)-1)] = snap
	r.n++
}

// rateMaxRecs bounds the ring (a power of two): segments shorter than
// the MSS (the ends of writes) may be more than the send buffer holds
// full ones.
const rateMaxRecs = 1 << 16

// grow doubles the ring, up to rateMaxRecs records.
func (r *rateState) grow() bool {
	if len(r.recs) >= rateMaxRecs {
		return false
	}
	nr := make([]txRec, min(2*len(r.recs), rateMaxRecs))
	for i := 0; i < r.n; i++ {
		nr[i] = *r.at(i)
	}
	r.recs, r.head = nr, 0
	return true
}

// at is the i-th record from the oldest.
func (r *rateState) at(i int) *txRec { return &r.recs[(r.head+i)&(len(r.recs)-1)] }

// find returns the index of the first record that ends after seq (r.n
// when none does): records are in sequence order.
func (r *rateState) find(seq uint32) int {
	lo, hi := 0, r.n
	for lo < hi {
		m := (lo + hi) / 2
		if seqGT(r.at(m).end, seq) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// rateAck takes an ACK s (§3.3) into rs: una is SND.UNA before it,
// minRTT the path's minimum RTT (0: unknown). It counts what the ACK
// delivered and makes the rate sample of the latest sent of the segments
// it delivered.
func (c *Conn) rateAck(rs *rateSample, r *rateState, s *segment, una uint32, minRTT int64) {
	now := c.e.now
	*rs = rateSample{rtt: -1}
	// Delivered: what the cumulative ACK moved over, less the records
	// in it that were SACKed before (counted then), plus the records
	// SACKed now. A segment the peer SACKed, then the scoreboard forgot
	// (a timeout clears it) and the peer acknowledged again is counted
	// once, not twice: a timeout's go-back-N otherwise read as a burst
	// of delivery far above the path's rate.
	d := int64(c.sndUna - una)
	// p is the latest sent of the records delivered: a record a
	// cumulative ACK removes from the ring stays in its slot until
	// rateSent reuses it, after this ACK.
	var p *txRec
	mask := len(r.recs) - 1
	for r.n > 0 {
		q := &r.recs[r.head]
		if seqGT(q.end, c.sndUna) {
			break
		}
		if !q.done {
			p = rateLatest(p, q)
		} else {
			d -= int64(q.end - q.start)
		}
		r.head = (r.head + 1) & mask
		r.n--
	}
	// What this ACK SACKed lies in the scoreboard's blocks that hold
	// its SACK blocks: only their records are looked at, so that an ACK
	// costs what it covers, not the whole flight.
	for j := 0; j < s.nsack && c.nsacked > 0; j++ {
		m, ok := c.sackedAt(s.sacks[j].start)
		if !ok {
			continue // a D-SACK, or a block the scoreboard could not take
		}
		for i := r.find(m.start); i < r.n; i++ {
			q := r.at(i)
			if seqGT(q.end, m.end) {
				break
			}
			if !q.done && seqGEQ(q.start, m.start) {
				q.done = true
				d += int64(q.end - q.start)
				p = rateLatest(p, q)
			}
		}
	}
	if d <= 0 {
		return
	}
	rs.newly = uint32(d)
	r.delivered += uint64(d)
	r.deliveredAt = now
	if r.appLimited != 0 && r.delivered > r.appLimited {
		r.appLimited = 0 // §3.4: the app-limited phase is over
	}
	if p == nil {
		return
	}
	if !p.rtx || minRTT > 0 && now-p.sentAt >= minRTT {
		r.xmitTs = max(r.xmitTs, p.sentAt)
	}
	rs.priorDelivered = p.delivered
	rs.appLimited = p.appLimited
	if !p.rtx {
		rs.rtt = now - p.sentAt
	}
	r.firstSentAt = p.sentAt
	sendElapsed := p.sentAt - p.firstSentAt
	ackElapsed := r.deliveredAt - p.deliveredAt
	interval := max(sendElapsed, ackElapsed)
	if interval <= 0 {
		return
	}
	// §3.3: an interval shorter than the minimum RTT is a burst of ACKs
	// (compressed, or a stretch ACK), not a rate of the path.
	if minRTT > 0 && interval < minRTT {
		return
	}
	rs.ok = true
	rs.bw = float64(r.delivered-p.delivered) * 1e9 / float64(interval)
}

// rateLatest is the later sent of p (nil: none yet) and q, the one
// ending later when both left at once (§3.3: the sample comes from the
// most recently sent segment).
func rateLatest(p, q *txRec) *txRec {
	if p == nil || q.sentAt > p.sentAt || q.sentAt == p.sentAt && seqGT(q.end, p.end) {
		return q
	}
	return p
}

// rateAppLimited marks the connection app-limited (§3.4) when sending
// stopped for want of data: nothing unsent, not held back by cwnd, less
// than cwnd in flight.
func (c *Conn) rateAppLimited(r *rateState) {
	if c.sLen > int(c.sndNxt-c.sndUna) || c.inRecovery || seqLT(c.sndNxt, c.sndMax) {
		return
	}
	if p := c.pipe(); p < c.cwnd {
		r.appLimited = max(r.delivered+uint64(p), 1)
	}
}

// rtxLostAt reports whether the retransmission of the segment at seq is
// lost by RFC 8985 §6.2's rule on the records' send times: a segment
// sent after it was delivered (RACK.xmit_ts) and reoWait went by since
// it left. The sequence-space test of lostRetransmit needs new data sent
// after the retransmission to be SACKed; a sender whose send buffer the
// holes fill has none to send, and only the RTO was left.
func (r *rateState) rtxLostAt(seq uint32, now, reoWait int64) bool {
	i := r.find(seq)
	if i >= r.n {
		return false
	}
	q := r.at(i)
	return q.rtx && !q.done && seqLEQ(q.start, seq) && q.sentAt < r.xmitTs && now-q.sentAt >= reoWait
}
