package load

import (
	"testing"
)

func TestMsgRoundTrip(t *testing.T) {
	m, err := NewMsg(100, 0xabcdef01)
	if err != nil {
		t.Fatal(err)
	}
	m.Stamp(123456789, 987654321012)
	if !m.IsValid() {
		t.Fatal("stamped message is not valid")
	}
	if m.RunID() != 0xabcdef01 || m.Seq() != 123456789 || m.Sched() != 987654321012 {
		t.Fatalf("got run %x seq %d sched %d", m.RunID(), m.Seq(), m.Sched())
	}
	for i := HeaderLen; i < len(m); i++ {
		if m[i] != 0 {
			t.Fatalf("padding byte %d is %#x", i, m[i])
		}
	}
	if _, err := NewMsg(HeaderLen-1, 1); err == nil {
		t.Fatal("NewMsg accepted a message shorter than its header")
	}
	if Msg(m[:HeaderLen-1]).IsValid() {
		t.Fatal("a truncated message is valid")
	}
	bad := append(Msg(nil), m...)
	bad[0] ^= 0xff
	if bad.IsValid() {
		t.Fatal("a message without the magic is valid")
	}
}

// FuzzMsg checks that no input makes the view panic and that a valid view
// reads back what Stamp wrote.
func FuzzMsg(f *testing.F) {
	m, _ := NewMsg(HeaderLen, 7)
	m.Stamp(1, 2)
	f.Add([]byte(m))
	f.Add([]byte{})
	f.Add([]byte("dgb1"))
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := Msg(b)
		if !v.IsValid() {
			return
		}
		run, seq, sched := v.RunID(), v.Seq(), v.Sched()
		w, err := NewMsg(len(b), run)
		if err != nil {
			t.Fatalf("valid message of %d bytes: %v", len(b), err)
		}
		w.Stamp(seq, sched)
		if string(w[:HeaderLen]) != string(b[:HeaderLen]) {
			t.Fatalf("re-encoded header %x differs from %x", w[:HeaderLen], b[:HeaderLen])
		}
	})
}
