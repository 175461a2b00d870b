package bulk

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WritePlots draws the report's Gbit/s as SVG into dir, one plot per
// question the bulk measurement answers (netbench's style: a colour and
// a mark per kind, the legend top left):
//
//   - for each wire the report ran ("gbps-veth.svg", "gbps-wire-1pct-10ms.svg"):
//     every cell (connections and direction) along x, a mark per kind at
//     its median, a whisker from its slowest to its fastest repeat;
//   - for each delay of the lossy wire where more than one loss rate ran
//     ("gbps-loss-10ms.svg"): Gbit/s against the loss rate, a line per
//     kind, number of connections and direction.
//
// A result without a measured repeat is not drawn (the table says why).
// It returns the file names written.
func (r *Report) WritePlots(dir string) ([]string, error) {
	var files []string
	write := func(name string, p *plot.Plot) error {
		c := vgsvg.NewWith(vgsvg.UseWH(8*vg.Inch, 5*vg.Inch))
		p.Draw(draw.New(c))
		var b bytes.Buffer
		if _, err := c.WriteTo(&b); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		files = append(files, name)
		return nil
	}
	for _, w := range r.wires() {
		p, err := r.cellPlot(w)
		if err != nil {
			return files, err
		}
		if err := write("gbps-"+fileWord(w.String())+".svg", p); err != nil {
			return files, err
		}
	}
	for _, d := range r.lossDelays() {
		p, err := r.lossPlot(d)
		if err != nil {
			return files, err
		}
		if err := write("gbps-loss-"+fileWord(d.String())+".svg", p); err != nil {
			return files, err
		}
	}
	return files, nil
}

// fileWord makes s a file name's word: "wire 1% 10ms" is "wire-1pct-10ms".
func fileWord(s string) string {
	return strings.NewReplacer("%", "pct", " ", "-", "/", "-").Replace(s)
}

// wires is the report's wires in the order they first ran.
func (r *Report) wires() []Wire {
	var out []Wire
	for _, res := range r.Results {
		if !slices.Contains(out, res.Wire) {
			out = append(out, res.Wire)
		}
	}
	return out
}

// lossDelays is the lossy wire's delays at which more than one loss rate
// ran, in order.
func (r *Report) lossDelays() []time.Duration {
	losses := map[time.Duration][]float64{}
	var order []time.Duration
	for _, res := range r.Results {
		w := res.Wire
		if !w.Lossy {
			continue
		}
		if _, ok := losses[w.Delay]; !ok {
			order = append(order, w.Delay)
		}
		if !slices.Contains(losses[w.Delay], w.Loss) {
			losses[w.Delay] = append(losses[w.Delay], w.Loss)
		}
	}
	var out []time.Duration
	for _, d := range order {
		if len(losses[d]) > 1 {
			out = append(out, d)
		}
	}
	return out
}

// cellName is a cell's label on x: "1 conn up", "16 conns both".
func cellName(conns int, dir Dir) string {
	if conns == 1 {
		return "1 conn " + string(dir)
	}
	return strconv.Itoa(conns) + " conns " + string(dir)
}

// errPoints are marks with whiskers (plotter.YErrorer).
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// cellPlot is one wire's plot: the cells along x, a mark per kind.
func (r *Report) cellPlot(w Wire) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Bulk goodput on " + w.String() + " (median of the repeats, whiskers min–max)"
	p.Y.Label.Text = "Gbit/s (both directions summed)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	var cells []string
	var rows []string
	for _, res := range r.Results {
		if res.Wire != w {
			continue
		}
		if c := cellName(res.Conns, res.Dir); !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
		if !slices.Contains(rows, res.Row) {
			rows = append(rows, res.Row)
		}
	}
	hi := 0.0
	for i, row := range rows {
		var pts errPoints
		for _, res := range r.Results {
			if res.Wire != w || res.Row != row || res.Measured == 0 {
				continue
			}
			// The kinds side by side around each cell's place.
			x := float64(slices.Index(cells, cellName(res.Conns, res.Dir))) + (float64(i)-float64(len(rows)-1)/2)*0.6/float64(len(rows))
			pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: res.Gbps})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{res.Gbps - res.MinGbps, res.MaxGbps - res.Gbps})
			hi = max(hi, res.MaxGbps)
		}
		if len(pts.XYs) == 0 {
			continue
		}
		col := plotutil.Color(i)
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.Color, s.Shape, s.Radius = col, plotShapes[i%len(plotShapes)], vg.Points(4)
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return nil, err
		}
		eb.Color = col
		p.Add(s, eb)
		p.Legend.Add(row, s)
	}
	p.X.Min, p.X.Max = -0.6, float64(len(cells))-0.4
	p.X.Tick.Marker = cellTicks(cells)
	p.Y.Min, p.Y.Max = 0, max(hi*1.3, 0.1)
	if hi == 0 {
		p.Title.Text += ": no cell measured"
	}
	return p, nil
}

// cellTicks labels x's whole numbers with the cells.
type cellTicks []string

// Ticks implements plot.Ticker.
func (t cellTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for i, c := range t {
		if x := float64(i); x >= lo && x <= hi {
			out = append(out, plot.Tick{Value: x, Label: c})
		}
	}
	return out
}

// lossPlot is Gbit/s against the loss rate at one delay of the lossy
// wire: a line per kind, number of connections and direction.
func (r *Report) lossPlot(d time.Duration) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Bulk goodput against loss, lossy wire, %v one way (medians)", d)
	p.X.Label.Text = "loss rate each way"
	p.Y.Label.Text = "Gbit/s (both directions summed)"
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	type key struct {
		row   string
		conns int
		dir   Dir
	}
	var order []key
	lines := map[key]plotter.XYs{}
	var losses []float64
	for _, res := range r.Results {
		if !res.Wire.Lossy || res.Wire.Delay != d || res.Measured == 0 {
			continue
		}
		k := key{res.Row, res.Conns, res.Dir}
		if _, ok := lines[k]; !ok {
			order = append(order, k)
		}
		lines[k] = append(lines[k], plotter.XY{X: res.Wire.Loss * 100, Y: res.Gbps})
		if !slices.Contains(losses, res.Wire.Loss) {
			losses = append(losses, res.Wire.Loss)
		}
	}
	rows := []string{}
	for _, k := range order {
		if !slices.Contains(rows, k.row) {
			rows = append(rows, k.row)
		}
	}
	hi := 0.0
	for j, k := range order {
		pts := lines[k]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		for _, pt := range pts {
			hi = max(hi, pt.Y)
		}
		i := slices.Index(rows, k.row)
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(j % 4)
		s.Shape, s.Radius = plotShapes[i%len(plotShapes)], vg.Points(3)
		p.Add(l, s)
		p.Legend.Add(k.row+", "+cellName(k.conns, k.dir), l, s)
	}
	slices.Sort(losses)
	var ticks lossTicks
	for _, l := range losses {
		ticks = append(ticks, l*100)
	}
	p.X.Tick.Marker = ticks
	if len(ticks) > 0 {
		p.X.Min, p.X.Max = ticks[0]-0.1*(ticks[len(ticks)-1]-ticks[0]+1), ticks[len(ticks)-1]*1.1+0.1
	}
	p.Y.Min, p.Y.Max = 0, max(hi*1.2, 0.1)
	return p, nil
}

// lossTicks marks the loss rates that ran (in percent).
type lossTicks []float64

// Ticks implements plot.Ticker.
func (t lossTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range t {
		if v >= lo && v <= hi {
			out = append(out, plot.Tick{Value: v, Label: FormatLoss(v / 100)})
		}
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b || math.IsNaN(a):
		return -1
	case a > b:
		return 1
	}
	return 0
}

// plotShapes mark the kinds, one each.
var plotShapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}
