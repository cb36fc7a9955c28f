package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one system's values for a grouped bar chart.
type Series struct {
	Name   string
	Values []float64 // one per group
	Low    []float64 // optional min per group (error bars)
	High   []float64 // optional max per group
}

// BarChart draws grouped bars (one group per label, one bar per series)
// with min–max error bars where given and there is one series, and saves
// it as a PNG.
func BarChart(file, title, ylabel string, groups []string, series []Series) error {
	p, err := barPlot(title, ylabel, groups, series)
	if err != nil {
		return fmt.Errorf("chart %s: %w", file, err)
	}
	return p.Save(vg.Length(max(6, 1.6*float64(len(groups)))+2)*vg.Inch, 4.5*vg.Inch, file)
}

// legendRoom is the headroom above the tallest bar, as a share of it: the
// legend sits at the top and would otherwise cover the tallest bars.
const legendRoom = 0.2

func barPlot(title, ylabel string, groups []string, series []Series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	w := vg.Points(float64(min(18, 90/max(1, len(series)))))
	for i, s := range series {
		vals := make(plotter.Values, len(s.Values))
		for i, v := range s.Values {
			if !math.IsNaN(v) {
				vals[i] = v
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
		// Error bars only for a single series: plotter.YErrorBars has no
		// offset to follow a grouped bar.
		if len(series) == 1 && len(s.Low) == len(s.Values) && len(s.High) == len(s.Values) {
			pts := make(errPoints, len(s.Values))
			for g := range s.Values {
				pts[g] = errPoint{x: float64(g), y: vals[g], lo: vals[g] - s.Low[g], hi: s.High[g] - vals[g]}
				if math.IsNaN(s.Values[g]) || math.IsNaN(s.Low[g]) || math.IsNaN(s.High[g]) {
					pts[g].lo, pts[g].hi = 0, 0
				}
			}
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, err
			}
			eb.LineStyle.Color = color.Black
			p.Add(eb)
		}
	}
	p.NominalX(groups...)
	if p.Y.Max > 0 {
		p.Y.Max *= 1 + legendRoom
	}
	return p, nil
}

// LineChart draws one line per series over xs and saves it as a PNG.
// Non-positive values are left out on a log scale.
func LineChart(file, title, xlabel, ylabel string, xs []float64, series []Series, logY bool) error {
	p := plot.New()
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, s := range series {
		pts := make(plotter.XYs, 0, len(xs))
		for i := range min(len(xs), len(s.Values)) {
			if math.IsNaN(s.Values[i]) || logY && s.Values[i] <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: xs[i], Y: s.Values[i]})
		}
		args = append(args, s.Name, pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}

type errPoint struct{ x, y, lo, hi float64 }
type errPoints []errPoint

func (e errPoints) Len() int                        { return len(e) }
func (e errPoints) XY(i int) (float64, float64)     { return e[i].x, e[i].y }
func (e errPoints) YError(i int) (float64, float64) { return e[i].lo, e[i].hi }
func (e errPoints) XError(i int) (float64, float64) { return 0, 0 }
