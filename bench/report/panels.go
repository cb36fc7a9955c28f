package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Panel is one small chart of a PanelChart: its own title, y unit and
// series over the chart's shared xs.
type Panel struct {
	Title, YLabel string
	Series        []Series
	// Floor, when set, draws a dashed horizontal line at that value (an
	// aim or a baseline); Zero makes the y axis start at 0.
	Floor float64
	Zero  bool
}

// PanelChart draws panels in one PNG (a square grid, filled row by row),
// each a line per series over xs with a log-scale x axis labelled by
// xnames (e.g. 1M, 10M, 100M): one chart for figures of different units
// that grow with the same variable. NaN values are left out.
func PanelChart(file, title string, xs []float64, xnames []string, panels []Panel) error {
	if len(panels) == 0 || len(xs) == 0 || len(xnames) != len(xs) {
		return fmt.Errorf("chart %s: %d panels, %d xs, %d x names", file, len(panels), len(xs), len(xnames))
	}
	for _, x := range xs {
		if x <= 0 {
			return fmt.Errorf("chart %s: x %v on a log scale", file, x)
		}
	}
	cols := int(math.Ceil(math.Sqrt(float64(len(panels)))))
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range grid[r] {
			p := plot.New()
			grid[r][c] = p
			i := r*cols + c
			if i >= len(panels) {
				p.HideAxes()
				continue
			}
			if err := drawPanel(p, panels[i], xs, xnames); err != nil {
				return fmt.Errorf("chart %s: %w", file, err)
			}
		}
	}
	const w, h = 4.2 * vg.Inch, 3.4 * vg.Inch
	img := vgimg.New(w*vg.Length(cols), h*vg.Length(rows)+0.4*vg.Inch)
	dc := draw.New(img)
	// The title above the grid, the panels below it.
	titleArea := draw.Crop(dc, 0, 0, h*vg.Length(rows), 0)
	ts := plot.New().Title.TextStyle
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YTop
	titleArea.FillText(ts, vg.Point{X: titleArea.Center().X, Y: titleArea.Max.Y - 0.05*vg.Inch}, title)
	body := draw.Crop(dc, 0, 0, 0, -0.4*vg.Inch)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, body)
	for r := range grid {
		for c := range grid[r] {
			grid[r][c].Draw(canvases[r][c])
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart %s: %w", file, err)
	}
	return f.Close()
}

func drawPanel(p *plot.Plot, pn Panel, xs []float64, xnames []string) error {
	p.Title.Text = pn.Title
	p.Y.Label.Text = pn.YLabel
	p.X.Scale = plot.LogScale{}
	ticks := make([]plot.Tick, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: xnames[i]}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = xs[0]/1.6, xs[len(xs)-1]*1.6
	p.Legend.Top = false // bottom right: clear of the title, and of lines that fall with x
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range pn.Series {
		pts := make(plotter.XYs, 0, len(xs))
		for j := range min(len(xs), len(s.Values)) {
			if v := s.Values[j]; !math.IsNaN(v) {
				pts = append(pts, plotter.XY{X: xs[j], Y: v})
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		if s.Name != "" {
			p.Legend.Add(s.Name, l, sc)
		}
	}
	if pn.Floor != 0 {
		f := plotter.NewFunction(func(float64) float64 { return pn.Floor })
		f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		f.Color = color.Gray{Y: 0x60}
		p.Add(f)
		p.Legend.Add("aim "+strconv.FormatFloat(pn.Floor, 'g', 3, 64), f)
		lo, hi = min(lo, pn.Floor), max(hi, pn.Floor)
	}
	if pn.Zero {
		lo = min(lo, 0)
	}
	if !math.IsInf(lo, 0) {
		pad := (hi - lo) * 0.15
		if pad == 0 {
			pad = math.Max(math.Abs(hi)*0.1, 1)
		}
		p.Y.Min, p.Y.Max = lo, hi+pad
		if !pn.Zero {
			p.Y.Min = lo - pad
		}
	}
	return nil
}
