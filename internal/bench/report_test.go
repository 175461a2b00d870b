package bench

import (
	"encoding/json"
	"encoding/xml"
	"github.com/dgramio/dgramio/internal/bench/load"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dgramio/dgramio"
)

func hdrOf(t *testing.T, vals ...int64) []byte {
	t.Helper()
	h := load.NewHist()
	for _, v := range vals {
		h.Record(v)
	}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func synthCell(p50, p99, ach float64, sent, recv uint64, sat bool, unacc int64, hdrb []byte) Cell {
	c := Cell{Kind: "udp", Mode: "m", EchoMode: "e", Rate: 20000, Offered: sent, Sent: sent, Received: recv,
		Lost: sent - recv, P50Us: p50, P99Us: p99, P999Us: p99 * 2, MaxUs: p99 * 3, AchievedRate: ach,
		Saturated: sat, Unaccounted: unacc, RTTHdr: hdrb,
		Counters: map[string]uint64{"loadgen.dgramio.syscalls": sent, "echo.socket.drops": sent - recv},
		LossKeys: []string{"echo.socket.drops"},
		Conservation: Conservation{Sent: sent, Received: recv, Counted: sent - recv - uint64(unacc), Unaccounted: unacc,
			ByLayer: map[string]uint64{"echo.socket.drops": sent - recv - uint64(unacc)}},
	}
	c.Display = c.Format()
	return c
}

func TestMergeRepeats(t *testing.T) {
	runs := []Cell{
		synthCell(10, 40, 20000, 1000, 1000, false, 0, hdrOf(t, 10000, 10000)),
		synthCell(30, 90, 19000, 1000, 980, true, 0, hdrOf(t, 30000)),
		synthCell(20, 50, 19900, 1000, 997, false, 1, hdrOf(t, 20000, 20000, 20000)),
		{Kind: "udp", Rate: 20000, Error: "echo did not start"},
	}
	runs[3].Display = runs[3].Format()
	c := MergeRepeats(runs)
	if c.P50Us != 20 || c.P99Us != 50 || c.AchievedRate != 19900 {
		t.Fatalf("medians: p50 %v p99 %v achieved %v, want 20, 50, 19900", c.P50Us, c.P99Us, c.AchievedRate)
	}
	if c.MaxUs != 270 {
		t.Fatalf("max %v, want the largest, 270", c.MaxUs)
	}
	if c.Sent != 3000 || c.Received != 2977 || c.Lost != 23 || c.Counters["loadgen.dgramio.syscalls"] != 3000 {
		t.Fatalf("sums: sent %d received %d lost %d counters %v", c.Sent, c.Received, c.Lost, c.Counters)
	}
	if c.Unaccounted != 1 || c.Conservation.Unaccounted != 1 || c.Conservation.ByLayer["echo.socket.drops"] != 22 {
		t.Fatalf("conservation %+v", c.Conservation)
	}
	if c.Saturated {
		t.Fatal("saturated in 1 of 3 measured repeats: not saturated")
	}
	if math.Abs(c.LossPct-23.0/30) > 1e-9 {
		t.Fatalf("loss %.4f%%", c.LossPct)
	}
	s := c.Spread
	if s == nil || s.P50MinUs != 10 || s.P50MaxUs != 30 || s.P99MinUs != 40 || s.P99MaxUs != 90 ||
		s.SaturatedIn != 1 || s.Unaccounted != 1 || s.Measured != 3 || s.OfRepeats != 4 {
		t.Fatalf("spread %+v", s)
	}
	if len(c.Repeats) != 4 || c.Repeats[3].Error == "" || c.Repeats[1].N != 2 || !c.Repeats[1].Saturated {
		t.Fatalf("repeats %+v", c.Repeats)
	}
	if !strings.Contains(strings.Join(c.Notes, ";"), "repeat 4: error: echo did not start") {
		t.Fatalf("notes %v", c.Notes)
	}
	h, err := hdr.Decode(c.RTTHdr)
	if err != nil || h.TotalCount() != 6 {
		t.Fatalf("merged histogram: %v, %d values (want 6)", err, h.TotalCount())
	}
	if !reflect.DeepEqual(c.LossKeys, []string{"echo.socket.drops"}) {
		t.Fatalf("loss keys %v", c.LossKeys)
	}
	if c.Display != "20.0 / 50.0 unaccounted +1" {
		t.Fatalf("display %q", c.Display)
	}

	// Most repeats saturated: the cell is.
	c = MergeRepeats([]Cell{runs[1], runs[1], runs[0]})
	if !c.Saturated || !strings.HasPrefix(c.Display, "sat. ") {
		t.Fatalf("2 of 3 saturated: %q", c.Display)
	}
	// One repeat is itself.
	one := MergeRepeats(runs[:1])
	if one.P50Us != 10 || len(one.Repeats) != 1 || one.Spread.OfRepeats != 1 {
		t.Fatalf("one repeat: %+v", one)
	}
}

func TestRotateKindsAndMedian(t *testing.T) {
	k := []string{"udp", "xdp", "tcp"}
	if got := RotateKinds(k, 4); !reflect.DeepEqual(got, []string{"xdp", "tcp", "udp"}) {
		t.Fatalf("rotate: %v", got)
	}
	seenFirst := map[string]bool{}
	for i := 0; i < 3; i++ {
		seenFirst[RotateKinds(k, i)[0]] = true
	}
	if len(seenFirst) != 3 {
		t.Fatal("every kind runs first once in 3 repeats")
	}
	if Median([]float64{3, 1, 2}) != 2 || Median([]float64{4, 1, 3, 2}) != 2.5 || Median(nil) != 0 {
		t.Fatal("median")
	}
}

// A small report of two kinds, one saturated at the higher rate.
func sampleReport() *Report {
	mk := func(kind string, rate, p50, p99 float64, sat bool) Cell {
		c := Cell{Kind: kind, Rate: rate, P50Us: p50, P99Us: p99, Sent: 100, Received: 100, AchievedRate: rate * 0.6,
			Saturated: sat, LossPct: 40, Counters: map[string]uint64{}}
		c.Display = c.Format()
		return c
	}
	return &Report{
		Env:   Env{Host: "a", Kernel: "6.18", Link: "veth", Modes: map[string]string{"udp": "sendmmsg"}, Repeat: 1},
		Kinds: []KindRow{{Kind: "udp"}, {Kind: "tcp"}, {Kind: "dpdk", Reason: "not_built: no"}},
		Rates: []float64{20000, 200000},
		Cells: []Cell{mk("udp", 20000, 15, 40, false), mk("tcp", 20000, 20, 60, false), mk("udp", 200000, 900, 5000, true), mk("tcp", 200000, 25, 80, false)},
	}
}

func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	files, err := r.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(files, []string{PlotP50, PlotP99}) {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		// Well-formed XML with an svg root.
		d := xml.NewDecoder(strings.NewReader(string(b)))
		root := ""
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if se, ok := tok.(xml.StartElement); ok && root == "" {
				root = se.Name.Local
			}
		}
		if root != "svg" {
			t.Fatalf("%s: root element %q", f, root)
		}
		for _, want := range []string{"udp", "tcp", "saturated cells: in the table, not drawn", "20k", "200k", "100 µs"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
		// A saturated cell is summarised in the table, not piled on the
		// curve with a label (its latency is a queue's depth: the y axis
		// would run to it).
		if strings.Contains(string(b), "sat. 120k") {
			t.Errorf("%s labels a saturated cell on the curve", f)
		}
		if strings.Contains(string(b), "dpdk") {
			t.Errorf("%s draws a kind that could not run", f)
		}
	}
	// Nothing measured: still a valid plot that says so.
	empty := &Report{Rates: []float64{1000}, Kinds: []KindRow{{Kind: "udp", Reason: "x"}}}
	if _, err := empty.WritePlots(dir); err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	a := sampleReport()
	b := sampleReport()
	b.Env.Kernel = "6.19"
	b.Env.Modes["udp"] = "uring-ish"
	b.Cells[0].P50Us, b.Cells[0].P99Us = 12, 80 // udp 20k: p50 0.8×, p99 2×
	b.Cells[0].Display = b.Cells[0].Format()
	b.Cells = b.Cells[:3] // no tcp at 200k in B
	b.Cells = append(b.Cells, Cell{Kind: "xdp", Rate: 20000, P50Us: 9, P99Us: 11, Display: "9.0 / 11.0"})
	b.Kinds = append(b.Kinds, KindRow{Kind: "xdp"})
	cmp := Compare(a, b)
	if len(cmp.Rows) != 3 {
		t.Fatalf("rows %+v", cmp.Rows)
	}
	r := cmp.Rows[0]
	if r.Kind != "udp" || r.Rate != 20000 || math.Abs(float64(r.P50)-0.8) > 1e-9 || math.Abs(float64(r.P99)-2) > 1e-9 || r.Achieved != 1 {
		t.Fatalf("udp 20k: %+v", r)
	}
	if cmp.Rows[1].Kind != "udp" || cmp.Rows[1].Saturated != "both" {
		t.Fatalf("udp 200k: %+v", cmp.Rows[1])
	}
	if !reflect.DeepEqual(cmp.OnlyA, []string{"tcp at 200k"}) || !reflect.DeepEqual(cmp.OnlyB, []string{"xdp at 20k"}) {
		t.Fatalf("only in A %v, only in B %v", cmp.OnlyA, cmp.OnlyB)
	}
	env := strings.Join(cmp.Env, "; ")
	if !strings.Contains(env, "kernel: 6.18 → 6.19") || !strings.Contains(env, "mode of udp: sendmmsg → uring-ish") {
		t.Fatalf("env %v", cmp.Env)
	}
	tab := cmp.Table("a.json", "b.json")
	for _, want := range []string{"0.80×", "2.00×", "(both saturated)", "only in A: tcp at 200k", "only in B: xdp at 20k"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	// Each run's probes are its own: not cells to pair; the capacities
	// are compared instead.
	a.Cells = append(a.Cells, Cell{Kind: "udp", Rate: 63e3, Probe: true, Sent: 1, P50Us: 9, P99Us: 11})
	a.ComputeCapacity()
	b.ComputeCapacity()
	cmp = Compare(a, b)
	if !reflect.DeepEqual(cmp.OnlyA, []string{"tcp at 200k"}) || len(cmp.Capacity) == 0 || cmp.Capacity[0].Kind != "udp" {
		t.Fatalf("with a probe in A: only in A %v, capacity %+v", cmp.OnlyA, cmp.Capacity)
	}
	if tab := cmp.Table("a.json", "b.json"); !strings.Contains(tab, "capacity:\n  udp: A ") {
		t.Errorf("table lacks the capacity:\n%s", tab)
	}
	a.Cells = a.Cells[:len(a.Cells)-1]
	// An undefined ratio is null in JSON and reads back as undefined.
	a.Cells[1].AchievedRate = 0
	cmp = Compare(a, b)
	js, err := json.Marshal(cmp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"achieved_ratio":null`) {
		t.Fatalf("json %s", js)
	}
	var back Comparison
	if err := json.Unmarshal(js, &back); err != nil || !math.IsNaN(float64(back.Rows[2].Achieved)) {
		t.Fatalf("round trip: %v %+v", err, back.Rows)
	}
}

// report.md carries, per cell, syscalls per message of both ends, frames
// per record for stream kinds, unaccounted losses in bold, and the
// counters of every layer with loss counters marked.
func TestMarkdownCellDetails(t *testing.T) {
	r := sampleReport()
	c := &r.Cells[1] // tcp 20k
	c.Kind = "tcp-xdp"
	c.Conservation = Conservation{Sent: 1000, Received: 990, Counted: 5, Unaccounted: 5, ByLayer: map[string]uint64{"echo.xsk.rx_dropped": 5}}
	c.Unaccounted = 5
	c.Counters = map[string]uint64{
		"loadgen.dgramio.syscalls": 2500, "echo.dgramio.syscalls": 990, "echo.app.received": 990,
		"loadgen.stream.records_tx": 1000, "loadgen.link.tx_tcp_data_frames": 800,
		"loadgen.stream.records_rx": 990, "loadgen.link.rx_tcp_data_frames": 990,
		"echo.xsk.rx_dropped": 5, "echo.xsk.rx_ring_full": 0,
	}
	c.LossKeys = []string{"echo.xsk.rx_dropped", "echo.xsk.rx_ring_full"}
	c.Display = c.Format()
	r.Kinds[1].Kind = "tcp-xdp"
	r.Plots = []string{PlotP50, PlotP99}
	r.Env.Preflight = []preflight.Check{{Name: "isolated CPUs", Status: preflight.StatusWarn, Detail: "none | really"}}
	md := r.Markdown()
	for _, want := range []string{
		"syscalls per message: loadgen 2.50 (of 1000 sent", "echo 1.00 (of 990 reflected)",
		"frames carrying data per record: loadgen tx 0.80 rx 1.00",
		"**unaccounted +5**",
		"| xsk.rx_dropped | - | 5 | loss |",
		"zero at both ends: xsk.rx_ring_full",
		"![rtt-p50](rtt-p50.svg)",
		"| isolated CPUs | warn | none \\| really |",
		"| tcp-xdp | 20.0 / 60.0 unaccounted +5 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Kernel TCP: segments per message from TCP_INFO.
	k := Cell{Kind: "tcp", Rate: 1000, Conservation: Conservation{Sent: 10}, Counters: map[string]uint64{
		"loadgen.dgramio.tx_sent": 10, "loadgen.tcp.segs_out": 12, "loadgen.tcp.segs_in": 15}}
	if got := k.framesLine(); !strings.Contains(got, "TCP segments per message sent") || !strings.Contains(got, "loadgen out 1.20 in 1.50") {
		t.Errorf("kernel tcp: %q", got)
	}
	if t.Failed() {
		t.Log(md)
	}
}

// Records a stream backend still held at the end (queued, not written to
// the connection) are in flight, not unaccounted; a datagram kind holds
// nothing after Flush, so a gap there stays unaccounted.
func TestAccountHeldByStream(t *testing.T) {
	lr := &load.LoadResult{Total: load.Totals{Sent: 100, Received: 90}}
	lr.Stats = dgramio.Stats{Kind: "tcp-xdp", TxQueued: 100, TxSent: 95}
	echo := &load.EchoResult{Dropped: 2, Stats: dgramio.Stats{Kind: "tcp-xdp", TxQueued: 93, TxSent: 90}}
	c := Account(lr, echo)
	if c.InFlight != 8 || c.Counted != 2 || c.Unaccounted != 0 {
		t.Fatalf("stream: %+v", c)
	}
	lr.Stats.Kind, echo.Stats.Kind = "udp", "udp"
	if c := Account(lr, echo); c.InFlight != 0 || c.Unaccounted != 8 {
		t.Fatalf("datagram: %+v", c)
	}
}

// The plot's line joins the table's rates that kept up; a capacity probe
// (a rate between them) is drawn apart, off the line, and a saturated
// cell or one whose sender fell behind is left to the table. The table
// says which setting limited a row (Env.Limits).
func TestPlotSeriesAndLimits(t *testing.T) {
	r := sampleReport()
	probe := Cell{Kind: "tcp", Rate: 141000, P50Us: 15, P99Us: 30, Sent: 100, Received: 100, Probe: true}
	behind := Cell{Kind: "tcp", Rate: 1.6e6, P50Us: 2267021, P99Us: 3999269, Sent: 100, Received: 100, LimitedBy: LimitLoadgen}
	r.Cells = append(r.Cells, probe, behind)
	r.Rates = append(r.Rates, 1.6e6)
	sweep, probes, sat, _ := r.series(&r.Kinds[1], func(c *Cell) float64 { return c.P50Us })
	if len(sweep) != 2 || sweep[0].X != 20000 || sweep[1].X != 200000 {
		t.Errorf("tcp sweep %v, want 20k and 200k", sweep)
	}
	if len(probes) != 1 || probes[0].X != 141000 {
		t.Errorf("tcp probes %v, want 141k alone", probes)
	}
	if sat != 1 {
		t.Errorf("tcp: %d cells left to the table, want the one whose sender fell behind", sat)
	}
	if _, _, sat, _ := r.series(&r.Kinds[0], func(c *Cell) float64 { return c.P50Us }); sat != 1 {
		t.Errorf("udp: %d saturated cells, want 1", sat)
	}
	r.Env.Limits = map[string]string{"tcp": "RX ring of 256 descriptors"}
	if tab := r.Table(); !strings.Contains(tab, "  limit tcp: RX ring of 256 descriptors\n") {
		t.Errorf("the table does not say what limited tcp:\n%s", tab)
	}
	if md := r.Markdown(); !strings.Contains(md, "Limit of tcp: RX ring of 256 descriptors.") {
		t.Errorf("report.md does not say what limited tcp")
	}
}
