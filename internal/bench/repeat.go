package bench

import (
	"fmt"
	"sort"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Repeat summarizes one repeat of a cell.
type Repeat struct {
	// N is the repeat's number, from 1.
	N            int     `json:"n"`
	P50Us        float64 `json:"p50_us"`
	P99Us        float64 `json:"p99_us"`
	AchievedRate float64 `json:"achieved_rate"`
	LossPct      float64 `json:"loss_pct"`
	Saturated    bool    `json:"saturated"`
	Unaccounted  int64   `json:"unaccounted"`
	Display      string  `json:"display"`
	Error        string  `json:"error,omitempty"`
}

// Spread is the range over the repeats that measured something.
type Spread struct {
	P50MinUs    float64 `json:"p50_min_us"`
	P50MaxUs    float64 `json:"p50_max_us"`
	P99MinUs    float64 `json:"p99_min_us"`
	P99MaxUs    float64 `json:"p99_max_us"`
	AchievedMin float64 `json:"achieved_min"`
	AchievedMax float64 `json:"achieved_max"`
	// SaturatedIn and Unaccounted count the measured repeats that were
	// saturated and whose counters did not add up; Measured of OfRepeats
	// measured something.
	SaturatedIn int `json:"saturated_in"`
	Unaccounted int `json:"unaccounted_in"`
	Measured    int `json:"measured"`
	OfRepeats   int `json:"of_repeats"`
}

// summary returns c as a Repeat numbered n.
func (c *Cell) summary(n int) Repeat {
	return Repeat{N: n, P50Us: c.P50Us, P99Us: c.P99Us, AchievedRate: c.AchievedRate, LossPct: c.LossPct,
		Saturated: c.Saturated, Unaccounted: c.Unaccounted, Display: c.Display, Error: c.Error}
}

// measured reports whether c holds a measurement (not only an error).
func (c *Cell) measured() bool { return !(c.Error != "" && c.Sent == 0) }

// MergeRepeats combines the repeats of one kind at one rate, in the order
// they ran, into the cell the report shows: the median of each latency
// percentile, of the sender's lag and of the achieved rate over the
// repeats that measured something; the sums of the counts, the counters
// and the conservation (so unaccounted messages of any repeat show);
// saturated when more than half of those repeats were; the RTT histograms
// merged; each repeat's summary in Repeats and the range in Spread. One
// repeat comes back as it is, with its summary added.
func MergeRepeats(runs []Cell) Cell {
	if len(runs) == 0 {
		return Cell{}
	}
	var good []int
	for i := range runs {
		if runs[i].measured() {
			good = append(good, i)
		}
	}
	if len(runs) == 1 || len(good) == 0 {
		c := runs[0]
		c.Repeats = nil
		for i := range runs {
			c.Repeats = append(c.Repeats, runs[i].summary(i+1))
		}
		c.Spread = spread(runs, good)
		if len(runs) > 1 {
			c.Notes = append(c.Notes, fmt.Sprintf("no repeat of %d measured anything", len(runs)))
		}
		c.Display = c.Format()
		return c
	}

	first := runs[good[0]]
	c := Cell{
		Kind: first.Kind, Variant: first.Variant, Mode: first.Mode, EchoMode: first.EchoMode, Queues: first.Queues, Poll: first.Poll, Rate: first.Rate, Probe: first.Probe,
		Counters: map[string]uint64{}, Conservation: Conservation{ByLayer: map[string]uint64{}},
	}
	med := func(get func(*Cell) float64) float64 {
		v := make([]float64, 0, len(good))
		for _, i := range good {
			v = append(v, get(&runs[i]))
		}
		return Median(v)
	}
	c.P50Us = med(func(x *Cell) float64 { return x.P50Us })
	c.P99Us = med(func(x *Cell) float64 { return x.P99Us })
	c.P999Us = med(func(x *Cell) float64 { return x.P999Us })
	c.MeanUs = med(func(x *Cell) float64 { return x.MeanUs })
	c.LagP50Us = med(func(x *Cell) float64 { return x.LagP50Us })
	c.LagP99Us = med(func(x *Cell) float64 { return x.LagP99Us })
	c.LagMaxUs = med(func(x *Cell) float64 { return x.LagMaxUs })
	c.AchievedRate = med(func(x *Cell) float64 { return x.AchievedRate })
	merged, sat, loss := c.sum(runs, good)
	for i := range runs {
		for _, n := range runs[i].Notes {
			c.Notes = append(c.Notes, fmt.Sprintf("repeat %d: %s", i+1, n))
		}
		if !runs[i].measured() {
			c.Notes = append(c.Notes, fmt.Sprintf("repeat %d: error: %s", i+1, runs[i].Error))
		}
		c.Repeats = append(c.Repeats, runs[i].summary(i+1))
	}
	c.PerQueue = mergeQueueCells(runs, good)
	for k := range loss {
		c.LossKeys = append(c.LossKeys, k)
	}
	sort.Strings(c.LossKeys)
	if merged != nil {
		if b, err := merged.Encode(hdr.V2CompressedEncodingCookieBase); err == nil {
			c.RTTHdr = b
		}
	}
	c.Unaccounted = c.Conservation.Unaccounted
	if c.Sent > 0 && c.Received <= c.Sent {
		c.LossPct = float64(c.Sent-c.Received) / float64(c.Sent) * 100
	}
	c.Saturated = sat*2 > len(good)
	c.Spread = spread(runs, good)
	c.attribute()
	c.Display = c.Format()
	return c
}

// sum adds the counts, counters and conservation of the repeats good of
// runs into c, and returns their RTT histograms merged, how many were
// saturated and the loss keys of any.
func (c *Cell) sum(runs []Cell, good []int) (merged *hdr.Histogram, sat int, loss map[string]bool) {
	loss = map[string]bool{}
	for _, i := range good {
		r := &runs[i]
		c.MaxUs = max(c.MaxUs, r.MaxUs)
		c.Offered += r.Offered
		c.Sent += r.Sent
		c.Received += r.Received
		c.Lost += r.Lost
		c.NotSent += r.NotSent
		c.Late += r.Late
		if r.Saturated {
			sat++
		}
		for k, v := range r.Counters {
			c.Counters[k] += v
		}
		if len(r.Host) > 0 && c.Host == nil {
			c.Host = map[string]uint64{}
		}
		for k, v := range r.Host {
			c.Host[k] += v
		}
		cs := &r.Conservation
		c.Conservation.Sent += cs.Sent
		c.Conservation.Received += cs.Received
		c.Conservation.Counted += cs.Counted
		c.Conservation.InFlight += cs.InFlight
		c.Conservation.Unaccounted += cs.Unaccounted
		for k, v := range cs.ByLayer {
			c.Conservation.ByLayer[k] += v
		}
		for _, k := range r.LossKeys {
			loss[k] = true
		}
		if r.Mode != c.Mode || r.EchoMode != c.EchoMode {
			c.Notes = append(c.Notes, fmt.Sprintf("repeat %d ran in another mode: %q / %q", i+1, r.Mode, r.EchoMode))
		}
		if h, err := hdr.Decode(r.RTTHdr); err == nil && len(r.RTTHdr) > 0 {
			if merged == nil {
				merged = h
			} else {
				merged.Merge(h)
			}
		}
	}
	return merged, sat, loss
}

// mergeQueueCells merges the per-queue shares of the repeats good as
// MergeRepeats merges the cells: counts and counters summed, latencies
// the median over the repeats.
func mergeQueueCells(runs []Cell, good []int) []QueueCell {
	n := 0
	for _, i := range good {
		n = max(n, len(runs[i].PerQueue))
	}
	if n == 0 {
		return nil
	}
	out := make([]QueueCell, n)
	for q := range out {
		m := &out[q]
		m.Queue, m.Counters = q, map[string]uint64{}
		var p50, p99 []float64
		for _, i := range good {
			if q >= len(runs[i].PerQueue) {
				continue
			}
			r := &runs[i].PerQueue[q]
			m.add(r)
			p50, p99 = append(p50, r.P50Us), append(p99, r.P99Us)
		}
		m.P50Us, m.P99Us = Median(p50), Median(p99)
	}
	return out
}

// spread computes the range over the repeats good.
func spread(runs []Cell, good []int) *Spread {
	s := &Spread{OfRepeats: len(runs), Measured: len(good)}
	for j, i := range good {
		r := &runs[i]
		if j == 0 {
			s.P50MinUs, s.P50MaxUs = r.P50Us, r.P50Us
			s.P99MinUs, s.P99MaxUs = r.P99Us, r.P99Us
			s.AchievedMin, s.AchievedMax = r.AchievedRate, r.AchievedRate
		}
		s.P50MinUs, s.P50MaxUs = min(s.P50MinUs, r.P50Us), max(s.P50MaxUs, r.P50Us)
		s.P99MinUs, s.P99MaxUs = min(s.P99MinUs, r.P99Us), max(s.P99MaxUs, r.P99Us)
		s.AchievedMin, s.AchievedMax = min(s.AchievedMin, r.AchievedRate), max(s.AchievedMax, r.AchievedRate)
		if r.Saturated {
			s.SaturatedIn++
		}
		if r.Unaccounted != 0 {
			s.Unaccounted++
		}
	}
	return s
}

// Median returns the median of v (the mean of the two middle values when
// there is an even number), 0 for none. v is reordered.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// RotateKinds returns kinds rotated left by n: the order of the kinds in
// repeat n, so that no kind always runs first (right after the test hosts
// were made, or right after the heaviest kind).
func RotateKinds(kinds []string, n int) []string {
	if len(kinds) == 0 {
		return nil
	}
	n %= len(kinds)
	return append(append([]string{}, kinds[n:]...), kinds[:n]...)
}
