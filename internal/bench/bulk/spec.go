package bulk

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
)

// Dir is the direction of a cell's bytes.
type Dir string

// The directions: client to server, server to client, both at once.
const (
	Up   Dir = "up"
	Down Dir = "down"
	Both Dir = "both"
)

// clientSends and serverSends say which side sends in d.
func (d Dir) clientSends() bool { return d == Up || d == Both }
func (d Dir) serverSends() bool { return d == Down || d == Both }

// Row is one row of the report: a stream kind, and for the userspace
// kinds the engine ("tcp-xdp" is the native engine, "tcp-xdp+netstack"
// gVisor netstack; "tcp-xdp+native" names the default explicitly).
type Row struct {
	Kind  dgramio.Kind
	Stack dgramio.TCPStack // empty for kind tcp
}

// String is the row's name as --kinds takes it.
func (r Row) String() string {
	if r.Stack == dgramio.TCPStackNetstack {
		return string(r.Kind) + "+" + bench.VariantNetstack
	}
	return string(r.Kind)
}

// IsKernel reports whether the row is kernel tcp, the baseline.
func (r Row) IsKernel() bool { return r.Kind == dgramio.KindTCP }

// ParseRow parses a --kinds entry.
func ParseRow(s string) (Row, error) {
	kind, variant := bench.SplitRow(strings.TrimSpace(s))
	switch dgramio.Kind(kind) {
	case dgramio.KindTCP:
		if variant != "" {
			return Row{}, fmt.Errorf("kind %q: tcp has no variants", s)
		}
		return Row{Kind: dgramio.KindTCP}, nil
	case dgramio.KindTCPXDP, dgramio.KindTCPDPDK:
		switch variant {
		case "", bench.VariantNative:
			return Row{Kind: dgramio.Kind(kind), Stack: dgramio.TCPStackNative}, nil
		case bench.VariantNetstack:
			return Row{Kind: dgramio.Kind(kind), Stack: dgramio.TCPStackNetstack}, nil
		}
		return Row{}, fmt.Errorf("kind %q: the engines are +native (the default) and +netstack", s)
	}
	return Row{}, fmt.Errorf("kind %q: bulk moves bytes through the stream kinds: tcp, tcp-xdp, tcp-xdp+netstack, tcp-dpdk, tcp-dpdk+netstack", s)
}

// DefaultRows are the rows of a run without --kinds: every stream kind
// this build has (tcp-dpdk with the build tag dpdk), each userspace
// engine.
var DefaultRows = []string{"tcp", "tcp-xdp", "tcp-xdp+netstack"}

// MaxConns bounds --conns.
const MaxConns = 1024

// ParseList splits a comma-separated list, dropping empty entries.
func ParseList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParseConns parses --conns: positive numbers of connections, 1..MaxConns.
func ParseConns(s string) ([]int, error) {
	var out []int
	for _, f := range ParseList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > MaxConns {
			return nil, fmt.Errorf("--conns %q: %q is not a number of connections 1..%d", s, f, MaxConns)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--conns %q: name at least one number of connections", s)
	}
	return out, nil
}

// ParseDirs parses --dir: up, down, both.
func ParseDirs(s string) ([]Dir, error) {
	var out []Dir
	for _, f := range ParseList(s) {
		switch d := Dir(f); d {
		case Up, Down, Both:
			out = append(out, d)
		default:
			return nil, fmt.Errorf("--dir %q: %q is not up, down or both", s, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--dir %q: name at least one direction (up, down, both)", s)
	}
	return out, nil
}

// ParseLoss parses --loss: percentages ("0.1%", "1%", "3%"), or 0 (the
// lossy wire's forwarder without loss, the matrix's reference). The
// percent sign is required, so that "1" cannot mean 1% to one reader and
// 100% to another.
func ParseLoss(s string) ([]float64, error) {
	var out []float64
	for _, f := range ParseList(s) {
		if f == "0" {
			out = append(out, 0)
			continue
		}
		num, ok := strings.CutSuffix(f, "%")
		v, err := strconv.ParseFloat(num, 64)
		if !ok || err != nil || v < 0 || v >= 100 {
			return nil, fmt.Errorf("--loss %q: %q is not a loss rate 0%%..<100%% (write 1%% for one frame in a hundred)", s, f)
		}
		out = append(out, v/100)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--loss %q: name at least one loss rate", s)
	}
	return out, nil
}

// MaxDelay bounds --delay.
const MaxDelay = time.Second

// ParseDelays parses --delay: one-way delays of the lossy wire (Go
// durations, "0.2ms", "10ms"), each 0..MaxDelay.
func ParseDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range ParseList(s) {
		d, err := time.ParseDuration(f)
		if f == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 || d > MaxDelay {
			return nil, fmt.Errorf("--delay %q: %q is not a delay 0..%v (\"0.2ms\", \"10ms\")", s, f, MaxDelay)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--delay %q: name at least one delay", s)
	}
	return out, nil
}

// FormatLoss writes a loss rate as --loss takes it.
func FormatLoss(p float64) string {
	if p == 0 {
		return "0"
	}
	return strconv.FormatFloat(p*100, 'f', -1, 64) + "%"
}
