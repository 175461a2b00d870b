package pad

import (
	"bytes"
	"testing"
)

func filled(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func TestInPlace(t *testing.T) {
	cases := []struct {
		name     string
		len, cap int
		wantLen  int
		wantOK   bool
	}{
		{"arp 42, room", 42, 64, 60, true},
		{"ack 54, room exact", 54, 60, 60, true},
		{"59, room", 59, 100, 60, true},
		{"60 as is", 60, 60, 60, true},
		{"1514 as is", 1514, 1514, 1514, true},
		{"42, no room", 42, 59, 42, false},
		{"empty, room", 0, 60, 60, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Dirty memory beyond len must be zeroed by InPlace.
			back := filled(c.cap, 0xEE)
			copy(back, filled(c.len, 0xAA))
			f := back[:c.len]
			got, ok := InPlace(f)
			if ok != c.wantOK || len(got) != c.wantLen {
				t.Fatalf("InPlace: len %d ok %v, want %d %v", len(got), ok, c.wantLen, c.wantOK)
			}
			if !bytes.Equal(got[:c.len], filled(c.len, 0xAA)) {
				t.Fatal("frame bytes changed")
			}
			if !bytes.Equal(got[c.len:], make([]byte, len(got)-c.len)) {
				t.Fatal("padding not zero")
			}
			if c.len < 60 && ok && &got[0] != &back[0] {
				t.Fatal("not in place")
			}
			if !ok && !bytes.Equal(back[c.len:], filled(c.cap-c.len, 0xEE)) {
				t.Fatal("wrote beyond len on failure")
			}
		})
	}
}

func TestAppend(t *testing.T) {
	for _, n := range []int{0, 1, 42, 54, 59, 60, 61, 200} {
		prefix := []byte{1, 2, 3}
		got := Append(append([]byte(nil), prefix...), filled(n, 0xAA))
		want := len(prefix) + max(n, 60)
		if len(got) != want {
			t.Fatalf("Append(%d): len %d, want %d", n, len(got), want)
		}
		if !bytes.Equal(got[:3], prefix) || !bytes.Equal(got[3:3+n], filled(n, 0xAA)) {
			t.Fatalf("Append(%d): content", n)
		}
		if !bytes.Equal(got[3+n:], make([]byte, want-3-n)) {
			t.Fatalf("Append(%d): padding not zero", n)
		}
	}
	dst := make([]byte, 0, 60)
	if allocs := testing.AllocsPerRun(100, func() { _ = Append(dst[:0], filled42) }); allocs != 0 {
		t.Fatalf("Append with capacity allocates %v", allocs)
	}
}

var filled42 = filled(42, 0xAA)

// TestExtend: a frame built by appending after a prefix is padded from
// where it starts, never the prefix counted in.
func TestExtend(t *testing.T) {
	for _, n := range []int{0, 14, 42, 59, 60, 61, 1514} {
		prefix := filled(100, 0xEE) // longer than a frame: must not count
		dst := append(append([]byte(nil), prefix...), filled(n, 0xAA)...)
		got := Extend(dst, len(prefix))
		if len(got)-len(prefix) != max(n, 60) {
			t.Fatalf("Extend of %d bytes: frame of %d, want %d", n, len(got)-len(prefix), max(n, 60))
		}
		if !bytes.Equal(got[:len(prefix)+n], dst) || !bytes.Equal(got[len(prefix)+n:], make([]byte, len(got)-len(prefix)-n)) {
			t.Fatalf("Extend of %d bytes: content or padding wrong", n)
		}
	}
	buf := make([]byte, 0, 60)
	if allocs := testing.AllocsPerRun(100, func() { _ = Extend(append(buf[:0], filled42...), 0) }); allocs != 0 {
		t.Fatalf("Extend with capacity allocates %v", allocs)
	}
}
