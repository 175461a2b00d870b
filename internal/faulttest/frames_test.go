package faulttest

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Frames built by hand for the malformed-frame test: every field can be
// made to lie. Checksums are right unless a case breaks them.

// csum returns the ones' complement sum of b folded to 16 bits, starting
// from acc.
func csum(acc uint32, b []byte) uint16 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// l4Sum computes the TCP or UDP checksum of seg (its checksum field
// zeroed first) with the IPv4 pseudo-header of src, dst, proto.
func l4Sum(src, dst netip.Addr, proto byte, seg []byte, at int) {
	seg[at], seg[at+1] = 0, 0
	s, d := src.As4(), dst.As4()
	acc := uint32(binary.BigEndian.Uint16(s[:2])) + uint32(binary.BigEndian.Uint16(s[2:])) +
		uint32(binary.BigEndian.Uint16(d[:2])) + uint32(binary.BigEndian.Uint16(d[2:])) +
		uint32(proto) + uint32(len(seg))
	c := ^csum(acc, seg)
	if c == 0 && proto == 17 {
		c = 0xffff // 0 means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(seg[at:], c)
}

// udpSeg returns a UDP header and payload from src to dst.
func udpSeg(src, dst netip.AddrPort, payload []byte) []byte {
	b := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(b, src.Port())
	binary.BigEndian.PutUint16(b[2:], dst.Port())
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	copy(b[8:], payload)
	l4Sum(src.Addr(), dst.Addr(), 17, b, 6)
	return b
}

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpURG = 0x20
)

// tcpSeg returns a TCP header (no options) with flags, and payload.
func tcpSeg(src, dst netip.AddrPort, flags byte, payload []byte) []byte {
	b := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(b, src.Port())
	binary.BigEndian.PutUint16(b[2:], dst.Port())
	binary.BigEndian.PutUint32(b[4:], 0x01020304) // sequence number
	if flags&tcpACK != 0 {
		binary.BigEndian.PutUint32(b[8:], 0x0a0b0c0d)
	}
	b[12] = 5 << 4
	b[13] = flags
	binary.BigEndian.PutUint16(b[14:], 65535) // window
	copy(b[20:], payload)
	l4Sum(src.Addr(), dst.Addr(), 6, b, 16)
	return b
}

// ipv4 returns an IPv4 packet carrying seg, with options (a multiple of 4
// bytes) and the DF flag.
func ipv4(src, dst netip.Addr, proto byte, options, seg []byte) []byte {
	hl := 20 + len(options)
	b := make([]byte, hl+len(seg))
	b[0] = 0x40 | byte(hl/4)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[4:], 0x1234) // identification
	binary.BigEndian.PutUint16(b[6:], 0x4000) // DF
	b[8] = 64
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	copy(b[20:], options)
	copy(b[hl:], seg)
	fixIPSum(b)
	return b
}

// fixIPSum recomputes the header checksum of ip, whose header length is
// read from its IHL (at least 20 bytes, at most what ip holds).
func fixIPSum(ip []byte) {
	hl := max(int(ip[0]&0x0f)*4, 20)
	hl = min(hl, len(ip))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^csum(0, ip[:hl]))
}

// ether returns an Ethernet frame from src to dst with typ and payload,
// with VLAN tags (TPID, TCI pairs) between the addresses and the type.
func ether(dst, src net.HardwareAddr, typ uint16, payload []byte, tags ...uint16) []byte {
	b := make([]byte, 0, 14+2*len(tags)+len(payload))
	b = append(b, dst...)
	b = append(b, src...)
	for _, t := range tags {
		b = binary.BigEndian.AppendUint16(b, t)
	}
	b = binary.BigEndian.AppendUint16(b, typ)
	return append(b, payload...)
}
