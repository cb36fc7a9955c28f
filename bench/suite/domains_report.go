package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/edgelink/edgelink/bench/report"
)

// domainPair is one back-to-back pair of the domains scenario.
type domainPair struct {
	single, mixed runRec
}

// ratio is the mixed-host mix's req per server CPU-second over the
// single-domain mix's, in the same pair.
func (p domainPair) ratio() float64 { return p.mixed.perCPU / p.single.perCPU }

// domainPairs are the scenario's pairs, by round number.
func domainPairsOf(runs []runRec) []domainPair {
	single, mixed := map[int]runRec{}, map[int]runRec{}
	for _, r := range runs {
		switch r.scenario {
		case scenDomainSingle:
			single[r.round] = r
		case scenDomainMixed:
			mixed[r.round] = r
		}
	}
	var out []domainPair
	for i := 1; ; i++ {
		s, ok1 := single[i]
		m, ok2 := mixed[i]
		if !ok1 || !ok2 {
			return out
		}
		out = append(out, domainPair{single: s, mixed: m})
	}
}

// quiet is whether neither run of the pair had other processes above the
// noise threshold (the runs the noise table flags).
func (p domainPair) quiet() bool {
	return p.single.otherCPU <= noisy*p.single.wall && p.mixed.otherCPU <= noisy*p.mixed.wall
}

// snapshotShare is the share of r's hits the edge answered from its
// snapshot rather than its overlay of applied changes.
func snapshotShare(r runRec) float64 {
	snap, over := r.edge[metricSnapHits], r.edge[metricOverlayHits]
	if snap+over == 0 {
		return 0
	}
	return snap / (snap + over)
}

// perRequest is a counter's change over a run per request the run sent.
func perRequest(r runRec, metric string) float64 {
	if r.requests == 0 {
		return 0
	}
	return r.edge[metric] / r.requests
}

// domainsVerdict says whether the pairs' median ratio keeps the statement
// (within domainsTolerance of the single-domain figure), and whether the
// pairs agree closely enough for the median to settle it: pairs spread
// wider than the tolerance on either side of 1 say the machine's noise,
// not the edge's cost, is what this run measured.
func domainsVerdict(ratios report.Summary) string {
	if ratios.N == 0 {
		return "not measured"
	}
	v := fmt.Sprintf("more than %.0f%% below: not kept", 100*domainsTolerance)
	if ratios.Median >= 1-domainsTolerance {
		v = fmt.Sprintf("within %.0f%%: kept", 100*domainsTolerance)
	}
	if ratios.Min < 1-domainsTolerance && ratios.Max > 1+domainsTolerance {
		v += fmt.Sprintf(", but the pairs spread from %.2f to %.2f, wider than the tolerance both ways: noise this run did not average out, not conclusive", ratios.Min, ratios.Max)
	}
	return v
}

// scanVerdict says whether the scan's authority round trips per code asked
// stay under the miss path's bound.
func scanVerdict(trips, codes float64) string {
	if codes == 0 {
		return "not measured"
	}
	if trips/codes < scanTripBound {
		return fmt.Sprintf("under %.0f%%: kept", 100*scanTripBound)
	}
	return fmt.Sprintf("not under %.0f%%: not kept", 100*scanTripBound)
}

// domainsSection renders the scenario's part of the results file and its
// chart, dir/stem-domains.png.
func (e *env) domainsSection(dr *domainsResult, dir, stem string) (string, error) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pairs := domainPairsOf(e.res.runs)
	var ratios []float64
	for _, x := range pairs {
		ratios = append(ratios, x.ratio())
	}
	sum := report.Summarize(ratios)
	var quietRatios []float64
	for _, x := range pairs {
		if x.quiet() {
			quietRatios = append(quietRatios, x.ratio())
		}
	}
	quiet := report.Summarize(quietRatios)
	p("The statement: with mixed Host headers, req per server CPU-second within %.0f%% of the single-domain figure, 0 allocations per hit; authority round trips for random codes on an FF1 domain under %.0f%% of the codes asked.\n\n", 100*domainsTolerance, 100*scanTripBound)
	p("%d FF1 domains (`%s` … `%s`) were created for the benchmark's tenant through `POST /api/v1/domains` (control with `--code-keys` and `--domain-key`, the edge with the same key file), and %d links spread over them round robin through the batch API (items with `\"domain\"`) in %.1f s, then waited for on the edge. ",
		len(dr.hosts), dr.hosts[0], dr.hosts[len(dr.hosts)-1], dr.links, dr.loadTook.Seconds())
	p("The same edge process then served two wrk mixes (1 thread, %d connections, pinned as in the redirect scenario), in back-to-back pairs whose order alternates: the single-domain mix is the redirect scenario's sample on the platform's host (`%s`); the mixed-host mix has the same shape (Zipf s=1.1 over as many links, 10%% random unknown codes) over the domains' links, each request with its link's host (an unknown code's host drawn among the %d). Both Lua scripts set `Host` per request the same way (`wrk.format(nil, path, {Host = host})`), so wrk's own cost is the same. Before timing, the first %d requests of each were asked with their Host and status and `Location` checked (%d refused 429/503, none wrong).\n\n",
		e.o.conns, dr.platformHost, len(dr.hosts), min(dr.singleChecked, dr.mixedChecked), dr.refusedChecked)
	p("**Mixed-host ÷ single-domain req per server CPU-second: %s** (median of %d pairs, min–max), %s. Over the %d pairs where neither run had other processes above %.2f of a core: %s. Figures measured on a shared 2-core machine while others worked: indicative.\n\n", sum.Ratio(), sum.N, domainsVerdict(sum), quiet.N, noisy, quiet.Ratio())
	t := report.Table{Header: []string{"pair", "first", "single req/s", "single req per CPU-s", "mixed req/s", "mixed req per CPU-s", "mixed ÷ single", "allocs/req single / mixed", "authority round trips per 1,000 req single / mixed", "hits from the snapshot single / mixed", "other CPU (cores) single / mixed"}, Align: "rlrrrrrrrrr"}
	for i, x := range pairs {
		first := "single"
		if (i+1)%2 == 0 {
			first = "mixed"
		}
		t.Add(fmt.Sprint(i+1), first, fmt.Sprintf("%.0f", x.single.rps), fmt.Sprintf("%.0f", x.single.perCPU), fmt.Sprintf("%.0f", x.mixed.rps), fmt.Sprintf("%.0f", x.mixed.perCPU),
			fmt.Sprintf("%.3f×", x.ratio()), fmt.Sprintf("%.3f / %.3f", perRequest(x.single, metricMallocs), perRequest(x.mixed, metricMallocs)),
			fmt.Sprintf("%.2f / %.2f", 1000*perRequest(x.single, metricTrips), 1000*perRequest(x.mixed, metricTrips)),
			fmt.Sprintf("%.2f / %.2f", snapshotShare(x.single), snapshotShare(x.mixed)),
			fmt.Sprintf("%.2f / %.2f", x.single.otherCPU/x.single.wall, x.mixed.otherCPU/x.mixed.wall))
	}
	p("%s\n", t.Markdown())
	p("Allocations per request are the edge process's heap allocations over the run (`%s`, read before and after) per request wrk sent: the whole process, its click publishing, stream consumer and the two metrics scrapes included, so an upper bound on the hit path's own, which the edge's benchmarks assert at 0 (edge/redirect, `BenchmarkDomainsByHost` in edge/store). The two mixes' difference is what mixed hosts add. The snapshot's share of hits says which layer answered: the overlay of applied changes holds links the last snapshot the edge loaded did not.\n\n", metricMallocs)
	p("![domains](%s-domains.png)\n\n", stem)

	var trips, asked, codes float64
	st := report.Table{Header: []string{"round", "req/s", "codes asked (requests)", "authority round trips", "codes asked of the authority", "round trips per code", "answered 404", "answered 429"}, Align: "rrrrrrrr"}
	for _, r := range e.res.runs {
		if r.scenario != scenDomainScan {
			continue
		}
		trips, asked, codes = trips+r.edge[metricTrips], asked+r.edge[metricAsked], codes+r.requests
		st.Add(fmt.Sprint(r.round), fmt.Sprintf("%.0f", r.rps), fmt.Sprintf("%.0f", r.requests), fmt.Sprintf("%.0f", r.edge[metricTrips]), fmt.Sprintf("%.0f", r.edge[metricAsked]),
			fmt.Sprintf("%.5f", perRequest(r, metricTrips)), fmt.Sprintf("%.0f", r.edge[`edge_requests_total{outcome="not_found"}`]), fmt.Sprintf("%.0f", r.edge[`edge_requests_total{outcome="rate_limited"}`]))
	}
	if codes > 0 {
		p("### Scan of an FF1 domain\n\n")
		p("wrk (pinned, one address) sent random 6-character codes, none a link, with `Host: %s`: the edge decodes each under the domain's key to a local ID and rules it out from memory when that ID is above the allocation frontier's promise, asking its authority only otherwise. Its counters (`%s`, `%s`) over the rounds: **%.0f authority round trips for %.0f codes asked, %.4f%% (bound: under %.0f%%), %s**; %.0f codes asked of the authority (a round trip also renews the frontier's promise when due, so there can be more round trips than codes asked). The edge resolves a miss before charging the client's budget of 404s, so the 429s past that budget went through the miss path too.\n\n",
			dr.hosts[0], metricTrips, metricAsked, trips, codes, 100*trips/codes, 100*scanTripBound, scanVerdict(trips, codes), asked)
		p("%s\n", st.Markdown())
	}

	groups := make([]string, len(pairs))
	single, mixed := make([]float64, len(pairs)), make([]float64, len(pairs))
	for i, x := range pairs {
		groups[i] = fmt.Sprintf("pair %d", i+1)
		single[i], mixed[i] = x.single.perCPU/1000, x.mixed.perCPU/1000
	}
	if len(pairs) == 0 {
		return b.String(), nil
	}
	err := report.BarChart(filepath.Join(dir, stem+"-domains.png"), fmt.Sprintf("The edge per pair, one host and %d hosts (median mixed ÷ single %.2f)", len(dr.hosts), sum.Median),
		"thousand requests per server CPU-second", groups,
		[]report.Series{{Name: "single domain (platform host)", Values: single}, {Name: fmt.Sprintf("mixed hosts (%d FF1 domains)", len(dr.hosts)), Values: mixed}})
	return b.String(), err
}
