package bulk

import (
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
)

// TestNativeCongestion: a native row's engine runs --cc where given, and
// otherwise Config's default for the native engine, the host's where the
// engine implements it (dgramio.TCPTuning.Congestion), as a tcp-xdp
// Backend would.
func TestNativeCongestion(t *testing.T) {
	def := dgramio.Config{Kind: dgramio.KindTCPXDP}.WithDefaults().TCP.Congestion
	t.Logf("the native engine's default on this host: %q", def)
	for _, kind := range []dgramio.Kind{dgramio.KindTCPXDP, dgramio.KindTCPDPDK} {
		for _, server := range []bool{false, true} {
			for cc, want := range map[string]native.Congestion{
				"": tcp.NativeCongestion(def), "reno": native.NewReno, "cubic": native.CUBIC, "bbr": native.BBR,
			} {
				s := &side{row: Row{Kind: kind, Stack: dgramio.TCPStackNative}, spec: SideSpec{CC: cc, Server: server, Conns: 1,
					Local: netip.MustParseAddr("198.18.0.1"), Peer: netip.MustParseAddr("198.18.0.2"), Port: 5201, Iface: "veth0"}}
				cfg := s.nativeConfig().WithDefaults()
				if err := cfg.Validate(); err != nil {
					t.Fatalf("%s --cc %q: %v", kind, cc, err)
				}
				if got := nativeOptions(cfg, tcp.Options{}, 1).Congestion; got != want {
					t.Errorf("%s server %v --cc %q: the engine runs %q, want %q", kind, server, cc, got, want)
				}
			}
		}
	}
}
