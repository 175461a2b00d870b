package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The plots WritePlots draws, by file name.
const (
	PlotP50 = "rtt-p50.svg"
	PlotP99 = "rtt-p99.svg"
)

// WritePlots draws the round trip against the offered rate, one line per
// kind, on log-log axes: p50 into PlotP50 and p99 into PlotP99 in dir. The
// line joins the cells of the table's rates that kept up; the capacity's
// probes (rates between them) are drawn apart, as hollow marks off the
// line, so a probe's latency never bends the sweep. A saturated cell, or
// one whose load generator fell behind (LimitLoadgen), is not drawn: its
// latency is the depth of a queue or the sender's lag, not the path's;
// the table summarises it ("sat. <achieved>, <loss>"), and the plot's
// legend says how many were left to it. Cells with an error are left
// out. It returns the file names written.
func (r *Report) WritePlots(dir string) ([]string, error) {
	var files []string
	for _, p := range []struct {
		file, what string
		get        func(*Cell) float64
	}{
		{PlotP50, "p50", func(c *Cell) float64 { return c.P50Us }},
		{PlotP99, "p99", func(c *Cell) float64 { return c.P99Us }},
	} {
		svg, err := r.plotSVG(p.what, p.get)
		if err != nil {
			return files, fmt.Errorf("plot %s: %w", p.what, err)
		}
		if err := os.WriteFile(filepath.Join(dir, p.file), svg, 0o644); err != nil {
			return files, fmt.Errorf("plot %s: %w", p.what, err)
		}
		files = append(files, p.file)
	}
	return files, nil
}

// plotSVG draws one percentile as SVG.
func (r *Report) plotSVG(what string, get func(*Cell) float64) ([]byte, error) {
	p, err := r.plot(what, get)
	if err != nil {
		return nil, err
	}
	c := vgsvg.NewWith(vgsvg.UseWH(8*vg.Inch, 5*vg.Inch))
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// plot builds the plot of one percentile.
func (r *Report) plot(what string, get func(*Cell) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Round trip %s against offered rate (%s)", what, r.Env.Link)
	p.X.Label.Text = "offered rate, messages/s"
	p.Y.Label.Text = what + " round trip"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = rateTicks{r.Rates}
	p.Y.Tick.Marker = usTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	drawn, saturated := 0, 0
	var lo, hi float64 = math.Inf(1), 0
	for i, k := range r.Kinds {
		if k.Reason != "" {
			continue
		}
		sweep, probes, nsat, capPt := r.series(&k, get)
		saturated += nsat
		for _, pt := range append(slices.Clone(sweep), probes...) {
			lo, hi = min(lo, pt.Y), max(hi, pt.Y)
		}
		if len(sweep)+len(probes) == 0 {
			continue
		}
		drawn++
		col := plotutil.Color(i)
		var thumbs []plot.Thumbnailer
		if len(sweep) > 0 {
			line, err := plotter.NewLine(sweep)
			if err != nil {
				return nil, err
			}
			line.Color = col
			line.Width = vg.Points(1.5)
			p.Add(line)
			pts, err := plotter.NewScatter(sweep)
			if err != nil {
				return nil, err
			}
			pts.Color = col
			pts.Shape = shapes[i%len(shapes)]
			pts.Radius = vg.Points(3)
			p.Add(pts)
			thumbs = append(thumbs, line, pts)
		}
		if len(probes) > 0 {
			ps, err := plotter.NewScatter(probes)
			if err != nil {
				return nil, err
			}
			ps.Color = col
			ps.Shape = draw.RingGlyph{}
			ps.Radius = vg.Points(2.5)
			p.Add(ps)
			if len(thumbs) == 0 {
				thumbs = append(thumbs, ps)
			}
		}
		if capPt != nil {
			if err := addCapacity(p, *capPt, col); err != nil {
				return nil, err
			}
		}
		p.Legend.Add(k.Label(), thumbs...)
	}
	if drawn == 0 {
		p.Title.Text += ": no cell measured"
		p.X.Scale, p.Y.Scale = plot.LinearScale{}, plot.LinearScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.DefaultTicks{}, plot.DefaultTicks{}
	} else {
		// Room for the labels and the legend.
		p.Y.Min, p.Y.Max = lo/2, hi*4
		if len(r.Rates) > 0 {
			p.X.Min, p.X.Max = minF(r.Rates)/1.5, maxF(r.Rates)*2.5
		}
	}
	p.Legend.Add("capacity probe (off the sweep)", probeThumb{})
	if saturated > 0 {
		p.Legend.Add(fmt.Sprintf("%d saturated cells: in the table, not drawn", saturated), crossThumb{})
	}
	if len(r.Capacity) > 0 {
		p.Legend.Add("capacity (highest rate held)", capThumb{})
	}
	return p, nil
}

// series returns the points of row k that kept up, in rate order: those
// of the table's rates (the sweep) and those of the capacity's probes;
// the number of its saturated cells (left to the table), and the
// capacity's point (nil when the report has no capacity for the row, or
// its cell was not drawn).
func (r *Report) series(k *KindRow, get func(*Cell) float64) (sweep, probes plotter.XYs, saturated int, capPt *plotter.XY) {
	capRate := 0.0
	if c, found := r.CapacityOf(k.Name(), k.Queues); found {
		capRate = c.Rate
	}
	for _, rate := range r.rowRates(k) {
		c, found := r.CellAt(k.Name(), k.Queues, rate)
		if !found || !c.measured() {
			continue
		}
		y := get(c)
		if y <= 0 || math.IsNaN(y) {
			continue
		}
		if c.Saturated || c.LimitedBy == LimitLoadgen {
			saturated++
			continue
		}
		pt := plotter.XY{X: rate, Y: y}
		if rate == capRate {
			capPt = &plotter.XY{X: rate, Y: y}
		}
		if slices.Contains(r.Rates, rate) {
			sweep = append(sweep, pt)
		} else {
			probes = append(probes, pt)
		}
	}
	return sweep, probes, saturated, capPt
}

// rowRates returns the rates row k ran (the table's and the probes), in
// order.
func (r *Report) rowRates(k *KindRow) []float64 {
	var rates []float64
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Name() == k.Name() && queuesOf(c.Queues) == queuesOf(k.Queues) && !slices.Contains(rates, c.Rate) {
			rates = append(rates, c.Rate)
		}
	}
	sort.Float64s(rates)
	return rates
}

// addCapacity marks a row's capacity: a large ring around its point,
// labelled with the rate.
func addCapacity(p *plot.Plot, pt plotter.XY, col color.Color) error {
	s, err := plotter.NewScatter(plotter.XYs{pt})
	if err != nil {
		return err
	}
	s.Color, s.Shape, s.Radius = col, draw.RingGlyph{}, vg.Points(9)
	p.Add(s)
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{pt}, Labels: []string{"capacity " + FormatRate(pt.X)}})
	if err != nil {
		return err
	}
	for j := range lbl.TextStyle {
		lbl.TextStyle[j].Color = col
		lbl.TextStyle[j].Font.Size = vg.Points(8)
	}
	lbl.Offset = vg.Point{X: vg.Points(-10), Y: vg.Points(-14)}
	p.Add(lbl)
	return nil
}

// capThumb is the legend's mark of the capacity.
type capThumb struct{}

// Thumbnail implements plot.Thumbnailer.
func (capThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: draw.RingGlyph{}}, c.Center())
}

// shapes mark the points that kept up, one per kind; the cross is kept
// for saturated points.
var shapes = []draw.GlyphDrawer{draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{},
	draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}

// usTicks marks the microsecond axis at powers of ten, labelled "10 µs",
// "1 ms", "1 s".
type usTicks struct{}

// Ticks implements plot.Ticker.
func (usTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for v := math.Pow(10, math.Floor(math.Log10(lo))); v <= hi*1.0001; v *= 10 {
		t := plot.Tick{Value: v}
		switch {
		case v >= 1e6:
			t.Label = fmt.Sprintf("%g s", v/1e6)
		case v >= 1e3:
			t.Label = fmt.Sprintf("%g ms", v/1e3)
		default:
			t.Label = fmt.Sprintf("%g µs", v)
		}
		if v >= lo {
			out = append(out, t)
		}
		for m := 2.0; m < 10; m++ {
			if x := v * m; x >= lo && x <= hi {
				out = append(out, plot.Tick{Value: x})
			}
		}
	}
	return out
}

// crossThumb is the legend's mark of a saturated point.
type crossThumb struct{}

// Thumbnail implements plot.Thumbnailer.
func (crossThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: draw.CrossGlyph{}}, c.Center())
}

// probeThumb is the legend's mark of a capacity probe.
type probeThumb struct{}

// Thumbnail implements plot.Thumbnailer.
func (probeThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle{Color: color.Black, Radius: vg.Points(2.5), Shape: draw.RingGlyph{}}, c.Center())
}

// rateTicks puts a tick at each offered rate, labelled as the table does.
type rateTicks struct{ rates []float64 }

// Ticks implements plot.Ticker.
func (t rateTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, r := range t.rates {
		if r >= lo && r <= hi {
			out = append(out, plot.Tick{Value: r, Label: FormatRate(r)})
		}
	}
	return out
}

func minF(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxF(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
