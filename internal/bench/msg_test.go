package bench

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

func TestRates(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"20k", 20000, true}, {"1.6M", 1.6e6, true}, {"200000", 200000, true},
		{" 100K ", 100000, true}, {"0", 0, false}, {"-5k", 0, false}, {"fast", 0, false}, {"NaN", 0, false},
	} {
		got, err := ParseRate(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseRate(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	rs, err := ParseRates("20k,100k,200k,400k,800k,1.6M")
	if err != nil || len(rs) != 6 || rs[5] != 1.6e6 {
		t.Fatalf("ParseRates = %v, %v", rs, err)
	}
	if _, err := ParseRates(" , "); err == nil {
		t.Fatal("ParseRates accepted an empty list")
	}
	for _, c := range []struct {
		r    float64
		want string
	}{{20000, "20k"}, {613400, "613k"}, {1.6e6, "1.6M"}, {1e6, "1M"}, {999700, "1M"}, {950, "950"}} {
		if got := FormatRate(c.r); got != c.want {
			t.Errorf("FormatRate(%v) = %q, want %q", c.r, got, c.want)
		}
	}
	for _, c := range []struct {
		p    float64
		want string
	}{{0, "0%"}, {0.04, "0.04%"}, {0.3, "0.3%"}, {12.4, "12%"}, {50, "50%"}} {
		if got := FormatLoss(c.p); got != c.want {
			t.Errorf("FormatLoss(%v) = %q, want %q", c.p, got, c.want)
		}
	}
	if got := FormatUs(17.24); got != "17.2" {
		t.Errorf("FormatUs(17.24) = %q", got)
	}
	if got := FormatUs(1226.4); got != "1226" {
		t.Errorf("FormatUs(1226.4) = %q", got)
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"TxBackpressure": "tx_backpressure", "SockRcvBuf": "sock_rcv_buf", "RxDelivered": "rx_delivered", "Syscalls": "syscalls",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
