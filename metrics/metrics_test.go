package metrics

import (
	"bufio"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/dgramio/dgramio"
)

// sample is one parsed sample line.
type sample struct {
	name   string
	labels map[string]string
	value  uint64
}

// exposition is a parsed text exposition.
type exposition struct {
	help, typ map[string]string
	samples   []sample
}

// parse reads the Prometheus text format strictly enough to catch what a
// scraper would refuse: a family's HELP and TYPE come once, before its
// samples, and its samples are contiguous; names and label names are
// valid; label values are quoted with \\, \" and \n escapes; values are
// numbers.
func parse(t *testing.T, text string) *exposition {
	t.Helper()
	e := &exposition{help: map[string]string{}, typ: map[string]string{}}
	done := map[string]bool{} // families whose samples ended
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		if l == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if _, dup := e.help[name]; dup {
				t.Fatalf("line %d: second HELP for %s", line, name)
			}
			e.help[name] = unescape(t, help, false)
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if _, dup := e.typ[name]; dup {
				t.Fatalf("line %d: second TYPE for %s", line, name)
			}
			if typ != "counter" && typ != "gauge" {
				t.Fatalf("line %d: type %q", line, typ)
			}
			e.typ[name] = typ
			continue
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		s := parseSample(t, line, l)
		if s.name != cur {
			if done[s.name] {
				t.Fatalf("line %d: samples of %s are not contiguous", line, s.name)
			}
			if cur != "" {
				done[cur] = true
			}
			cur = s.name
		}
		if e.typ[s.name] == "" || e.help[s.name] == "" {
			t.Fatalf("line %d: sample of %s before its HELP and TYPE", line, s.name)
		}
		if e.typ[s.name] == "counter" && !strings.HasSuffix(s.name, "_total") {
			t.Fatalf("line %d: counter %s without _total", line, s.name)
		}
		e.samples = append(e.samples, s)
	}
	return e
}

func parseSample(t *testing.T, line int, l string) sample {
	t.Helper()
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(l, "{ ")
	if i < 0 {
		t.Fatalf("line %d: %q", line, l)
	}
	s.name = l[:i]
	if !validName(s.name, true) {
		t.Fatalf("line %d: metric name %q", line, s.name)
	}
	rest := l[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				t.Fatalf("line %d: label without =\": %q", line, l)
			}
			ln := rest[:eq]
			if !validName(ln, false) {
				t.Fatalf("line %d: label name %q", line, ln)
			}
			rest = rest[eq+2:]
			// The value ends at the first unescaped quote.
			var v strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' {
					j++
					if j == len(rest) {
						t.Fatalf("line %d: dangling escape", line)
					}
				}
				v.WriteByte(rest[j])
			}
			if j == len(rest) {
				t.Fatalf("line %d: unterminated label value", line)
			}
			if _, dup := s.labels[ln]; dup {
				t.Fatalf("line %d: label %s twice", line, ln)
			}
			s.labels[ln] = unescape(t, rest[:j], true)
			rest = strings.TrimPrefix(rest[j+1:], ",")
		}
	}
	v, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
	if err != nil || !strings.HasPrefix(rest, " ") {
		t.Fatalf("line %d: value %q: %v", line, rest, err)
	}
	s.value = v
	return s
}

// unescape undoes the format's escapes (\\ and \n; \" in label values).
func unescape(t *testing.T, s string, quote bool) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch {
		case i < len(s) && s[i] == '\\':
			b.WriteByte('\\')
		case i < len(s) && s[i] == 'n':
			b.WriteByte('\n')
		case i < len(s) && s[i] == '"' && quote:
			b.WriteByte('"')
		default:
			t.Fatalf("bad escape in %q", s)
		}
	}
	return b.String()
}

// find returns the value of the sample with name and exactly these labels.
func (e *exposition) find(name string, labels map[string]string) (uint64, bool) {
	for _, s := range e.samples {
		if s.name == name && reflect.DeepEqual(s.labels, labels) {
			return s.value, true
		}
	}
	return 0, false
}

// stats returns Stats with every numeric field set to a distinct value.
func testStats(kind, mode string, base uint64) dgramio.Stats {
	s := dgramio.Stats{Kind: dgramio.Kind(kind), Mode: mode}
	v := reflect.ValueOf(&s).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Uint64:
			f.SetUint(base + uint64(i))
		case reflect.Int:
			f.SetInt(int64(base) + int64(i)*1000)
		}
	}
	s.Layers = []dgramio.Counter{
		{Layer: "socket", Name: "drops", Value: 7, Loss: true},
		{Layer: "xsk", Name: "rx_fill_ring_empty_descs", Value: 11},
		{Layer: "xsk", Name: "rx_dropped", Value: 3, Loss: true},
		{Layer: "xsk", Name: "rx_dropped", Value: 2, Loss: true}, // a second queue's
	}
	return s
}

// Every numeric Stats field is a family; the parsed values are the
// fields; layer counters carry layer, name and loss; labels and the mode
// survive escaping.
func TestPrometheusParsesBack(t *testing.T) {
	mode := `xdp "driver" copy \ odd` + "\nsecond line"
	s := testStats("xdp", mode, 100)
	var b strings.Builder
	if err := WritePrometheus(&b, s, "queue", "0", "iface", `eth"1`); err != nil {
		t.Fatal(err)
	}
	e := parse(t, b.String())
	base := map[string]string{"kind": "xdp", "queue": "0", "iface": `eth"1`}
	with := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}

	// Every numeric field of Stats, by reflection, so that a field added
	// to dgramio.Stats and forgotten here fails.
	known := map[string]field{}
	for _, f := range fields {
		known[f.name] = f
	}
	st := reflect.TypeOf(s)
	for i := 0; i < st.NumField(); i++ {
		sf := st.Field(i)
		switch sf.Type.Kind() {
		case reflect.Uint64, reflect.Int:
		default:
			continue
		}
		f, ok := known[sf.Name]
		if !ok {
			t.Errorf("Stats.%s is not exported to Prometheus", sf.Name)
			continue
		}
		got, ok := e.find(f.familyName(), base)
		if !ok {
			t.Errorf("no sample of %s", f.familyName())
			continue
		}
		if want := fieldValue(&s, sf.Name); got != want {
			t.Errorf("%s = %d, want %d", f.familyName(), got, want)
		}
		wantType := "counter"
		if f.gauge {
			wantType = "gauge"
		}
		if e.typ[f.familyName()] != wantType {
			t.Errorf("%s: type %s", f.familyName(), e.typ[f.familyName()])
		}
	}
	if got, _ := e.find("dgramio_tx_queued_total", base); got != s.TxQueued {
		t.Errorf("dgramio_tx_queued_total %d", got)
	}
	if got, _ := e.find("dgramio_sock_rcv_buf_bytes", base); got != uint64(s.SockRcvBuf) {
		t.Errorf("dgramio_sock_rcv_buf_bytes %d", got)
	}
	if got, ok := e.find("dgramio_info", with("mode", mode)); !ok || got != 1 {
		t.Errorf("dgramio_info with the mode back: %v %d\n%s", ok, got, b.String())
	}
	if got, _ := e.find("dgramio_lost_total", base); got != s.Lost() {
		t.Errorf("dgramio_lost_total %d, want %d", got, s.Lost())
	}
	for _, c := range []struct {
		layer, name, loss string
		want              uint64
	}{
		{"socket", "drops", "true", 7},
		{"xsk", "rx_fill_ring_empty_descs", "false", 11},
		{"xsk", "rx_dropped", "true", 5},
	} {
		got, ok := e.find("dgramio_layer_total", with("layer", c.layer, "name", c.name, "loss", c.loss))
		if !ok || got != c.want {
			t.Errorf("layer %s.%s: %v %d, want %d", c.layer, c.name, ok, got, c.want)
		}
	}
	t.Logf("exposition:\n%s", b.String())
}

// Several backends in one exposition: each family once, one sample per
// backend.
func TestPrometheusSeveralSets(t *testing.T) {
	var b strings.Builder
	a, c := testStats("udp", "m", 1), testStats("udp", "m", 500)
	if err := Write(&b, Set{Stats: a, Labels: []string{"queue", "0"}}, Set{Stats: c, Labels: []string{"queue", "1"}}); err != nil {
		t.Fatal(err)
	}
	e := parse(t, b.String())
	for q, s := range map[string]dgramio.Stats{"0": a, "1": c} {
		got, ok := e.find("dgramio_rx_delivered_total", map[string]string{"kind": "udp", "queue": q})
		if !ok || got != s.RxDelivered {
			t.Errorf("queue %s: %v %d", q, ok, got)
		}
	}
	if err := Write(&b, Set{Stats: a}, Set{Stats: a}); err == nil {
		t.Error("two sets with the same labels accepted")
	}
}

func TestPrometheusBadLabels(t *testing.T) {
	for _, l := range [][]string{{"queue"}, {"0queue", "x"}, {"kind", "udp"}, {"__x", "y"}, {"a-b", "c"}, {"q", "1", "q", "2"}} {
		if err := WritePrometheus(&strings.Builder{}, dgramio.Stats{Kind: "udp"}, l...); err == nil {
			t.Errorf("labels %q accepted", l)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"TxBackpressure": "tx_backpressure", "SockRcvBuf": "sock_rcv_buf", "RxBadChecksum": "rx_bad_checksum",
		"Syscalls": "syscalls", "TCPConns": "tcp_conns", "PeerCloses": "peer_closes",
	} {
		if got := Snake(in); got != want {
			t.Errorf("Snake(%s) = %s, want %s", in, got, want)
		}
	}
}

var expvarRuns atomic.Int64

// The expvar variable is the Stats struct as JSON, read at each request,
// served by expvar's handler.
func TestExpvar(t *testing.T) {
	n := uint64(0)
	stats := func() dgramio.Stats {
		n++
		s := testStats("tcp", "records", n)
		return s
	}
	// expvar cannot unpublish: each run of the test (-count) takes a name
	// of its own.
	name := fmt.Sprintf("dgramio_test_%d", expvarRuns.Add(1))
	v, err := PublishExpvar(name, stats)
	if err != nil {
		t.Fatal(err)
	}
	var got dgramio.Stats
	if err := json.Unmarshal([]byte(v.String()), &got); err != nil {
		t.Fatalf("%s: %v", v.String(), err)
	}
	if want := testStats("tcp", "records", 1); !reflect.DeepEqual(got, want) {
		t.Fatalf("expvar value\n got %+v\nwant %+v", got, want)
	}
	// Through the /debug/vars handler: read again, so the counters moved.
	rec := httptest.NewRecorder()
	expvar.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/vars", nil))
	var all map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &all); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(all[name], &got); err != nil {
		t.Fatalf("/debug/vars has no %s: %v", name, err)
	}
	if got.TxQueued != testStats("tcp", "records", 2).TxQueued {
		t.Fatalf("the handler served stale counters: %+v", got)
	}
	if _, err := PublishExpvar(name, stats); !errors.Is(err, ErrPublished) {
		t.Fatalf("second publish: %v", err)
	}
}

// Any mode and label value comes back from the exposition unchanged.
func FuzzLabelValues(f *testing.F) {
	for _, s := range []string{"", "xdp driver copy", `a"b`, `back\slash`, "new\nline", `\n`, `"}` + "\n# TYPE x gauge"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, mode, label string) {
		if !utf8.ValidString(mode) || !utf8.ValidString(label) {
			t.Skip("the text format is UTF-8")
		}
		var b strings.Builder
		if err := WritePrometheus(&b, dgramio.Stats{Kind: "udp", Mode: mode}, "peer", label); err != nil {
			t.Fatal(err)
		}
		e := parse(t, b.String())
		got, ok := e.find("dgramio_info", map[string]string{"kind": "udp", "mode": mode, "peer": label})
		if !ok || got != 1 {
			t.Fatalf("mode %q, label %q did not come back:\n%s", mode, label, b.String())
		}
	})
}

// The expvar JSON names are snake case, the names the tools' JSON and
// the Prometheus families use: every field of Stats and of Counter.
func TestExpvarJSONSnakeCase(t *testing.T) {
	s := dgramio.Stats{Kind: dgramio.KindUDP, TxQueued: 3, SockRcvBuf: 1,
		Layers: []dgramio.Counter{{Layer: "socket", Name: "drops", Value: 2, Loss: true}}}
	var m map[string]any
	if err := json.Unmarshal([]byte(ExpvarFunc(func() dgramio.Stats { return s }).String()), &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if k != Snake(k) || strings.ToLower(k) != k {
			t.Errorf("expvar key %q is not snake case", k)
		}
	}
	if m["tx_queued"] != 3.0 || m["sock_rcv_buf"] != 1.0 {
		t.Errorf("tx_queued %v sock_rcv_buf %v in %v", m["tx_queued"], m["sock_rcv_buf"], m)
	}
	layer := m["layers"].([]any)[0].(map[string]any)
	if layer["layer"] != "socket" || layer["name"] != "drops" || layer["value"] != 2.0 || layer["loss"] != true {
		t.Errorf("layer counter %v", layer)
	}
}

// A level among the layer counters (Counter.Gauge) is exported as a
// gauge, in family dgramio_layer, never in the counter family
// dgramio_layer_total (whose rate a dashboard takes); the counts stay
// counters.
func TestLayerGaugesTyped(t *testing.T) {
	s := dgramio.Stats{Kind: dgramio.KindURing, Layers: []dgramio.Counter{
		{Layer: "uring", Name: "tx_inflight", Value: 7, Gauge: true},
		{Layer: "tcp", Name: "rtt_us_max", Value: 250, Gauge: true},
		{Layer: "socket", Name: "drops", Value: 2, Loss: true},
	}}
	var b strings.Builder
	if err := WritePrometheus(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE dgramio_layer_total counter\n",
		`dgramio_layer_total{kind="uring",layer="socket",name="drops",loss="true"} 2`,
		"# TYPE dgramio_layer gauge\n",
		`dgramio_layer{kind="uring",layer="uring",name="tx_inflight",loss="false"} 7`,
		`dgramio_layer{kind="uring",layer="tcp",name="rtt_us_max",loss="false"} 250`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `dgramio_layer_total{kind="uring",layer="uring",name="tx_inflight"`) {
		t.Errorf("a gauge in the counter family:\n%s", out)
	}
	sum := dgramio.SumStats([]dgramio.Stats{s, s})
	if v := sum.Layers[0]; !v.Gauge || v.Value != 14 {
		t.Errorf("SumStats lost the gauge: %+v", v)
	}
}
