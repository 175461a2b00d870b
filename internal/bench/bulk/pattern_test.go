package bulk

import (
	"strings"
	"testing"
	"time"
)

// stream runs a sender to its end, cutting what it produces into pieces
// of the sizes given in turn.
func stream(s *sender, sizes ...int) []byte {
	var out []byte
	for i := 0; !s.done(time.Time{}); i++ {
		b := s.next(sizes[i%len(sizes)])
		n := min(len(b), sizes[i%len(sizes)])
		out = append(out, b[:n]...)
		s.advance(n)
	}
	return out
}

// TestPatternRoundTrip: what a sender produces, in any cutting, a
// receiver takes byte for byte, across the pattern's period.
func TestPatternRoundTrip(t *testing.T) {
	const limit = 3*patternLen + 17
	for _, start := range []int{0, 1, patternLen - 1, 4242} {
		s := newSender(start, limit, time.Time{})
		b := stream(s, 1, 7, 65536, 3, patternLen+5)
		if int64(len(b)) != limit+headerLen || s.total() != int64(len(b)) {
			t.Fatalf("start %d: sent %d bytes (total %d), want %d", start, len(b), s.total(), limit+headerLen)
		}
		var r receiver
		for len(b) > 0 {
			n := min(len(b), 1000)
			if err := r.take(b[:n], time.Now()); err != nil {
				t.Fatalf("start %d: %v", start, err)
			}
			b = b[n:]
		}
		if r.total() != limit+headerLen || r.start != start%patternLen {
			t.Fatalf("start %d: received %d from start %d", start, r.total(), r.start)
		}
	}
}

// TestPatternCatchesDamage: a flipped byte, a bad header, a stream of
// another start offset are all refused.
func TestPatternCatchesDamage(t *testing.T) {
	good := stream(newSender(100, 5000, time.Time{}), 4096)
	for _, tc := range []struct {
		name string
		at   int
		want string
	}{
		{"magic", 1, "magic"},
		{"offset", 6, ""}, // another start: the payload no longer matches
		{"payload", 3000, "byte 3000 of the stream differs"},
	} {
		b := append([]byte(nil), good...)
		b[tc.at] ^= 0x40
		var r receiver
		err := r.take(b, time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestSenderDeadline: without a byte limit a sender stops at its
// deadline, and never before its header is out.
func TestSenderDeadline(t *testing.T) {
	now := time.Now()
	s := newSender(0, 0, now)
	if s.done(now) {
		t.Fatal("done before the header was sent")
	}
	s.advance(len(s.next(100)))
	if !s.done(now) || s.next(100) != nil {
		t.Fatal("not done at the deadline")
	}
	s2 := newSender(0, 0, now.Add(time.Hour))
	s2.advance(len(s2.next(100)))
	if s2.done(now) {
		t.Fatal("done before the deadline")
	}
}

// FuzzReceiver feeds arbitrary bytes, as a stream's first bytes, to a
// receiver: it never panics, and accepts exactly the bytes a sender of
// the start offset the header names would have sent.
func FuzzReceiver(f *testing.F) {
	f.Add(stream(newSender(5, 100, time.Time{}), 64))
	f.Add([]byte{0x44, 0x47, 0x42, 0x4b, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r receiver
		err := r.take(b, time.Now())
		if err != nil || len(b) <= headerLen {
			return
		}
		want := stream(newSender(r.start, int64(len(b)-headerLen), time.Time{}), 4096)
		if string(want) != string(b) {
			t.Fatalf("accepted %x, a sender from %d sends %x", b, r.start, want)
		}
	})
}
