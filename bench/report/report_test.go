package report

import (
	"image"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Summary
	}{
		{[]float64{3, 1, 2}, Summary{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, Summary{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{[]float64{5, math.NaN()}, Summary{Median: 5, Min: 5, Max: 5, N: 1}},
	} {
		if got := Summarize(c.in); got != c.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if got := Summarize(nil).Ratio(); got != "n/a" {
		t.Errorf("empty summary renders %q, want n/a", got)
	}
	if got, want := Summarize(Ratios([]float64{2, 3, 8}, []float64{4, 3, 4})).Ratio(), "1.00× (0.50–2.00)"; got != want {
		t.Errorf("ratio summary = %q, want %q", got, want)
	}
}

func TestTableMarkdown(t *testing.T) {
	tb := Table{Header: []string{"system", "req/s"}, Align: "lr"}
	tb.Add("edge", "1234")
	tb.Add("a|b", "5")
	want := "" +
		"| system | req/s |\n" +
		"| ------ | ----: |\n" +
		"| edge   |  1234 |\n" +
		"| a\\|b   |     5 |\n"
	if got := tb.Markdown(); got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
}

func TestChartsWritePNG(t *testing.T) {
	dir := t.TempDir()
	bar := filepath.Join(dir, "bar.png")
	if err := BarChart(bar, "t", "y", []string{"a", "b"}, []Series{{Name: "s", Values: []float64{1, math.NaN()}, Low: []float64{0.5, 0}, High: []float64{1.5, 0}}}); err != nil {
		t.Fatal(err)
	}
	line := filepath.Join(dir, "line.png")
	if err := LineChart(line, "t", "x", "y", []float64{0.3, 1, 2}, []Series{{Name: "s", Values: []float64{0.2, 0, 9}}}, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{bar, line} {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
			t.Errorf("%s is not a PNG (err %v)", f, err)
		}
	}
}

func TestPanelChart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "panels.png")
	xs, names := []float64{1e6, 1e7, 1e8}, []string{"1M", "10M", "100M"}
	panels := []Panel{
		{Title: "ready", YLabel: "ms", Series: []Series{{Name: "snapshot", Values: []float64{20, 250, 800}}}, Zero: true},
		{Title: "RSS per link", YLabel: "B", Series: []Series{{Values: []float64{74, 74, math.NaN()}}}, Floor: 90},
		{Title: "hits per CPU-second", YLabel: "M", Series: []Series{{Name: "zipf", Values: []float64{1.7, 1.2, 0.8}}, {Name: "uniform", Values: []float64{1.1, 0.9, 0.7}}}},
		{Title: "budgeted hit ratio", YLabel: "share", Series: []Series{{Values: []float64{math.NaN(), math.NaN(), math.NaN()}}}},
	}
	if err := PanelChart(file, "cost by links", xs, names, panels); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil || format != "png" || cfg.Width <= cfg.Height || cfg.Width > 2*cfg.Height {
		t.Fatalf("chart: %v %s %dx%d, want a PNG of two rows of two panels", err, format, cfg.Width, cfg.Height)
	}
	if err := PanelChart(file, "bad", []float64{0, 1}, []string{"0", "1"}, panels); err == nil {
		t.Fatal("a zero x on a log scale was accepted")
	}
	if err := PanelChart(file, "bad", xs, names[:2], panels); err == nil {
		t.Fatal("x names that do not match the xs were accepted")
	}
}

// TestBarPlotLeavesRoomForTheLegend: the y axis reaches above the tallest
// bar, so the legend at the top does not cover it.
func TestBarPlotLeavesRoomForTheLegend(t *testing.T) {
	p, err := barPlot("t", "y", []string{"a", "b"}, []Series{{Name: "s1", Values: []float64{10, 40}}, {Name: "s2", Values: []float64{30, 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 40 * (1 + legendRoom); p.Y.Max < want {
		t.Errorf("y axis up to %v, want at least %v above the tallest bar (40)", p.Y.Max, want)
	}
}
