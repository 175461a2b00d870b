package pad

import (
	"bytes"
	"testing"

	"github.com/dgramio/dgramio/frameio/memio"
)

func filled(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func TestNeeded(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 60}, {14, 46}, {42, 18}, {54, 6}, {59, 1}, {60, 0}, {61, 0}, {1514, 0}} {
		if got := Needed(make([]byte, c.n)); got != c.want {
			t.Errorf("Needed(%d bytes) = %d, want %d", c.n, got, c.want)
		}
	}
}

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

// TestPadderOverMemio asserts the padding on frames that leave through
// memio: every frame is at least 60 bytes, short ones end in zeros, and
// memio counted no runt.
func TestPadderOverMemio(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	var p Padder
	sizes := []int{14, 42, 54, 59, 60, 61, 1514}
	for _, n := range sizes {
		// Dirty scratch from a previous longer frame must not leak.
		if !p.TxFrame(a, filled(n, byte(n))) {
			t.Fatalf("TxFrame(%d) refused", n)
		}
	}
	if err := a.Kick(); err != nil {
		t.Fatal(err)
	}
	i := 0
	b.RxFrames(len(sizes), func(f []byte) {
		n := sizes[i]
		if len(f) != max(n, 60) {
			t.Errorf("frame of %d bytes left as %d", n, len(f))
		}
		if !bytes.Equal(f[:n], filled(n, byte(n))) || !bytes.Equal(f[n:], make([]byte, len(f)-n)) {
			t.Errorf("frame of %d bytes: content or padding wrong", n)
		}
		i++
	})
	if i != len(sizes) {
		t.Fatalf("%d frames arrived, want %d", i, len(sizes))
	}
	if p.Padded != 4 {
		t.Fatalf("Padded = %d, want 4", p.Padded)
	}
	for _, c := range a.Stats().Layers {
		if c.Name == "tx_runt" && c.Value != 0 {
			t.Fatalf("memio saw %d runts", c.Value)
		}
	}
	f := filled(42, 1)
	if allocs := testing.AllocsPerRun(100, func() {
		p.TxFrame(a, f)
		a.Kick()
		b.RxFrames(1, func([]byte) {})
	}); allocs != 0 {
		t.Fatalf("Padder allocates %v per frame", allocs)
	}
}

func TestPadderRingFull(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{TxSlots: 1})
	var p Padder
	if !p.TxFrame(a, filled(10, 1)) {
		t.Fatal("first refused")
	}
	if p.TxFrame(a, filled(10, 1)) {
		t.Fatal("full ring accepted")
	}
	if p.Padded != 1 {
		t.Fatalf("Padded %d counts a refused frame", p.Padded)
	}
}
