package bulk

import (
	"bytes"
	"strings"
	"testing"
)

// The connection-rate mode refuses what it cannot run before it starts
// anything: rows other than kernel tcp and native tcp-xdp, bad numbers,
// a side spec that is not one (exit status 2, said on stderr).
func TestConnRateFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--kinds", "tcp-xdp+netstack"},
		{"--kinds", "udp"},
		{"--parallel", "0"},
		{"--repeat", "0"},
		{"--duration", "0s"},
		{"--port", "0"},
		{"--nosuch"},
	} {
		var out, errb bytes.Buffer
		if rc := ConnRateMain(args, &out, &errb); rc != 2 || errb.Len() == 0 {
			t.Errorf("connrate %q: status %d, stderr %q; want 2 and a word", args, rc, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if rc := ConnRateSideMain([]string{"{not json"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("connrate-side with a bad spec: status %d, stderr %q", rc, errb.String())
	}
}

func TestFmtCountersSorted(t *testing.T) {
	if got := fmtCounters(map[string]uint64{"b": 2, "a": 1}); got != "a=1 b=2" {
		t.Errorf("fmtCounters: %q", got)
	}
}
