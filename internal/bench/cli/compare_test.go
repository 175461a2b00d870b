package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgramio/dgramio/internal/bench"
)

// netbench compare reads two results.json and prints the ratios per cell.
func TestCompareMain(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r *bench.Report) string {
		p := filepath.Join(dir, name)
		b, _ := json.Marshal(r)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cell := func(kind string, rate, p50, p99, ach float64) bench.Cell {
		c := bench.Cell{Kind: kind, Rate: rate, P50Us: p50, P99Us: p99, AchievedRate: ach, Sent: 1}
		c.Display = c.Format()
		return c
	}
	a := write("a.json", &bench.Report{Rates: []float64{20000}, Kinds: []bench.KindRow{{Kind: "udp"}, {Kind: "tcp"}},
		Cells: []bench.Cell{cell("udp", 20000, 10, 20, 20000), cell("tcp", 20000, 12, 30, 20000)}})
	b := write("b.json", &bench.Report{Rates: []float64{20000}, Kinds: []bench.KindRow{{Kind: "udp"}, {Kind: "xdp"}},
		Cells: []bench.Cell{cell("udp", 20000, 5, 40, 19000), cell("xdp", 20000, 7, 9, 20000)}})
	var out, errOut strings.Builder
	js := filepath.Join(dir, "cmp.json")
	if st := NetbenchMain([]string{"compare", "--json", js, a, b}, &out, &errOut); st != 0 {
		t.Fatalf("exit %d: %s", st, errOut.String())
	}
	for _, want := range []string{"0.50×", "2.00×", "0.95×", "only in A: tcp at 20k", "only in B: xdp at 20k"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	var cmp bench.Comparison
	raw, _ := os.ReadFile(js)
	if err := json.Unmarshal(raw, &cmp); err != nil || len(cmp.Rows) != 1 {
		t.Fatalf("json: %v %s", err, raw)
	}
	if st := NetbenchMain([]string{"compare", a}, &out, &errOut); st != 2 {
		t.Fatalf("one file: exit %d", st)
	}
	if st := NetbenchMain([]string{"compare", a, filepath.Join(dir, "missing.json")}, &out, &errOut); st != 1 {
		t.Fatalf("missing file: exit %d", st)
	}
}

// netbench report writes report.md, the table and the plots again from a
// results.json.
func TestReportMain(t *testing.T) {
	dir := t.TempDir()
	c := bench.Cell{Kind: "udp", Rate: 20000, P50Us: 10, P99Us: 20, AchievedRate: 20000, Sent: 5, Received: 5}
	c.Display = c.Format()
	r := bench.Report{Env: bench.Env{Command: "netbench --kinds udp"}, Rates: []float64{20000}, Kinds: []bench.KindRow{{Kind: "udp"}}, Cells: []bench.Cell{c}}
	b, _ := json.Marshal(&r)
	src := filepath.Join(dir, "results.json")
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "again")
	var so, se strings.Builder
	if st := NetbenchMain([]string{"report", "--out", out, src}, &so, &se); st != 0 {
		t.Fatalf("exit %d: %s", st, se.String())
	}
	for _, f := range []string{"report.md", "table.txt", "results.json", bench.PlotP50, bench.PlotP99} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	// A report read back gets the capacity this build computes.
	if !strings.Contains(string(md), "| udp | 10.0 / 20.0 | ≥ 20k |") || !strings.Contains(string(md), "![rtt-p99](rtt-p99.svg)") {
		t.Fatalf("report.md:\n%s", md)
	}
	if !strings.Contains(so.String(), "10.0 / 20.0") {
		t.Fatalf("table %q", so.String())
	}
}
