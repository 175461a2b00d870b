package bench

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// scalingReport is a report of xdp and udp with one and two queues: xdp
// reaches its limit at 400k with either, udp with one queue only (two
// carry 390k of 400k, more than LimitShare: about what was offered).
func scalingReport() *Report {
	cell := func(kind string, queues int, rate, achieved float64, sat bool) Cell {
		c := Cell{Kind: kind, Queues: queues, Poll: "yield", Rate: rate, AchievedRate: achieved, Saturated: sat,
			Offered: 100, Sent: 100, Received: 100, P50Us: rate / 1e3, P99Us: rate / 1e2}
		c.Display = c.Format()
		return c
	}
	return &Report{
		Env:   Env{Poll: "wait", Queues: 2, QueueCounts: []int{1, 2}},
		Rates: []float64{100e3, 400e3},
		Kinds: []KindRow{{Kind: "xdp", Queues: 1}, {Kind: "xdp", Queues: 2}, {Kind: "udp", Queues: 1}, {Kind: "udp", Queues: 2}},
		Cells: []Cell{
			cell("xdp", 0, 100e3, 100e3, false), cell("xdp", 0, 400e3, 250e3, true),
			cell("xdp", 2, 100e3, 100e3, false), cell("xdp", 2, 400e3, 370e3, true),
			cell("udp", 1, 100e3, 99e3, false), cell("udp", 1, 400e3, 120e3, true),
			cell("udp", 2, 100e3, 100e3, false), cell("udp", 2, 400e3, 390e3, false),
		},
	}
}

func TestComputeScaling(t *testing.T) {
	r := scalingReport()
	rows := r.ComputeScaling()
	if len(rows) != 4 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	want := []struct {
		kind          string
		queues        int
		rate, offered float64
		limited       bool
		eff           float64
		bound         string
		latAt         float64
	}{
		{"xdp", 1, 250e3, 400e3, true, 1, "", 100e3},
		{"xdp", 2, 370e3, 400e3, true, 370e3 / 500e3, "", 100e3},
		{"udp", 1, 120e3, 400e3, true, 1, "", 100e3},
		{"udp", 2, 390e3, 400e3, false, 390e3 / 240e3, ">=", 400e3},
	}
	for i, w := range want {
		g := rows[i]
		if g.Kind != w.kind || g.Queues != w.queues || g.Rate != w.rate || g.AtOffered != w.offered || g.Limited != w.limited ||
			math.Abs(float64(g.Efficiency)-w.eff) > 1e-9 || g.Bound != w.bound || g.LatencyAt != w.latAt || g.Poll != "yield" {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	// udp's one queue never saturating: rate(1) is a lower bound.
	r.Cells[5] = r.Cells[4]
	r.Cells[5].Rate, r.Cells[5].AchievedRate = 400e3, 400e3
	rows = r.ComputeScaling()
	if rows[2].Limited || rows[3].Bound != "unknown" {
		t.Fatalf("udp rows %+v %+v: want rate(1) a bound, the efficiency unknown", rows[2], rows[3])
	}
	r.Cells[7].AchievedRate = 300e3
	if rows = r.ComputeScaling(); rows[3].Bound != "<=" {
		t.Fatalf("udp ×2 limited, ×1 not: bound %q, want <=", rows[3].Bound)
	}

	// Without a cell of several queues there is no table.
	one := &Report{Cells: []Cell{{Kind: "udp", Rate: 1, AchievedRate: 1}}}
	if s := one.ComputeScaling(); s != nil {
		t.Fatalf("one queue: %+v", s)
	}
	// Without one queue the efficiency is undefined, null in the JSON.
	two := &Report{Cells: []Cell{{Kind: "udp", Queues: 2, Rate: 1, AchievedRate: 1}}}
	s := two.ComputeScaling()
	if len(s) != 1 || !math.IsNaN(float64(s[0].Efficiency)) {
		t.Fatalf("two queues only: %+v", s)
	}
	b, err := json.Marshal(s[0])
	if err != nil || !strings.Contains(string(b), `"efficiency":null`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
}

// The tables name the rows with their queues and show the scaling table,
// rows marked poll yield.
func TestScalingInTables(t *testing.T) {
	r := scalingReport()
	r.Scaling = r.ComputeScaling()
	tab := r.Table()
	for _, want := range []string{"xdp, 2 queues  ", "udp  ", "scaling: rate(N)", "poll yield", "≥ 390k (offered 400k: carried)", "≥ 1.62", "370k (offered 400k)", "0.74"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	md := r.Markdown()
	for _, want := range []string{"## Scaling", "| xdp | 2 | poll yield | 370k (offered 400k) | 0.74 | 100.0 / 1000 at 100k |",
		"| xdp, 2 queues |", "Rows marked poll yield", "| poll | poll yield:", "queues 1, 2 (each kind with each)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if c, ok := r.Cell("xdp", 400e3); !ok || c.Queues != 0 {
		t.Fatalf("Cell: %+v, want the one-queue cell", c)
	}
	if c, ok := r.CellAt("xdp", 2, 400e3); !ok || c.AchievedRate != 370e3 {
		t.Fatalf("CellAt: %+v", c)
	}
	if c, ok := r.CellAt("xdp", 1, 400e3); !ok || c.AchievedRate != 250e3 {
		t.Fatalf("CellAt 1 finds queues 0: %+v", c)
	}
	cmp := Compare(r, r)
	if len(cmp.Rows) != 8 || len(cmp.OnlyA) != 0 {
		t.Fatalf("comparing a report with itself: %d rows, only in A %v", len(cmp.Rows), cmp.OnlyA)
	}
	if !strings.Contains(cmp.Table("a", "b"), "xdp, 2 queues") {
		t.Fatalf("comparison table:\n%s", cmp.Table("a", "b"))
	}
}
