package udp

import (
	"encoding/binary"

	"github.com/dgramio/dgramio/internal/checksum"
)

// Sum adds b to the running ones' complement sum acc (RFC 1071) as
// big-endian 16-bit words; an odd last byte is the high byte of a word
// padded with zero. acc is unfolded: pass it to Fold for the 16-bit sum.
// Sums of buffers that start at even offsets can be added with Add.
func Sum(acc uint64, b []byte) uint64 { return checksum.Sum(acc, b) }

// Add adds two unfolded sums.
func Add(a, b uint64) uint64 { return checksum.Add(a, b) }

// Fold folds an unfolded sum to 16 bits (not complemented).
func Fold(acc uint64) uint16 { return checksum.Fold(acc) }

// Checksum returns the Internet checksum of b: the complement of its
// folded ones' complement sum. A header whose checksum field is correct
// sums, checksum included, to 0xffff, so Checksum over it returns 0.
func Checksum(b []byte) uint16 { return ^Fold(Sum(0, b)) }

// pseudoSum is the sum of the IPv4 pseudo-header of UDP: the addresses,
// the protocol and the UDP length.
func pseudoSum(src, dst [4]byte, udpLen int) uint64 {
	return uint64(binary.BigEndian.Uint32(src[:])) + uint64(binary.BigEndian.Uint32(dst[:])) +
		ProtoUDP + uint64(udpLen)
}

// UDPChecksum returns the value of the checksum field for the UDP header
// and payload u (its checksum field taken as zero) between src and dst:
// the complement of the sum over pseudo-header, header and payload, with
// 0 sent as 0xffff (RFC 768: 0 means no checksum).
func UDPChecksum(src, dst [4]byte, u []byte) uint16 {
	acc := pseudoSum(src, dst, len(u))
	acc = Sum(acc, u[0:6])
	acc = Sum(acc, u[8:])
	c := ^Fold(acc)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// pseudoSum6 is the sum of the IPv6 pseudo-header of UDP (RFC 8200 §8.1):
// the addresses, the upper-layer length and the next header (17).
func pseudoSum6(src, dst *[16]byte, udpLen int) uint64 {
	return Sum(Sum(0, src[:]), dst[:]) + ProtoUDP + uint64(udpLen)
}

// UDPChecksum6 returns the value of the checksum field for the UDP header
// and payload u (its checksum field taken as zero) between the IPv6
// addresses src and dst, with 0 sent as 0xffff: over IPv6 the checksum is
// mandatory (RFC 8200 §8.1), 0 is never sent and never accepted.
func UDPChecksum6(src, dst [16]byte, u []byte) uint16 {
	acc := pseudoSum6(&src, &dst, len(u))
	acc = Sum(acc, u[0:6])
	acc = Sum(acc, u[8:])
	c := ^Fold(acc)
	if c == 0 {
		c = 0xffff
	}
	return c
}
