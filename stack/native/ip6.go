package native

import "encoding/binary"

// IPv6 building blocks (RFC 8200), called by the engine's IPv6 input
// (engine6.go). See docs/ipv6.md.

// IPv6 header size and field values (RFC 8200 §3, §4; RFC 4443).
const (
	ip6Len      = 40
	etherIPv6   = 0x86dd
	protoICMPv6 = 58
	hopLimit6   = 64     // the hop limit of what we originate (Linux's default)
	minMTU6     = 1280   // RFC 8200 §5: every link carries 1280 bytes
	maxPayload6 = 0xffff // no jumbograms (RFC 2675 is not supported)
)

// ip6Addr is an IPv6 address in network order.
type ip6Addr = [16]byte

// ip6Unspecified is :: (RFC 4291 §2.5.2).
var ip6Unspecified ip6Addr

// isMulticast6 says whether a is a multicast address, ff00::/8 (RFC 4291
// §2.7).
func isMulticast6(a ip6Addr) bool { return a[0] == 0xff }

// isLinkLocal6 says whether a is a unicast link-local address, fe80::/10
// (RFC 4291 §2.5.6).
func isLinkLocal6(a ip6Addr) bool { return a[0] == 0xfe && a[1]&0xc0 == 0x80 }

// ipv6 is a view of an IPv6 packet: the fixed header, then the extension
// headers and the upper-layer data. Parse it with parseIPv6 first.
type ipv6 []byte

func (p ipv6) nextHeader() uint8 { return p[6] }
func (p ipv6) hopLimit() uint8   { return p[7] }
func (p ipv6) src() ip6Addr      { return ip6Addr(p[8:24]) }
func (p ipv6) dst() ip6Addr      { return ip6Addr(p[24:40]) }

// payloadLen is the Payload Length field: the bytes after the fixed header.
func (p ipv6) payloadLen() int { return int(binary.BigEndian.Uint16(p[4:])) }

// putIPv6 writes the fixed IPv6 header into b (RFC 8200 §3): traffic
// class and flow label 0, payload length n (the bytes after the header).
func putIPv6(b []byte, next, hops uint8, src, dst ip6Addr, n int) {
	h := (*[ip6Len]byte)(b)
	h[0], h[1], h[2], h[3] = 0x60, 0, 0, 0
	binary.BigEndian.PutUint16(h[4:], uint16(n))
	h[6], h[7] = next, hops
	copy(h[8:24], src[:])
	copy(h[24:40], dst[:])
}

// pseudo6 is the unfolded sum of the IPv6 pseudo-header (RFC 8200 §8.1):
// source, destination, the 32-bit upper-layer packet length n and the
// next header value proto (the upper-layer protocol, not that of an
// extension header in between).
func pseudo6(src, dst ip6Addr, proto uint8, n int) uint64 {
	s := uint64(proto) + uint64(uint32(n)>>16) + uint64(uint16(n))
	for i := 0; i < 16; i += 4 {
		s += uint64(binary.BigEndian.Uint32(src[i:])) + uint64(binary.BigEndian.Uint32(dst[i:]))
	}
	return s
}

// checksum6 is the checksum field value of the upper-layer packet b
// (TCP, UDP or ICMPv6) from src to dst over IPv6, b's checksum field
// being zero. For UDP a result of 0 is sent as 0xffff (RFC 8200 §8.1: a
// zero UDP checksum is not allowed over IPv6; RFC 768's rule).
func checksum6(src, dst ip6Addr, proto uint8, b []byte) uint16 {
	c := fold(csum(pseudo6(src, dst, proto, len(b)), b))
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	return c
}

// verify6 says whether the upper-layer packet b from src to dst carries a
// correct checksum over the IPv6 pseudo-header. A UDP checksum of 0 is
// wrong over IPv6 (RFC 8200 §8.1: receivers discard it).
func verify6(src, dst ip6Addr, proto uint8, b []byte) bool {
	if proto == protoUDP && len(b) >= 8 && b[6] == 0 && b[7] == 0 {
		return false
	}
	return fold(csum(pseudo6(src, dst, proto, len(b)), b)) == 0
}

// tcpMSS6 is the MSS a TCP over IPv6 announces for a link of MTU mtu:
// the MTU less the fixed IPv6 and TCP headers (RFC 9293 §3.7.1, RFC 8200
// §5), never below what a 1280-byte path carries (1220).
func tcpMSS6(mtu int) uint16 {
	return uint16(max(mtu, minMTU6) - ip6Len - tcpLen)
}
