package bench

import "testing"

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
