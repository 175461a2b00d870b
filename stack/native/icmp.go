package native

import "encoding/binary"

// ICMP types (RFC 792).
const (
	icmpEchoReply   = 0
	icmpUnreachable = 3
	icmpEcho        = 8
)

// icmpInput answers echo requests to our address (RFC 1122 §3.2.2.6);
// other ICMP messages are counted and ignored.
func (e *Engine) icmpInput(srcMAC [6]byte, p ipv4) {
	m := p.payload()
	if len(m) < 8 || fold(csum(0, m)) != 0 {
		e.cnt[cICMPBadChecksum]++
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
func (e *Engine) sendUnreachable(srcMAC [6]byte, p ipv4, code uint8) {
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
