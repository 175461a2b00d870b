package checksum

import (
	"math/rand/v2"
	"testing"
)

// naive is RFC 1071 §4.1's sum, sixteen bits at a time, folded.
func naive(acc uint64, b []byte) uint16 {
	s := acc
	for ; len(b) >= 2; b = b[2:] {
		s += uint64(b[0])<<8 | uint64(b[1])
		s = s&0xffff + s>>16
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TestSumIsRFC1071: Sum then Fold equals the naive sum for every length
// from 0 to 300 and random longer ones, with random bytes, all-ones bytes
// (the largest carries) and a starting sum near the top of the range; the
// example of RFC 1071 §3 sums to 0xddf2.
func TestSumIsRFC1071(t *testing.T) {
	if got := Fold(Sum(0, []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7})); got != 0xddf2 {
		t.Fatalf("RFC 1071 §3 example: %#04x, want 0xddf2", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	lengths := make([]int, 0, 400)
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for range 100 {
		lengths = append(lengths, r.IntN(9000))
	}
	for _, n := range lengths {
		b := make([]byte, n)
		ones := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
			ones[i] = 0xff
		}
		for _, acc := range []uint64{0, 0xffff, 1 << 40, 0xffffffff} {
			for _, buf := range [][]byte{b, ones} {
				got, want := Fold(Sum(acc, buf)), naive(acc, buf)
				// 0 and 0xffff are the same number in ones' complement.
				if got != want && !(got|want == 0xffff && got&want == 0) {
					t.Fatalf("length %d, sum %#x: %#04x, want %#04x", n, acc, got, want)
				}
			}
		}
		if n >= 2 {
			split := r.IntN(n/2) * 2 // an even offset
			if got, want := Fold(Add(Sum(0, b[:split]), Sum(0, b[split:]))), naive(0, b); got != want && !(got|want == 0xffff && got&want == 0) {
				t.Fatalf("length %d split at %d: %#04x, want %#04x", n, split, got, want)
			}
		}
	}
}

func BenchmarkSum(b *testing.B) {
	buf := make([]byte, 146) // a 100-byte record's TCP segment with timestamps
	var s uint64
	for b.Loop() {
		s += uint64(Fold(Sum(0, buf)))
	}
	_ = s
}
