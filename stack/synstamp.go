package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
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
// synStamps repairs this on the way out: it remembers the TSval and the
// time (netstack's clock) of the first transmission of the last few SYNs
// and SYN-ACKs, by 4-tuple and sequence number, and gives a retransmission
// the TSval netstack would have stamped at that moment, first TSval plus
// the milliseconds since, fixing the TCP checksum. Only frames with SYN set
// take this path; others cost one look at the flags.

// synStampSlots bounds the handshakes remembered; the oldest is forgotten
// first (its retransmissions then keep the old TSval, as without this).
const synStampSlots = 64

// synKey names one SYN or SYN-ACK: its addresses, ports and sequence number.
type synKey struct {
	src, dst     [4]byte
	sport, dport uint16
	seq          uint32
}

type synStamp struct {
	key   synKey
	tsval uint32
	ms    int64 // netstack's clock, in ms, at the first transmission
	used  bool
}

// synStamps is a small table of first transmissions; not safe for
// concurrent use (the Endpoint holds txMu).
type synStamps struct {
	slots [synStampSlots]synStamp
	next  int
}

// synStampAt returns where a frame's TSval lies (an offset into frame), its
// key, and the TCP segment (header and payload, as long as the IP header
// says), when frame is an Ethernet frame carrying IPv4 and an unfragmented
// TCP segment with SYN set and a timestamp option. ok is false otherwise.
// It reads frame only.
func synStampAt(frame []byte) (key synKey, tsOff int, seg []byte, ok bool) {
	if len(frame) < ethHeader+header.IPv4MinimumSize+header.TCPMinimumSize ||
		frame[12] != 0x08 || frame[13] != 0x00 {
		return key, 0, nil, false
	}
	ip := header.IPv4(frame[ethHeader:])
	if !ip.IsValid(len(frame)-ethHeader) || ip.TransportProtocol() != header.TCPProtocolNumber ||
		ip.FragmentOffset() != 0 || ip.More() {
		return key, 0, nil, false
	}
	seg = ip.Payload()
	if len(seg) < header.TCPMinimumSize {
		return key, 0, nil, false
	}
	tcp := header.TCP(seg)
	if tcp.Flags()&header.TCPFlagSyn == 0 {
		return key, 0, nil, false
	}
	end := int(tcp.DataOffset())
	if end < header.TCPMinimumSize || end > len(seg) {
		return key, 0, nil, false
	}
	opts := seg[header.TCPMinimumSize:end]
	for i := 0; i < len(opts); {
		switch kind := opts[i]; kind {
		case header.TCPOptionEOL:
			return key, 0, nil, false
		case header.TCPOptionNOP:
			i++
			continue
		}
		if i+1 >= len(opts) {
			return key, 0, nil, false
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			return key, 0, nil, false
		}
		if opts[i] == header.TCPOptionTS && l == header.TCPOptionTSLength {
			copy(key.src[:], ip.SourceAddressSlice())
			copy(key.dst[:], ip.DestinationAddressSlice())
			key.sport, key.dport, key.seq = tcp.SourcePort(), tcp.DestinationPort(), tcp.SequenceNumber()
			off := ethHeader + int(ip.HeaderLength()) + header.TCPMinimumSize + i + 2
			return key, off, seg, true
		}
		i += l
	}
	return key, 0, nil, false
}

// isSYN reports cheaply whether frame may be a TCP SYN over IPv4: the
// filter in front of synStampAt on the transmit path.
func isSYN(frame []byte) bool {
	if len(frame) < ethHeader+header.IPv4MinimumSize+header.TCPMinimumSize ||
		frame[12] != 0x08 || frame[13] != 0x00 || frame[ethHeader+9] != uint8(header.TCPProtocolNumber) {
		return false
	}
	t := ethHeader + int(frame[ethHeader]&0x0f)*4
	return t+header.TCPMinimumSize <= len(frame) && frame[t+13]&uint8(header.TCPFlagSyn) != 0
}

// restamp records frame's TSval if frame is the first transmission of a
// SYN or SYN-ACK with a timestamp, or, if it is a retransmission of one
// remembered, rewrites its TSval to first TSval + (nowMs - first ms) and
// its TCP checksum. It reports whether it rewrote the frame.
func (t *synStamps) restamp(frame []byte, nowMs int64) bool {
	key, off, seg, ok := synStampAt(frame)
	if !ok {
		return false
	}
	cur := binary.BigEndian.Uint32(frame[off:])
	for i := range t.slots {
		s := &t.slots[i]
		if !s.used || s.key != key {
			continue
		}
		want := s.tsval + uint32(nowMs-s.ms)
		if want == cur || cur != s.tsval {
			// Already fresh, or netstack stamped it anew itself.
			return false
		}
		binary.BigEndian.PutUint32(frame[off:], want)
		setTCPChecksum(frame, seg)
		return true
	}
	t.slots[t.next] = synStamp{key: key, tsval: cur, ms: nowMs, used: true}
	t.next = (t.next + 1) % synStampSlots
	return false
}

// setTCPChecksum recomputes the checksum of seg, the TCP segment of the
// IPv4 packet in frame.
func setTCPChecksum(frame, seg []byte) {
	ip := header.IPv4(frame[ethHeader:])
	tcp := header.TCP(seg)
	tcp.SetChecksum(0)
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber,
		tcpip.AddrFromSlice(ip.SourceAddressSlice()), tcpip.AddrFromSlice(ip.DestinationAddressSlice()), uint16(len(seg)))
	tcp.SetChecksum(^checksum.Checksum(seg, xsum))
}
