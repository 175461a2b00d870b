package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// The zero-window stall. This gVisor version tests a received segment's
// sequence range against its receive window first, and drops a segment
// outside it whole, ACK field included, after answering with an ACK. RFC
// 9293 §3.10.7.4 says the ACK field of such a segment is still to be
// processed when the window is zero ("special allowance should be made to
// accept valid ACKs"), and Linux does (tcp_ack runs before the data is
// refused). Without it a stream echo deadlocks on any loss: the
// application (io.Copy) blocks in Write because netstack's send buffer is
// full of data the peer has acknowledged, so it reads nothing, so
// netstack's window stays at zero; the peer, whose send sequence is past
// netstack's RCV.NXT (it sent the bytes the window closed on), sends pure
// ACKs with SEG.SEQ > RCV.NXT and window probes carrying data, and
// netstack drops both with their ACK field. Its retransmission timer backs
// off to a minute, and both directions stop for good (found with a capture
// of TestFaultCopyWire on tcp-xdp: netstack advertised win=0 at
// RCV.NXT=x while the peer's ACKs came with seq x+12).
//
// ackSalvage repairs it in the link endpoint, which sees every segment in
// both directions. It remembers, per connection, what netstack last
// advertised (the ACK number: RCV.NXT, and the window, scaled as the
// handshake agreed) and the last ACK field and window of the peer that
// netstack accepted. A received segment that netstack would refuse as out
// of its window, and whose ACK field or window says something netstack
// has not heard, is preceded by a pure ACK made from it: same addresses,
// ports, ACK number, window and options (timestamps, SACK blocks), no
// payload, no FIN or PSH, SEG.SEQ = RCV.NXT, which netstack accepts at any
// window. The original follows unchanged (netstack answers it with the
// ACK that tells the peer its window). A segment whose checksum is wrong is
// never copied.
//
// The table judges a segment by what netstack last advertised, and
// netstack by where it is: a burst can fill netstack's window before its
// ACK says so, and netstack then refuses a segment the table took for
// acceptable, ACK field and all. Netstack's own segments show that it
// missed an ACK or a window update (it sends again: data below the ACK,
// or the same window probe), and they are news again for the next segment
// it would refuse. An acceptable segment's ACK
// counts as heard only when its checksums hold (netstack drops a corrupt
// one whole).
//
// The table is direct-mapped by 4-tuple: a connection whose slot another
// took is learnt again from netstack's next segment.

// ackSlots is the number of connections remembered (a power of two).
const ackSlots = 1024

// flowKey names a connection from netstack's side.
type flowKey struct {
	// IPv4 addresses are in the first 4 bytes (v6 false); IPv6 ones
	// take all 16.
	local, remote [16]byte
	lport, rport  uint16
	v6            bool
}

type flowState struct {
	key    flowKey
	used   bool
	rcvNxt seqnum.Value // the ACK number netstack sent last
	rcvWnd uint16       // its window field
	// scale is netstack's receive window scale: offered in its SYN or
	// SYN-ACK, 0 when the peer's SYN-ACK declined it.
	scale uint8
	// peerAck and peerWnd are the peer's ACK number and window field
	// last handed to netstack (on a segment judged acceptable whose
	// checksums hold, or on a salvaged ACK).
	peerAck  seqnum.Value
	peerWnd  uint16
	havePeer bool
	// iss is netstack's initial sequence number (its SYN or SYN-ACK) and
	// una the highest ACK number the peer sent since: what of netstack's
	// stream the peer acknowledged (Endpoint.Unacked). haveISS: the SYN
	// was seen (not a connection learnt mid-way). They survive a RST.
	iss, una seqnum.Value
	haveISS  bool
	// sndEnd is the end of the highest data netstack sent (haveSnd: one
	// data segment seen): data below it is sent again.
	sndEnd  seqnum.Value
	haveSnd bool
}

// ackSalvage is the table; not safe for concurrent use (Endpoint.ackMu).
type ackSalvage struct {
	slots [ackSlots]flowState
}

func (k flowKey) slot() int {
	fold := func(a *[16]byte) uint32 { // an IPv4 address's zero bytes change nothing
		return binary.LittleEndian.Uint32(a[0:]) ^ binary.LittleEndian.Uint32(a[4:]) ^
			binary.LittleEndian.Uint32(a[8:]) ^ binary.LittleEndian.Uint32(a[12:])
	}
	h := fold(&k.remote)*0x9e3779b1 ^ uint32(k.rport)<<16 ^ uint32(k.lport)
	h ^= fold(&k.local) * 0x85ebca6b
	h ^= h >> 15
	return int(h & (ackSlots - 1))
}

// tcpView is a received or sent Ethernet frame that carries one whole,
// unfragmented TCP segment with a valid header length over IPv4, or over
// IPv6 with TCP as the fixed header's Next Header (netstack sends no
// extension header; a peer's segment behind one is not followed: its ACK
// is netstack's alone to take, as before the table existed).
type tcpView struct {
	frame    []byte
	v6       bool
	ipLen    int        // the IP header's length: IPv4's IHL, or 40
	src, dst []byte     // the addresses in frame: 4 or 16 bytes
	tcp      header.TCP // header and payload, as long as the IP header says
	payload  int
}

// parseTCP returns frame's TCP view, ok false for anything else. It reads
// frame only and checks no checksum.
func parseTCP(frame []byte) (v tcpView, ok bool) {
	if len(frame) < ethHeader+header.IPv4MinimumSize+header.TCPMinimumSize {
		return v, false
	}
	var seg []byte
	switch header.Ethernet(frame).Type() {
	case header.IPv4ProtocolNumber:
		ip := header.IPv4(frame[ethHeader:])
		if !ip.IsValid(len(frame)-ethHeader) || ip.TransportProtocol() != header.TCPProtocolNumber ||
			ip.FragmentOffset() != 0 || ip.More() {
			return v, false
		}
		v.ipLen, v.src, v.dst = int(ip.HeaderLength()), ip.SourceAddressSlice(), ip.DestinationAddressSlice()
		seg = ip.Payload()
	case header.IPv6ProtocolNumber:
		ip := header.IPv6(frame[ethHeader:])
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 ||
			ip.TransportProtocol() != header.TCPProtocolNumber ||
			int(ip.PayloadLength()) > len(ip)-header.IPv6MinimumSize {
			return v, false
		}
		v.v6, v.ipLen = true, header.IPv6MinimumSize
		v.src, v.dst = ip[8:24], ip[24:40]
		seg = ip[header.IPv6MinimumSize:][:ip.PayloadLength()]
	default:
		return v, false
	}
	if len(seg) < header.TCPMinimumSize {
		return v, false
	}
	off := int(header.TCP(seg).DataOffset())
	if off < header.TCPMinimumSize || off > len(seg) {
		return v, false
	}
	v.frame, v.tcp, v.payload = frame, seg, len(seg)-off
	return v, true
}

// key returns the connection v belongs to, seen from netstack's side:
// local is v's source when netstack sends it (out), its destination
// otherwise.
func (v tcpView) key(out bool) flowKey {
	k := flowKey{v6: v.v6}
	local, remote := v.dst, v.src
	k.lport, k.rport = v.tcp.DestinationPort(), v.tcp.SourcePort()
	if out {
		local, remote = v.src, v.dst
		k.lport, k.rport = k.rport, k.lport
	}
	copy(k.local[:], local)
	copy(k.remote[:], remote)
	return k
}

// sent notes a segment netstack sends: its ACK number and window, and the
// window scale of its SYN or SYN-ACK. A RST forgets the connection.
func (a *ackSalvage) sent(v tcpView) {
	k := v.key(true)
	s := &a.slots[k.slot()]
	flags := v.tcp.Flags()
	if flags&header.TCPFlagRst != 0 {
		if s.key == k {
			s.forgetPeer()
		}
		return
	}
	if flags&header.TCPFlagSyn != 0 {
		ws := header.ParseSynOptions(v.tcp.Options(), flags&header.TCPFlagAck != 0).WS
		iss := seqnum.Value(v.tcp.SequenceNumber())
		*s = flowState{key: k, scale: uint8(max(ws, 0)), iss: iss, una: iss.Add(1), haveISS: true}
	} else if s.key != k {
		// Learnt mid-connection (the slot was another's): the scale is
		// unknown, and 0 makes the window look smaller than it is, which
		// costs at most a pure ACK netstack did not need.
		*s = flowState{key: k}
	}
	if flags&header.TCPFlagAck != 0 {
		s.used = true
		s.rcvNxt = seqnum.Value(v.tcp.AckNumber())
		s.rcvWnd = v.tcp.WindowSize()
	}
	if v.payload > 0 {
		seq := seqnum.Value(v.tcp.SequenceNumber())
		if s.havePeer && (seq.LessThan(s.peerAck) || s.haveSnd && seq.LessThan(s.sndEnd)) {
			// Netstack sends again: a retransmission, or the same window
			// probe again. It may have missed the peer's last ACK or
			// window: the table judged the segment that carried them by
			// what netstack had advertised, and netstack by where it was
			// by then (a burst had filled its window before its ACK said
			// so). They are news again for the next segment netstack
			// refuses.
			s.havePeer = false
		}
		if end := seq.Add(seqnum.Size(v.payload)); !s.haveSnd || s.sndEnd.LessThan(end) {
			s.sndEnd, s.haveSnd = end, true
		}
	}
}

// received looks at a segment for netstack. If netstack would refuse it
// as out of window and its ACK field or window is news, it writes the
// pure ACK to hand netstack first into buf and returns it; otherwise nil.
func (a *ackSalvage) received(v tcpView, buf []byte) []byte {
	flags := v.tcp.Flags()
	k := v.key(false)
	s := &a.slots[k.slot()]
	if s.key != k {
		return nil
	}
	if flags&header.TCPFlagRst != 0 {
		s.forgetPeer()
		return nil
	}
	ack, wnd := seqnum.Value(v.tcp.AckNumber()), v.tcp.WindowSize()
	if flags&header.TCPFlagAck != 0 && s.haveISS && s.una.LessThan(ack) {
		s.una = ack // a SYN-ACK's too
	}
	if flags&header.TCPFlagSyn != 0 {
		if flags&header.TCPFlagAck != 0 && header.ParseSynOptions(v.tcp.Options(), true).WS < 0 {
			s.scale = 0 // the peer declined window scaling
		}
		return nil
	}
	if flags&header.TCPFlagAck == 0 {
		return nil
	}
	if !s.used {
		return nil
	}
	// News is any change, not only a later ACK. An acceptable segment's
	// ACK and window count as heard only when its checksums hold:
	// netstack drops a corrupt one whole, so what it carried, genuine or
	// not, is still news to netstack when a segment it refuses brings it.
	news := !s.havePeer || s.peerAck != ack || s.peerWnd != wnd
	edge := s.rcvNxt.Add(seqnum.Size(uint32(s.rcvWnd) << s.scale))
	if header.Acceptable(seqnum.Value(v.tcp.SequenceNumber()), seqnum.Size(v.payload), s.rcvNxt, edge) {
		if news && checksumsValid(v) {
			s.peerAck, s.peerWnd, s.havePeer = ack, wnd, true
		}
		return nil
	}
	if !news || !checksumsValid(v) {
		return nil
	}
	s.peerAck, s.peerWnd, s.havePeer = ack, wnd, true
	return pureACK(v, s.rcvNxt, buf)
}

// forgetPeer ends the salvage of a connection that was reset; what the
// peer acknowledged (iss, una) stays for Endpoint.Unacked.
func (s *flowState) forgetPeer() {
	s.used, s.havePeer = false, false
}

// unacked returns how many of the first written bytes of netstack's
// stream on k the peer has not acknowledged, ok false when the table did
// not see the connection's SYN.
func (a *ackSalvage) unacked(k flowKey, written uint64) (uint64, bool) {
	s := &a.slots[k.slot()]
	if s.key != k || !s.haveISS {
		return 0, false
	}
	nxt := s.iss.Add(1).Add(seqnum.Size(uint32(written)))
	if !s.una.LessThan(nxt) {
		return 0, true // all of it, and the FIN after it perhaps
	}
	return uint64(s.una.Size(nxt)), true
}

// checksumsValid reports whether v's checksums hold: the IPv4 header's
// (IPv6 has none) and TCP's, over the pseudo-header of v's family.
func checksumsValid(v tcpView) bool {
	if !v.v6 && !header.IPv4(v.frame[ethHeader:]).IsChecksumValid() {
		return false
	}
	return checksum.Checksum(v.tcp, pseudoHeader(v.src, v.dst, len(v.tcp))) == 0xffff
}

// pseudoHeader is the checksum of the TCP pseudo-header for a segment of
// n bytes between src and dst, 4-byte or 16-byte addresses (RFC 9293
// §3.1, RFC 8200 §8.1).
func pseudoHeader(src, dst []byte, n int) uint16 {
	return header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFromSlice(src), tcpip.AddrFromSlice(dst), uint16(n))
}

// pureACK writes into buf an Ethernet frame that is v without payload,
// with flags ACK only and sequence number seq, and returns it. buf must
// hold v's headers.
func pureACK(v tcpView, seq seqnum.Value, buf []byte) []byte {
	tcpLen := int(v.tcp.DataOffset())
	n := ethHeader + v.ipLen + tcpLen
	copy(buf, v.frame[:n])
	if v.v6 {
		header.IPv6(buf[ethHeader:]).SetPayloadLength(uint16(tcpLen))
	} else {
		ip := header.IPv4(buf[ethHeader : ethHeader+v.ipLen])
		ip.SetTotalLength(uint16(v.ipLen + tcpLen))
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	}
	seg := header.TCP(buf[ethHeader+v.ipLen : n])
	seg.SetSequenceNumber(uint32(seq))
	seg.SetFlags(uint8(header.TCPFlagAck))
	seg.SetUrgentPointer(0)
	seg.SetChecksum(0)
	seg.SetChecksum(^checksum.Checksum(seg, pseudoHeader(v.src, v.dst, tcpLen)))
	return buf[:n]
}
