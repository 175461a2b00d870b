package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// ScaleRow is one kind with one number of queues in the scaling table of
// a run with several queues (netbench --queues 1,2,4).
type ScaleRow struct {
	Kind string `json:"kind"`
	// Variant is the row's variant of the kind (see Variants), empty for
	// the kind as it is.
	Variant string `json:"variant,omitempty"`
	Queues  int    `json:"queues"`
	// Poll is how the pollers waited, "busy" or "yield": a yielding row
	// measures the scheduler too, not the fast path.
	Poll string `json:"poll"`
	// Rate is rate(N): the highest achieved rate of the kind's measured
	// cells with Queues queues, over the offered rates; AtOffered is the
	// offered rate of that cell.
	Rate      float64 `json:"rate"`
	AtOffered float64 `json:"at_offered"`
	// Limited is true when the cell of that highest rate carried less than
	// LimitShare of its offered rate: the path could not carry more, so
	// Rate is what it carries (as far as these offered rates show).
	// Otherwise the highest rate was about what was offered and Rate is
	// only a lower bound of what the path can carry.
	Limited bool `json:"limited"`
	// Efficiency is rate(N) / (N × rate(1)): 1 when N queues carry N
	// times what one carries. Undefined (null) without a row of one queue.
	Efficiency Ratio `json:"efficiency"`
	// Bound says how far Efficiency is a measure: "" when both rates are
	// (both rows Limited), ">=" when only rate(1) is (rate(N) is a lower
	// bound, so is the efficiency), "<=" when only rate(N) is, "unknown"
	// when neither is (offer higher rates).
	Bound string `json:"bound,omitempty"`
	// LatencyAt is the highest offered rate at which the row was not
	// saturated, and P50Us and P99Us the round trip there; all 0 when
	// every cell of the row was saturated.
	LatencyAt float64 `json:"latency_at"`
	P50Us     float64 `json:"p50_us"`
	P99Us     float64 `json:"p99_us"`
}

// LimitShare is the share of its offered rate below which a cell's achieved
// rate is the path's limit rather than what was offered (ScaleRow.Limited).
const LimitShare = 0.95

// ComputeScaling returns the scaling table of the report's measured cells:
// a row per kind and number of queues, in the order of the report's kinds,
// then of the queues. It is empty unless some cell ran more than one
// queue.
func (r *Report) ComputeScaling() []ScaleRow {
	several := false
	for i := range r.Cells {
		if queuesOf(r.Cells[i].Queues) > 1 {
			several = true
		}
	}
	if !several {
		return nil
	}
	var names []string // the rows' names: kinds and variants
	for _, k := range r.Kinds {
		if !slices.Contains(names, k.Name()) {
			names = append(names, k.Name())
		}
	}
	for i := range r.Cells {
		if !slices.Contains(names, r.Cells[i].Name()) {
			names = append(names, r.Cells[i].Name())
		}
	}
	var out []ScaleRow
	for _, name := range names {
		kind, variant := SplitRow(name)
		var qs []int
		for i := range r.Cells {
			c := &r.Cells[i]
			if c.Name() == name && c.measured() && !slices.Contains(qs, queuesOf(c.Queues)) {
				qs = append(qs, queuesOf(c.Queues))
			}
		}
		slices.Sort(qs)
		start := len(out)
		for _, n := range qs {
			row := ScaleRow{Kind: kind, Variant: variant, Queues: n, Poll: PollName(r.Env.Poll)}
			for i := range r.Cells {
				c := &r.Cells[i]
				if c.Name() != name || queuesOf(c.Queues) != n || !c.measured() {
					continue
				}
				if c.Poll != "" {
					row.Poll = PollName(c.Poll)
				}
				if c.AchievedRate > row.Rate {
					row.Rate, row.AtOffered = c.AchievedRate, c.Rate
				}
				if !c.Saturated && c.Rate > row.LatencyAt {
					row.LatencyAt, row.P50Us, row.P99Us = c.Rate, c.P50Us, c.P99Us
				}
			}
			row.Limited = row.Rate < LimitShare*row.AtOffered
			out = append(out, row)
		}
		one := -1
		for i := start; i < len(out); i++ {
			if out[i].Queues == 1 {
				one = i
			}
		}
		for i := start; i < len(out); i++ {
			row := &out[i]
			row.Efficiency = Ratio(math.NaN())
			if one < 0 || out[one].Rate <= 0 {
				continue
			}
			r1 := &out[one]
			row.Efficiency = Ratio(row.Rate / (float64(row.Queues) * r1.Rate))
			switch {
			case row.Limited && r1.Limited:
			case r1.Limited:
				row.Bound = ">="
			case row.Limited:
				row.Bound = "<="
			default:
				row.Bound = "unknown"
			}
		}
	}
	return out
}

// scaleTexts are a scaling row's cells as the tables write them.
func (s *ScaleRow) texts() (rate, eff, lat string) {
	if s.Limited {
		rate = FormatRate(s.Rate) + " (offered " + FormatRate(s.AtOffered) + ")"
	} else {
		rate = "≥ " + FormatRate(s.Rate) + " (offered " + FormatRate(s.AtOffered) + ": carried)"
	}
	e := float64(s.Efficiency)
	switch {
	case math.IsNaN(e) || math.IsInf(e, 0):
		eff = "-"
	case s.Bound == "unknown":
		eff = fmt.Sprintf("? (%.2f; neither row reached its limit)", e)
	case s.Bound != "":
		eff = strings.NewReplacer(">=", "≥ ", "<=", "≤ ").Replace(s.Bound) + fmt.Sprintf("%.2f", e)
	default:
		eff = fmt.Sprintf("%.2f", e)
	}
	if s.LatencyAt > 0 {
		lat = FormatUs(s.P50Us) + " / " + FormatUs(s.P99Us) + " at " + FormatRate(s.LatencyAt)
	} else {
		lat = "saturated at every rate"
	}
	return rate, eff, lat
}

// ScalingTable writes the scaling table for a terminal (empty when the
// report has none).
func (r *Report) ScalingTable() string {
	if len(r.Scaling) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("scaling: rate(N) is the highest achieved rate of N queues over the offered rates; efficiency rate(N) / (N × rate(1))\n")
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "kind\tqueues\tpoll\trate(N)\tefficiency\tp50 / p99 µs\t")
	for i := range r.Scaling {
		s := &r.Scaling[i]
		rate, eff, lat := s.texts()
		fmt.Fprintf(w, "%s\t%d\tpoll %s\t%s\t%s\t%s\t\n", RowName(s.Kind, s.Variant), s.Queues, s.Poll, rate, eff, lat)
	}
	w.Flush()
	return b.String()
}

// scalingMarkdown writes the scaling section.
func (r *Report) scalingMarkdown(b *strings.Builder) {
	if len(r.Scaling) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Scaling\n\nrate(N) is the highest achieved rate of the kind with N queues over the offered rates (the offered rate of that cell in brackets), "+
		"and efficiency is rate(N) / (N × rate(1)): 1 when N queues carry N times what one carries. A rate measures what the path carries only when that cell carried less than %.0f%% of its offered rate; "+
		"otherwise it is a lower bound (≥ … carried), and so is, or is not, the efficiency (≥, ≤, or ? when neither row reached its limit: offer higher rates). "+
		"The latency is p50 / p99 at the highest offered rate the row carried unsaturated. ", LimitShare*100)
	if slices.ContainsFunc(r.Scaling, func(s ScaleRow) bool { return s.Poll == "yield" }) {
		b.WriteString("Rows marked poll yield ran pollers that sleep when idle, sharing CPUs: they show that the queues work and carry their share, not what the fast path does.")
	}
	b.WriteString("\n\n| kind | queues | poll | rate(N) | efficiency | p50 / p99 µs |\n|---|---:|---|---|---|---|\n")
	for i := range r.Scaling {
		s := &r.Scaling[i]
		rate, eff, lat := s.texts()
		fmt.Fprintf(b, "| %s | %d | poll %s | %s | %s | %s |\n", RowName(s.Kind, s.Variant), s.Queues, s.Poll, rate, eff, lat)
	}
}
