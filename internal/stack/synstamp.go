package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Retransmitted SYNs and SYN-ACKs keep their first TSval in this gVisor
// version: the handshake caches its SYN options, timestamp included, and
// sends them again on every retransmission. The peer echoes that TSval, so
// the handshake's RTT sample (netstack prefers the echoed timestamp to its
// own clock) spans the whole SYN backoff: a connection whose first SYN or
// SYN-ACK was lost starts with an SRTT of about 1 s and an RTO of about 3 s,
// and RFC 7323's per-ACK weighting brings that down only over thousands of
// segments. A lost retransmission then stalls the stream for seconds
// (TestSACK found it: 2% loss, SACK off, the first SYN lost). Linux stamps
// every retransmission afresh, as RFC 7323 intends.
//
// The SYN-ACK's echo is cached too: a SYN-ACK sent again because the
// peer's SYN came again (its first SYN-ACK was lost) still echoes the
// peer's first SYN, and the peer, Linux as well as netstack, takes the
// whole backoff for its RTT. Linux's listener echoes the latest SYN
// (tcp_check_req updates ts_recent).
//
// synStamps repairs both on the way out. It remembers the TSval and the
// time (netstack's clock) of the first transmission of the last few SYNs
// and SYN-ACKs, by 4-tuple and sequence number, and gives a retransmission
// the TSval netstack would have stamped at that moment, first TSval plus
// the milliseconds since. It remembers the TSval of the latest SYN each
// peer sent (notePeerSYN, on receive) and makes our SYN-ACK to it echo
// that one. The TCP checksum is computed again after a change. Only frames
// with SYN set take this path; others cost one look at the flags.

// synStampSlots bounds the handshakes remembered; the oldest is forgotten
// first (its retransmissions then keep the old TSval, as without this).
const synStampSlots = 64

// synKey names one SYN or SYN-ACK: its addresses (IPv4 ones in the first
// 4 bytes), ports and sequence number.
type synKey struct {
	src, dst     [16]byte
	sport, dport uint16
	seq          uint32
	v6           bool
}

type synStamp struct {
	key   synKey
	tsval uint32
	ms    int64 // netstack's clock, in ms, at the first transmission
	used  bool
}

// synStamps is a small table of first transmissions and of the peers'
// latest SYNs; not safe for concurrent use (the Endpoint holds txMu).
type synStamps struct {
	slots [synStampSlots]synStamp
	next  int
	peers [synStampSlots]synStamp // ms unused
	pnext int
}

// synStampAt returns where a frame's TSval lies (an offset into frame; the
// TSecr follows it), its key, and its TCP view, when frame is an Ethernet
// frame carrying IPv4 or IPv6 and an unfragmented TCP segment (parseTCP)
// with SYN set and a timestamp option. ok is false otherwise. It reads
// frame only.
func synStampAt(frame []byte) (key synKey, tsOff int, v tcpView, ok bool) {
	v, ok = parseTCP(frame)
	if !ok || v.tcp.Flags()&header.TCPFlagSyn == 0 {
		return key, 0, v, false
	}
	seg := []byte(v.tcp)
	opts := seg[header.TCPMinimumSize:v.tcp.DataOffset()]
	for i := 0; i < len(opts); {
		switch kind := opts[i]; kind {
		case header.TCPOptionEOL:
			return key, 0, v, false
		case header.TCPOptionNOP:
			i++
			continue
		}
		if i+1 >= len(opts) {
			return key, 0, v, false
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			return key, 0, v, false
		}
		if opts[i] == header.TCPOptionTS && l == header.TCPOptionTSLength {
			copy(key.src[:], v.src)
			copy(key.dst[:], v.dst)
			key.sport, key.dport, key.seq, key.v6 = v.tcp.SourcePort(), v.tcp.DestinationPort(), v.tcp.SequenceNumber(), v.v6
			off := ethHeader + v.ipLen + header.TCPMinimumSize + i + 2
			return key, off, v, true
		}
		i += l
	}
	return key, 0, v, false
}

// isSYN reports cheaply whether frame may be a TCP SYN over IPv4, or over
// IPv6 with TCP as the fixed header's Next Header: the filter in front of
// synStampAt on the transmit path.
func isSYN(frame []byte) bool {
	if len(frame) < ethHeader+header.IPv4MinimumSize+header.TCPMinimumSize {
		return false
	}
	var t int
	switch {
	case frame[12] == 0x08 && frame[13] == 0x00 && frame[ethHeader+9] == uint8(header.TCPProtocolNumber):
		t = ethHeader + int(frame[ethHeader]&0x0f)*4
	case frame[12] == 0x86 && frame[13] == 0xdd && frame[ethHeader+6] == uint8(header.TCPProtocolNumber):
		t = ethHeader + header.IPv6MinimumSize
	default:
		return false
	}
	return t+header.TCPMinimumSize <= len(frame) && frame[t+13]&uint8(header.TCPFlagSyn) != 0
}

// restamp records frame's TSval if frame is the first transmission of a
// SYN or SYN-ACK with a timestamp, or, if it is a retransmission of one
// remembered, rewrites its TSval to first TSval + (nowMs - first ms). A
// SYN-ACK's TSecr becomes the TSval of the latest SYN noted from its
// peer. It fixes the TCP checksum after a change and reports whether it
// changed the frame.
func (t *synStamps) restamp(frame []byte, nowMs int64) bool {
	key, off, v, ok := synStampAt(frame)
	if !ok {
		return false
	}
	changed := false
	if tcp := v.tcp; tcp.Flags()&header.TCPFlagAck != 0 {
		// The SYN it answers: the reverse tuple, the peer's ISN.
		peer := synKey{src: key.dst, dst: key.src, sport: key.dport, dport: key.sport, seq: tcp.AckNumber() - 1, v6: key.v6}
		if p := t.find(t.peers[:], peer); p != nil && binary.BigEndian.Uint32(frame[off+4:]) != p.tsval {
			binary.BigEndian.PutUint32(frame[off+4:], p.tsval)
			changed = true
		}
	}
	cur := binary.BigEndian.Uint32(frame[off:])
	if s := t.find(t.slots[:], key); s == nil {
		t.slots[t.next] = synStamp{key: key, tsval: cur, ms: nowMs, used: true}
		t.next = (t.next + 1) % synStampSlots
	} else if want := s.tsval + uint32(nowMs-s.ms); want != cur && cur == s.tsval {
		// A retransmission with the first TSval (one netstack stamped
		// anew itself is left alone).
		binary.BigEndian.PutUint32(frame[off:], want)
		changed = true
	}
	if changed {
		v.tcp.SetChecksum(0)
		v.tcp.SetChecksum(^checksum.Checksum(v.tcp, pseudoHeader(v.src, v.dst, len(v.tcp))))
	}
	return changed
}

// notePeerSYN remembers the TSval of frame if it is a SYN (without ACK)
// with a timestamp: the latest one of each peer's handshake is what our
// SYN-ACK echoes.
func (t *synStamps) notePeerSYN(frame []byte) {
	key, off, v, ok := synStampAt(frame)
	if !ok || v.tcp.Flags()&header.TCPFlagAck != 0 {
		return
	}
	ts := binary.BigEndian.Uint32(frame[off:])
	if p := t.find(t.peers[:], key); p != nil {
		p.tsval = ts
		return
	}
	t.peers[t.pnext] = synStamp{key: key, tsval: ts, used: true}
	t.pnext = (t.pnext + 1) % synStampSlots
}

// find returns the entry of slots with key, or nil.
func (t *synStamps) find(slots []synStamp, key synKey) *synStamp {
	for i := range slots {
		if slots[i].used && slots[i].key == key {
			return &slots[i]
		}
	}
	return nil
}
