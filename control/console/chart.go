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
	chartBottom  = 24 // room for the first and last day
	chartTop     = 8
	chartPadding = 1 // between bars, so adjacent days stay apart
)

// dailyChart draws days as a bar chart of stacked human and bot clicks,
// as SVG markup to put in the page: no script, so it reads the same with
// JavaScript off. Its <title> and <desc> say what it shows and its total;
// the page's table beside it holds every number, and that table is what a
// screen reader reads (the chart is an image of it). Every text is escaped
// here, since the markup is trusted by html/template once returned.
func dailyChart(id, title string, days []dayRow) template.HTML {
	var peak, human, bot int64
	for _, d := range days {
		peak = max(peak, d.Human+d.Bot)
		human += d.Human
		bot += d.Bot
	}
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title %s-desc" xmlns="http://www.w3.org/2000/svg">`,
		chartWidth, chartHeight, esc(id), esc(id))
	fmt.Fprintf(&b, `<title id="%s-title">%s</title>`, esc(id), esc(title))
	desc := fmt.Sprintf("%d human and %d bot clicks over %d days", human, bot, len(days))
	if len(days) > 0 {
		desc += fmt.Sprintf(", %s to %s; the busiest day had %d", days[0].Date, days[len(days)-1].Date, peak)
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
	if n := len(days); n > 0 {
		slot := float64(plotW) / float64(n)
		w := max(slot-chartPadding, 1)
		for i, d := range days {
			x := float64(chartLeft) + float64(i)*slot
			hh, bh := barHeight(d.Human, peak, plotH), barHeight(d.Bot, peak, plotH)
			// Humans at the bottom, bots stacked on them; each bar names
			// its day and numbers for a pointer's tooltip.
			fmt.Fprintf(&b, `<g><title>%s: %d human, %d bot</title>`, esc(d.Date), d.Human, d.Bot)
			if hh > 0 {
				fmt.Fprintf(&b, `<rect class="human" x="%s" y="%s" width="%s" height="%s"></rect>`, num(x), num(float64(base)-hh), num(w), num(hh))
			}
			if bh > 0 {
				fmt.Fprintf(&b, `<rect class="bot" x="%s" y="%s" width="%s" height="%s"></rect>`, num(x), num(float64(base)-hh-bh), num(w), num(bh))
			}
			b.WriteString(`</g>`)
		}
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">%s</text>`, chartLeft, chartHeight-6, esc(days[0].Date))
		if n > 1 {
			fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, chartWidth, chartHeight-6, esc(days[n-1].Date))
		}
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
