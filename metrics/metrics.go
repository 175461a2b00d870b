// Package metrics exports a backend's dgramio.Stats outside the measuring
// tools: as an expvar variable (the Stats struct as JSON, at
// /debug/vars) and in the Prometheus text exposition format (version
// 0.0.4), so that a service built on dgramio can be scraped. The root
// package re-exports it (dgramio.WritePrometheus, dgramio.PublishExpvar).
//
// # Prometheus names
//
// Every numeric field of Stats is one family named dgramio_<field in snake
// case>, a counter with the suffix _total (dgramio_tx_queued_total), or a
// gauge for what is a level rather than a count (dgramio_conns,
// dgramio_sock_rcv_buf_bytes). dgramio_lost_total is Stats.Lost(), the sum
// of every loss counter. The layer counters are two families by type:
// the counts in dgramio_layer_total{layer="socket",name="drops",loss="true"}
// (a counter), the levels (dgramio.Counter.Gauge: uring's tx_inflight,
// tcp's rtt_us_max, netconn's endpoints, netstack's tcp_established) in
// dgramio_layer{layer="uring",name="tx_inflight",loss="false"} (a gauge),
// so that rate() is never taken of a level. Every sample carries the
// label kind and the caller's labels; dgramio_info (always 1) carries the
// mode.
//
// The writer is written here rather than taken from
// prometheus/client_golang: the exposition is one function of a Stats
// value, with no registry or collectors to keep, and the client library
// would link its dependencies (protobuf among them) into every program
// that imports dgramio, which keeps its binaries small. A service that
// uses client_golang already can serve this text beside its own, or read
// Stats into its own collectors.
package metrics

import (
	"errors"
	"expvar"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/dgramio/dgramio"
)

// Set is one backend's counters with the labels that tell it apart from
// the others of the same exposition (a queue number, a peer).
type Set struct {
	Stats dgramio.Stats
	// Labels are name, value pairs: {"queue", "0", "iface", "eth1"}.
	// Names follow Prometheus' rules ([a-zA-Z_][a-zA-Z0-9_]*, not
	// starting with "__") and must not be kind, mode, layer, name or loss.
	Labels []string
}

// field describes how one Stats field is exported.
type field struct {
	name  string // Go field name
	gauge bool
	unit  string // suffix before _total or at the end of a gauge
	help  string
}

// fields lists every numeric field of dgramio.Stats; a test checks that none
// is missing.
var fields = []field{
	{name: "TxQueued", help: "Messages accepted by Queue and QueueTo."},
	{name: "TxBackpressure", help: "Messages refused by Queue and QueueTo because the slots were full (the caller kept them; not a loss)."},
	{name: "TxOversize", help: "Messages refused for being larger than MaxDatagram."},
	{name: "TxSent", help: "Messages handed to the kernel, the ring or the stream."},
	{name: "TxDropped", help: "Queued messages that did not leave (send errors, a full TX ring, a link down): a loss."},
	{name: "TxBytes", help: "Payload bytes sent."},
	{name: "RxDelivered", help: "Messages returned by Rx."},
	{name: "RxBytes", help: "Payload bytes returned by Rx."},
	{name: "RxTruncated", help: "Datagrams larger than the receive buffer, dropped: a loss."},
	{name: "RxBadChecksum", help: "Frames dropped for a wrong IPv4 or UDP checksum: a loss."},
	{name: "RxMalformed", help: "Frames or records that could not be parsed: a loss."},
	{name: "RxFiltered", help: "Frames that were not ours (another port, protocol or address), ignored."},
	{name: "Syscalls", help: "System calls made on the data path (Queue, Flush, Rx, Wait)."},
	{name: "Conns", gauge: true, help: "Connections open now (stream kinds)."},
	{name: "Accepts", help: "Connections accepted (stream kinds)."},
	{name: "Resets", help: "Connections reset (stream kinds)."},
	{name: "PeerCloses", help: "Connections closed by the peer (stream kinds)."},
	{name: "SockRcvBuf", gauge: true, unit: "bytes", help: "Receive buffer size the kernel granted (socket kinds)."},
	{name: "SockSndBuf", gauge: true, unit: "bytes", help: "Send buffer size the kernel granted (socket kinds)."},
}

// familyName returns the Prometheus name of a field.
func (f field) familyName() string {
	n := "dgramio_" + Snake(f.name)
	if f.unit != "" {
		n += "_" + f.unit
	}
	if !f.gauge {
		n += "_total"
	}
	return n
}

// Snake turns a Go field name into snake case: "TxBackpressure" into
// "tx_backpressure", "SockRcvBuf" into "sock_rcv_buf".
func Snake(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			lowerBefore := i > 0 && s[i-1] >= 'a' && s[i-1] <= 'z'
			lowerAfter := i > 0 && i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z' && s[i-1] >= 'A' && s[i-1] <= 'Z'
			if lowerBefore || lowerAfter {
				b.WriteByte('_')
			}
			b.WriteByte(c + 'a' - 'A')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// reserved are label names the exposition sets itself.
var reserved = map[string]bool{"kind": true, "mode": true, "layer": true, "name": true, "loss": true}

func checkLabels(l []string) error {
	if len(l)%2 != 0 {
		return fmt.Errorf("metrics: labels %q: want name, value pairs", l)
	}
	seen := map[string]bool{}
	for i := 0; i < len(l); i += 2 {
		n := l[i]
		if !validName(n, false) || strings.HasPrefix(n, "__") {
			return fmt.Errorf("metrics: label name %q: want [a-zA-Z_][a-zA-Z0-9_]*, not starting with __", n)
		}
		if reserved[n] {
			return fmt.Errorf("metrics: label name %q is set by the exposition itself", n)
		}
		if seen[n] {
			return fmt.Errorf("metrics: label %q given twice", n)
		}
		seen[n] = true
	}
	return nil
}

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c == ':' && colon:
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// escapeLabel escapes a label value: backslash, double quote, newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// escapeHelp escapes a HELP text: backslash and newline.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// labelString writes {k="v",...} from pairs.
func labelString(pairs ...string) string {
	if len(pairs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pairs[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(pairs[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// WritePrometheus writes one backend's counters in the Prometheus text
// format, with labels given as name, value pairs.
func WritePrometheus(w io.Writer, s dgramio.Stats, labels ...string) error {
	return Write(w, Set{Stats: s, Labels: labels})
}

// Write writes the counters of several backends in the Prometheus text
// format (version 0.0.4): each family once, with its HELP and TYPE, then
// one sample per set. Sets must differ in their labels or kinds (the
// exposition would hold the same series twice otherwise).
func Write(w io.Writer, sets ...Set) error {
	seen := map[string]bool{}
	for _, s := range sets {
		if err := checkLabels(s.Labels); err != nil {
			return err
		}
		id := labelString(append([]string{"kind", string(s.Stats.Kind)}, s.Labels...)...)
		if seen[id] {
			return fmt.Errorf("metrics: two sets with the labels %s", id)
		}
		seen[id] = true
	}
	var b strings.Builder
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
	}
	sample := func(name string, v uint64, set *Set, extra ...string) {
		pairs := append([]string{"kind", string(set.Stats.Kind)}, set.Labels...)
		pairs = append(pairs, extra...)
		b.WriteString(name)
		b.WriteString(labelString(pairs...))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatUint(v, 10))
		b.WriteByte('\n')
	}

	family("dgramio_info", "gauge", "The backend's kind and mode; always 1.")
	for i := range sets {
		sample("dgramio_info", 1, &sets[i], "mode", sets[i].Stats.Mode)
	}
	for _, f := range fields {
		typ := "counter"
		if f.gauge {
			typ = "gauge"
		}
		family(f.familyName(), typ, f.help)
		for i := range sets {
			sample(f.familyName(), fieldValue(&sets[i].Stats, f.name), &sets[i])
		}
	}
	family("dgramio_lost_total", "counter", "Every message lost, the sum of the loss counters of every layer (Stats.Lost).")
	for i := range sets {
		sample("dgramio_lost_total", sets[i].Stats.Lost(), &sets[i])
	}
	writeLayers(sets, false, family, sample)
	writeLayers(sets, true, family, sample)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLayers writes the layer counters of sets that are gauges (gauge)
// or counts (!gauge) as one family.
func writeLayers(sets []Set, gauge bool, family func(name, typ, help string), sample func(name string, v uint64, set *Set, extra ...string)) {
	name, typ, help := "dgramio_layer_total", "counter", "Counters of the layers below the backend (kernel socket, XDP rings and program, netstack, DPDK); loss=\"true\" marks those that count lost messages."
	if gauge {
		name, typ, help = "dgramio_layer", "gauge", "Levels of the layers below the backend: values that go down as well as up (sends in flight, connections open) or the largest seen (rtt_us_max)."
	}
	header := false
	for i := range sets {
		// Layer counters in a stable order; the same layer and name twice
		// (a backend that reports a counter per queue) are added.
		type key struct{ layer, name string }
		vals := map[key]uint64{}
		loss := map[key]bool{}
		var keys []key
		for _, c := range sets[i].Stats.Layers {
			if c.Gauge != gauge {
				continue
			}
			k := key{c.Layer, c.Name}
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			vals[k] += c.Value
			loss[k] = loss[k] || c.Loss
		}
		sort.Slice(keys, func(a, b int) bool {
			if keys[a].layer != keys[b].layer {
				return keys[a].layer < keys[b].layer
			}
			return keys[a].name < keys[b].name
		})
		if len(keys) > 0 && !header {
			family(name, typ, help)
			header = true
		}
		for _, k := range keys {
			sample(name, vals[k], &sets[i], "layer", k.layer, "name", k.name, "loss", strconv.FormatBool(loss[k]))
		}
	}
}

// fieldValue reads a numeric field of s by name.
func fieldValue(s *dgramio.Stats, name string) uint64 {
	v := reflect.ValueOf(s).Elem().FieldByName(name)
	switch v.Kind() {
	case reflect.Uint64, reflect.Uint32, reflect.Uint, reflect.Uint16, reflect.Uint8:
		return v.Uint()
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
		if v.Int() < 0 {
			return 0
		}
		return uint64(v.Int())
	}
	return 0
}

// StatsFunc returns the counters of one backend; Backend.Stats is one.
type StatsFunc func() dgramio.Stats

// ExpvarFunc returns an expvar.Func whose value is the Stats that stats
// returns at each read, marshalled as JSON (field names in snake case,
// as the tools write them: "tx_queued", "layers": [{"layer",
// "name", "value", "loss"}]).
func ExpvarFunc(stats StatsFunc) expvar.Func {
	return expvar.Func(func() any { return stats() })
}

// ErrPublished is returned by PublishExpvar for a name already published.
var ErrPublished = errors.New("metrics: expvar name already published")

// PublishExpvar publishes stats under name in expvar's registry (served at
// /debug/vars by expvar's handler). expvar cannot unpublish: publish a
// backend that lives as long as the process, or a StatsFunc that reads
// whichever backend is current. A name already taken is ErrPublished
// (expvar.Publish itself would panic).
func PublishExpvar(name string, stats StatsFunc) (expvar.Var, error) {
	if name == "" {
		return nil, errors.New("metrics: empty expvar name")
	}
	if expvar.Get(name) != nil {
		return nil, fmt.Errorf("%w: %q", ErrPublished, name)
	}
	v := ExpvarFunc(stats)
	expvar.Publish(name, v)
	return v, nil
}
