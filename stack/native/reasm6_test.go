package native

import (
	"bytes"
	"testing"
)

// frags6 cuts the upper-layer data up of a packet from a6B to a6A into
// fragments at the byte offsets cuts (multiples of 8), each with the
// unfragmentable headers pre before its Fragment header.
func frags6(pre []ext6, id uint32, up []byte, cuts ...int) [][]byte {
	var out [][]byte
	bounds := append(append([]int{0}, cuts...), len(up))
	for i := 0; i+1 < len(bounds); i++ {
		chain := append(append([]ext6(nil), pre...), fragHdr(bounds[i], i+2 < len(bounds), id))
		out = append(out, pkt6(a6B, a6A, 64, chain, protoTCP, up[bounds[i]:bounds[i+1]]))
	}
	return out
}

// feed6 parses p and gives it to t at now.
func feed6(tb testing.TB, r *reasm6, now int64, p []byte) ([]byte, reasm6Result) {
	tb.Helper()
	var h ip6Hdr
	if e := parseIPv6(p, &h); e != ip6OK || !h.frag {
		tb.Fatalf("not a fragment: %v %+v", e, h)
	}
	return r.input(now, p, &h)
}

// TestReasm6 reassembles fragments in and out of order (RFC 8200 §4.5):
// the packet comes back as if sent whole, the unfragmentable headers of
// the first fragment kept, its Fragment header gone, and the header that
// named it naming what the Fragment header named.
func TestReasm6(t *testing.T) {
	up := tcp6(a6B, a6A, 1000, 80, bytes.Repeat([]byte("0123456789abcdef"), 200))
	hbh := optsHdr(extHopByHop, 5, 2, 0, 0)
	whole := pkt6(a6B, a6A, 64, []ext6{hbh}, protoTCP, up)
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}} {
		var r reasm6
		fs := frags6([]ext6{hbh}, 42, up, 1232, 2464, 2472)
		var got []byte
		for i, k := range order {
			out, res := feed6(t, &r, 1, fs[k])
			want := reasm6Queued
			if i == len(order)-1 {
				want = reasm6Done
			}
			if res != want {
				t.Fatalf("order %v, fragment %d: %v, want %v", order, k, res, want)
			}
			got = out
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("order %v: reassembled packet differs from the whole one (%d vs %d bytes)", order, len(got), len(whole))
		}
		var h ip6Hdr
		if e := walk6(got, &h, walkReassembled); e != ip6OK || h.proto != protoTCP || !verify6(h.src, h.dst, protoTCP, h.payload(got)) {
			t.Fatalf("reassembled packet: %v %+v", e, h)
		}
		if r.used != 0 {
			t.Errorf("%d slots still used", r.used)
		}
	}
}

// TestReasm6Overlap: a fragment overlapping one received abandons the
// packet, and every fragment of it that comes later is dropped too, until
// the slot's time runs out (RFC 5722 §4); its end is not a reassembly
// timeout.
func TestReasm6Overlap(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, make([]byte, 100))
	fs := frags6(nil, 9, up, 48, 96)
	over := pkt6(a6B, a6A, 64, []ext6{fragHdr(40, true, 9)}, protoTCP, up[40:56])
	var r reasm6
	if _, res := feed6(t, &r, 1, fs[0]); res != reasm6Queued {
		t.Fatal(res)
	}
	if _, res := feed6(t, &r, 2, over); res != reasm6Overlap {
		t.Fatalf("overlapping fragment: %v", res)
	}
	for _, f := range fs[1:] {
		if out, res := feed6(t, &r, 3, f); res != reasm6Abandoned || out != nil {
			t.Fatalf("later fragment of an abandoned packet: %v", res)
		}
	}
	if n := r.expire(1 + reasm6Timeout); n != 0 || r.timeouts != 0 || r.used != 0 {
		t.Errorf("abandoned slot expiry: %d timeouts (%d), %d used", n, r.timeouts, r.used)
	}
	// After it, the same identification starts afresh.
	for i, f := range fs {
		if _, res := feed6(t, &r, 2+reasm6Timeout, f); (i < 2) != (res == reasm6Queued) {
			t.Fatalf("fresh packet, fragment %d: %v", i, res)
		}
	}
}

// TestReasm6Duplicate: an exact duplicate is dropped alone and the packet
// still completes (RFC 8200 §4.5 allows it); a first fragment repeated
// with other data is an overlap (RFC 5722).
func TestReasm6Duplicate(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, make([]byte, 100))
	fs := frags6(nil, 5, up, 64)
	var r reasm6
	feed6(t, &r, 1, fs[0])
	if _, res := feed6(t, &r, 1, fs[0]); res != reasm6Duplicate {
		t.Fatalf("duplicate: %v", res)
	}
	if _, res := feed6(t, &r, 1, fs[1]); res != reasm6Done {
		t.Fatalf("after a duplicate: %v", res)
	}
	feed6(t, &r, 1, fs[0])
	other := append([]byte(nil), fs[0]...)
	other[len(other)-1] ^= 1
	if _, res := feed6(t, &r, 1, other); res != reasm6Overlap {
		t.Fatalf("first fragment with other data: %v", res)
	}
}

// TestReasm6Drops: the fragments RFC 8200 §4.5 and RFC 7112 §5 drop, each
// with its reason.
func TestReasm6Drops(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, make([]byte, 100))
	for _, c := range []struct {
		name string
		p    [][]byte
		want reasm6Result
	}{
		{"§4.5 M set, length not a multiple of 8", [][]byte{pkt6(a6B, a6A, 64, []ext6{fragHdr(0, true, 1)}, protoTCP, up[:30])}, reasm6BadLength},
		{"§4.5 beyond 65535 bytes", [][]byte{pkt6(a6B, a6A, 64, []ext6{fragHdr(65528, false, 1)}, protoTCP, up[:16])}, reasm6TooBig},
		{"RFC 7112 §5 first fragment without the whole TCP header", [][]byte{pkt6(a6B, a6A, 64, []ext6{fragHdr(0, true, 1)}, protoTCP, up[:16])}, reasm6ChainCut},
		{"RFC 7112 §5 first fragment cutting a destination options header",
			[][]byte{pkt6(a6B, a6A, 64, []ext6{fragHdr(0, true, 1)}, extDestOpts, []byte{6, 1, 0, 0, 0, 0, 0, 0})}, reasm6ChainCut},
		{"second last fragment with another end", [][]byte{
			pkt6(a6B, a6A, 64, []ext6{fragHdr(48, false, 1)}, protoTCP, up[48:64]),
			pkt6(a6B, a6A, 64, []ext6{fragHdr(64, false, 1)}, protoTCP, up[64:80])}, reasm6BadTotal},
		{"data beyond the last fragment's end", [][]byte{
			pkt6(a6B, a6A, 64, []ext6{fragHdr(48, false, 1)}, protoTCP, up[48:64]),
			pkt6(a6B, a6A, 64, []ext6{fragHdr(64, true, 1)}, protoTCP, up[64:80])}, reasm6BadTotal},
	} {
		var r reasm6
		var res reasm6Result
		for _, p := range c.p {
			_, res = feed6(t, &r, 1, p)
		}
		if res != c.want {
			t.Errorf("%s: %v, want %v", c.name, res, c.want)
		}
	}
}

// TestReasm6Bounds: a slot tracks reasm6Ranges holes at most, and the
// table reasm6Slots packets; beyond either, fragments are dropped and
// counted, and the table's memory stays what it was.
func TestReasm6Bounds(t *testing.T) {
	up := make([]byte, 8*64)
	var r reasm6
	var res reasm6Result
	for i := 0; i <= reasm6Ranges; i++ { // every other 8-byte block: a hole after each
		_, res = feed6(t, &r, 1, pkt6(a6B, a6A, 64, []ext6{fragHdr(16*i+16, true, 3)}, protoTCP, up[:8]))
	}
	if res != reasm6TooManyRanges {
		t.Fatalf("holes beyond the limit: %v", res)
	}
	r = reasm6{}
	first := tcp6(a6B, a6A, 1, 2, make([]byte, 12))
	for id := uint32(0); id <= reasm6Slots; id++ {
		_, res = feed6(t, &r, 1, pkt6(a6B, a6A, 64, []ext6{fragHdr(0, true, id)}, protoTCP, first))
	}
	if res != reasm6NoSlot || r.used != reasm6Slots {
		t.Fatalf("packets beyond the slots: %v, %d used", res, r.used)
	}
}

// TestReasm6Timeout: a packet not whole 60 s after its first fragment is
// dropped and counted (RFC 8200 §4.5); next says when.
func TestReasm6Timeout(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, make([]byte, 100))
	fs := frags6(nil, 77, up, 64)
	var r reasm6
	feed6(t, &r, 1000, fs[0])
	if at, ok := r.next(); !ok || at != 1000+reasm6Timeout {
		t.Fatalf("next %d %v", at, ok)
	}
	if n := r.expire(999 + reasm6Timeout); n != 0 {
		t.Fatal("expired early")
	}
	if n := r.expire(1000 + reasm6Timeout); n != 1 || r.timeouts != 1 || r.used != 0 {
		t.Fatalf("expire: %d, timeouts %d, used %d", n, r.timeouts, r.used)
	}
	if _, ok := r.next(); ok {
		t.Error("a deadline left")
	}
	if _, res := feed6(t, &r, 2000+reasm6Timeout, fs[1]); res != reasm6Queued {
		t.Errorf("the rest after the timeout starts a new packet: %v", res)
	}
}

// TestReasm6AtomicFragmentIsolated: an atomic fragment is processed as a
// whole packet, apart from a packet being reassembled with the same
// source, destination and identification (RFC 6946 §4).
func TestReasm6AtomicFragmentIsolated(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, make([]byte, 100))
	fs := frags6(nil, 11, up, 64)
	var r reasm6
	feed6(t, &r, 1, fs[0])
	atomic := pkt6(a6B, a6A, 64, []ext6{fragHdr(0, false, 11)}, protoTCP, up)
	var h ip6Hdr
	if e := parseIPv6(atomic, &h); e != ip6OK || h.frag || !h.atomic || !bytes.Equal(h.payload(atomic), up) {
		t.Fatalf("atomic fragment: %v %+v", e, h)
	}
	if _, res := feed6(t, &r, 1, fs[1]); res != reasm6Done {
		t.Fatalf("the pending packet: %v", res)
	}
}

// TestReasm6NoNestedFragments: a reassembled packet that holds another
// Fragment header is refused by its walk, so fragments never nest.
func TestReasm6NoNestedFragments(t *testing.T) {
	inner := pkt6(a6B, a6A, 64, []ext6{fragHdr(8, false, 1)}, protoTCP, make([]byte, 40))[ip6Len:]
	up := append([]byte(nil), inner...)
	var r reasm6
	feed6(t, &r, 1, pkt6(a6B, a6A, 64, []ext6{fragHdr(0, true, 2)}, extFragment, up[:32]))
	out, res := feed6(t, &r, 1, pkt6(a6B, a6A, 64, []ext6{fragHdr(32, false, 2)}, extFragment, up[32:]))
	if res != reasm6Done {
		t.Fatal(res)
	}
	var h ip6Hdr
	if e := walk6(out, &h, walkReassembled); e != ip6FragmentTwice {
		t.Fatalf("nested fragment: %v", e)
	}
}

// TestReasm6Allocs: once a slot's buffers exist, reassembly allocates
// nothing.
func TestReasm6Allocs(t *testing.T) {
	up := tcp6(a6B, a6A, 1, 2, make([]byte, 100))
	fs := frags6(nil, 5, up, 64)
	var r reasm6
	var hs [2]ip6Hdr
	for i := range fs {
		parseIPv6(fs[i], &hs[i])
	}
	run := func() {
		r.input(1, fs[0], &hs[0])
		if _, res := r.input(1, fs[1], &hs[1]); res != reasm6Done {
			t.Fatal(res)
		}
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("%v allocations a packet", n)
	}
}
