//go:build linux

package wire

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Bad options are refused before anything is made (no root needed).
func TestOptionsRefused(t *testing.T) {
	pfx := netip.MustParsePrefix
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Loss: 1.5}, "Loss"},
		{Options{Corrupt: -0.1}, "Corrupt"},
		{Options{Delay: -time.Second}, "Delay"},
		{Options{Reverse: &Impairment{Dup: 2}}, "Reverse"},
		{Options{Limit: -1}, "Limit"},
		{Options{MTU: 70000}, "MTU"},
		{Options{A: pfx("10.0.0.1/24"), B: pfx("10.0.0.2/24")}, "198.18.0.0/15"},
		{Options{A: pfx("198.18.7.1/24"), B: pfx("198.18.8.2/24")}, "one subnet"},
		{Options{A: pfx("198.18.7.1/24"), B: pfx("198.18.7.1/24")}, "same address"},
	} {
		w, err := New(c.o)
		if err == nil {
			w.Close()
			t.Errorf("%+v accepted", c.o)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want it to mention %q", c.o, err, c.want)
		}
	}
}

func TestChooseSeed(t *testing.T) {
	t.Setenv(SeedEnv, "")
	if s, err := ChooseSeed(77); s != 77 || err != nil {
		t.Errorf("ChooseSeed(77) = %d, %v", s, err)
	}
	a, err1 := ChooseSeed(0)
	b, err2 := ChooseSeed(0)
	if a == 0 || b == 0 || a == b || err1 != nil || err2 != nil {
		t.Errorf("random seeds %d, %d (%v, %v)", a, b, err1, err2)
	}
	t.Setenv(SeedEnv, "0x1234")
	if s, err := ChooseSeed(0); s != 0x1234 || err != nil {
		t.Errorf("with %s=0x1234: %d, %v", SeedEnv, s, err)
	}
	if s, err := ChooseSeed(5); s != 5 || err != nil {
		t.Errorf("the environment overrode the explicit seed 5: %d, %v", s, err)
	}
	for _, bad := range []string{"zero", "0", "-3"} {
		t.Setenv(SeedEnv, bad)
		if _, err := ChooseSeed(0); err == nil {
			t.Errorf("%s=%q accepted", SeedEnv, bad)
		}
		if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), SeedEnv) {
			t.Errorf("New with %s=%q: %v", SeedEnv, bad, err)
		}
	}
}

func TestOptionsDirections(t *testing.T) {
	o := Options{Loss: 0.1, Delay: time.Millisecond}
	if o.Forward() != o.Backward() || o.Forward().Loss != 0.1 {
		t.Errorf("without Reverse: %+v, %+v", o.Forward(), o.Backward())
	}
	o.Reverse = &Impairment{Dup: 0.3}
	if o.Backward() != *o.Reverse || o.Forward().Dup != 0 {
		t.Errorf("with Reverse: %+v, %+v", o.Forward(), o.Backward())
	}
}
