package console

import (
	"encoding/xml"
	"strings"
	"testing"
)

// svgDoc is what the tests read back from a chart: it must be
// well-formed XML, so a label that broke out of its text would fail here.
type svgDoc struct {
	Title string `xml:"title"`
	Desc  string `xml:"desc"`
	Bars  []struct {
		Title string `xml:"title"`
		Rects []struct {
			Class  string  `xml:"class,attr"`
			Height float64 `xml:"height,attr"`
		} `xml:"rect"`
	} `xml:"g"`
	Labels []string `xml:"text"`
}

func parseChart(t *testing.T, svg string) svgDoc {
	t.Helper()
	var d svgDoc
	if err := xml.Unmarshal([]byte(svg), &d); err != nil {
		t.Fatalf("chart is not well-formed: %v\n%s", err, svg)
	}
	return d
}

func TestDailyChart(t *testing.T) {
	days := []dayRow{{"2030-01-08", 10, 2}, {"2030-01-09", 0, 0}, {"2030-01-10", 3, 0}}
	d := parseChart(t, string(dailyChart("daily", `clicks of <b>"x"</b>`, days)))
	if d.Title != `clicks of <b>"x"</b>` {
		t.Errorf("title %q: the markup in it should be text", d.Title)
	}
	if !strings.HasPrefix(d.Desc, "13 human and 2 bot clicks over 3 days, 2030-01-08 to 2030-01-10; the busiest day had 12") {
		t.Errorf("desc %q", d.Desc)
	}
	if len(d.Bars) != 3 {
		t.Fatalf("%d bars; want one per day", len(d.Bars))
	}
	// The busiest day fills the plot; the others are to scale.
	plot := float64(chartHeight - chartTop - chartBottom)
	first := d.Bars[0].Rects
	if len(first) != 2 || first[0].Class != "human" || first[1].Class != "bot" || first[0].Height+first[1].Height != plot {
		t.Errorf("first day's bars %+v; want human and bot filling %v", first, plot)
	}
	if len(d.Bars[1].Rects) != 0 || d.Bars[1].Title != "2030-01-09: 0 human, 0 bot" {
		t.Errorf("an empty day draws %+v", d.Bars[1])
	}
	if r := d.Bars[2].Rects; len(r) != 1 || r[0].Height != plot*3/12 {
		t.Errorf("third day %+v; want one human bar a quarter high", r)
	}
	if strings.Join(d.Labels, ",") != "12,0,2030-01-08,2030-01-10" {
		t.Errorf("axis labels %q", d.Labels)
	}
}

func TestDailyChartWithoutClicks(t *testing.T) {
	d := parseChart(t, string(dailyChart("daily", "none", []dayRow{{"2030-01-08", 0, 0}})))
	if len(d.Bars) != 1 || len(d.Bars[0].Rects) != 0 || !strings.HasPrefix(d.Desc, "0 human and 0 bot clicks over 1 days") {
		t.Errorf("chart of no clicks: %+v", d)
	}
	d = parseChart(t, string(dailyChart("daily", "none", nil)))
	if len(d.Bars) != 0 || d.Desc != "0 human and 0 bot clicks over 0 days." {
		t.Errorf("chart of no days: %+v", d)
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
