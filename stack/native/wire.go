package native

import (
	"encoding/binary"

	"github.com/dgramio/dgramio/internal/checksum"
)

// Header sizes and field values (RFC 791, RFC 9293, RFC 792).
const (
	ethLen    = 14
	ipLen     = 20
	tcpLen    = 20
	etherIPv4 = 0x0800
	etherARP  = 0x0806
	protoICMP = 1
	protoTCP  = 6
	protoUDP  = 17
	ttl       = 64
)

// TCP header flags.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagPSH = 0x08
	flagACK = 0x10
	flagURG = 0x20
)

// TCP option kinds (RFC 9293, RFC 7323, RFC 2018).
const (
	optEnd       = 0
	optNOP       = 1
	optMSS       = 2
	optWScale    = 3
	optSACKPerm  = 4
	optSACK      = 5
	optTimestamp = 8
)

// sackBlock is one SACK block: the bytes [start, end) in sequence space.
type sackBlock struct{ start, end uint32 }

// segment is a parsed TCP segment with its IPv4 and Ethernet addresses.
// payload aliases the received frame: valid only during input.
type segment struct {
	srcMAC       [6]byte
	src, dst     [4]byte
	sport, dport uint16
	seq, ack     uint32
	flags        uint8
	wnd          uint16
	payload      []byte

	hasMSS, hasWS, sackOK, hasTS bool
	mss                          uint16
	wscale                       uint8
	tsVal, tsEcr                 uint32
	nsack                        int
	sacks                        [4]sackBlock
}

// seqLen is the sequence space the segment occupies (data, SYN, FIN).
func (s *segment) seqLen() uint32 {
	n := uint32(len(s.payload))
	if s.flags&flagSYN != 0 {
		n++
	}
	if s.flags&flagFIN != 0 {
		n++
	}
	return n
}

// Sequence-number comparisons modulo 2^32 (RFC 9293 §3.4).
func seqLT(a, b uint32) bool  { return int32(a-b) < 0 }
func seqLEQ(a, b uint32) bool { return int32(a-b) <= 0 }
func seqGT(a, b uint32) bool  { return int32(a-b) > 0 }
func seqGEQ(a, b uint32) bool { return int32(a-b) >= 0 }
func seqMax(a, b uint32) uint32 {
	if seqGT(a, b) {
		return a
	}
	return b
}
func seqMin(a, b uint32) uint32 {
	if seqLT(a, b) {
		return a
	}
	return b
}

// csum adds b to the one's-complement sum s (RFC 1071), unfolded.
func csum(s uint64, b []byte) uint64 { return checksum.Sum(s, b) }

// fold folds s to 16 bits and complements it.
func fold(s uint64) uint16 { return ^checksum.Fold(s) }

// pseudo is the IPv4 pseudo-header sum for protocol proto and length n.
func pseudo(src, dst [4]byte, proto uint8, n int) uint64 {
	return uint64(binary.BigEndian.Uint16(src[0:])) + uint64(binary.BigEndian.Uint16(src[2:])) +
		uint64(binary.BigEndian.Uint16(dst[0:])) + uint64(binary.BigEndian.Uint16(dst[2:])) +
		uint64(proto) + uint64(n)
}

// ipv4 is a view of an IPv4 header and its payload. Call check first.
type ipv4 []byte

// ipError says why an IPv4 datagram was not taken; 0 when it is valid.
type ipError int

const (
	ipOK ipError = iota
	ipShort
	ipVersion
	ipOptions
	ipLength
	ipChecksum
	ipFragment
)

// check validates the header: version 4, no options (IHL 5), a total
// length within the frame, a correct checksum, not a fragment.
func (p ipv4) check() ipError {
	if len(p) < ipLen {
		return ipShort
	}
	if p[0]>>4 != 4 {
		return ipVersion
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < ipLen || ihl > len(p) {
		return ipLength
	}
	tot := int(binary.BigEndian.Uint16(p[2:]))
	if tot < ihl || tot > len(p) {
		return ipLength
	}
	if fold(headerSum(p, ihl)) != 0 {
		return ipChecksum
	}
	if ihl != ipLen {
		return ipOptions
	}
	if binary.BigEndian.Uint16(p[6:])&0x3fff != 0 { // MF or an offset
		return ipFragment
	}
	return ipOK
}

// headerSum is the unfolded sum (RFC 1071) of the first ihl bytes of p:
// a header without options as five 32-bit words (RFC 1071 §2 (B): the
// sum may be taken in wider words and folded), others by csum.
func headerSum(p []byte, ihl int) uint64 {
	if ihl != ipLen {
		return csum(0, p[:ihl])
	}
	h := (*[ipLen]byte)(p)
	return uint64(binary.BigEndian.Uint32(h[0:])) + uint64(binary.BigEndian.Uint32(h[4:])) +
		uint64(binary.BigEndian.Uint32(h[8:])) + uint64(binary.BigEndian.Uint32(h[12:])) +
		uint64(binary.BigEndian.Uint32(h[16:]))
}

func (p ipv4) proto() uint8 { return p[9] }
func (p ipv4) src() [4]byte { return [4]byte(p[12:16]) }
func (p ipv4) dst() [4]byte { return [4]byte(p[16:20]) }

// payload is the datagram after the header, up to the total length.
func (p ipv4) payload() []byte { return p[ipLen:binary.BigEndian.Uint16(p[2:])] }

// tcpError says why a segment was not taken.
type tcpError int

const (
	tcpOK tcpError = iota
	tcpShort
	tcpOffset
	tcpChecksum
	tcpBadOption
)

// parseTCP parses b, the TCP header and data of an IPv4 datagram from src
// to dst, into s, checking the checksum and the options.
func parseTCP(s *segment, src, dst [4]byte, b []byte) tcpError {
	s.src, s.dst = src, dst
	return parseTCPSum(s, pseudo(src, dst, protoTCP, 0), b)
}

// parseTCPSum is parseTCP of a segment of either family whose
// pseudo-header sum without the length is sum: pseudo(…, 0) for IPv4,
// pseudo6(…, 0) for IPv6 (the two add the length alike below 64 KiB).
// s's addresses are the caller's to fill.
func parseTCPSum(s *segment, sum uint64, b []byte) tcpError {
	if len(b) < tcpLen {
		return tcpShort
	}
	off := int(b[12]>>4) * 4
	if off < tcpLen || off > len(b) {
		return tcpOffset
	}
	if fold(csum(sum+uint64(len(b)), b)) != 0 {
		return tcpChecksum
	}
	s.sport = binary.BigEndian.Uint16(b[0:])
	s.dport = binary.BigEndian.Uint16(b[2:])
	s.seq = binary.BigEndian.Uint32(b[4:])
	s.ack = binary.BigEndian.Uint32(b[8:])
	s.flags = b[13] & 0x3f
	s.wnd = binary.BigEndian.Uint16(b[14:])
	s.payload = b[off:]
	if !parseOptions(s, b[tcpLen:off]) {
		return tcpBadOption
	}
	return tcpOK
}

// parseOptions reads the TCP options of s. Unknown options are skipped by
// their length; a length that runs past the header, or a known option of
// the wrong length, makes the segment malformed (false).
func parseOptions(s *segment, o []byte) bool {
	s.hasMSS, s.hasWS, s.sackOK, s.nsack = false, false, false, 0
	// The options of nearly every segment after the handshake, ours and
	// Linux's: two NOPs and the timestamps (RFC 7323 Appendix A's layout).
	if len(o) == 12 && binary.BigEndian.Uint32(o) == tsLayout {
		s.hasTS, s.tsVal, s.tsEcr = true, binary.BigEndian.Uint32(o[4:]), binary.BigEndian.Uint32(o[8:])
		return true
	}
	s.hasTS = false
	return parseAnyOptions(s, o)
}

// tsLayout is NOP, NOP, kind 8 and length 10: the first four bytes of
// the timestamps option aligned as RFC 7323 Appendix A recommends.
const tsLayout = optNOP<<24 | optNOP<<16 | optTimestamp<<8 | 10

// parseAnyOptions is parseOptions for options in any order and layout,
// with s's option fields cleared.
func parseAnyOptions(s *segment, o []byte) bool {
	for len(o) > 0 {
		k := o[0]
		if k == optEnd {
			return true
		}
		if k == optNOP {
			o = o[1:]
			continue
		}
		if len(o) < 2 || int(o[1]) < 2 || int(o[1]) > len(o) {
			return false
		}
		l := int(o[1])
		v := o[2:l]
		switch k {
		case optMSS:
			if l != 4 {
				return false
			}
			s.hasMSS, s.mss = true, binary.BigEndian.Uint16(v)
		case optWScale:
			if l != 3 {
				return false
			}
			s.hasWS, s.wscale = true, min(v[0], 14) // RFC 7323 §2.3
		case optSACKPerm:
			if l != 2 {
				return false
			}
			s.sackOK = true
		case optTimestamp:
			if l != 10 {
				return false
			}
			s.hasTS, s.tsVal, s.tsEcr = true, binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:])
		case optSACK:
			if (l-2)%8 != 0 || l == 2 {
				return false
			}
			for i := 0; i+8 <= len(v) && s.nsack < len(s.sacks); i += 8 {
				s.sacks[s.nsack] = sackBlock{binary.BigEndian.Uint32(v[i:]), binary.BigEndian.Uint32(v[i+4:])}
				s.nsack++
			}
		}
		o = o[l:]
	}
	return true
}

// putIPv4 writes an IPv4 header for a datagram of n bytes (header
// included) into b. Its checksum (RFC 791 §3.1, RFC 1071) is the sum of
// the ten header words added as numbers, not read back from b.
func putIPv4(b []byte, id uint16, proto uint8, src, dst [4]byte, n int) {
	h := (*[ipLen]byte)(b)
	h[0], h[1] = 0x45, 0
	binary.BigEndian.PutUint16(h[2:], uint16(n))
	binary.BigEndian.PutUint16(h[4:], id)
	h[6], h[7] = 0x40, 0 // DF
	h[8], h[9] = ttl, proto
	copy(h[12:16], src[:])
	copy(h[16:20], dst[:])
	sum := pseudo(src, dst, 0, 0) + 0x4500 + uint64(uint16(n)) + uint64(id) + 0x4000 + (ttl<<8 | uint64(proto))
	binary.BigEndian.PutUint16(h[10:], fold(sum))
}

// putEth writes an Ethernet header into b.
func putEth(b []byte, dst, src [6]byte, typ uint16) {
	h := (*[ethLen]byte)(b)
	copy(h[0:6], dst[:])
	copy(h[6:12], src[:])
	binary.BigEndian.PutUint16(h[12:], typ)
}
