package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/edgelink/edgelink/bench/report"
)

// geoPair is one back-to-back pair of the geo scenario.
type geoPair struct{ off, on runRec }

// ratio is the edge with country data's req per server CPU-second over the
// edge without, in the same pair.
func (p geoPair) ratio() float64 { return p.on.perCPU / p.off.perCPU }

func (p geoPair) quiet() bool {
	return p.off.otherCPU <= noisy*p.off.wall && p.on.otherCPU <= noisy*p.on.wall
}

func geoPairsOf(runs []runRec) []geoPair {
	off, on := map[int]runRec{}, map[int]runRec{}
	for _, r := range runs {
		switch r.scenario {
		case scenGeoOff:
			off[r.round] = r
		case scenGeoOn:
			on[r.round] = r
		}
	}
	var out []geoPair
	for i := 1; ; i++ {
		o, ok1 := off[i]
		n, ok2 := on[i]
		if !ok1 || !ok2 {
			return out
		}
		out = append(out, geoPair{off: o, on: n})
	}
}

// geoVerdict says whether the median keeps the statement (at least
// 1-geoTolerance), and whether the pairs spread too wide to settle it.
func geoVerdict(ratios report.Summary) string {
	if ratios.N == 0 {
		return "not measured"
	}
	v := fmt.Sprintf("below %.2f×: not kept", 1-geoTolerance)
	if ratios.Median >= 1-geoTolerance {
		v = fmt.Sprintf("at least %.2f×: kept", 1-geoTolerance)
	}
	if ratios.Min < 1-geoTolerance && ratios.Max > 1+geoTolerance {
		v += fmt.Sprintf(", but the pairs spread from %.2f to %.2f, wider than the tolerance both ways: noise this run did not average out, not conclusive", ratios.Min, ratios.Max)
	}
	return v
}

// geoSection renders the scenario's part of the results file and its
// chart, dir/stem-geo.png.
func (e *env) geoSection(gr *geoResult, dir, stem string) (string, error) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pairs := geoPairsOf(e.res.runs)
	var ratios, quietRatios []float64
	var known, unknown, clicks float64
	for _, x := range pairs {
		ratios = append(ratios, x.ratio())
		if x.quiet() {
			quietRatios = append(quietRatios, x.ratio())
		}
		known, unknown = known+x.on.edge[metricGeoKnown], unknown+x.on.edge[metricGeoMiss]
		clicks += x.on.edge[metricHits]
	}
	sum, quiet := report.Summarize(ratios), report.Summarize(quietRatios)
	date := "undated"
	if !gr.data.Generated.IsZero() {
		date = "generated " + gr.data.Generated.Format("2006-01-02")
	}
	p("The statement: req per server CPU-second with the country data loaded at least %.2f× the figure without it, 0 allocations per click.\n\n", 1-geoTolerance)
	p("Two edge processes, started for this scenario with the same flags (`--trusted-proxies 127.0.0.1`) but for `--geoip` on `%s`, fed by the run's stack until both had applied every link; the one with data loaded the IPFire Location data (%s, %d IPv4 and %d IPv6 ranges, CC BY-SA 4.0) in %.2f s. ",
		gr.on, date, gr.data.V4Ranges, gr.data.V6Ranges, gr.data.Load.Seconds())
	p("Both served the redirect scenario's sample (Zipf s=1.1, 10%% unknown codes) with wrk (1 thread, %d connections, pinned as in the redirect scenario), every request with an `X-Forwarded-For` from one of %d client addresses drawn from the data (%d IPv4 and %d IPv6 in ranges with a country, weighted by the ranges' sizes, and %d carrier-grade NAT addresses with none), so the lookups walk real ranges; the same Lua script for both. The runs alternate order pair by pair. Before timing, the first %d requests were asked of each and their status and `Location` checked.\n\n",
		e.o.conns, geoSources, gr.v4, gr.v6, gr.nowhere, gr.checked)
	p("**With ÷ without country data, req per server CPU-second: %s** (median of %d pairs, min–max), %s. Over the %d pairs where neither run had other processes above %.2f of a core: %s. Over the timed runs the edge with data looked up %.0f clicks' countries (%.0f known, %.0f unknown) for %.0f redirects. Figures measured on a shared 2-core machine while others worked: indicative.\n\n",
		sum.Ratio(), sum.N, geoVerdict(sum), quiet.N, noisy, quiet.Ratio(), known+unknown, known, unknown, clicks)
	t := report.Table{Header: []string{"pair", "first", "without: req/s", "without: req per CPU-s", "with: req/s", "with: req per CPU-s", "with ÷ without", "allocs/req without / with", "lookups per redirect", "other CPU (cores) without / with"}, Align: "rlrrrrrrrr"}
	for i, x := range pairs {
		first := "without"
		if (i+1)%2 == 0 {
			first = "with"
		}
		lookups := 0.0
		if h := x.on.edge[metricHits]; h > 0 {
			lookups = (x.on.edge[metricGeoKnown] + x.on.edge[metricGeoMiss]) / h
		}
		t.Add(fmt.Sprint(i+1), first, fmt.Sprintf("%.0f", x.off.rps), fmt.Sprintf("%.0f", x.off.perCPU), fmt.Sprintf("%.0f", x.on.rps), fmt.Sprintf("%.0f", x.on.perCPU),
			fmt.Sprintf("%.3f×", x.ratio()), fmt.Sprintf("%.3f / %.3f", perRequest(x.off, metricMallocs), perRequest(x.on, metricMallocs)),
			fmt.Sprintf("%.3f", lookups), fmt.Sprintf("%.2f / %.2f", x.off.otherCPU/x.off.wall, x.on.otherCPU/x.on.wall))
	}
	p("%s\n", t.Markdown())
	p("Allocations per request are each edge process's heap allocations over the run (`%s`) per request wrk sent, the whole process included (its click publisher, stream consumer, metrics scrapes): the difference between the two is what the lookups allocate, which `TestLookupAllocatesNothing` (edge/geo) and `TestCountriesLookupAllocatesNothing` (edge/edgeserver) assert at 0. Lookups per redirect counts the publisher's lookups over the run (`edge_geo_lookups_total`) against the redirects; the clicks of a run's last 200 ms may be published after it is read.\n\n", metricMallocs)
	if len(pairs) == 0 {
		return b.String(), nil
	}
	p("![geo](%s-geo.png)\n\n", stem)
	groups := make([]string, len(pairs))
	off, on := make([]float64, len(pairs)), make([]float64, len(pairs))
	for i, x := range pairs {
		groups[i] = fmt.Sprintf("pair %d", i+1)
		off[i], on[i] = x.off.perCPU/1000, x.on.perCPU/1000
	}
	err := report.BarChart(filepath.Join(dir, stem+"-geo.png"), fmt.Sprintf("The edge per pair, without and with country data (median with ÷ without %.2f)", sum.Median),
		"thousand requests per server CPU-second", groups,
		[]report.Series{{Name: "without country data", Values: off}, {Name: "with (IPFire Location, --geoip)", Values: on}})
	return b.String(), err
}
