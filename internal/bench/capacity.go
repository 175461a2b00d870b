package bench

import (
	"math"
	"sort"
)

// CapacityTolerance is how close the bisection brings the two rates that
// bracket a capacity: it stops once the lowest saturated rate is within
// this factor of the highest rate held.
const CapacityTolerance = 1.1

// RatePoint is one offered rate a row ran, as the capacity sees it.
type RatePoint struct {
	Rate float64
	// Held is true when the rate kept to the saturation rule (fewer than
	// MaxLoss lost and at least MinBack answered: not Saturated) with the
	// load generator keeping to its schedule (not LimitLoadgen): a rate
	// the sender could not offer did not hold, whatever came back.
	Held bool
	// LimitedBy is the saturated cell's Cell.LimitedBy.
	LimitedBy string
}

// Capacity is a row's highest sustained rate: the largest offered rate it
// ran that held (less than 0.1% lost, at least 99% answered), refined by
// bisection between the rates it ran (CapacityProbes).
type Capacity struct {
	// Kind, Variant and Queues name the row, as a Cell's.
	Kind    string `json:"kind"`
	Variant string `json:"variant,omitempty"`
	Queues  int    `json:"queues,omitempty"`
	// Rate is the largest rate that held, messages per second; 0 when
	// none did.
	Rate float64 `json:"rate"`
	// SaturatedAt is the lowest rate above Rate that was saturated (0:
	// none ran: the capacity is at least Rate); LimitedBy says which side
	// limited that cell (LimitPath, LimitLoadgen): with LimitLoadgen the
	// path's capacity is at least Rate, and the load generator is what
	// stopped the search.
	SaturatedAt float64 `json:"saturated_at,omitempty"`
	LimitedBy   string  `json:"limited_by,omitempty"`
	// Probes are the rates run by bisection, in the order they ran.
	Probes []float64 `json:"probes,omitempty"`
	// Display is the table's text: "412k", "≥ 1.6M", "< 20k", "412k
	// [loadgen]".
	Display string `json:"display"`
}

// Bracket returns, of the points of one row, the capacity (the largest
// rate that held; 0 when none did) and the lowest saturated rate above it
// with that point's LimitedBy (0 and "" when none ran).
func Bracket(pts []RatePoint) (held, sat float64, limitedBy string) {
	for _, p := range pts {
		if p.Held && p.Rate > held {
			held = p.Rate
		}
	}
	for _, p := range pts {
		if !p.Held && p.Rate > held && (sat == 0 || p.Rate < sat) {
			sat, limitedBy = p.Rate, p.LimitedBy
		}
	}
	return held, sat, limitedBy
}

// NextProbe returns the rate to run next to narrow a row's capacity, and
// false when there is none: when nothing held (no lower end), nothing
// above the capacity saturated (no upper end), or the two are within
// CapacityTolerance. The probe is the geometric middle of the two (the
// rates are on a log scale), rounded to three significant digits.
func NextProbe(pts []RatePoint) (float64, bool) {
	held, sat, _ := Bracket(pts)
	if held == 0 || sat == 0 || sat <= held*CapacityTolerance {
		return 0, false
	}
	mid := roundSig(math.Sqrt(held*sat), 3)
	if mid <= held || mid >= sat {
		return 0, false
	}
	return mid, true
}

// roundSig rounds r to n significant digits.
func roundSig(r float64, n int) float64 {
	if r <= 0 {
		return r
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(r)))
	return math.Round(r*p) / p
}

// NewCapacity returns the capacity of a row from its points.
func NewCapacity(kind, variant string, queues int, pts []RatePoint, probes []float64) Capacity {
	c := Capacity{Kind: kind, Variant: variant, Queues: queues, Probes: probes}
	c.Rate, c.SaturatedAt, c.LimitedBy = Bracket(pts)
	switch {
	case len(pts) == 0:
		c.Display = "-"
	case c.Rate == 0:
		lowest := pts[0].Rate
		for _, p := range pts {
			lowest = min(lowest, p.Rate)
		}
		c.Display = "< " + FormatRate(lowest)
	case c.SaturatedAt == 0:
		c.Display = "≥ " + FormatRate(c.Rate)
	default:
		c.Display = FormatRate(c.Rate)
	}
	if c.LimitedBy == LimitLoadgen {
		c.Display += " [loadgen]"
	}
	return c
}

// RatePoints returns the points of the row of c's name and queues among
// cells, in rate order.
func RatePoints(cells []Cell, name string, queues int) []RatePoint {
	var pts []RatePoint
	for i := range cells {
		c := &cells[i]
		if c.Name() != name || queuesOf(c.Queues) != queuesOf(queues) || !c.measured() {
			continue
		}
		pts = append(pts, RatePoint{Rate: c.Rate, Held: !c.Saturated && c.LimitedBy != LimitLoadgen, LimitedBy: c.LimitedBy})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Rate < pts[j].Rate })
	return pts
}

// ComputeCapacity fills r.Capacity: one entry per row of r.Kinds that
// measured something, from all its cells (the table's rates and the
// probes).
func (r *Report) ComputeCapacity() {
	r.Capacity = nil
	for _, k := range r.Kinds {
		if k.Reason != "" {
			continue
		}
		pts := RatePoints(r.Cells, k.Name(), k.Queues)
		if len(pts) == 0 {
			continue
		}
		var probes []float64
		for i := range r.Cells {
			c := &r.Cells[i]
			if c.Probe && c.Name() == k.Name() && queuesOf(c.Queues) == queuesOf(k.Queues) {
				probes = append(probes, c.Rate)
			}
		}
		r.Capacity = append(r.Capacity, NewCapacity(k.Kind, k.Variant, k.Queues, pts, probes))
	}
}

// CapacityOf returns the capacity of row name with queues queues, if the
// report has one.
func (r *Report) CapacityOf(name string, queues int) (*Capacity, bool) {
	for i := range r.Capacity {
		c := &r.Capacity[i]
		if RowName(c.Kind, c.Variant) == name && queuesOf(c.Queues) == queuesOf(queues) {
			return c, true
		}
	}
	return nil, false
}

// capacityText is the capacity column's text for row k.
func (r *Report) capacityText(k *KindRow) string {
	if c, ok := r.CapacityOf(k.Name(), k.Queues); ok {
		return c.Display
	}
	return "-"
}

// Reassess puts each cell's limit on a side again (and its table text),
// and computes the capacity, with the rules of this build: for a report
// read back (netbench report), perhaps made before the rules existed.
func (r *Report) Reassess() {
	for i := range r.Cells {
		c := &r.Cells[i]
		c.attribute()
		if c.measured() {
			c.Display = c.Format()
		}
	}
	r.ComputeCapacity()
}
