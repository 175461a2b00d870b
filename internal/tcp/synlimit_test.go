package tcp

import (
	"errors"
	"testing"

	"github.com/dgramio/dgramio"
)

// The XDP program's SYN bucket: each engine's defaults for 0, the
// configured rate and burst as they are, no limit for a negative rate,
// and a *ConfigError for what the program cannot hold. The native engine
// answers SYNs beyond its backlog with cookies (Linux's behaviour,
// net.ipv4.tcp_syncookies=1), so its bucket is only the last line and its
// default sits far above a kernel listener's connection rate.
func TestSYNLimitDefaults(t *testing.T) {
	for _, c := range []struct {
		stack       dgramio.TCPStack
		rate, burst int
		wantR       int
		wantB       int
	}{
		{dgramio.TCPStackNative, 0, 0, dgramio.DefaultSYNRate, dgramio.DefaultSYNBurst},
		{dgramio.TCPStackNetstack, 0, 0, dgramio.DefaultNetstackSYNRate, dgramio.DefaultNetstackSYNBurst},
		{dgramio.TCPStackNative, 2000, 0, 2000, dgramio.DefaultSYNBurst},
		{dgramio.TCPStackNative, 2000, 100, 2000, 100},
		{dgramio.TCPStackNetstack, 0, 300, dgramio.DefaultNetstackSYNRate, 300},
		{dgramio.TCPStackNative, -1, 0, 0, 0},
		{dgramio.TCPStackNative, -1, 7, 0, 0},
	} {
		cfg := dgramio.Config{Kind: dgramio.KindTCPXDP}
		cfg.TCP.Stack = c.stack
		cfg.XDP.SYNRate, cfg.XDP.SYNBurst = c.rate, c.burst
		r, b, err := synLimit(cfg)
		if err != nil || r != c.wantR || b != c.wantB {
			t.Errorf("%s SYNRate %d SYNBurst %d: %d/s burst %d, %v; want %d/s burst %d", c.stack, c.rate, c.burst, r, b, err, c.wantR, c.wantB)
		}
	}
	for _, c := range [][2]int{{0, -1}, {1 << 32, 0}, {100, 1 << 32}} {
		cfg := dgramio.Config{Kind: dgramio.KindTCPXDP}
		cfg.TCP.Stack = dgramio.TCPStackNative
		cfg.XDP.SYNRate, cfg.XDP.SYNBurst = c[0], c[1]
		var ce *dgramio.ConfigError
		if _, _, err := synLimit(cfg); !errors.As(err, &ce) {
			t.Errorf("SYNRate %d SYNBurst %d: %v; want a *ConfigError", c[0], c[1], err)
		}
	}
}
