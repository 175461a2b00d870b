// Package cli holds the command lines of the measuring tools: echo and
// loadgen (cmd/dgramio-echo, cmd/dgramio-loadgen, and netbench, which re-executes itself in
// either mode). Each Main parses its flags, pins the poller (the userspace
// TCP kinds on netstack pin the whole process themselves: see pin), opens the backend
// with dgramio.New, runs the loop of package load, closes the backend and
// writes its result, with the counters read after Close, as JSON, so
// netbench can collect both ends' counters. With
// --queues N > 1 it opens a group (dgramio.NewGroup) instead and runs a
// poller per queue, each on its own goroutine (Group.Open pins it), and
// merges the queues' results; netbench --queues 1,2,… runs every kind with
// each number of queues and adds the scaling table to the report.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/cpu"
)

// The classes of an error that stops a tool before it measures anything,
// as OpenError.Class says them.
const (
	ClassNotBuilt     = "not_built"     // the kind is not compiled into this build
	ClassNotSupported = "not_supported" // the host or kernel lacks a feature
	ClassPrivilege    = "privilege"     // a capability is missing
	ClassConfig       = "config"        // a bad flag or Config field
	ClassOther        = "other"         // anything else (a failed system call)
)

// Classify names the class of an error from dgramio.New or from pinning.
func Classify(kind dgramio.Kind, err error) string {
	var ue *dgramio.UnsupportedError
	var pe *dgramio.PrivilegeError
	var ce *dgramio.ConfigError
	switch {
	case errors.Is(err, dgramio.ErrNoDPDK), errors.As(err, &ue) && ue.Feature == "kind "+string(kind):
		return ClassNotBuilt
	case errors.Is(err, dgramio.ErrNotSupported):
		return ClassNotSupported
	case errors.As(err, &pe), errors.Is(err, os.ErrPermission):
		return ClassPrivilege
	case errors.As(err, &ce), errors.Is(err, cpu.ErrNotAllowed):
		return ClassConfig
	default:
		return ClassOther
	}
}

// Failure is what a tool writes (as its JSON result, and on standard
// output as a line starting "failed ") when it cannot start measuring.
type Failure struct {
	Class string `json:"class"`
	Error string `json:"error"`
}

// failer returns a tool's fail: it records class and err in *f, prints
// "failed <class>: <err>" on stdout (on stderr when the JSON goes to
// stdout), writes out as JSON to path (when set; an error of that goes to
// stderr after "<tool>:"), and returns the exit status: ExitUsage for a
// ClassConfig error (a flag or setting the tool refuses), ExitFailed for
// any other (the run could not be made here).
func failer(tool string, kind *dgramio.Kind, stdout, stderr io.Writer, path string, f **Failure, out any) func(class string, err error) int {
	return func(class string, err error) int {
		*f = &Failure{Class: class, Error: err.Error()}
		human := stdout
		if path == "-" {
			human = stderr
		}
		fmt.Fprintf(human, "failed %s: %v\n", class, err)
		if hint := fixHint(*kind, err); hint != "" {
			fmt.Fprintf(stderr, "%s: %s\n", tool, hint)
		}
		if werr := writeResult(path, stdout, out); werr != nil {
			fmt.Fprintln(stderr, tool+":", werr)
		}
		if class == ClassConfig {
			return ExitUsage
		}
		return ExitFailed
	}
}

// writeResult writes v as JSON to path, or to stdout when path is "-"
// (as iperf3 -J).
func writeResult(path string, stdout io.Writer, v any) error {
	if path != "-" {
		return writeJSON(path, v)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}

// writeJSON writes v to path (nothing when path is empty).
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// parseAddr parses an address given on the command line, IPv4 or IPv6
// (an IPv4-mapped one as IPv4): any address of the user's own ports (the
// benchmarking ranges of package benchnet bind only the test hosts that
// netbench and the tests make). Empty gives the zero Addr.
func parseAddr(flag, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1] // [2001:db8::1]: an IPv6 literal as a URL writes it
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		if _, perr := netip.ParseAddrPort(s); perr == nil {
			return netip.Addr{}, fmt.Errorf("--%s %q: the address alone: give the port with --port", flag, s)
		}
		return netip.Addr{}, fmt.Errorf("--%s %q: not an IP address: %s", flag, s, addrHint(s))
	}
	if err := checkHostAddr(flag, a); err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap(), nil
}

// checkHostAddr checks an address given on the command line: IPv4 or
// IPv6 (which kinds serve it, Config says), of one host, without a zone.
// Any network: the user's own ports. --local may be 0.0.0.0 or :: (a
// kernel server on every address of the family; Config refuses it to the
// raw kinds).
func checkHostAddr(flag string, a netip.Addr) error {
	if a.Zone() != "" && !a.IsLinkLocalUnicast() {
		return fmt.Errorf("--%s %s: an address with a zone is not supported: write it without %%%s", flag, a, a.Zone())
	}
	if a.Is6() && a.IsLinkLocalUnicast() {
		return fmt.Errorf("--%s %s: a link-local address (fe80::/10, with its zone or without) is not supported: use a global one", flag, a)
	}
	a = a.Unmap()
	if a.IsUnspecified() && flag == "local" {
		return nil
	}
	if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return fmt.Errorf("--%s %s: want the address of one host", flag, a)
	}
	return nil
}

// parseDest parses the value of a destination flag: an address with its
// port (198.18.0.2:5000, [2001:2::2]:5000, [::ffff:198.18.0.2]:5000) or
// an address alone, whose port is then 0 (Config.Dests takes
// Config.Port, the --port flag, for it). Empty gives the zero AddrPort.
func parseDest(flag, s string) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		bare := s
		if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
			bare = s[1 : len(s)-1] // [2001:db8::2] without a port
		}
		a, aerr := netip.ParseAddr(bare)
		if aerr != nil {
			return netip.AddrPort{}, fmt.Errorf("--%s %q: %s; want an address (192.0.2.2, 2001:db8::2) or address:port (192.0.2.2:5000, [2001:db8::2]:5000)", flag, s, destHint(s))
		}
		ap = netip.AddrPortFrom(a, 0)
	} else if ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("--%s %q: port 0: want a port 1..65535, or the address alone for --port's", flag, s)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if err := checkHostAddr(flag, ap.Addr()); err != nil {
		return netip.AddrPort{}, err
	}
	return ap, nil
}

// addrHint says what is wrong with s, which is not an IP address.
func addrHint(s string) string {
	if strings.ContainsAny(s, "[]") {
		return "write an IPv6 address without its port, like 2001:db8::1 or [2001:db8::1]"
	}
	if isHostname(s) {
		return "a host name is not looked up: give its IP address (192.0.2.1, 2001:db8::1)"
	}
	return "write it like 192.0.2.1 or 2001:db8::1"
}

// destHint says what is wrong with s, which is neither an address nor
// address:port.
func destHint(s string) string {
	host, port, hasPort := s, "", false
	switch {
	case strings.HasPrefix(s, "["):
		if i := strings.Index(s, "]:"); i >= 0 {
			host, port, hasPort = s[1:i], s[i+2:], true
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, port, hasPort = s[:i], s[i+1:], true
	}
	if hasPort {
		if port == "" {
			return "no port after the colon"
		}
		if n, err := strconv.ParseUint(port, 10, 64); err == nil && n > 65535 {
			return fmt.Sprintf("port %d out of range: want 1..65535", n)
		}
	}
	if isHostname(host) {
		return "a host name is not looked up: give its IP address"
	}
	return "not an IP address"
}

// isHostname reports whether s looks like a DNS name: letters, digits,
// dots and hyphens, with a letter somewhere and no colon.
func isHostname(s string) bool {
	letter := false
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letter = true
		case r >= '0' && r <= '9', r == '.', r == '-':
		default:
			return false
		}
	}
	return letter
}

// pin prepares the poller of a tool with one queue for cpu (none when
// cpu < 0) and returns the CPU list for Config.CPUs. For most kinds it
// pins the calling goroutine to cpu (cpu.Pin: locked to its thread, the
// thread bound to the CPU), as their backends need (uring's SINGLE_ISSUER
// ring belongs to one thread); the native TCP engine too, which has no
// goroutines behind its poll loop. The userspace TCP kinds on netstack
// are left alone: their backend binds every thread of the process to
// Config.CPUs[0] itself (cpu.PinProcess), and a poller locked to its
// thread would pay two thread hand-offs for every yield to netstack's
// goroutines (netbench measured tcp-xdp at 20k msg/s at 40 µs p50 so,
// 28 µs unlocked).
func pin(cfg dgramio.Config, c int) ([]int, error) {
	if c < 0 {
		return nil, nil
	}
	if pinsProcess(cfg) {
		return []int{c}, nil
	}
	if err := cpu.Pin(c); err != nil {
		return nil, fmt.Errorf("pin to CPU %d: %w", c, err)
	}
	return []int{c}, nil
}

// pinsProcess reports whether the backend of cfg pins the whole process
// to Config.CPUs[0] itself (tcp-xdp and tcp-dpdk on netstack), so the tool
// must not lock its poller's thread.
func pinsProcess(cfg dgramio.Config) bool {
	userspace := cfg.Kind == dgramio.KindTCPXDP || cfg.Kind == dgramio.KindTCPDPDK
	return userspace && cfg.TCP.Stack == dgramio.TCPStackNetstack
}

// formatStats writes the counters one per line, for people.
func formatStats(end string, s *dgramio.Stats, own []dgramio.Counter) string {
	var b strings.Builder
	m := map[string]uint64{}
	bench.Flatten(end, s, own, m)
	fmt.Fprintf(&b, "%s: kind %s, mode %q\n", end, s.Kind, s.Mode)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			fmt.Fprintf(&b, "  %-40s %d\n", k, m[k])
		}
	}
	return b.String()
}
