package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The u32 framing: Staging32 writes a big-endian u32 prefix, Decoder32
// reads it back, whole records in order from pieces of any size; a
// prefix beyond the maximum (here 2^32-1) is an oversize record, skipped
// and reported once, and the stream goes on after it.
func TestU32Framing(t *testing.T) {
	s := NewStaging32(64)
	if s.Put([]byte("hello")) != nil || s.Put(nil) != nil {
		t.Fatal("Put refused")
	}
	want := []byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0}
	if !bytes.Equal(s.Pending(), want) || s.Records() != 2 {
		t.Fatalf("staged % x, %d records", s.Pending(), s.Records())
	}
	if done := s.Consume(9); done != 1 || s.TakenPayload() != 5 {
		t.Fatalf("%d done, %d taken", done, s.TakenPayload())
	}
	d := NewDecoder32(8, 64)
	d.Feed([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	if r, err := d.Next(); r != nil || err != ErrOversize {
		t.Fatalf("a 2^32-1 prefix: %q, %v; want ErrOversize", r, err)
	}
	if r, err := d.Next(); r != nil || err != nil || d.Idle() {
		t.Fatalf("while skipping: %q, %v, idle %v", r, err, d.Idle())
	}
	for _, p := range [][]byte{{0, 0, 0}, {2, 'o'}, {'k'}} {
		d.Feed(p)
	}
	d.Compact()
	if r, err := d.Next(); r != nil || err != nil {
		t.Fatalf("still skipping the oversize record: %q, %v", r, err)
	}
}

// FuzzDecoder32: any bytes fed to a Decoder32 in pieces of any size give
// records no longer than its maximum and never a panic; and records put
// through a Staging32 come back whole and in order whatever the pieces.
func FuzzDecoder32(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0}, uint64(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'x'}, uint64(2))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		d := NewDecoder32(100, 300)
		for len(in) > 0 {
			d.Compact()
			k := d.Feed(in[:min(len(in), 1+rng.IntN(50))])
			in = in[k:]
			for {
				r, err := d.Next()
				if err == nil && r == nil {
					break
				}
				if len(r) > 100 {
					t.Fatalf("a record of %d bytes, max 100", len(r))
				}
			}
		}
		s := NewStaging32(1 << 12)
		var sent [][]byte
		for i := 0; i < 20; i++ {
			p := make([]byte, rng.IntN(101))
			for j := range p {
				p[j] = byte(i + j)
			}
			if s.Put(p) == nil {
				sent = append(sent, p)
			}
		}
		stream := append([]byte(nil), s.Pending()...)
		d = NewDecoder32(100, 300)
		var got [][]byte
		for len(stream) > 0 {
			d.Compact()
			k := d.Feed(stream[:min(len(stream), 1+rng.IntN(50))])
			stream = stream[k:]
			for {
				r, err := d.Next()
				if err != nil {
					t.Fatal(err)
				}
				if r == nil {
					break
				}
				got = append(got, append([]byte(nil), r...))
			}
		}
		if len(got) != len(sent) {
			t.Fatalf("%d records back of %d", len(got), len(sent))
		}
		for i := range got {
			if !bytes.Equal(got[i], sent[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
	})
}
