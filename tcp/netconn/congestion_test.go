package netconn

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestCongestionDefault: a Service's engine runs Config.TCP.Congestion
// after the defaults, resolved for the engine the Service runs: the
// host's where that engine implements it (dgramio.TCPTuning.Congestion;
// on a BBR host bbr for the native engine, reno for netstack), or the
// one given.
func TestCongestionDefault(t *testing.T) {
	t.Logf("defaults on this host: native %q, netstack %q",
		testutil.CongestionDefault(dgramio.TCPStackNative), testutil.CongestionDefault(dgramio.TCPStackNetstack))
	for _, tc := range testutil.CongestionCases() {
		pa, pb := memio.NewPair(memio.Options{})
		cfg := dgramio.Config{LocalIP: ipA}
		cfg.TCP.Stack, cfg.TCP.Congestion = tc.Stack, tc.Given
		s, err := NewOverFrameIO(cfg, pa, Options{})
		if err != nil {
			t.Fatalf("stack %q, given %q: %v", tc.Stack, tc.Given, err)
		}
		if s.tune.Congestion != tc.Want {
			t.Errorf("stack %q, given %q: the Service's tuning has %q, want %q", tc.Stack, tc.Given, s.tune.Congestion, tc.Want)
		}
		if s.st == nil { // the native engine
			if got := engineOptions(s.cfg, s.tune, s.opts, nil).Congestion; got != tcp.NativeCongestion(tc.Want) {
				t.Errorf("stack %q, given %q: the engine runs %q, want %q", tc.Stack, tc.Given, got, tcp.NativeCongestion(tc.Want))
			}
		} else if got, err := tcp.ReadStackTuning(s.st.NS); err != nil || got.Congestion != tc.Want {
			t.Errorf("stack %q, given %q: netstack runs %q (%v), want %q", tc.Stack, tc.Given, got.Congestion, err, tc.Want)
		}
		s.Close()
		pb.Close()
	}
}
