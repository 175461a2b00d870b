package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// The acknowledgement table (ackSalvage) follows IPv6 flows too, for
// Endpoint.Unacked only: netstack's SYN or SYN-ACK gives the initial
// sequence number, the peer's ACK numbers what it acknowledged since, as
// over IPv4. The zero-window salvage stays IPv4's. A segment behind an
// extension header is not followed (netstack sends none; a peer's ACK
// behind one is not seen, and Unacked then counts more unacknowledged
// than there was, never less).

// tcp6View is the part of an IPv6 TCP segment the table reads.
type tcp6View struct {
	src, dst     [16]byte
	sport, dport uint16
	seq, ack     uint32
	flags        header.TCPFlags
}

// parseTCP6 reads frame as Ethernet, IPv6 whose Next Header is TCP and a
// TCP header; ok false for anything else. It checks no checksum.
func parseTCP6(frame []byte) (v tcp6View, ok bool) {
	const ip6Len = header.IPv6MinimumSize
	if len(frame) < ethHeader+ip6Len+header.TCPMinimumSize ||
		header.Ethernet(frame).Type() != header.IPv6ProtocolNumber {
		return v, false
	}
	ip := frame[ethHeader:]
	if ip[0]>>4 != 6 || ip[6] != uint8(header.TCPProtocolNumber) ||
		int(binary.BigEndian.Uint16(ip[4:])) < header.TCPMinimumSize {
		return v, false
	}
	copy(v.src[:], ip[8:24])
	copy(v.dst[:], ip[24:40])
	t := header.TCP(ip[ip6Len:])
	v.sport, v.dport = t.SourcePort(), t.DestinationPort()
	v.seq, v.ack, v.flags = t.SequenceNumber(), t.AckNumber(), t.Flags()
	return v, true
}

// sent6 notes netstack's SYN or SYN-ACK on an IPv6 flow: the initial
// sequence number from which Unacked counts.
func (a *ackSalvage) sent6(v tcp6View) {
	if v.flags&header.TCPFlagSyn == 0 || v.flags&header.TCPFlagRst != 0 {
		return
	}
	k := flowKey{local: v.src, remote: v.dst, lport: v.sport, rport: v.dport, v6: true}
	iss := seqnum.Value(v.seq)
	a.slots[k.slot()] = flowState{key: k, iss: iss, una: iss.Add(1), haveISS: true}
}

// received6 notes the peer's ACK number on an IPv6 flow the table holds.
func (a *ackSalvage) received6(v tcp6View) {
	if v.flags&header.TCPFlagAck == 0 || v.flags&header.TCPFlagRst != 0 {
		return
	}
	k := flowKey{local: v.dst, remote: v.src, lport: v.dport, rport: v.sport, v6: true}
	s := &a.slots[k.slot()]
	if ack := seqnum.Value(v.ack); s.key == k && s.haveISS && s.una.LessThan(ack) {
		s.una = ack
	}
}
