package bench

import (
	"strings"
	"testing"
)

func TestNextProbeBisects(t *testing.T) {
	h := func(r float64) RatePoint { return RatePoint{Rate: r, Held: true} }
	s := func(r float64) RatePoint { return RatePoint{Rate: r, LimitedBy: LimitPath} }
	for _, c := range []struct {
		name     string
		pts      []RatePoint
		next     float64
		ok       bool
		held     float64
		sat      float64
		display  string
		limitNow string
	}{
		{"held then saturated: the geometric middle", []RatePoint{h(20e3), h(200e3), h(400e3), s(800e3)}, 566e3, true, 400e3, 800e3, "400k", ""},
		{"order of the points does not matter", []RatePoint{s(800e3), h(400e3), h(20e3)}, 566e3, true, 400e3, 800e3, "400k", ""},
		{"within the tolerance: done", []RatePoint{h(400e3), s(430e3)}, 0, false, 400e3, 430e3, "400k", ""},
		{"everything held: no upper end", []RatePoint{h(20e3), h(1.6e6)}, 0, false, 1.6e6, 0, "≥ 1.6M", ""},
		{"nothing held: no lower end", []RatePoint{s(20e3), s(200e3)}, 0, false, 0, 20e3, "< 20k", ""},
		{"a held rate above a saturated one: the largest held counts", []RatePoint{h(20e3), s(200e3), h(400e3), s(800e3)}, 566e3, true, 400e3, 800e3, "400k", ""},
		{"the saturated rate above is the load generator's", []RatePoint{h(200e3), {Rate: 800e3, LimitedBy: LimitLoadgen}}, 400e3, true, 200e3, 800e3, "200k [loadgen]", LimitLoadgen},
		{"after a probe held: bisect the upper half", []RatePoint{h(400e3), h(566e3), s(800e3)}, 673e3, true, 566e3, 800e3, "566k", ""},
		{"after a probe saturated: bisect the lower half", []RatePoint{h(400e3), s(566e3), s(800e3)}, 476e3, true, 400e3, 566e3, "400k", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, ok := NextProbe(c.pts)
			if next != c.next || ok != c.ok {
				t.Fatalf("NextProbe = %v, %v; want %v, %v", next, ok, c.next, c.ok)
			}
			held, sat, by := Bracket(c.pts)
			if held != c.held || sat != c.sat {
				t.Fatalf("Bracket = %v, %v; want %v, %v", held, sat, c.held, c.sat)
			}
			want := c.limitNow // of the saturated point above: the path unless told
			if want == "" && c.sat != 0 {
				want = LimitPath
			}
			cp := NewCapacity("udp", "", 0, c.pts, nil)
			if cp.Rate != c.held || cp.Display != c.display || by != cp.LimitedBy || cp.LimitedBy != want {
				t.Fatalf("capacity %+v, want rate %v display %q limited by %q", cp, c.held, c.display, want)
			}
		})
	}
}

// A bisection run to its end over a path that holds up to 500k: the probes
// converge on it within the tolerance.
func TestNextProbeConverges(t *testing.T) {
	pts := []RatePoint{{Rate: 200e3, Held: true}, {Rate: 400e3, Held: true}, {Rate: 800e3}}
	var probes []float64
	for range 10 {
		r, ok := NextProbe(pts)
		if !ok {
			break
		}
		probes = append(probes, r)
		pts = append(pts, RatePoint{Rate: r, Held: r <= 500e3})
	}
	held, sat, _ := Bracket(pts)
	if held > 500e3 || sat <= 500e3 || sat > held*CapacityTolerance || len(probes) > 4 {
		t.Fatalf("after probes %v: held %v, saturated at %v; want 500k bracketed within %v in at most 4 probes", probes, held, sat, CapacityTolerance)
	}
}

func TestReportCapacity(t *testing.T) {
	cell := func(kind string, rate float64, sat, probe bool) Cell {
		c := Cell{Kind: kind, Rate: rate, Saturated: sat, Probe: probe, Sent: 1, Counters: map[string]uint64{}}
		c.Display = c.Format()
		return c
	}
	r := &Report{
		Rates: []float64{200e3, 800e3},
		Kinds: []KindRow{{Kind: "udp"}, {Kind: "xdp"}, {Kind: "dpdk", Reason: "not built"}},
		Cells: []Cell{cell("udp", 200e3, false, false), cell("udp", 800e3, true, false), cell("udp", 400e3, false, true),
			cell("xdp", 200e3, false, false), cell("xdp", 800e3, false, false)},
	}
	r.ComputeCapacity()
	if len(r.Capacity) != 2 {
		t.Fatalf("capacity %+v: want one per row that ran", r.Capacity)
	}
	if c := r.Capacity[0]; c.Kind != "udp" || c.Rate != 400e3 || c.SaturatedAt != 800e3 || len(c.Probes) != 1 || c.Display != "400k" {
		t.Fatalf("udp capacity %+v: want 400k (the probe), saturated at 800k", c)
	}
	if c := r.Capacity[1]; c.Display != "≥ 800k" {
		t.Fatalf("xdp capacity %+v: want at least 800k", c)
	}
	tab := r.Table()
	if !strings.Contains(tab, "capacity") || !strings.Contains(tab, "400k") || !strings.Contains(tab, "≥ 800k") {
		t.Fatalf("table without the capacity column:\n%s", tab)
	}
	if md := r.Markdown(); !strings.Contains(md, "| capacity |") || !strings.Contains(md, "udp probed 400k") {
		t.Fatalf("report.md without the capacity:\n%s", md)
	}
	if _, err := r.plotSVG("p50", func(c *Cell) float64 { return 10 }); err != nil {
		t.Fatal(err)
	}
}
