package cli

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// --dst takes address:port, whose port wins over --port, or an address
// alone, at --port.
func TestParseDest(t *testing.T) {
	for _, c := range []struct {
		in   string
		want netip.AddrPort
	}{
		{"198.18.0.2:6000", netip.MustParseAddrPort("198.18.0.2:6000")},
		{"198.18.0.2", netip.MustParseAddrPort("198.18.0.2:0")},
		{"[::ffff:198.18.0.2]:6000", netip.MustParseAddrPort("198.18.0.2:6000")},
		{"", netip.AddrPort{}},
	} {
		got, err := parseDest("dst", c.in)
		if err != nil || got != c.want {
			t.Errorf("parseDest(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"198.18.0.2:", "198.18.0.2:99999", "host:5000"} {
		if _, err := parseDest("dst", in); err == nil || !strings.Contains(err.Error(), "--dst") {
			t.Errorf("parseDest(%q): %v, want an error naming --dst", in, err)
		}
	}
}

// The loadgen reaches an echo at the port --dst names, whatever --port
// says.
func TestLoadgenDstWithPort(t *testing.T) {
	port := fmt.Sprint(freeUDPPort(t))
	lf, _, _ := echoAndLoad(t,
		[]string{"--kind", "udp", "--local", "127.0.0.1", "--port", port, "--wait"},
		[]string{"--kind", "udp", "--dst", "127.0.0.1:" + port, "--port", "9",
			"--rate", "2k", "--warmup", "100ms", "--duration", "200ms", "--drain", "5s", "--wait"}, nil)
	if lf.Result.Total.Sent != 600 || lf.Result.Total.Received != lf.Result.Total.Sent {
		t.Fatalf("sent %d, received %d; want 600 each", lf.Result.Total.Sent, lf.Result.Total.Received)
	}
}
