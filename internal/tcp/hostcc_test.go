package tcp

import (
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/stack/native"
)

// fakeHost makes CongestionSysctl read as content (or fail with err) for
// the test.
func fakeHost(t *testing.T, content string, err error) {
	t.Helper()
	old := readCongestionSysctl
	readCongestionSysctl = func() ([]byte, error) { return []byte(content), err }
	t.Cleanup(func() { readCongestionSysctl = old })
}

// TestHostCongestion: an empty Config.TCP.Congestion on the native engine
// is what net.ipv4.tcp_congestion_control names, as for a Linux socket
// of the namespace (tcp_init_congestion_control takes the namespace's
// default); a name the engine does not implement, or no file, gives
// DefaultCongestion, and CongestionFrom says which.
func TestHostCongestion(t *testing.T) {
	for _, tc := range []struct {
		file   string
		err    error
		want   dgramio.Congestion
		native native.Congestion
		from   string
	}{
		{file: "bbr\n", want: dgramio.CongestionBBR, native: native.BBR, from: "host"},
		{file: "cubic\n", want: dgramio.CongestionCubic, native: native.CUBIC, from: "host"},
		{file: "reno\n", want: dgramio.CongestionReno, native: native.NewReno, from: "host"},
		{file: " bbr ", want: dgramio.CongestionBBR, native: native.BBR, from: "host"},
		{file: "vegas\n", want: DefaultCongestion, native: native.NewReno, from: `"vegas" is not implemented`},
		{file: "bbr2\n", want: DefaultCongestion, native: native.NewReno, from: `"bbr2" is not implemented`},
		{file: "", want: DefaultCongestion, native: native.NewReno, from: `"" is not implemented`},
		{err: fs.ErrNotExist, want: DefaultCongestion, native: native.NewReno, from: "unknown"},
		{err: fs.ErrPermission, want: DefaultCongestion, native: native.NewReno, from: "unknown"},
	} {
		fakeHost(t, tc.file, tc.err)
		cfg := dgramio.Config{Kind: dgramio.KindTCPXDP}
		tu := TuningFromConfig(cfg)
		if tu.Congestion != tc.want || !strings.Contains(tu.CongestionFrom, tc.from) {
			t.Errorf("host %q (%v): %s (%s), want %s (%s)", tc.file, tc.err, tu.Congestion, tu.CongestionFrom, tc.want, tc.from)
		}
		if err := tu.ValidateFor(dgramio.TCPStackNative); err != nil {
			t.Errorf("host %q (%v): %v", tc.file, tc.err, err)
		}
		if got := nativeOptions(cfg.WithDefaults(), tu, Options{}).Congestion; got != tc.native {
			t.Errorf("host %q (%v): engine runs %s, want %s", tc.file, tc.err, got, tc.native)
		}
	}
}

// TestHostCongestionExplicitWins: a Config.TCP.Congestion that names one
// is taken whatever the host says, and netstack never takes the host's
// (it has no BBR): its empty Congestion stays reno.
func TestHostCongestionExplicitWins(t *testing.T) {
	fakeHost(t, "bbr\n", nil)
	for _, cc := range []dgramio.Congestion{dgramio.CongestionReno, dgramio.CongestionCubic, dgramio.CongestionBBR} {
		cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Congestion: cc}}
		if tu := TuningFromConfig(cfg); tu.Congestion != cc || tu.CongestionFrom != "config" {
			t.Errorf("Congestion %s on a bbr host: %s (%s)", cc, tu.Congestion, tu.CongestionFrom)
		}
	}
	fakeHost(t, "cubic\n", nil)
	cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Congestion: dgramio.CongestionReno}}
	if got := nativeOptions(cfg.WithDefaults(), TuningFromConfig(cfg), Options{}).Congestion; got != native.NewReno {
		t.Errorf("reno set on a cubic host: the engine runs %s", got)
	}
	ns := dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}}
	if tu := TuningFromConfig(ns); tu.Congestion != dgramio.CongestionReno {
		t.Errorf("netstack on a cubic host: %s (%s), want reno", tu.Congestion, tu.CongestionFrom)
	}
	if err := TuningFromConfig(ns).ValidateFor(dgramio.TCPStackNetstack); err != nil {
		t.Error(err)
	}
}

// TestHostCongestionReadsOnce: the host's file is read when a Backend is
// created, not per connection, and Stats.Mode names what was taken.
func TestHostCongestionReadsOnce(t *testing.T) {
	var reads atomic.Int32
	old := readCongestionSysctl
	readCongestionSysctl = func() ([]byte, error) { reads.Add(1); return []byte("bbr\n"), nil }
	t.Cleanup(func() { readCongestionSysctl = old })
	scfg, ccfg := nativeConfigs()
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := NewOverFrameIO(scfg, pa, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := startPoller(srv, spinEcho(srv))
	defer p.stop()
	cli, err := NewOverFrameIO(ccfg, pb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	created := reads.Load()
	msg, pkts := make([]byte, 100), make([]dgramio.Packet, 8)
	for i := 0; i < 20; i++ {
		roundTrip(t, cli, msg, pkts)
	}
	if n := reads.Load(); n != created || n == 0 {
		t.Errorf("%d reads at creation, %d after a connection's traffic", created, n)
	}
	for _, b := range []*Backend{srv, cli} {
		if m := b.Stats().Mode; !strings.HasSuffix(m, "congestion bbr (host)") {
			t.Errorf("Stats.Mode %q does not name the host's bbr", m)
		}
	}
}
