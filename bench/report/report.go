// Package report summarizes benchmark rounds (median, min, max), renders
// Markdown tables and draws the PNG charts of a results file.
package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Summary is the median, min and max of a figure over rounds.
type Summary struct {
	Median, Min, Max float64
	N                int
}

// Summarize returns the summary of xs; NaNs are ignored. The median of an
// even count is the mean of the middle two.
func Summarize(xs []float64) Summary {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Summary{Median: med, Min: v[0], Max: v[len(v)-1], N: len(v)}
}

// Ratios divides xs by base round by round (the same round's baseline), so
// the ratio's spread is not the product of two spreads.
func Ratios(xs, base []float64) []float64 {
	out := make([]float64, min(len(xs), len(base)))
	for i := range out {
		out[i] = xs[i] / base[i]
	}
	return out
}

// Format renders a summary as "median (min–max)" with format f for each.
func (s Summary) Format(f string) string {
	if math.IsNaN(s.Median) {
		return "n/a"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf(f, s.Median)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.Median, s.Min, s.Max)
}

// Ratio renders a ratio summary: "0.83× (0.80–0.85)".
func (s Summary) Ratio() string {
	if math.IsNaN(s.Median) {
		return "n/a"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf("%.2f×", s.Median)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Median, s.Min, s.Max)
}

// Table is a Markdown table.
type Table struct {
	Header []string
	Rows   [][]string
	// Align per column: 'l' or 'r'; missing columns are left-aligned.
	Align string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Markdown renders the table with padded columns. Pipes in cells are
// escaped.
func (t *Table) Markdown() string {
	n := len(t.Header)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	cell := func(r []string, i int) string {
		if i < len(r) {
			return strings.ReplaceAll(r[i], "|", `\|`)
		}
		return ""
	}
	width := make([]int, n)
	for i := range n {
		width[i] = max(3, len([]rune(cell(t.Header, i))))
		for _, r := range t.Rows {
			width[i] = max(width[i], len([]rune(cell(r, i))))
		}
	}
	right := func(i int) bool { return i < len(t.Align) && t.Align[i] == 'r' }
	var b strings.Builder
	line := func(r []string) {
		b.WriteByte('|')
		for i := range n {
			c := cell(r, i)
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if right(i) {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		b.WriteByte('\n')
	}
	line(t.Header)
	b.WriteByte('|')
	for i := range n {
		if right(i) {
			b.WriteString(" " + strings.Repeat("-", width[i]-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
		}
	}
	b.WriteByte('\n')
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}
