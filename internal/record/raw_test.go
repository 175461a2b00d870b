package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// A raw Staging holds the payloads without prefixes, in order, and counts
// each Put as a record that is done once its last byte is taken.
func TestRawStaging(t *testing.T) {
	s := NewRawStaging(10)
	if s.Put([]byte("abcd")) != nil || s.Put([]byte("efg")) != nil {
		t.Fatal("Put refused")
	}
	if s.Put(nil) != ErrStagingFull || s.Fits(0) {
		t.Fatal("a payload of 0 bytes was taken: it would never be sent")
	}
	if s.Put([]byte("hijk")) != ErrStagingFull {
		t.Fatal("Put took more than the buffer holds")
	}
	if string(s.Pending()) != "abcdefg" || s.Records() != 2 || s.Len() != 7 {
		t.Fatalf("pending %q, %d records", s.Pending(), s.Records())
	}
	if done := s.Consume(3); done != 0 || !s.Started() {
		t.Fatalf("3 bytes of the first Put: %d done, started %v", done, s.Started())
	}
	if done := s.Consume(2); done != 1 || s.TakenPayload() != 4 {
		t.Fatalf("the first Put taken: %d done, %d payload taken", done, s.TakenPayload())
	}
	// The space of a Put partly taken frees when it is taken whole.
	if !s.Fits(7) || s.Fits(8) {
		t.Fatal("Fits: 10 bytes less the 3 of the second Put leave 7")
	}
	if s.Put([]byte("hijkl")) != nil {
		t.Fatal("Put refused after compaction")
	}
	if string(s.Pending()) != "fghijkl" {
		t.Fatalf("pending %q after compaction", s.Pending())
	}
	if done := s.Consume(7); done != 2 || s.Records() != 0 || s.TakenPayload() != 12 {
		t.Fatalf("%d done, %d records, %d taken", done, s.Records(), s.TakenPayload())
	}
	s.Put([]byte("x"))
	s.Reset()
	if s.Records() != 0 || s.Len() != 0 {
		t.Fatal("Reset left something")
	}
}

// A raw Decoder hands out what was read, at most max bytes at a time,
// and never an error.
func TestRawDecoder(t *testing.T) {
	d := NewRawDecoder(4, 16)
	if r, err := d.Next(); r != nil || err != nil || d.Complete() || !d.Idle() {
		t.Fatal("an empty decoder gave something")
	}
	d.Feed([]byte("abcdefghij"))
	var got []string
	for d.Complete() {
		r, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(r))
	}
	if len(got) != 3 || got[0] != "abcd" || got[1] != "efgh" || got[2] != "ij" {
		t.Fatalf("pieces %q", got)
	}
	d.Compact()
	if len(d.Tail()) != 16 {
		t.Fatalf("tail %d after everything was handed out", len(d.Tail()))
	}
}

// FuzzRawStream: whatever sizes the appends and the stream's takes have,
// a raw Staging gives the bytes in order, counts each append done once,
// and a raw Decoder fed the taken bytes in pieces hands them all back in
// order, no piece longer than its max.
func FuzzRawStream(f *testing.F) {
	f.Add(uint64(1), uint8(7), uint16(100))
	f.Add(uint64(2), uint8(1), uint16(4096))
	f.Fuzz(func(t *testing.T, seed uint64, most uint8, size uint16) {
		rng := rand.New(rand.NewPCG(seed, 0))
		s := NewRawStaging(int(size%8192) + 1)
		d := NewRawDecoder(int(most)+1, int(size%512)+1)
		var sent, staged, got []byte
		puts, done := 0, 0
		for round := 0; round < 200; round++ {
			p := make([]byte, rng.IntN(300))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if s.Put(p) == nil {
				puts++
				staged = append(staged, p...)
			}
			if n := s.Len(); n > 0 {
				k := rng.IntN(n + 1)
				taken := s.Pending()[:k]
				sent = append(sent, taken...)
				done += s.Consume(k)
				for len(taken) > 0 {
					m := d.Feed(taken)
					taken = taken[m:]
					for {
						r, err := d.Next()
						if err != nil {
							t.Fatal(err)
						}
						if r == nil {
							break
						}
						if len(r) > d.Max() {
							t.Fatalf("a piece of %d bytes, max %d", len(r), d.Max())
						}
						got = append(got, r...)
					}
					d.Compact()
				}
			}
		}
		if !bytes.Equal(sent, staged[:len(sent)]) || !bytes.Equal(got, sent) {
			t.Fatal("bytes out of order")
		}
		if done+s.Records() != puts {
			t.Fatalf("%d done + %d staged != %d put", done, s.Records(), puts)
		}
	})
}
