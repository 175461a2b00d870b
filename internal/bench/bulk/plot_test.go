package bulk

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// plotReport is a run on the veth and on the lossy wire at two loss
// rates, with a row that never measured.
func plotReport() *Report {
	w1 := Wire{Lossy: true, Loss: 0.001, Delay: 10 * time.Millisecond}
	w3 := Wire{Lossy: true, Loss: 0.03, Delay: 10 * time.Millisecond}
	rep := &Report{}
	for _, w := range []Wire{{}, w1, w3} {
		for _, row := range []string{"tcp", "tcp-xdp"} {
			for _, conns := range []int{1, 16} {
				c := cell(row, conns, Up, 3, 0.5, 0.5, 1)
				c.Wire = w
				rep.Cells = append(rep.Cells, c)
			}
		}
		rep.Cells = append(rep.Cells, Cell{Row: "tcp-dpdk", Conns: 1, Dir: Up, Wire: w, Error: "no port"})
	}
	rep.Summarize()
	return rep
}

// svgText is the text of an SVG file, checked to be well-formed XML with
// an svg root.
func svgText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(b)))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q", path, root)
	}
	return string(b)
}

// WritePlots draws a plot per wire (the cells along x, a mark per kind)
// and, per delay of the lossy wire with more than one loss rate, Gbit/s
// against the loss rate; a row that never measured is not drawn.
func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	rep := plotReport()
	files, err := rep.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gbps-veth.svg", "gbps-wire-0.1pct-10ms.svg", "gbps-wire-3pct-10ms.svg", "gbps-loss-10ms.svg"}
	if !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	for _, f := range files {
		s := svgText(t, filepath.Join(dir, f))
		for _, w := range []string{"tcp", "tcp-xdp", "Gbit/s"} {
			if !strings.Contains(s, w) {
				t.Errorf("%s lacks %q", f, w)
			}
		}
		if strings.Contains(s, "tcp-dpdk") {
			t.Errorf("%s draws a row that never measured", f)
		}
	}
	if s := svgText(t, filepath.Join(dir, "gbps-veth.svg")); !strings.Contains(s, "16 conns up") || !strings.Contains(s, "1 conn up") {
		t.Errorf("gbps-veth.svg lacks the cells' labels")
	}
	if s := svgText(t, filepath.Join(dir, "gbps-loss-10ms.svg")); !strings.Contains(s, "3%") || !strings.Contains(s, "0.1%") {
		t.Errorf("gbps-loss-10ms.svg lacks the loss rates")
	}
	// Nothing measured: still a plot, which says so.
	empty := &Report{Cells: []Cell{{Row: "tcp", Conns: 1, Dir: Up, Error: "x"}}}
	empty.Summarize()
	if files, err := empty.WritePlots(dir); err != nil || len(files) != 1 || !strings.Contains(svgText(t, filepath.Join(dir, files[0])), "no cell measured") {
		t.Errorf("empty report: %v, %v", files, err)
	}
}

// --out writes the plots beside results.json and names them in it and in
// report.md; "dgramio-bulk plot" draws them again from results.json.
func TestPlotsOutAndAgain(t *testing.T) {
	dir := t.TempDir()
	rep := plotReport()
	if err := writeOut(rep, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	var back Report
	if err == nil {
		err = json.Unmarshal(b, &back)
	}
	if err != nil || len(back.Plots) != 4 || back.Plots[0] != "gbps-veth.svg" {
		t.Errorf("results.json names the plots %v (%v)", back.Plots, err)
	}
	if md, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || !strings.Contains(string(md), "![gbps-veth.svg](gbps-veth.svg)") {
		t.Errorf("report.md lacks the plots (%v)", err)
	}
	again := t.TempDir()
	var out, errb strings.Builder
	if rc := Main([]string{"plot", filepath.Join(dir, "results.json"), again}, &out, &errb); rc != 0 {
		t.Fatalf("plot: status %d, stderr %q", rc, errb.String())
	}
	if _, err := os.Stat(filepath.Join(again, "gbps-loss-10ms.svg")); err != nil {
		t.Errorf("plot again: %v", err)
	}
	if rc := Main([]string{"plot"}, &out, &errb); rc != 2 {
		t.Errorf("plot without a report: status %d, want 2", rc)
	}
	if rc := Main([]string{"plot", filepath.Join(dir, "none.json")}, &out, &errb); rc != 1 {
		t.Errorf("plot of a missing report: status %d, want 1", rc)
	}
}
