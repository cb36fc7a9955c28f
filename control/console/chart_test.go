package console

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"
)

// svgDoc is what the tests read back from a chart: it must be
// well-formed XML, so a label that broke out of its text would fail here.
type svgDoc struct {
	Title string `xml:"title"`
	Desc  string `xml:"desc"`
	Bars  []struct {
		Class string `xml:"class,attr"`
		Title string `xml:"title"`
		Rects []struct {
			Class  string  `xml:"class,attr"`
			Height float64 `xml:"height,attr"`
		} `xml:"rect"`
	} `xml:"g"`
	Labels []string `xml:"text"`
	Lines  []struct {
		Points string `xml:"points,attr"`
	} `xml:"polyline"`
	Dots []struct{} `xml:"circle"`
}

func parseChart(t *testing.T, svg string) svgDoc {
	t.Helper()
	var d svgDoc
	if err := xml.Unmarshal([]byte(svg), &d); err != nil {
		t.Fatalf("chart is not well-formed: %v\n%s", err, svg)
	}
	return d
}

func TestSeriesChart(t *testing.T) {
	days := []bucketRow{{Label: "2030-01-08", Human: 10, Bot: 2, Visitors: "7"}, {Label: "2030-01-09", Visitors: "0"},
		{Label: "2030-01-10", Human: 3, Approximate: true, Counted: "2030-01-10 00:00 to 2030-01-11 00:00 UTC"}}
	svg := string(seriesChart("series", `clicks of <b>"x"</b>`, days))
	d := parseChart(t, svg)
	if d.Title != `clicks of <b>"x"</b>` {
		t.Errorf("title %q: the markup in it should be text", d.Title)
	}
	if d.Desc != "13 human and 2 bot clicks over 3 buckets, 2030-01-08 to 2030-01-10; the busiest had 12; 1 approximate." {
		t.Errorf("desc %q", d.Desc)
	}
	if len(d.Bars) != 3 {
		t.Fatalf("%d bars; want one per bucket", len(d.Bars))
	}
	// The busiest bucket fills the plot; the others are to scale.
	plot := float64(chartHeight - chartTop - chartBottom)
	first := d.Bars[0].Rects
	if len(first) != 2 || first[0].Class != "human" || first[1].Class != "bot" || first[0].Height+first[1].Height != plot {
		t.Errorf("first bucket's bars %+v; want human and bot filling %v", first, plot)
	}
	if len(d.Bars[1].Rects) != 0 || d.Bars[1].Title != "2030-01-09: 0 human, 0 bot, 0 unique visitors" {
		t.Errorf("an empty bucket draws %+v", d.Bars[1])
	}
	if r := d.Bars[2].Rects; len(r) != 1 || r[0].Height != plot*3/12 || d.Bars[2].Class != "approx" ||
		d.Bars[2].Title != "2030-01-10: 3 human, 0 bot (approximate: 2030-01-10 00:00 to 2030-01-11 00:00 UTC)" {
		t.Errorf("third bucket %+v; want one human bar a quarter high, approximate", d.Bars[2])
	}
	if strings.Join(d.Labels, ",") != "12,0,2030-01-08,2030-01-10" {
		t.Errorf("axis labels %q", d.Labels)
	}
	// The visitors: one line over the two buckets that have them.
	if len(d.Lines) != 1 || strings.Count(d.Lines[0].Points, ",") != 2 {
		t.Errorf("visitors' lines %+v; want one of two points", d.Lines)
	}
}

func TestSeriesChartWithoutClicks(t *testing.T) {
	d := parseChart(t, string(seriesChart("series", "none", []bucketRow{{Label: "2030-01-08"}})))
	if len(d.Bars) != 1 || len(d.Bars[0].Rects) != 0 || !strings.HasPrefix(d.Desc, "0 human and 0 bot clicks over 1 buckets") {
		t.Errorf("chart of no clicks: %+v", d)
	}
	d = parseChart(t, string(seriesChart("series", "none", nil)))
	if len(d.Bars) != 0 || d.Desc != "0 human and 0 bot clicks over 0 buckets." {
		t.Errorf("chart of no buckets: %+v", d)
	}
}

// TestSeriesChartOfHours: a month of hours draws a bar for each, and a
// visitor dot for a lone bucket that has them.
func TestSeriesChartOfHours(t *testing.T) {
	rows := make([]bucketRow, 744)
	for i := range rows {
		rows[i] = bucketRow{Label: fmt.Sprint(i), Human: int64(i % 5)}
	}
	rows[10].Visitors = "1"
	d := parseChart(t, string(seriesChart("series", "hours", rows)))
	if len(d.Bars) != 744 || len(d.Dots) != 1 || len(d.Lines) != 0 {
		t.Errorf("%d bars, %d dots, %d lines; want 744, 1, 0", len(d.Bars), len(d.Dots), len(d.Lines))
	}
}

func TestBarPercent(t *testing.T) {
	for _, c := range []struct {
		v, peak int64
		want    int
	}{{0, 0, 0}, {0, 10, 0}, {10, 10, 100}, {5, 10, 50}, {1, 1000, 1}, {999, 1000, 99}} {
		if got := barPercent(c.v, c.peak); got != c.want {
			t.Errorf("barPercent(%d, %d) = %d; want %d", c.v, c.peak, got, c.want)
		}
	}
}

func TestCSVSafe(t *testing.T) {
	for in, want := range map[string]string{
		"=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx", "\rx": "'\rx",
		"t.co": "t.co", "": "", "a=b": "a=b",
	} {
		if got := csvSafe(in); got != want {
			t.Errorf("csvSafe(%q) = %q; want %q", in, got, want)
		}
	}
}
