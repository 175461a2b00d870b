// Package checksum is the Internet checksum (RFC 1071) that the raw
// UDP path and the native TCP/IP engine compute on every frame: a ones'
// complement sum of big-endian 16-bit words, added eight bytes at a time
// with the carry chained through each 32 bytes.
package checksum

import (
	"encoding/binary"
	"math/bits"
)

// Sum adds b to the running ones' complement sum acc (RFC 1071) as
// big-endian 16-bit words; an odd last byte is the high byte of a word
// padded with zero. acc is unfolded: pass it to Fold for the 16-bit sum.
// Sums of buffers that start at even offsets can be added with Add.
func Sum(acc uint64, b []byte) uint64 {
	var carry uint64
	for len(b) >= 32 {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[0:8]), 0)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[8:16]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[16:24]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[24:32]), carry)
		acc += carry
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[0:8]), 0)
		acc += carry
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, carry = bits.Add64(acc, uint64(binary.BigEndian.Uint32(b[0:4])), 0)
		acc += carry
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, carry = bits.Add64(acc, uint64(binary.BigEndian.Uint16(b[0:2])), 0)
		acc += carry
		b = b[2:]
	}
	if len(b) == 1 {
		acc, carry = bits.Add64(acc, uint64(b[0])<<8, 0)
		acc += carry
	}
	return acc
}

// Add adds two unfolded sums.
func Add(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	return s + c
}

// Fold folds an unfolded sum to 16 bits (not complemented).
func Fold(acc uint64) uint16 {
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	return uint16(acc)
}
