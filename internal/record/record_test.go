package record

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

func TestAppendRecord(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []byte // prefix
		err  error
	}{
		{0, []byte{0, 0}, nil},
		{1, []byte{0, 1}, nil},
		{100, []byte{0, 100}, nil},
		{256, []byte{1, 0}, nil},
		{1400, []byte{0x05, 0x78}, nil},
		{MaxRecord, []byte{0xff, 0xff}, nil},
		{MaxRecord + 1, nil, ErrRecordTooLarge},
		{1 << 20, nil, ErrRecordTooLarge},
	} {
		p := bytes.Repeat([]byte{0xab}, tc.n)
		got, err := AppendRecord([]byte("x"), p)
		if !errors.Is(err, tc.err) {
			t.Errorf("len %d: err %v, want %v", tc.n, err, tc.err)
			continue
		}
		if err != nil {
			if string(got) != "x" {
				t.Errorf("len %d: dst changed on error: %q", tc.n, got)
			}
			continue
		}
		if !bytes.Equal(got[1:3], tc.want) || !bytes.Equal(got[3:], p) || len(got) != 3+tc.n {
			t.Errorf("len %d: got prefix %x, total %d", tc.n, got[1:3], len(got))
		}
		buf := make([]byte, HeaderLen+tc.n)
		if n, err := PutRecord(buf, p); err != nil || n != len(buf) || !bytes.Equal(buf, got[1:]) {
			t.Errorf("len %d: PutRecord = %d, %v", tc.n, n, err)
		}
		if tc.n > 0 {
			if n, err := PutRecord(buf[:len(buf)-1], p); err != ErrStagingFull || n != 0 {
				t.Errorf("len %d: PutRecord into a short buffer = %d, %v", tc.n, n, err)
			}
		}
	}
}

// encode returns the stream of records of the given payloads.
func encode(t testing.TB, payloads ...[]byte) []byte {
	var s []byte
	var err error
	for _, p := range payloads {
		if s, err = AppendRecord(s, p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// decodeAll reads stream into d in chunks of the given sizes (cycled) and
// returns the records (copied) and the number of ErrOversize reports.
func decodeAll(t testing.TB, d *Decoder, stream []byte, chunks []int) (recs [][]byte, oversize int) {
	t.Helper()
	ci := 0
	for len(stream) > 0 || d.Buffered() > 0 {
		d.Compact()
		tail := d.Tail()
		if len(tail) == 0 {
			t.Fatalf("empty tail after Compact with %d buffered", d.Buffered())
		}
		c := len(stream)
		if len(chunks) > 0 {
			c = chunks[ci%len(chunks)]
			ci++
			if c <= 0 {
				c = 1
			}
		}
		if c > len(stream) {
			c = len(stream)
		}
		n := copy(tail, stream[:c])
		d.Commit(n)
		stream = stream[n:]
		progressed := false
		for {
			complete := d.Complete()
			rec, err := d.Next()
			if complete != (rec != nil || err == ErrOversize) {
				t.Fatalf("Complete said %v, Next returned %d bytes, %v", complete, len(rec), err)
			}
			if err == ErrOversize {
				oversize++
				progressed = true
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec == nil {
				break
			}
			progressed = true
			recs = append(recs, append([]byte{}, rec...))
		}
		if len(stream) == 0 && !progressed && n == 0 {
			break // a partial record at the end of the stream
		}
	}
	return recs, oversize
}

func payloads(sizes ...int) [][]byte {
	var ps [][]byte
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i*7 + j)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestDecoderSplits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		buf    int
		sizes  []int
		chunks []int
	}{
		{"one record whole", 100, 0, []int{100}, nil},
		{"byte by byte", 100, 0, []int{3, 0, 100, 1}, []int{1}},
		{"header split", 1472, 0, []int{1472, 1472, 5}, []int{1, 1474, 2, 1}},
		{"many small in one read", 100, 4096, []int{100, 100, 100, 100, 100, 100, 100}, nil},
		{"odd chunks", 1472, 3000, []int{1472, 1, 1000, 1472, 0, 77}, []int{7, 1500, 13}},
		{"largest record", MaxRecord, 0, []int{MaxRecord, 1, MaxRecord}, []int{40000, 1, 30000}},
		{"empty records", 10, 0, []int{0, 0, 0, 10, 0}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := payloads(tc.sizes...)
			stream := encode(t, ps...)
			d := NewDecoder(tc.max, tc.buf)
			got, over := decodeAll(t, d, stream, tc.chunks)
			if over != 0 {
				t.Errorf("%d oversize reports", over)
			}
			if len(got) != len(ps) {
				t.Fatalf("got %d records, want %d", len(got), len(ps))
			}
			for i := range ps {
				if !bytes.Equal(got[i], ps[i]) {
					t.Errorf("record %d: %d bytes, want %d (content differs)", i, len(got[i]), len(ps[i]))
				}
			}
			if d.Buffered() != 0 {
				t.Errorf("%d bytes left buffered", d.Buffered())
			}
		})
	}
}

func TestDecoderOversizeSkipped(t *testing.T) {
	ps := payloads(10, 200, 10, 65535, 3, 101, 100)
	stream := encode(t, ps...)
	for _, chunks := range [][]int{nil, {1}, {3, 50}, {1000}} {
		d := NewDecoder(100, 150)
		got, over := decodeAll(t, d, stream, chunks)
		if over != 3 {
			t.Errorf("chunks %v: %d oversize reports, want 3", chunks, over)
		}
		want := [][]byte{ps[0], ps[2], ps[4], ps[6]}
		if len(got) != len(want) {
			t.Fatalf("chunks %v: %d records, want %d", chunks, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("chunks %v: record %d differs", chunks, i)
			}
		}
	}
}

// Idle is true only where the stream's next byte starts a record: not
// with a partial record buffered, nor while an oversize record's bytes
// are still being dropped (buffered or not).
func TestDecoderIdle(t *testing.T) {
	d := NewDecoder(100, 150)
	if !d.Idle() {
		t.Fatal("new decoder not idle")
	}
	stream := encode(t, payloads(10, 300, 20)...)
	d.Commit(copy(d.Tail(), stream[:5])) // 2-byte prefix and 3 of 10 bytes
	if d.Idle() {
		t.Fatal("idle with a partial record buffered")
	}
	d.Commit(copy(d.Tail(), stream[5:12]))
	if rec, err := d.Next(); err != nil || len(rec) != 10 {
		t.Fatalf("first record: %d bytes, %v", len(rec), err)
	}
	if !d.Idle() {
		t.Fatal("not idle after the whole record was decoded")
	}
	d.Compact()
	d.Commit(copy(d.Tail(), stream[12:112])) // the oversize prefix and 98 bytes
	if _, err := d.Next(); err != ErrOversize {
		t.Fatalf("oversize record: %v", err)
	}
	if d.Buffered() != 0 || d.Idle() {
		t.Fatalf("buffered %d, idle %v in the oversize record's middle: want 0 and false", d.Buffered(), d.Idle())
	}
	for _, part := range [][]byte{stream[112:212], stream[212:314]} { // its last 202 bytes
		d.Compact()
		d.Commit(copy(d.Tail(), part))
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if !d.Idle() {
		t.Fatal("not idle after the oversize record")
	}
}

func TestDecoderPartialRecordWaits(t *testing.T) {
	d := NewDecoder(100, 0)
	stream := encode(t, payloads(50)...)
	for i := 0; i < len(stream)-1; i++ {
		d.Commit(copy(d.Tail(), stream[i:i+1]))
		if rec, err := d.Next(); rec != nil || err != nil {
			t.Fatalf("after %d of %d bytes: Next = %v, %v", i+1, len(stream), rec, err)
		}
	}
	d.Commit(copy(d.Tail(), stream[len(stream)-1:]))
	if rec, err := d.Next(); err != nil || len(rec) != 50 {
		t.Fatalf("complete record: %d bytes, %v", len(rec), err)
	}
}

func TestDecoderRecordsStayValidUntilCompact(t *testing.T) {
	d := NewDecoder(10, 12)
	stream := encode(t, []byte("abcdefghij"), []byte("0123456789"))
	d.Commit(copy(d.Tail(), stream))
	first, _ := d.Next()
	// The second record does not fit behind the first: Feed takes what fits
	// but must not move the first record.
	n := d.Feed(stream[12:])
	if string(first) != "abcdefghij" {
		t.Fatalf("first record changed by Feed: %q", first)
	}
	if n != 0 {
		t.Fatalf("Feed into a full buffer took %d bytes", n)
	}
	d.Compact()
	d.Commit(copy(d.Tail(), stream[12:]))
	second, _ := d.Next()
	if string(second) != "0123456789" {
		t.Fatalf("second record %q", second)
	}
}

func TestDecoderNoAllocs(t *testing.T) {
	stream := encode(t, payloads(100, 1472, 7, 300)...)
	d := NewDecoder(1472, 4096)
	allocs := testing.AllocsPerRun(200, func() {
		rest := stream
		for len(rest) > 0 {
			d.Compact()
			n := d.Feed(rest[:min(len(rest), 333)])
			rest = rest[n:]
			for {
				rec, err := d.Next()
				if rec == nil && err == nil {
					break
				}
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("decoding allocates %v times per stream", allocs)
	}
}

func TestStaging(t *testing.T) {
	s := NewStaging(3 * (HeaderLen + 100))
	p := bytes.Repeat([]byte{1}, 100)
	for i := 0; i < 3; i++ {
		if !s.Fits(100) {
			t.Fatalf("record %d does not fit", i)
		}
		if err := s.Put(p); err != nil {
			t.Fatal(err)
		}
	}
	if s.Fits(0) || s.Put(nil) != ErrStagingFull {
		t.Fatal("a full staging buffer accepted a record")
	}
	if s.Records() != 3 || s.Len() != 3*102 || s.Started() {
		t.Fatalf("records %d len %d started %v", s.Records(), s.Len(), s.Started())
	}
	// The stream takes one and a half records.
	if done := s.Consume(153); done != 1 {
		t.Fatalf("Consume(153) completed %d records, want 1", done)
	}
	if s.Records() != 2 || !s.Started() {
		t.Fatalf("records %d started %v, want 2 and a record begun", s.Records(), s.Started())
	}
	// The half-taken record's space is not free yet: only one record's
	// worth (102 bytes) is.
	if !s.Fits(100) || s.Fits(101) {
		t.Fatalf("Fits after a partial take: 100=%v 101=%v", s.Fits(100), s.Fits(101))
	}
	if err := s.Put(bytes.Repeat([]byte{2}, 100)); err != nil {
		t.Fatal(err)
	}
	// The rest of the stream is the second half of record 2, record 3 and
	// the new one, in order.
	want := append(append(bytes.Repeat([]byte{1}, 51), 0, 100), p...)
	want = append(append(want, 0, 100), bytes.Repeat([]byte{2}, 100)...)
	if !bytes.Equal(s.Pending(), want) {
		t.Fatalf("pending after compaction differs: %d bytes, want %d", s.Len(), len(want))
	}
	if done := s.Consume(s.Len()); done != 3 || s.Started() {
		t.Fatalf("consuming everything completed %d records (want 3), started %v", done, s.Started())
	}
	if s.Records() != 0 || s.Len() != 0 || !s.Fits(3*102-2) {
		t.Fatalf("after taking all: records %d len %d", s.Records(), s.Len())
	}
	if s.TakenPayload() != 400 {
		t.Fatalf("TakenPayload %d, want 400", s.TakenPayload())
	}
	if err := s.Put(make([]byte, MaxRecord+1)); err != ErrRecordTooLarge {
		t.Fatalf("oversize Put: %v", err)
	}
}

// TestStagingRandom stages random records, lets a stream take random
// amounts, and checks that the bytes taken decode to the same records and
// that Consume's counts add up.
func TestStagingRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := NewStaging(5000)
	d := NewDecoder(1000, 0)
	var sent [][]byte
	var got [][]byte
	completed := 0
	for i := 0; i < 20000; i++ {
		if rng.Intn(2) == 0 {
			p := make([]byte, rng.Intn(1001))
			rng.Read(p)
			if s.Fits(len(p)) {
				if err := s.Put(p); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, p)
			} else if s.Put(p) != ErrStagingFull {
				t.Fatal("Put succeeded where Fits said no")
			}
		} else if s.Len() > 0 {
			n := 1 + rng.Intn(s.Len())
			d.Compact()
			m := d.Feed(s.Pending()[:n])
			completed += s.Consume(m)
			for {
				rec, err := d.Next()
				if err != nil {
					t.Fatal(err)
				}
				if rec == nil {
					break
				}
				got = append(got, append([]byte{}, rec...))
			}
		}
		if completed != len(got) || completed+s.Records() != len(sent) {
			t.Fatalf("step %d: completed %d, decoded %d, staged %d, sent %d", i, completed, len(got), s.Records(), len(sent))
		}
	}
	for i := range got {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
	if len(got) < 1000 {
		t.Fatalf("only %d records went through", len(got))
	}
}

// FuzzDecoder feeds an arbitrary stream to a Decoder in arbitrary pieces
// and checks it against a reference decoding of the whole stream at once.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c', 0, 0, 0, 1, 'x'}, uint16(100), []byte{1, 2, 3})
	f.Add([]byte{0xff, 0xff, 1, 2, 3}, uint16(10), []byte{1})
	f.Add([]byte{0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 0, 1, 9}, uint16(5), []byte{4, 0, 7})
	f.Add([]byte{0}, uint16(0), []byte(nil))
	f.Fuzz(func(t *testing.T, stream []byte, max uint16, cuts []byte) {
		// Reference: parse the whole stream.
		var want [][]byte
		wantOver := 0
		for rest := stream; len(rest) >= HeaderLen; {
			n := int(rest[0])<<8 | int(rest[1])
			if n > int(max) {
				wantOver++
				if len(rest) < HeaderLen+n {
					break
				}
			} else if len(rest) < HeaderLen+n {
				break
			} else {
				want = append(want, rest[HeaderLen:HeaderLen+n])
			}
			rest = rest[HeaderLen+n:]
		}
		chunks := make([]int, len(cuts))
		for i, c := range cuts {
			chunks[i] = int(c)
		}
		d := NewDecoder(int(max), int(max)/2)
		got, over := decodeAll(t, d, stream, chunks)
		if over != wantOver {
			t.Fatalf("%d oversize reports, want %d", over, wantOver)
		}
		if len(got) != len(want) {
			t.Fatalf("%d records, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d: %x, want %x", i, got[i], want[i])
			}
		}
	})
}

func ExampleDecoder() {
	stream, _ := AppendRecord(nil, []byte("hello"))
	stream, _ = AppendRecord(stream, []byte("world"))
	d := NewDecoder(100, 0)
	// The stream arrives in two reads that cut the second record.
	for _, piece := range [][]byte{stream[:9], stream[9:]} {
		d.Compact()
		d.Commit(copy(d.Tail(), piece))
		for rec, _ := d.Next(); rec != nil; rec, _ = d.Next() {
			fmt.Println(string(rec))
		}
	}
	// Output:
	// hello
	// world
}
