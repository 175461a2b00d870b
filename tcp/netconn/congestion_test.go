package netconn

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/tcp"
)

// TestCongestionDefault: a Service's engine runs Config.TCP.Congestion
// after the defaults, resolved for the engine the Service runs: the
// host's where that engine implements it (dgramio.TCPTuning.Congestion;
// on a BBR host bbr for the native engine, reno for netstack), or the
// one given.
func TestCongestionDefault(t *testing.T) {
	def := func(s dgramio.TCPStack) dgramio.Congestion {
		return dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Stack: s}}.WithDefaults().TCP.Congestion
	}
	t.Logf("defaults on this host: native %q, netstack %q", def(dgramio.TCPStackNative), def(dgramio.TCPStackNetstack))
	for _, tc := range []struct {
		stack       dgramio.TCPStack
		given, want dgramio.Congestion
	}{
		{"", "", def(dgramio.TCPStackNative)}, // netconn's default engine is native
		{dgramio.TCPStackNative, "", def(dgramio.TCPStackNative)},
		{dgramio.TCPStackNetstack, "", def(dgramio.TCPStackNetstack)},
		{"", dgramio.CongestionReno, dgramio.CongestionReno},
		{dgramio.TCPStackNative, dgramio.CongestionCubic, dgramio.CongestionCubic},
		{dgramio.TCPStackNative, dgramio.CongestionBBR, dgramio.CongestionBBR},
		{dgramio.TCPStackNetstack, dgramio.CongestionCubic, dgramio.CongestionCubic},
		{dgramio.TCPStackNetstack, dgramio.CongestionReno, dgramio.CongestionReno},
	} {
		pa, pb := memio.NewPair(memio.Options{})
		cfg := dgramio.Config{LocalIP: ipA}
		cfg.TCP.Stack, cfg.TCP.Congestion = tc.stack, tc.given
		s, err := NewOverFrameIO(cfg, pa, Options{})
		if err != nil {
			t.Fatalf("stack %q, given %q: %v", tc.stack, tc.given, err)
		}
		if s.tune.Congestion != tc.want {
			t.Errorf("stack %q, given %q: the Service's tuning has %q, want %q", tc.stack, tc.given, s.tune.Congestion, tc.want)
		}
		if s.st == nil { // the native engine
			if got := engineOptions(s.cfg, s.tune, s.opts, nil).Congestion; got != tcp.NativeCongestion(tc.want) {
				t.Errorf("stack %q, given %q: the engine runs %q, want %q", tc.stack, tc.given, got, tcp.NativeCongestion(tc.want))
			}
		} else if got, err := tcp.ReadStackTuning(s.st.NS); err != nil || got.Congestion != tc.want {
			t.Errorf("stack %q, given %q: netstack runs %q (%v), want %q", tc.stack, tc.given, got.Congestion, err, tc.want)
		}
		s.Close()
		pb.Close()
	}
}
