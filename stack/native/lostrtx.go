package native

// Lost retransmissions anywhere in the scoreboard (RFC 8985 §6.1–6.3).
//
// RFC 6675 sends each hole once per recovery: sendHoles walks up from
// rtxNext, and a retransmission that is lost again counts as in flight
// until the cumulative ACK reaches it (lostRetransmit then finds it at
// SND.UNA) or the RTO fires. RACK's rule (§6.2 step 5) needs no such
// wait: a segment, a retransmission included by its own send time, is
// lost when a segment sent after it was delivered and RACK.rtt plus the
// reordering window passed since it left.
//
// The sequence-space scoreboard has no send times, so the retransmissions
// of the current recovery are recorded here (rtxTable): each range, when
// it left, its place in the order of the episode's retransmissions and
// SND.MAX then. A segment sent after a recorded range was delivered when
//   - data above that SND.MAX (new data, sent after it) is SACKed;
//   - a range retransmitted after it is SACKed or acknowledged, no sooner
//     than the minimum RTT after it left (sooner, the original may have
//     arrived instead: Linux's tcp_rack_advance skips such a sample);
//   - under BBR, the delivery-rate records' RACK.xmit_ts is later than
//     its send time (ratesample.go).
//
// Such a range, itself neither acknowledged nor SACKed, is lost once
// SRTT plus the reordering window (rack.go reoWnd, which D-SACKs widen)
// passed since it left; until then RACK's timer (§6.3, kind lossRtx)
// waits for that moment, so that a lost retransmission at the end of a
// flight does not wait for the RTO. A range found lost leaves pipe (RFC
// 6675 §4: a lost segment not yet retransmitted is not in flight; sent
// again it counts once) and goes again, lowest first, before the holes
// above rtxNext, as pipe and cwnd (PRR) allow; the one at SND.UNA goes
// by rtxOne, as lostRetransmit's does, with the RTO re-armed behind it.
//
// The table holds rtxTableMax ranges; a retransmission beyond them is
// not recorded (tcp_lost_retransmit_untracked) and is found lost only at
// SND.UNA, as before. A timeout, and the start of a recovery, empty it.

// rtxTableMax bounds a connection's record of retransmissions in flight:
// a recovery of a window with as many holes as the scoreboard holds
// (maxBlocks), of four segments each (a range is recorded per segment
// sent). At maxBlocks, 16 MiB windows at 3% loss and 10 ms under BBR
// left 900 to 2,200 retransmissions a run untracked, each found lost
// again only at SND.UNA (dgramio-bulk --buf 16MiB, BENCHMARKS.md).
const rtxTableMax = 4 * maxBlocks

// rtxEntry is one retransmission of the current recovery.
type rtxEntry struct {
	start, end uint32
	mark       uint32 // SND.MAX when it left: data above it was sent after it
	order      uint32 // its place in the episode's retransmissions, from 1
	sentAt     int64
	lost       bool // found lost again and not yet sent again
}

// rtxTable is the record of a recovery's retransmissions in flight.
type rtxTable struct {
	e         []rtxEntry // sorted, disjoint; grows up to rtxTableMax
	order     uint32     // of the latest retransmission recorded
	delivered uint32     // the latest order known delivered (0: none)
	nlost     int        // entries with lost set
}

// rtxTableReset empties the record (a recovery begins, or a timeout
// ended one).
func (c *Conn) rtxTableReset() {
	if t := c.rk.rtx; t != nil {
		*t = rtxTable{e: t.e[:0]}
	}
}

// rtxRecord records the retransmission of [seq, end) in recovery: what it
// covers of earlier entries is this transmission's now.
func (c *Conn) rtxRecord(seq, end uint32) {
	if !c.inRecovery || !c.sackOK || c.e.o.NoRACK {
		return
	}
	t := c.rk.rtx
	if t == nil {
		t = &rtxTable{e: make([]rtxEntry, 0, 8)}
		c.rk.rtx = t
	}
	es := t.e
	i := 0
	for i < len(es) && seqLEQ(es[i].end, seq) {
		i++
	}
	at := i // where the new entry goes
	for i < len(es) && seqLT(es[i].start, end) {
		x := &es[i]
		switch {
		case seqLT(x.start, seq) && seqGT(x.end, end):
			// The new range in the middle of x: x's head stays, its
			// tail becomes an entry of its own.
			tail := *x
			tail.start = end
			x.end = seq
			if len(es) < rtxTableMax {
				es = append(es, rtxEntry{})
				copy(es[i+2:], es[i+1:])
				es[i+1] = tail
			} else {
				if tail.lost {
					t.nlost--
				}
				c.e.cnt[cTCPRtxUntracked]++ // dropped: in flight until SND.UNA reaches it
			}
			i++
			at = i
		case seqLT(x.start, seq):
			x.end = seq
			i++
			at = i
		case seqGT(x.end, end):
			x.start = end
			i = len(es) // x and those after it lie above the new range
		default:
			if x.lost {
				t.nlost--
			}
			es = append(es[:i], es[i+1:]...)
		}
	}
	t.order++
	nx := rtxEntry{start: seq, end: end, mark: c.sndMax, order: t.order, sentAt: c.e.now}
	if len(es) >= rtxTableMax {
		t.e = es
		c.e.cnt[cTCPRtxUntracked]++
		return
	}
	if len(es) == cap(es) {
		ns := make([]rtxEntry, len(es), min(2*cap(es), rtxTableMax))
		copy(ns, es)
		es = ns
	}
	es = append(es, rtxEntry{})
	copy(es[at+1:], es[at:])
	es[at] = nx
	t.e = es
}

// lostRtxDetect is RACK's detection (RFC 8985 §6.2 step 5, §6.3) over
// the recorded retransmissions, at an ACK before PRR takes what it
// delivered, and at RACK's timer: it drops what was delivered, marks
// lost what a later transmission overtook a round trip and a reordering
// window ago, and arms the timer for the next one that may be.
func (c *Conn) lostRtxDetect() {
	t := c.rk.rtx
	if t == nil || len(t.e) == 0 {
		return
	}
	if !c.inRecovery {
		c.rtxTableReset()
		return
	}
	now := c.e.now
	minRTT := c.rk.minRTT
	if minRTT == 0 {
		minRTT = c.srtt
	}
	// Delivered entries leave (§6.2 step 2, RACK.xmit_ts): one delivered
	// sooner than a minimum RTT after it left may be its original's
	// arrival and tells nothing of the order.
	k, j := 0, 0
	for _, x := range t.e {
		if seqLT(x.start, c.sndUna) {
			x.start = c.sndUna
		}
		done := !seqLT(x.start, x.end)
		if !done {
			for j < c.nsacked && seqLEQ(c.sacked[j].end, x.start) {
				j++
			}
			done = j < c.nsacked && seqLEQ(c.sacked[j].start, x.start) && seqGEQ(c.sacked[j].end, x.end)
		}
		if done {
			if x.lost {
				t.nlost--
			}
			if now-x.sentAt >= minRTT && x.order > t.delivered {
				t.delivered = x.order
			}
			continue
		}
		t.e[k] = x
		k++
	}
	t.e = t.e[:k]
	high := c.sndUna // the highest SACKed byte, plus one
	if c.nsacked > 0 {
		high = c.sacked[c.nsacked-1].end
	}
	var xmitTs int64
	if c.bbr != nil {
		xmitTs = c.bbr.rate.xmitTs
	}
	wait := c.srtt + c.reoWnd()
	var next int64 // the least time left to an overtaken entry, 0: none
	found := false
	for i := range t.e {
		x := &t.e[i]
		if x.lost || x.start == c.sndUna && c.rtxOne {
			continue // already to be sent again
		}
		if x.order >= t.delivered && !seqGT(high, x.mark) && x.sentAt >= xmitTs {
			continue // nothing sent after it was delivered
		}
		if left := x.sentAt + wait - now; left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		x.lost = true
		t.nlost++
		found = true
		c.e.cnt[cTCPLostRetransmits]++
		if x.start == c.sndUna {
			c.rtxOne, c.unaRtx = true, false
		}
	}
	r := &c.rk
	if next > 0 {
		r.kind, r.tLoss = lossRtx, now+next
		c.e.arm(c)
	} else if r.kind == lossRtx {
		r.tLoss = 0
	}
	if found {
		c.e.markDirty(c)
	}
}

// lostRtxPipe is what pipe leaves out for the recorded retransmissions
// found lost and not sent again: their bytes not SACKed below from (the
// holes from there up pipe counts itself).
func (c *Conn) lostRtxPipe(from uint32) uint32 {
	t := c.rk.rtx
	if t == nil || t.nlost == 0 {
		return 0
	}
	var n uint32
	for _, x := range t.e {
		if !x.lost || !seqLT(x.start, from) {
			continue
		}
		n += c.unsackedIn(seqMax(x.start, c.sndUna), seqMin(x.end, from))
	}
	return n
}

// unsackedIn is the number of bytes of [start, end) the scoreboard does
// not hold.
func (c *Conn) unsackedIn(start, end uint32) uint32 {
	if !seqLT(start, end) {
		return 0
	}
	n := end - start
	for i := 0; i < c.nsacked; i++ {
		b := c.sacked[i]
		if s, e := seqMax(b.start, start), seqMin(b.end, end); seqLT(s, e) {
			n -= e - s
		}
	}
	return n
}

// sendLostRtx sends again, lowest first, the recorded retransmissions
// found lost, while pipe is below cwnd (RFC 6675 §5 step 4.2 rule 1: a
// lost segment before anything else). Each send records itself
// (rtxRecord), which takes its range out of the lost entry.
func (c *Conn) sendLostRtx() bool {
	t := c.rk.rtx
	for t != nil && t.nlost > 0 && c.pipe() < c.cwnd && (c.bbr == nil || c.paceOK()) {
		var x *rtxEntry
		for i := range t.e {
			if t.e[i].lost {
				x = &t.e[i]
				break
			}
		}
		if x == nil {
			t.nlost = 0
			break
		}
		at := seqMax(x.start, c.sndUna)
		for {
			b, ok := c.sackedAt(at)
			if !ok {
				break
			}
			at = b.end
		}
		n := 0
		if seqLT(at, x.end) {
			n = min(int(x.end-at), c.segData(), c.sLen-int(at-c.sndUna))
			if b, ok := c.nextSACKed(at); ok {
				n = min(n, int(b-at))
			}
		}
		if n <= 0 {
			x.lost = false // nothing of it left to send
			t.nlost--
			continue
		}
		if !c.sendSeg(at, flagACK, int(at-c.sndUna), n) {
			return false
		}
		if at == c.sndUna {
			c.markUnaRtx(true)
			c.tRTO = c.e.now + c.queuedRTOWait()
		}
	}
	return true
}
