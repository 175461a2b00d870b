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
		{"[2001:2::2]:6000", netip.MustParseAddrPort("[2001:2::2]:6000")},
		{"2001:2::2", netip.MustParseAddrPort("[2001:2::2]:0")},
		{"[::1]:6000", netip.MustParseAddrPort("[::1]:6000")},
		{"", netip.AddrPort{}},
	} {
		got, err := parseDest("dst", c.in)
		if err != nil || got != c.want {
			t.Errorf("parseDest(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"198.18.0.2:", "198.18.0.2:99999", "host:5000", "[2001:2::2]:"} {
		if _, err := parseDest("dst", in); err == nil || !strings.Contains(err.Error(), "--dst") {
			t.Errorf("parseDest(%q): %v, want an error naming --dst", in, err)
		}
	}
	// Not one host, or with a zone, either family.
	for _, in := range []string{"[ff02::1]:5000", "[::]:5000", "[fe80::1%lo]:5000", "224.0.0.1:5000", "0.0.0.0:5000"} {
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

// echo and loadgen over IPv6 (--local ::1, --dst [::1]:port), on each
// kernel kind: every message sent comes back.
func TestEchoLoadgenIPv6(t *testing.T) {
	for _, kind := range []string{"udp", "uring", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			port := fmt.Sprint(freeUDPPort(t))
			// The echo listens on ::1 only: every answer crossed IPv6.
			lf, _, _ := echoAndLoad(t,
				[]string{"--kind", kind, "--local", "::1", "--port", port, "--wait"},
				[]string{"--kind", kind, "--dst", "[::1]:" + port,
					"--rate", "2k", "--warmup", "100ms", "--duration", "200ms", "--drain", "5s", "--wait"}, nil)
			if lf.Result.Total.Sent != 600 || lf.Result.Total.Received != lf.Result.Total.Sent {
				t.Fatalf("sent %d, received %d; want 600 each", lf.Result.Total.Sent, lf.Result.Total.Received)
			}
		})
	}
}

// --family makes a row per family of each kind (and of tcp-xdp's and
// tcp-dpdk's netstack variant); the variants without an IPv6 row
// (uring+napi, tcp-xdp+raw) stay IPv4 rows.
func TestFamilyRows(t *testing.T) {
	rows := []string{"udp", "uring", "uring+napi", "xdp", "tcp", "tcp-xdp", "tcp-xdp+netstack", "tcp-xdp+raw", "tcp-dpdk"}
	for family, want := range map[string]string{
		"4": "udp uring uring+napi xdp tcp tcp-xdp tcp-xdp+netstack tcp-xdp+raw tcp-dpdk",
		"6": "udp+ipv6 uring+ipv6 uring+napi xdp+ipv6 tcp+ipv6 tcp-xdp+ipv6 tcp-xdp+netstack+ipv6 tcp-xdp+raw tcp-dpdk+ipv6",
		"4,6": "udp udp+ipv6 uring uring+ipv6 uring+napi xdp xdp+ipv6 tcp tcp+ipv6 tcp-xdp tcp-xdp+ipv6 " +
			"tcp-xdp+netstack tcp-xdp+netstack+ipv6 tcp-xdp+raw tcp-dpdk tcp-dpdk+ipv6",
		"6,4": "udp udp+ipv6 uring uring+ipv6 uring+napi xdp xdp+ipv6 tcp tcp+ipv6 tcp-xdp tcp-xdp+ipv6 " +
			"tcp-xdp+netstack tcp-xdp+netstack+ipv6 tcp-xdp+raw tcp-dpdk tcp-dpdk+ipv6",
	} {
		got, err := familyRows(rows, family)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("--family %s: %v, %v; want %s", family, got, err, want)
		}
	}
	// A row named already is not run twice.
	if got, _ := familyRows([]string{"udp", "udp+ipv6"}, "4,6"); strings.Join(got, " ") != "udp udp+ipv6" {
		t.Errorf("udp,udp+ipv6 with --family 4,6: %v", got)
	}
	for _, bad := range []string{"", "5", "ipv6", "4;6"} {
		if _, err := familyRows(rows, bad); err == nil || !strings.Contains(err.Error(), "--family") {
			t.Errorf("--family %q: %v, want an error naming the flag", bad, err)
		}
	}
}

// --local takes an address alone, IPv4 or IPv6, an IPv6 one also in
// brackets as a URL writes it (RFC 3986 §3.2.2); an IPv4-mapped one is
// IPv4 (RFC 4291 §2.5.5.2). What it refuses it names with the fix: the
// port goes in --port, a host name is not looked up.
func TestParseAddrForms(t *testing.T) {
	for in, want := range map[string]string{
		"198.18.0.1":          "198.18.0.1",
		"2001:2::1":           "2001:2::1",
		"[2001:2::1]":         "2001:2::1",
		"::ffff:198.18.0.1":   "198.18.0.1",
		"[::ffff:198.18.0.1]": "198.18.0.1",
	} {
		got, err := parseAddr("local", in)
		if err != nil || got != netip.MustParseAddr(want) {
			t.Errorf("parseAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for in, hint := range map[string]string{
		"198.18.0.1:5000":  "--port",
		"[2001:2::1]:5000": "--port",
		"localhost":        "host name",
		"echo.example":     "host name",
		"[2001:2::1":       "2001:db8::1",
		"fe80::1%lo":       "link-local",
		"fe80::1":          "link-local",
		"2001:2::1%lo":     "without %lo",
	} {
		_, err := parseAddr("local", in)
		if err == nil || !strings.Contains(err.Error(), "--local") || !strings.Contains(err.Error(), hint) {
			t.Errorf("parseAddr(%q): %v, want an error naming --local and %q", in, err, hint)
		}
	}
}

// --dst: an IPv6 address in brackets without a port is the address at
// --port; a wrong port or a host name is named as such, and an explicit
// port 0 is refused rather than taken for --port's.
func TestParseDestForms(t *testing.T) {
	if got, err := parseDest("dst", "[2001:2::2]"); err != nil || got != netip.MustParseAddrPort("[2001:2::2]:0") {
		t.Errorf("parseDest([2001:2::2]) = %v, %v", got, err)
	}
	for in, hint := range map[string]string{
		"198.18.0.2:70000":  "out of range",
		"[2001:2::2]:99999": "out of range",
		"198.18.0.2:":       "no port",
		"localhost:5000":    "host name",
		"localhost":         "host name",
		"198.18.0.2:0":      "port 0",
		"[2001:2::2]:0":     "port 0",
	} {
		_, err := parseDest("dst", in)
		if err == nil || !strings.Contains(err.Error(), "--dst") || !strings.Contains(err.Error(), hint) {
			t.Errorf("parseDest(%q): %v, want an error naming --dst and %q", in, err, hint)
		}
	}
}

// An IPv6 --dst written without brackets takes what looks like its port
// as a part of the address (RFC 5952 §6); a run that got nothing back
// says how to write the port.
func TestPortInAddrHint(t *testing.T) {
	if h := portInAddrHint(netip.MustParseAddr("2001:2::2:5000")); !strings.Contains(h, "--dst [2001:2::2]:5000") {
		t.Errorf("2001:2::2:5000: hint %q", h)
	}
	for _, a := range []string{"2001:2::2", "2001:2::2:abcd", "198.18.0.2", "2001:2::2:0"} {
		if h := portInAddrHint(netip.MustParseAddr(a)); h != "" {
			t.Errorf("%s: hint %q, want none", a, h)
		}
	}
}
