package bench

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dgramio/dgramio/internal/core"
)

// Answers that arrive in a burst (after a stall) say nothing about the
// rate: the achieved rate is never above the answers over the window.
func TestAchievedNotAboveMean(t *testing.T) {
	h := NewHist()
	for i := 0; i < 1000; i++ {
		h.Record(int64(500*time.Millisecond) + int64(i)*int64(10*time.Microsecond)) // 1000 answers within 10 ms
	}
	if got := achieved(1000, h, time.Second); got != 1000 {
		t.Fatalf("achieved %.0f/s, want 1000/s (1000 answers over a 1 s window)", got)
	}
	// Answers spread evenly over 2 s of a 1 s window (a queue that drains
	// slowly): the spacing gives the rate.
	h = NewHist()
	for i := 0; i < 1000; i++ {
		h.Record(int64(i) * int64(2*time.Millisecond))
	}
	if got := achieved(1000, h, time.Second); got < 480 || got > 520 {
		t.Fatalf("achieved %.0f/s, want about 500/s", got)
	}
}

func hdrOf(t *testing.T, vals ...int64) []byte {
	t.Helper()
	h := NewHist()
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

func TestParseCPUListAndInterrupts(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0": {0}, "0-3,6,8-9\n": {0, 1, 2, 3, 6, 8, 9}, "2,1,2": {1, 2}} {
		got, err := ParseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseCPUList(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) accepted", bad)
		}
	}
	irqs := ParseInterrupts(`            CPU0       CPU1
  24:          0     123456  PCI-MSIX-0000:03:00.0   0-edge      enp3s0f0-TxRx-0
  25:          1          0  PCI-MSIX-0000:03:00.0   1-edge      enp3s0f0
 NMI:          0          0   Non-maskable interrupts
  30:          5          6  IO-APIC   9-fasteoi   acpi
`)
	if !reflect.DeepEqual(irqs, map[int]string{24: "enp3s0f0-TxRx-0", 25: "enp3s0f0", 30: "acpi"}) {
		t.Fatalf("interrupts %v", irqs)
	}
}

// fakeSys builds a /sys and /proc with what Preflight reads.
func fakeSys(t *testing.T, files map[string]string) System {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return System{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}
}

func findCheck(t *testing.T, cs []Check, name string) Check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, cs)
	return Check{}
}

// The preflight on a machine with two NIC ports and 4 CPUs in two
// hyperthread pairs: each finding it is built for.
func TestPreflightRealPorts(t *testing.T) {
	files := map[string]string{
		"sys/devices/system/cpu/isolated":                           "\n",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0,2\n",
		"sys/devices/system/cpu/cpu2/topology/thread_siblings_list": "0,2\n",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1,3\n",
		"sys/devices/system/cpu/cpu3/topology/thread_siblings_list": "1,3\n",
		"sys/devices/system/cpu/cpu0/node0/x":                       "",
		"sys/devices/system/cpu/cpu1/node1/x":                       "",
		"sys/class/net/eth1/device/numa_node":                       "0\n",
		"sys/class/net/eth1/device/msi_irqs/40":                     "msix",
		"sys/class/net/eth2/device/numa_node":                       "-1\n",
		"proc/interrupts": "           CPU0 CPU1 CPU2 CPU3\n" +
			"  40: 1 2 3 4 PCI-MSIX 0-edge eth1-TxRx-0\n" +
			"  41: 1 2 3 4 PCI-MSIX 0-edge eth2-TxRx-0\n" +
			"  42: 1 2 3 4 PCI-MSIX 0-edge eth9-TxRx-0\n",
		"proc/irq/40/effective_affinity_list": "2\n", // the sibling of loadgen's CPU 0
		"proc/irq/41/smp_affinity_list":       "1\n", // the echo's own CPU
	}
	sys := fakeSys(t, files)
	irq1, err := sys.FindIRQs("eth1")
	if err != nil || !reflect.DeepEqual(irq1, []IRQ{{40, "eth1-TxRx-0"}}) {
		t.Fatalf("IRQs of eth1: %v %v", irq1, err)
	}
	irq2, _ := sys.FindIRQs("eth2")
	n1, err := sys.NICNode("eth1")
	if err != nil || n1 != 0 {
		t.Fatalf("node of eth1: %d %v", n1, err)
	}
	n2, _ := sys.NICNode("eth2")
	if _, err := sys.NICNode("veth0"); err != ErrNoDevice {
		t.Fatalf("a virtual interface: %v", err)
	}
	cs := Preflight(sys, []PreflightPort{
		{Iface: "eth1", Role: "loadgen", NUMANode: n1, IRQs: irq1, RxUsecs: func() (uint32, error) { return 50, nil }},
		{Iface: "eth2", Role: "echo", NUMANode: n2, IRQs: irq2, RxUsecs: func() (uint32, error) { return 0, nil }},
	}, 0, 1)
	for name, want := range map[string]string{
		"isolated CPUs": StatusWarn, "poller cores": StatusOK,
		"coalescing eth1": StatusWarn, "coalescing eth2": StatusOK,
		"IRQs eth1": StatusWarn, "IRQs eth2": StatusWarn,
		"NUMA eth1": StatusWarn, "NUMA eth2": StatusNA,
	} {
		c := findCheck(t, cs, name)
		if c.Status != want {
			t.Errorf("%s: %s (%s), want %s", name, c.Status, c.Detail, want)
		}
	}
	if d := findCheck(t, cs, "IRQs eth1").Detail; !strings.Contains(d, "hyperthread sibling of the loadgen poller's CPU 0") {
		t.Errorf("IRQs eth1: %s", d)
	}
	if d := findCheck(t, cs, "IRQs eth2").Detail; !strings.Contains(d, "the echo poller's own CPU") {
		t.Errorf("IRQs eth2: %s", d)
	}
	if d := findCheck(t, cs, "NUMA eth1").Detail; !strings.Contains(d, "echo poller's CPU 1 is on node 1") {
		t.Errorf("NUMA eth1: %s", d)
	}

	// Isolated pollers on one physical core.
	files["sys/devices/system/cpu/isolated"] = "0,2\n"
	sys = fakeSys(t, files)
	cs = Preflight(sys, nil, 0, 2)
	if c := findCheck(t, cs, "isolated CPUs"); c.Status != StatusOK {
		t.Errorf("isolated: %+v", c)
	}
	if c := findCheck(t, cs, "poller cores"); c.Status != StatusWarn || !strings.Contains(c.Detail, "hyperthreads of one physical core") {
		t.Errorf("poller cores: %+v", c)
	}
}

func TestPreflightVeth(t *testing.T) {
	sys := fakeSys(t, map[string]string{"sys/devices/system/cpu/isolated": ""})
	cs := Preflight(sys, []PreflightPort{{Iface: "dg1a", Role: "loadgen", Veth: true}}, 0, 1)
	for _, n := range []string{"coalescing dg1a", "IRQs dg1a", "NUMA dg1a"} {
		if c := findCheck(t, cs, n); c.Status != StatusNA || c.Detail == "" {
			t.Errorf("%s: %+v", n, c)
		}
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
		for _, want := range []string{"udp", "tcp", "sat. 120k, 40%", "saturated", "20k", "200k", "100 µs", "1 ms"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", f, want)
			}
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
	r.Env.Preflight = []Check{{Name: "isolated CPUs", Status: StatusWarn, Detail: "none | really"}}
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
	load := &LoadResult{Total: Totals{Sent: 100, Received: 90}}
	load.Stats = core.Stats{Kind: "tcp-xdp", TxQueued: 100, TxSent: 95}
	echo := &EchoResult{Dropped: 2, Stats: core.Stats{Kind: "tcp-xdp", TxQueued: 93, TxSent: 90}}
	c := Account(load, echo)
	if c.InFlight != 8 || c.Counted != 2 || c.Unaccounted != 0 {
		t.Fatalf("stream: %+v", c)
	}
	load.Stats.Kind, echo.Stats.Kind = "udp", "udp"
	if c := Account(load, echo); c.InFlight != 0 || c.Unaccounted != 8 {
		t.Fatalf("datagram: %+v", c)
	}
}
