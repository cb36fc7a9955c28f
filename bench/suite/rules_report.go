package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/edgelink/edgelink/bench/report"
)

// rulesPair is one back-to-back pair of one of the scenario's comparisons:
// base is the baseline run (the edge before, or plain links), x the other.
type rulesPair struct{ base, x runRec }

// ratio is x's req per server CPU-second over base's.
func (p rulesPair) ratio() float64 { return p.x.perCPU / p.base.perCPU }

func (p rulesPair) quiet() bool {
	return p.base.otherCPU <= noisy*p.base.wall && p.x.otherCPU <= noisy*p.x.wall
}

// rulesPairsOf pairs the runs of scenarios base and x by round.
func rulesPairsOf(runs []runRec, base, x string) []rulesPair {
	b, o := map[int]runRec{}, map[int]runRec{}
	for _, r := range runs {
		switch r.scenario {
		case base:
			b[r.round] = r
		case x:
			o[r.round] = r
		}
	}
	var out []rulesPair
	for i := 1; ; i++ {
		p, ok1 := b[i]
		q, ok2 := o[i]
		if !ok1 || !ok2 {
			return out
		}
		out = append(out, rulesPair{base: p, x: q})
	}
}

// sameVerdict says whether the median after ÷ before ratio is within the
// tolerance of 1 both ways, and whether the pairs spread too wide to
// settle it.
func sameVerdict(s report.Summary) string {
	if s.N == 0 {
		return "not measured"
	}
	v := fmt.Sprintf("outside %.2f–%.2f×: not kept", 1-rulesSameTolerance, 1+rulesSameTolerance)
	if s.Median >= 1-rulesSameTolerance && s.Median <= 1+rulesSameTolerance {
		v = fmt.Sprintf("within %.2f–%.2f×: kept", 1-rulesSameTolerance, 1+rulesSameTolerance)
	}
	if s.Min < 1-rulesSameTolerance && s.Max > 1+rulesSameTolerance {
		v += fmt.Sprintf(", but the pairs spread from %.2f to %.2f, wider than the tolerance both ways: noise this run did not average out, not conclusive", s.Min, s.Max)
	}
	return v
}

// costVerdict says whether a rule hit's median cost (plain ÷ rules req
// per CPU-second) is below rulesBound.
func costVerdict(s report.Summary) string {
	if s.N == 0 {
		return "not measured"
	}
	if s.Median < rulesBound {
		v := fmt.Sprintf("below %.1f×: kept", rulesBound)
		if s.Max >= rulesBound {
			v += fmt.Sprintf(" (the dearest pair %.2f×)", s.Max)
		}
		return v
	}
	return fmt.Sprintf("at least %.1f×: not kept", rulesBound)
}

// rulesSection renders the scenario's part of the results file and its
// chart, dir/stem-rules.png.
func (e *env) rulesSection(rr *rulesResult, dir, stem string) (string, error) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	ba := rulesPairsOf(e.res.runs, scenRulesBefore, scenRulesAfter)
	pr := rulesPairsOf(e.res.runs, scenRulesPlain, scenRulesThree)
	summarize := func(pairs []rulesPair, f func(rulesPair) float64) (all, quiet report.Summary) {
		var a, q []float64
		for _, x := range pairs {
			a = append(a, f(x))
			if x.quiet() {
				q = append(q, f(x))
			}
		}
		return report.Summarize(a), report.Summarize(q)
	}
	baAll, baQuiet := summarize(ba, rulesPair.ratio)
	cost := func(x rulesPair) float64 { return 1 / x.ratio() } // plain ÷ rules: what a rule hit costs
	prAll, prQuiet := summarize(pr, cost)
	var ruleHits, ruleDefaults, redirects float64
	for _, x := range pr {
		ruleHits += x.x.edge[`edge_rule_redirects_total{outcome="rule"}`]
		ruleDefaults += x.x.edge[`edge_rule_redirects_total{outcome="default"}`]
		redirects += x.x.edge[metricHits]
	}
	p("The statements: links without rules keep 0 allocations per hit and the same req per server CPU-second (within %.0f%%) as before the edge evaluated rules; a link with 3 rules costs less than %.1f× a plain hit per server CPU-second.\n\n", 100*rulesSameTolerance, rulesBound)
	p("Two edge processes, started for this scenario with the same flags (`--trusted-proxies 127.0.0.1 --geoip` on the run's IPFire data) and fed by the run's stack until both had applied every link: `%s` built from `%s` (`git archive %s`, the commit before the edge evaluated rules) and `%s` from this tree. %d plain links and %d links with 3 rules (iOS, Android, and the countries %s) were created through the batch API for it. Every request carries a browser's User-Agent (45%% iPhone, 30%% Android, 25%% Windows or macOS: the desktops pass both device rules and have their country looked up) and an `X-Forwarded-For` from %d public addresses, a quarter of them in the listed countries. Before timing, the first %d requests of each sample were asked and their status and `Location` checked (a rule link's by its rule). Runs are wrk (1 thread, %d connections) pinned as in the redirect scenario, in back-to-back pairs whose order alternates.\n\n",
		rr.before, rr.baseline, rr.baselineRev, rr.after, rr.plain, rr.ruled, strings.Join(ruleCountries, ", "), geoSources, rr.checked, e.o.conns)
	p("**Plain links, after ÷ before, req per server CPU-second: %s** (median of %d pairs, min–max), %s; over the %d quiet pairs: %s. The redirect scenario's sample (Zipf s=1.1 over the run's links, 10%% unknown codes) on both edges.\n\n",
		baAll.Ratio(), baAll.N, sameVerdict(baAll), baQuiet.N, baQuiet.Ratio())
	p("**A link with 3 rules, plain ÷ rules req per server CPU-second (what a rule hit costs against a plain one): %s** (median of %d pairs), %s; over the %d quiet pairs: %s. Zipf s=1.1 over the %d plain links, and the same over the %d rule links, on the edge of this tree, from the same clients in the same order; of the rule links' %.0f redirects, %.0f went to a rule's target and %.0f to the link's own.\n\n",
		prAll.Ratio(), prAll.N, costVerdict(prAll), prQuiet.N, prQuiet.Ratio(), rr.plain, rr.ruled, redirects, ruleHits, ruleDefaults)
	p("Figures measured on a shared 2-core machine while others worked: indicative. Allocations per request are each edge process's heap allocations over the run (`%s`) per request wrk sent, the whole process included (click publisher, stream consumer, metrics scrapes): an upper bound on the hit path's, which `TestPlainAndRuleHitsDoNotAllocate` and `TestHitDoesNotAllocate` (edge/redirect) assert at 0.\n\n", metricMallocs)
	t := report.Table{Header: []string{"pair", "before: req per CPU-s", "after: req per CPU-s", "after ÷ before", "allocs/req before / after", "plain: req per CPU-s", "rules: req per CPU-s", "plain ÷ rules", "allocs/req plain / rules", "other CPU (cores)"}, Align: "rrrrrrrrrr"}
	for i := range max(len(ba), len(pr)) {
		row := []string{fmt.Sprint(i + 1), "", "", "", "", "", "", "", "", ""}
		other := 0.0
		if i < len(ba) {
			x := ba[i]
			row[1], row[2], row[3] = fmt.Sprintf("%.0f", x.base.perCPU), fmt.Sprintf("%.0f", x.x.perCPU), fmt.Sprintf("%.3f×", x.ratio())
			row[4] = fmt.Sprintf("%.3f / %.3f", perRequest(x.base, metricMallocs), perRequest(x.x, metricMallocs))
			other = max(other, x.base.otherCPU/x.base.wall, x.x.otherCPU/x.x.wall)
		}
		if i < len(pr) {
			x := pr[i]
			row[5], row[6], row[7] = fmt.Sprintf("%.0f", x.base.perCPU), fmt.Sprintf("%.0f", x.x.perCPU), fmt.Sprintf("%.3f×", cost(x))
			row[8] = fmt.Sprintf("%.3f / %.3f", perRequest(x.base, metricMallocs), perRequest(x.x, metricMallocs))
			other = max(other, x.base.otherCPU/x.base.wall, x.x.otherCPU/x.x.wall)
		}
		row[9] = fmt.Sprintf("%.2f", other)
		t.Add(row...)
	}
	p("%s\n", t.Markdown())
	for _, x := range rr.profiles {
		if x.prof.err != nil {
			p("The edge's CPU profile of the %s sample failed: %v\n\n", x.sample, x.prof.err)
			continue
		}
		p("<details><summary>The edge after's CPU profile over an untimed run of the %s sample (%.0f req per server CPU-second with the profiler on): <code>%s</code></summary>\n\n```\n%s\n```\n</details>\n\n",
			x.sample, x.perCPU, filepath.Base(x.prof.file), x.prof.top)
	}
	if len(ba) == 0 && len(pr) == 0 {
		return b.String(), nil
	}
	p("![rules](%s-rules.png)\n\n", stem)
	n := max(len(ba), len(pr))
	groups := make([]string, n)
	series := [4][]float64{}
	for i := range n {
		groups[i] = fmt.Sprintf("pair %d", i+1)
		for s := range series {
			series[s] = append(series[s], 0)
		}
		if i < len(ba) {
			series[0][i], series[1][i] = ba[i].base.perCPU/1000, ba[i].x.perCPU/1000
		}
		if i < len(pr) {
			series[2][i], series[3][i] = pr[i].base.perCPU/1000, pr[i].x.perCPU/1000
		}
	}
	err := report.BarChart(filepath.Join(dir, stem+"-rules.png"),
		fmt.Sprintf("Plain links before and after (median %.2f), and a link with 3 rules (costs %.2f× a plain hit)", baAll.Median, prAll.Median),
		"thousand requests per server CPU-second", groups, []report.Series{
			{Name: "plain, before (" + rr.baseline + ")", Values: series[0]}, {Name: "plain, after", Values: series[1]},
			{Name: "10,000 plain links", Values: series[2]}, {Name: "10,000 links with 3 rules", Values: series[3]}})
	return b.String(), err
}
