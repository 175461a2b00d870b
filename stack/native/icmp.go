package native

import "encoding/binary"

// ICMP types (RFC 792) and codes.
const (
	icmpEchoReply   = 0
	icmpUnreachable = 3
	icmpEcho        = 8
	icmpFragNeeded  = 4 // code of icmpUnreachable (RFC 1191 §4)
)

// icmpInput answers echo requests to our address (RFC 1122 §3.2.2.6) and
// takes "fragmentation needed" for a connection (RFC 1191); other ICMP
// messages are counted and ignored.
func (e *Engine) icmpInput(srcMAC [6]byte, p ipv4) {
	m := p.payload()
	if len(m) < 8 || fold(csum(0, m)) != 0 {
		e.cnt[cICMPBadChecksum]++
		return
	}
	if m[0] == icmpUnreachable && m[1] == icmpFragNeeded {
		e.fragNeeded(m)
		return
	}
	if m[0] != icmpEcho || m[1] != 0 {
		e.cnt[cICMPIgnored]++
		return
	}
	n := ethLen + ipLen + len(m)
	if n > cap(e.tx) || ipLen+len(m) > e.o.MTU {
		e.cnt[cICMPTooBig]++ // the reply would need fragmenting, which the engine does not do
		return
	}
	e.tx = e.tx[:n]
	f := e.tx
	putEth(f, srcMAC, e.mac, etherIPv4)
	putIPv4(f[ethLen:], e.nextID(), protoICMP, e.addr, p.src(), ipLen+len(m))
	r := f[ethLen+ipLen:]
	copy(r, m)
	r[0], r[2], r[3] = icmpEchoReply, 0, 0
	binary.BigEndian.PutUint16(r[2:], fold(csum(0, r)))
	if e.send() {
		e.cnt[cICMPEchoReplies]++
	}
}

// sendUnreachable answers datagram p with destination unreachable code
// (RFC 1122 §3.2.2.1), quoting its header and 8 bytes. It is sent back to
// the MAC the datagram came from.
// Unreachables are rate-limited as Linux's icmp_msgs_per_sec and
// icmp_msgs_burst do (RFC 1812 §4.3.2.8, RFC 1122 §3.2.2 "SHOULD limit"):
// a token bucket of Options.ICMPBurst messages refilled at
// Options.ICMPRateLimit a second; one beyond it is not sent (counted
// icmp_unreachable_limited), so a flood of UDP or of unknown protocols is
// not answered at the rate it comes.
func (e *Engine) sendUnreachable(srcMAC [6]byte, p ipv4, code uint8) {
	if !e.icmpAllow() {
		e.cnt[cICMPRateLimited]++
		return
	}
	q := p[:min(len(p), ipLen+8)]
	n := ethLen + ipLen + 8 + len(q)
	e.tx = e.tx[:n]
	f := e.tx
	putEth(f, srcMAC, e.mac, etherIPv4)
	putIPv4(f[ethLen:], e.nextID(), protoICMP, e.addr, p.src(), ipLen+8+len(q))
	r := f[ethLen+ipLen:]
	clear(r[:8])
	r[0], r[1] = icmpUnreachable, code
	copy(r[8:], q)
	binary.BigEndian.PutUint16(r[2:], fold(csum(0, r)))
	if e.send() {
		e.cnt[cICMPUnreachSent]++
	}
}

func (e *Engine) nextID() uint16 { e.ipID++; return e.ipID }

// icmpAllow takes a token of the ICMP bucket; false when it is empty.
// The bucket holds time: each message costs a second over
// ICMPRateLimit, and at most ICMPBurst messages' worth accrues.
func (e *Engine) icmpAllow() bool {
	cost := int64(1e9) / int64(e.o.ICMPRateLimit)
	e.icmpCredit = min(e.icmpCredit+(e.now-e.icmpAt), int64(e.o.ICMPBurst)*cost)
	e.icmpAt = e.now
	if e.icmpCredit < cost {
		return false
	}
	e.icmpCredit -= cost
	return true
}

// minPMTU is the smallest path MTU "fragmentation needed" may set: Linux's
// min_pmtu (ip_rt_min_pmtu, 552), so that a forged message cannot make a
// connection send tiny segments (RFC 1191 §3 allows 68; RFC 5927 §5.2).
const minPMTU = 552

// pmtuPlateaus are RFC 1191 §7's plateaus, for a router that sends
// "fragmentation needed" without the next-hop MTU (§5).
var pmtuPlateaus = [...]int{32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68}

// fragNeeded takes ICMP "fragmentation needed and DF set" m (RFC 1191 §4:
// the next-hop MTU in the second half of the second word, the quoted
// header of our datagram and 8 bytes of its TCP header). Every segment
// the engine sends has DF set, so without this a path with a smaller MTU
// is a black hole. As RFC 5927 §5.1 advises (and Linux does), the quoted
// sequence number must lie in what the connection has in flight
// (SND.UNA ≤ SEG.SEQ < SND.MAX): a blind attacker does not know it.
// Taken, the connection's segment size drops to fit the MTU (never below
// minPMTU) and what is in flight goes again at that size (Linux's
// tcp_simple_retransmit: no congestion response, the loss was ours).
func (e *Engine) fragNeeded(m []byte) {
	e.cnt[cICMPFragNeeded]++
	c, ok := e.quotedConn(m)
	if !ok {
		e.cnt[cICMPFragNeededBad]++
		return
	}
	q := ipv4(m[8:])
	mtu := int(binary.BigEndian.Uint16(m[6:]))
	if mtu < 68 { // RFC 1191 §5: an old router; guess from the datagram's length
		tot := int(binary.BigEndian.Uint16(q[2:]))
		mtu = 68
		for _, p := range pmtuPlateaus {
			if p < tot {
				mtu = p
				break
			}
		}
	}
	mtu = max(mtu, minPMTU)
	mss := mtu - ipLen - tcpLen
	if mss >= c.peerMSS {
		e.cnt[cICMPFragNeededBad]++ // no smaller than what we send: nothing to do
		return
	}
	c.peerMSS = mss
	c.smss = mss
	if c.tsOK {
		c.smss -= 12
	}
	e.cnt[cTCPPMTULowered]++
	if c.state.synchronized() && seqLT(c.sndUna, c.sndNxt) {
		c.sndNxt = c.sndUna
		c.rttTiming = false // Karn: what is timed goes again
		e.markDirty(c)
	}
}

// quotedConn returns the connection of the TCP segment an ICMP error m
// quotes, when the quote is of a segment we sent on it whose sequence
// number is in flight (RFC 5927 §5.1).
func (e *Engine) quotedConn(m []byte) (*Conn, bool) {
	q := m[8:]
	if len(q) < ipLen || q[0]>>4 != 4 {
		return nil, false
	}
	hl := int(q[0]&0xf) * 4
	if hl < ipLen || len(q) < hl+8 || q[9] != protoTCP || [4]byte(q[12:16]) != e.addr || q[16] == 0 {
		return nil, false // q[16] 0: 0.0.0.0/8 is no peer (and the IPv6 aliases live there)
	}
	t := q[hl:]
	i, ok := e.table[tuple{[4]byte(q[16:20]), binary.BigEndian.Uint16(t[0:]), binary.BigEndian.Uint16(t[2:])}]
	if !ok || i < 0 { // none, or a TIME-WAIT record: nothing in flight
		return nil, false
	}
	c := &e.conns[i]
	seq := binary.BigEndian.Uint32(t[4:])
	if c.state < SynSent || c.state == TimeWait || !seqLEQ(c.sndUna, seq) || !seqLT(seq, c.sndMax) {
		return nil, false
	}
	return c, true
}
