package tcp

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/stack/native"
)

// TestCongestionDefault: a tcp-xdp Backend runs Config.TCP.Congestion
// after the defaults, resolved for its engine: the host's where the engine
// implements it (dgramio.TCPTuning.Congestion; on a BBR host bbr for the
// native engine, reno for netstack), or the one given.
func TestCongestionDefault(t *testing.T) {
	t.Logf("defaults on this host: native %q, netstack %q",
		testutil.CongestionDefault(dgramio.TCPStackNative), testutil.CongestionDefault(dgramio.TCPStackNetstack))
	for _, tc := range testutil.CongestionCases() {
		pa, pb := memio.NewPair(memio.Options{})
		cfg := serverConfig()
		cfg.TCP.Stack, cfg.TCP.Congestion = tc.Stack, tc.Given
		b, err := NewOverFrameIO(cfg, pa, Options{})
		if err != nil {
			t.Fatalf("stack %q, given %q: %v", tc.Stack, tc.Given, err)
		}
		if b.tune.Congestion != tc.Want {
			t.Errorf("stack %q, given %q: the Backend's tuning has %q, want %q", tc.Stack, tc.Given, b.tune.Congestion, tc.Want)
		}
		if b.nat != nil {
			if got := nativeOptions(b.cfg, b.tune, b.opts).Congestion; got != NativeCongestion(tc.Want) {
				t.Errorf("stack %q, given %q: the engine runs %q, want %q", tc.Stack, tc.Given, got, NativeCongestion(tc.Want))
			}
		} else if got, err := ReadStackTuning(b.st.NS); err != nil || got.Congestion != tc.Want {
			t.Errorf("stack %q, given %q: netstack runs %q (%v), want %q", tc.Stack, tc.Given, got.Congestion, err, tc.Want)
		}
		b.Close()
		pb.Close()
	}
	for c, want := range map[dgramio.Congestion]native.Congestion{
		dgramio.CongestionReno: native.NewReno, dgramio.CongestionCubic: native.CUBIC, dgramio.CongestionBBR: native.BBR,
	} {
		if got := NativeCongestion(c); got != want {
			t.Errorf("NativeCongestion(%q) = %q, want %q", c, got, want)
		}
	}
}
