package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/edgelink/edgelink/bench/report"
)

// budgetMS is issue 21's bound on a console page's server time.
const budgetMS = 100

// results are the run's measurements: samples[tenant][page].
type results struct {
	tenants                 []*tenant
	samples                 [][]sample
	command, commit         string
	postgres                string
	took                    time.Duration
	links, baseline, rounds int
}

// percentile is the p-th percentile of xs (nearest rank).
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(v float64) string { return fmt.Sprintf("%.1f", v) }

// table is the per-page Markdown table: server time at both sizes, the
// ratio of the medians, the client's median and the rows a page showed.
func (r *results) table() string {
	t := report.Table{
		Header: []string{"page", fmt.Sprintf("%s links: p50 ms", count(r.links)), "p95", "max", "client p50",
			fmt.Sprintf("%s links: p50 ms", count(r.baseline)), "p95", "max", "ratio of p50s", "rows"},
		Align: "lrrrrrrrrr",
	}
	for p, pg := range r.tenants[0].pages {
		big, small := r.samples[0][p], r.samples[1][p]
		max := func(xs []float64) float64 { return slices.Max(xs) }
		flag := ""
		if percentile(big.server, 0.95) >= budgetMS {
			flag = " (over 100 ms)"
		}
		t.Add(pg.name, ms(percentile(big.server, 0.5)), ms(percentile(big.server, 0.95))+flag, ms(max(big.server)),
			ms(percentile(big.client, 0.5)),
			ms(percentile(small.server, 0.5)), ms(percentile(small.server, 0.95)), ms(max(small.server)),
			fmt.Sprintf("%.2f×", percentile(big.server, 0.5)/percentile(small.server, 0.5)),
			fmt.Sprintf("%d", big.rows))
	}
	return t.Markdown()
}

func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// write writes the results file and its chart into dir and returns the
// file's path.
func (r *results) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(dir, time.Now().UTC().Format("2006-01-02")+"-"+r.commit+"-console")
	var groups []string
	series := []report.Series{{Name: count(r.links) + " links, p50"}, {Name: count(r.links) + " links, p95"}, {Name: count(r.baseline) + " links, p50"}}
	worst, worstPage := 0.0, ""
	for p, pg := range r.tenants[0].pages {
		groups = append(groups, pg.name)
		big, small := r.samples[0][p], r.samples[1][p]
		series[0].Values = append(series[0].Values, percentile(big.server, 0.5))
		series[1].Values = append(series[1].Values, percentile(big.server, 0.95))
		series[2].Values = append(series[2].Values, percentile(small.server, 0.5))
		if v := percentile(big.server, 0.95); v > worst {
			worst, worstPage = v, pg.name
		}
	}
	if err := report.BarChart(base+".png", "Console pages: server time (Server-Timing)", "ms", groups, series); err != nil {
		return "", err
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Console pages at %s links: server time\n\n", count(r.links))
	p("Commit %s, %s. %d cores (runtime.NumCPU), PostgreSQL %s, shared with other engineers' work: figures are indicative. The run took %s.\n\n",
		r.commit, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), r.postgres, r.took.Round(time.Second))
	p("```\n%s\n```\n\n", r.command)
	p("Two tenants in one database: %s links, and %s links as the baseline. Each was loaded through the batch API "+
		"(bench/dataset targets, 80%% on the platform's domain and 20%% on two of the tenant's own, 10%% custom codes, 60%% titles, "+
		"tags, 6%% expiries), then 2%% disabled and 0.5%% deleted through the API, 1%% expired, creation times spread over a year, "+
		"and the hottest 2%% given 30 days of clicks in the rollups. A signed-in session asked every page %d times per tenant "+
		"(after 2 rounds not kept), the tenants and pages alternating.\n\n", count(r.links), count(r.baseline), r.rounds)
	p("Server time is the console's `Server-Timing: console;dur=…` header: from the request's arrival in the console's handler "+
		"to its header, so the session read, every query and the rendering, not the network. *client p50* is this client's "+
		"whole request on loopback. The ratio divides the %s-link tenant's p50 by the baseline's: what a hundred times more "+
		"links costs each page.\n\n", count(r.links))
	p("%s\n", r.table())
	p("The slowest page's p95 at %s links: %s ms (%s); the bound is %d ms.\n\n", count(r.links), ms(worst), worstPage, budgetMS)
	p("![server time per page](%s)\n", filepath.Base(base+".png"))
	if err := os.WriteFile(base+".md", []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return base + ".md", nil
}
