package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// CompareRow is one cell (kind × rate) present in both reports: B's value
// over A's for the median and 99th percentile round trip and for the
// achieved rate (below 1: B is faster, resp. slower to answer).
type CompareRow struct {
	Kind string `json:"kind"`
	// Variant is the cells' variant of the kind ("napi"; see Variants),
	// empty for the kind as it is.
	Variant string `json:"variant,omitempty"`
	// Queues is the number of queues of both cells (0: one).
	Queues int     `json:"queues,omitempty"`
	Rate   float64 `json:"rate"`
	// A and B are the cells' table texts.
	A string `json:"a"`
	B string `json:"b"`
	// Ratios, B / A; NaN (null in JSON) where A's value is 0.
	P50      Ratio `json:"p50_ratio"`
	P99      Ratio `json:"p99_ratio"`
	Achieved Ratio `json:"achieved_ratio"`
	// Saturated says which side was saturated: "", "a", "b" or "both";
	// a saturated cell's latency is a queue's depth, so its ratio is
	// not the path's.
	Saturated string `json:"saturated,omitempty"`
}

// Comparison is the result of Compare.
type Comparison struct {
	// Rows are the cells in both, in A's order of kinds, then rate.
	Rows []CompareRow `json:"rows"`
	// OnlyA and OnlyB are the cells ("tcp at 200k") present in one report
	// only.
	OnlyA []string `json:"only_a,omitempty"`
	OnlyB []string `json:"only_b,omitempty"`
	// Env lists what differs between the two environments.
	Env []string `json:"env,omitempty"`
	// Capacity compares the capacity of each row both reports have one
	// for.
	Capacity []CompareCapacity `json:"capacity,omitempty"`
}

// CompareCapacity is a row's capacity in both reports: their table texts
// and B's rate over A's.
type CompareCapacity struct {
	Kind    string `json:"kind"`
	Variant string `json:"variant,omitempty"`
	Queues  int    `json:"queues,omitempty"`
	A       string `json:"a"`
	B       string `json:"b"`
	Ratio   Ratio  `json:"ratio"`
}

// ReadReport reads a results.json (or --json) file.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Ratio is B over A; NaN when A is 0, written as null in JSON.
type Ratio float64

// MarshalJSON writes the ratio, or null when it is undefined.
func (r Ratio) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(r)) || math.IsInf(float64(r), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(r))
}

// UnmarshalJSON reads a ratio; null is NaN.
func (r *Ratio) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = Ratio(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(r))
}

func ratio(b, a float64) Ratio {
	if a == 0 {
		return Ratio(math.NaN())
	}
	return Ratio(b / a)
}

// measuredCells returns the measured cells of r in the order of its rows
// (row name and queues; then of any row not listed), then rate; not the
// capacity's probes (each run bisects at rates of its own: their
// capacities are compared instead).
func measuredCells(r *Report) []*Cell {
	var out []*Cell
	type row struct {
		name   string
		queues int
	}
	seen := map[row]bool{}
	order := []row{}
	for _, k := range r.Kinds {
		order = append(order, row{k.Name(), queuesOf(k.Queues)})
	}
	for _, c := range r.Cells {
		order = append(order, row{c.Name(), queuesOf(c.Queues)})
	}
	for _, k := range order {
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, rate := range r.Rates {
			if c, ok := r.CellAt(k.name, k.queues, rate); ok && c.measured() {
				out = append(out, c)
			}
		}
		for i := range r.Cells {
			c := &r.Cells[i]
			if c.Name() == k.name && queuesOf(c.Queues) == k.queues && !slices.Contains(r.Rates, c.Rate) && c.measured() && !c.Probe {
				out = append(out, c)
			}
		}
	}
	return out
}

// Compare compares two reports cell by cell (kind × rate).
func Compare(a, b *Report) Comparison {
	var cmp Comparison
	ca, cb := measuredCells(a), measuredCells(b)
	name := func(c *Cell) string { return c.Label() + " at " + FormatRate(c.Rate) }
	inB := map[string]*Cell{}
	for _, c := range cb {
		inB[name(c)] = c
	}
	inA := map[string]bool{}
	for _, x := range ca {
		inA[name(x)] = true
		y, ok := inB[name(x)]
		if !ok {
			cmp.OnlyA = append(cmp.OnlyA, name(x))
			continue
		}
		row := CompareRow{Kind: x.Kind, Variant: x.Variant, Queues: x.Queues, Rate: x.Rate, A: x.Display, B: y.Display,
			P50: ratio(y.P50Us, x.P50Us), P99: ratio(y.P99Us, x.P99Us), Achieved: ratio(y.AchievedRate, x.AchievedRate)}
		switch {
		case x.Saturated && y.Saturated:
			row.Saturated = "both"
		case x.Saturated:
			row.Saturated = "a"
		case y.Saturated:
			row.Saturated = "b"
		}
		cmp.Rows = append(cmp.Rows, row)
	}
	for _, y := range cb {
		if !inA[name(y)] {
			cmp.OnlyB = append(cmp.OnlyB, name(y))
		}
	}
	ea, eb := &a.Env, &b.Env
	for _, d := range []struct{ what, a, b string }{
		{"host", ea.Host, eb.Host}, {"kernel", ea.Kernel, eb.Kernel}, {"CPU", ea.CPUModel, eb.CPUModel},
		{"CPUs", fmt.Sprint(ea.CPUs), fmt.Sprint(eb.CPUs)}, {"link", ea.Link, eb.Link}, {"poll", PollName(ea.Poll), PollName(eb.Poll)},
		{"pinning", ea.Pinning, eb.Pinning}, {"Go", ea.GoVersion, eb.GoVersion},
		{"size", fmt.Sprint(ea.Size), fmt.Sprint(eb.Size)}, {"batch", fmt.Sprint(ea.Batch), fmt.Sprint(eb.Batch)},
		{"duration", ea.Duration, eb.Duration}, {"repeat", fmt.Sprint(ea.Repeat), fmt.Sprint(eb.Repeat)},
	} {
		if d.a != d.b {
			cmp.Env = append(cmp.Env, fmt.Sprintf("%s: %s → %s", d.what, d.a, d.b))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ea.Modes)) {
		if m, ok := eb.Modes[k]; ok && m != ea.Modes[k] {
			cmp.Env = append(cmp.Env, fmt.Sprintf("mode of %s: %s → %s", k, ea.Modes[k], m))
		}
	}
	for _, x := range a.Capacity {
		if y, ok := b.CapacityOf(RowName(x.Kind, x.Variant), x.Queues); ok {
			cmp.Capacity = append(cmp.Capacity, CompareCapacity{Kind: x.Kind, Variant: x.Variant, Queues: x.Queues,
				A: x.Display, B: y.Display, Ratio: ratio(y.Rate, x.Rate)})
		}
	}
	return cmp
}

// FormatRatio writes a ratio as "0.87×", or "-" when it is undefined.
func FormatRatio(r Ratio) string {
	if math.IsNaN(float64(r)) || math.IsInf(float64(r), 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", float64(r))
}

// Table writes the comparison for a terminal: the differences of the
// environments, one row per common cell with both cells' texts and the
// ratios B/A, then the cells present in one report only.
func (c *Comparison) Table(nameA, nameB string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s\nB: %s\n", nameA, nameB)
	if len(c.Env) > 0 {
		b.WriteString("environments differ:\n")
		for _, e := range c.Env {
			b.WriteString("  " + e + "\n")
		}
	}
	b.WriteString("\n")
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "kind\trate\tA\tB\tp50 B/A\tp99 B/A\tachieved B/A\t")
	for _, r := range c.Rows {
		note := ""
		switch r.Saturated {
		case "a":
			note = "  (A saturated)"
		case "b":
			note = "  (B saturated)"
		case "both":
			note = "  (both saturated)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rowLabel(RowName(r.Kind, r.Variant), r.Queues), FormatRate(r.Rate), r.A, r.B,
			FormatRatio(r.P50), FormatRatio(r.P99), FormatRatio(r.Achieved), note)
	}
	w.Flush()
	if len(c.Rows) == 0 {
		b.WriteString("no cell is in both reports\n")
	}
	if len(c.Capacity) > 0 {
		b.WriteString("\ncapacity:\n")
		for _, r := range c.Capacity {
			fmt.Fprintf(&b, "  %s: A %s, B %s, B/A %s\n", rowLabel(RowName(r.Kind, r.Variant), r.Queues), r.A, r.B, FormatRatio(r.Ratio))
		}
	}
	if len(c.OnlyA) > 0 {
		fmt.Fprintf(&b, "\nonly in A: %s\n", strings.Join(c.OnlyA, ", "))
	}
	if len(c.OnlyB) > 0 {
		fmt.Fprintf(&b, "only in B: %s\n", strings.Join(c.OnlyB, ", "))
	}
	b.WriteString("\nratios are B over A: below 1 a shorter round trip (or a lower achieved rate) in B; a saturated cell's latency is the depth of its queue.\n")
	return b.String()
}
