package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
)

// Chart geometry, in the SVG's own units: the browser scales the whole
// drawing to the page's width (console.css), so no size here is pixels.
const (
	chartWidth   = 720
	chartHeight  = 240
	chartLeft    = 48 // room for the y axis' labels
	chartBottom  = 24 // room for the first and last bucket
	chartTop     = 8
	chartPadding = 1 // between bars, so adjacent buckets stay apart
)

// seriesChart draws a series' buckets (days or hours) as a bar chart of
// stacked human and bot clicks, with the unique visitors of the buckets
// that have them as a line on the same scale, as SVG markup to put in the
// page: no script, so it reads the same with JavaScript off. An
// approximate bucket's bars are drawn apart (class approx). Its <title>
// and <desc> say what it shows and its totals; the page's table beside it
// holds every number, and that table is what a screen reader reads (the
// chart is an image of it). Every text is escaped here, since the markup
// is trusted by html/template once returned.
func seriesChart(id, title string, rows []bucketRow) template.HTML {
	var peak, human, bot int64
	approx := 0
	for _, d := range rows {
		peak = max(peak, d.Human+d.Bot)
		human += d.Human
		bot += d.Bot
		if d.Approximate {
			approx++
		}
	}
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title %s-desc" xmlns="http://www.w3.org/2000/svg">`,
		chartWidth, chartHeight, esc(id), esc(id))
	fmt.Fprintf(&b, `<title id="%s-title">%s</title>`, esc(id), esc(title))
	desc := fmt.Sprintf("%d human and %d bot clicks over %d buckets", human, bot, len(rows))
	if len(rows) > 0 {
		desc += fmt.Sprintf(", %s to %s; the busiest had %d", rows[0].Label, rows[len(rows)-1].Label, peak)
	}
	if approx > 0 {
		desc += fmt.Sprintf("; %d approximate", approx)
	}
	fmt.Fprintf(&b, `<desc id="%s-desc">%s.</desc>`, esc(id), esc(desc))
	plotH := chartHeight - chartTop - chartBottom
	plotW := chartWidth - chartLeft
	base := chartTop + plotH
	// The axis: a baseline and the peak's value at the top, so the
	// bars' heights read as numbers.
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"></line>`, chartLeft, base, chartWidth, base)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%d</text>`, chartLeft-6, chartTop+10, peak)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">0</text>`, chartLeft-6, base)
	n := len(rows)
	if n == 0 {
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	slot := float64(plotW) / float64(n)
	w := max(slot-chartPadding, 0.5)
	var line []string // the visitors' points of the current run of buckets that have them
	var lines []string
	for i, d := range rows {
		x := float64(chartLeft) + float64(i)*slot
		hh, bh := barHeight(d.Human, peak, plotH), barHeight(d.Bot, peak, plotH)
		// Humans at the bottom, bots stacked on them; each bar names its
		// bucket and numbers for a pointer's tooltip.
		class := ""
		if d.Approximate {
			class = ` class="approx"`
		}
		tip := fmt.Sprintf("%s: %d human, %d bot", d.Label, d.Human, d.Bot)
		if d.Visitors != "" {
			tip += ", " + d.Visitors + " unique visitors"
		}
		if d.Approximate {
			tip += " (approximate: " + d.Counted + ")"
		}
		fmt.Fprintf(&b, `<g%s><title>%s</title>`, class, esc(tip))
		if hh > 0 {
			fmt.Fprintf(&b, `<rect class="human" x="%s" y="%s" width="%s" height="%s"></rect>`, num(x), num(float64(base)-hh), num(w), num(hh))
		}
		if bh > 0 {
			fmt.Fprintf(&b, `<rect class="bot" x="%s" y="%s" width="%s" height="%s"></rect>`, num(x), num(float64(base)-hh-bh), num(w), num(bh))
		}
		b.WriteString(`</g>`)
		if v, err := strconv.ParseInt(d.Visitors, 10, 64); err == nil {
			line = append(line, num(x+w/2)+","+num(float64(base)-barHeight(v, peak, plotH)))
		} else if len(line) > 0 {
			lines, line = append(lines, strings.Join(line, " ")), nil
		}
	}
	if len(line) > 0 {
		lines = append(lines, strings.Join(line, " "))
	}
	for _, pts := range lines {
		if !strings.Contains(pts, " ") {
			// One bucket alone: a dot, which a polyline of one point is not.
			xy := strings.Split(pts, ",")
			fmt.Fprintf(&b, `<circle class="visitors" cx="%s" cy="%s" r="2.5"></circle>`, xy[0], xy[1])
			continue
		}
		fmt.Fprintf(&b, `<polyline class="visitors" points="%s"></polyline>`, pts)
	}
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">%s</text>`, chartLeft, chartHeight-6, esc(rows[0].Label))
	if n > 1 {
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, chartWidth, chartHeight-6, esc(rows[n-1].Label))
	}
	b.WriteString(`</svg>`)
	// Trusted markup: every text in it was escaped above.
	return template.HTML(b.String())
}

// barHeight is v's share of the plot's height, peak taking all of it.
func barHeight(v, peak int64, plotH int) float64 {
	if v <= 0 || peak <= 0 {
		return 0
	}
	return float64(v) / float64(peak) * float64(plotH)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// barPercent is v's share of peak as a whole percent, for a table's bar;
// a value above zero always shows at least 1.
func barPercent(v, peak int64) int {
	if v <= 0 || peak <= 0 {
		return 0
	}
	return max(int(v*100/peak), 1)
}
