package tcp

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/stack/native"
)

// TestCongestionDefault: a tcp-xdp Backend runs Config.TCP.Congestion
// after the defaults, resolved for its engine: the host's where the engine
// implements it (dgramio.TCPTuning.Congestion; on a BBR host bbr for the
// native engine, reno for netstack), or the one given.
func TestCongestionDefault(t *testing.T) {
	def := func(s dgramio.TCPStack) dgramio.Congestion {
		return dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Stack: s}}.WithDefaults().TCP.Congestion
	}
	t.Logf("defaults on this host: native %q, netstack %q", def(dgramio.TCPStackNative), def(dgramio.TCPStackNetstack))
	for _, tc := range []struct {
		stack       dgramio.TCPStack
		given, want dgramio.Congestion
	}{
		{"", "", def(dgramio.TCPStackNative)}, // tcp-xdp's default engine is native
		{dgramio.TCPStackNative, "", def(dgramio.TCPStackNative)},
		{dgramio.TCPStackNetstack, "", def(dgramio.TCPStackNetstack)},
		{"", dgramio.CongestionReno, dgramio.CongestionReno},
		{dgramio.TCPStackNative, dgramio.CongestionCubic, dgramio.CongestionCubic},
		{dgramio.TCPStackNative, dgramio.CongestionBBR, dgramio.CongestionBBR},
		{dgramio.TCPStackNetstack, dgramio.CongestionCubic, dgramio.CongestionCubic},
	} {
		pa, pb := memio.NewPair(memio.Options{})
		cfg := serverConfig()
		cfg.TCP.Stack, cfg.TCP.Congestion = tc.stack, tc.given
		b, err := NewOverFrameIO(cfg, pa, Options{})
		if err != nil {
			t.Fatalf("stack %q, given %q: %v", tc.stack, tc.given, err)
		}
		if b.tune.Congestion != tc.want {
			t.Errorf("stack %q, given %q: the Backend's tuning has %q, want %q", tc.stack, tc.given, b.tune.Congestion, tc.want)
		}
		if b.nat != nil {
			if got := nativeOptions(b.cfg, b.tune, b.opts).Congestion; got != NativeCongestion(tc.want) {
				t.Errorf("stack %q, given %q: the engine runs %q, want %q", tc.stack, tc.given, got, NativeCongestion(tc.want))
			}
		} else if got, err := ReadStackTuning(b.st.NS); err != nil || got.Congestion != tc.want {
			t.Errorf("stack %q, given %q: netstack runs %q (%v), want %q", tc.stack, tc.given, got.Congestion, err, tc.want)
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
