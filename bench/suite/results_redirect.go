package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgelink/edgelink/bench/report"
)

func (e *env) redirectSection(b *strings.Builder, dir, stem string) {
	r := &e.res
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	rps := func(x runRec) float64 { return x.rps }
	per := func(x runRec) float64 { return x.perCPU }
	p("## Redirect throughput (wrk, 10%% unknown codes)\n\n")
	for _, variant := range []string{"pinned", "unpinned"} {
		p("### %s\n\n", variant)
		t := report.Table{Header: []string{"system", "req/s", "× bare", "req per server CPU-s", "× bare", "edge ÷ this (req/CPU-s)", "server CPU (cores)", "non-3xx share", "socket errors"}, Align: "lrrrrrrrr"}
		edgePer := r.pick("redirect", variant, "edgelink-edge", per)
		for _, s := range e.servers {
			xs := r.pick("redirect", variant, s.name, rps)
			ps := r.pick("redirect", variant, s.name, per)
			cores := r.pick("redirect", variant, s.name, func(x runRec) float64 { return x.serverCPU / x.wall })
			extra := ""
			if s.extra != nil {
				extra = " + redis " + report.Summarize(r.pick("redirect", variant, s.name, func(x runRec) float64 { return x.extraCPU / x.wall })).Format("%.2f")
			}
			non := r.pick("redirect", variant, s.name, func(x runRec) float64 { return float64(x.non3xx) / x.requests })
			errs := r.pick("redirect", variant, s.name, func(x runRec) float64 { return float64(x.sockErr) })
			vs := "—"
			if s.name != "edgelink-edge" {
				vs = report.Summarize(report.Ratios(edgePer, ps)).Ratio()
			}
			t.Add(s.name, report.Summarize(xs).Format("%.0f"), e.ratioSummary("redirect", variant, s.name, rps).Ratio(),
				report.Summarize(ps).Format("%.0f"), e.ratioSummary("redirect", variant, s.name, per).Ratio(), vs,
				report.Summarize(cores).Format("%.2f")+extra, report.Summarize(non).Format("%.3f"), report.Summarize(errs).Format("%.0f"))
		}
		p("%s\n", t.Markdown())
	}
	if pr := e.ratioSummary("pairs", "pinned", "edgelink-edge", per); pr.N > 0 {
		p("### The edge against bare fasthttp, in pairs\n\n")
		p("%d more pinned wrk runs of each, back to back in pairs (the order alternating pair by pair): the edge served %s the requests per server CPU-second of bare fasthttp's constant `302` (median of the pairs' ratios, min–max). Per pair:\n\n", pr.N, pr.Ratio())
		t := report.Table{Header: []string{"pair", "edge req/s", "edge req per CPU-s", "bare req/s", "bare req per CPU-s", "edge ÷ bare"}, Align: "rrrrrr"}
		ep, bp := r.pick("pairs", "pinned", "edgelink-edge", per), r.pick("pairs", "pinned", base, per)
		er, br := r.pick("pairs", "pinned", "edgelink-edge", rps), r.pick("pairs", "pinned", base, rps)
		for i := range min(len(ep), len(bp)) {
			t.Add(fmt.Sprint(i+1), fmt.Sprintf("%.0f", er[i]), fmt.Sprintf("%.0f", ep[i]), fmt.Sprintf("%.0f", br[i]), fmt.Sprintf("%.0f", bp[i]), fmt.Sprintf("%.2f×", ep[i]/bp[i]))
		}
		p("%s\n", t.Markdown())
	}
	p("The non-3xx share should be about 0.100 (the unknown codes). wrk's connections all come from one address, so past that client's budget of 404s (a burst of 1,000, then 50/s, the edge's defaults) the edge answers its unknown codes 429 instead of 404: the same answer from memory, counted as non-3xx too. The paced runs below come from %d addresses, each within its budget; [unknown codes](#unknown-codes) has what they were answered.\n\n", e.o.conns)
	p("![throughput](%s-throughput.png)\n\n", stem)

	series := e.latencyTable(b, "latency", fmt.Sprintf("## Redirect latency (paced, %d req/s, pinned)\n\n", r.rate))
	p("![latency](%s-latency.png)\n\n", stem)
	// x is the number of nines: p50 0.3, p90 1, p99 2, p99.9 3.
	nines := []float64{math.Log10(2), 1, 2, 3}
	if err := report.LineChart(filepath.Join(dir, stem+"-latency.png"), fmt.Sprintf("Redirect latency at %d req/s (paced, pinned; median of rounds)", r.rate),
		"percentile: p50, p90 (1), p99 (2), p99.9 (3) nines", "milliseconds (log scale)", nines, series, true); err != nil {
		e.res.failures = append(e.res.failures, "latency chart: "+err.Error())
	}
	if r.halfRate > 0 {
		e.latencyTable(b, "latency-half", fmt.Sprintf("### At half the edge's peak (%d req/s, pinned; the edge's median wrk peak was %.0f req/s, and the rate is capped at 20,000)\n\n", r.halfRate, r.edgePeak))
		p("The edge's latency target is set at half its peak. On this machine the tail of every server, nginx included, comes and goes with the host: a p99 between 0.3 and 2 ms and a p99.9 of several milliseconds for the same server from run to run, so compare servers within a round, not against the target alone.\n\n")
	}
	var tp, tc []report.Series
	for _, variant := range []string{"pinned", "unpinned"} {
		var v1, v2 []float64
		for _, s := range e.servers {
			v1 = append(v1, report.Summarize(r.pick("redirect", variant, s.name, rps)).Median/1000)
			v2 = append(v2, report.Summarize(r.pick("redirect", variant, s.name, per)).Median/1000)
		}
		tp = append(tp, report.Series{Name: "req/s (k), " + variant, Values: v1})
		tc = append(tc, report.Series{Name: "req per server CPU-s (k), " + variant, Values: v2})
	}
	if err := report.BarChart(filepath.Join(dir, stem+"-throughput.png"), "Redirect throughput and efficiency (wrk, median of rounds)",
		"thousands", e.serverNames(), append(tp, tc...)); err != nil {
		e.res.failures = append(e.res.failures, "throughput chart: "+err.Error())
	}
}

func (e *env) scanSection(b *strings.Builder) {
	r := &e.res
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Scan (wrk, 90%% random codes, pinned)\n\n")
	t := report.Table{Header: []string{"system", "req/s", "× bare", "req per server CPU-s", "× bare", "authority / Redis calls per 1,000 requests", "non-3xx share"}, Align: "lrrrrrr"}
	for _, s := range e.servers {
		auth := "—"
		if s.name == "edgelink-edge" || s.name == "fasthttp+redis" {
			auth = report.Summarize(r.pick("scan", "pinned", s.name, func(x runRec) float64 { return 1000 * x.authority / x.requests })).Format("%.1f")
		}
		t.Add(s.name, report.Summarize(r.pick("scan", "pinned", s.name, func(x runRec) float64 { return x.rps })).Format("%.0f"),
			e.ratioSummary("scan", "pinned", s.name, func(x runRec) float64 { return x.rps }).Ratio(),
			report.Summarize(r.pick("scan", "pinned", s.name, func(x runRec) float64 { return x.perCPU })).Format("%.0f"),
			e.ratioSummary("scan", "pinned", s.name, func(x runRec) float64 { return x.perCPU }).Ratio(), auth,
			report.Summarize(r.pick("scan", "pinned", s.name, func(x runRec) float64 { return float64(x.non3xx) / x.requests })).Format("%.3f"))
	}
	p("%s\n", t.Markdown())
	// The edge's outcomes over the scan rounds.
	sum := map[string]float64{}
	for _, x := range r.runs {
		if x.scenario == "scan" && x.server == "edgelink-edge" {
			for k, v := range x.edge {
				sum[k] += v
			}
		}
	}
	var keys []string
	for k, v := range sum {
		if v != 0 && (strings.HasPrefix(k, "edge_requests_total") || strings.HasPrefix(k, "edge_miss_total") || strings.HasPrefix(k, "edge_authority")) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		p("The edge's own counters over all scan rounds:\n\n")
		t := report.Table{Header: []string{"counter", "count"}, Align: "lr"}
		for _, k := range keys {
			t.Add("`"+k+"`", fmt.Sprintf("%.0f", sum[k]))
		}
		p("%s\n", t.Markdown())
	}
	p("fasthttp+redis makes one Redis call per request, found or not; in a full cache-aside design each of those misses would then reach the database once per code per null-cache lifetime, which this baseline does not model. The edge answers a random code from memory when its ID lies above the allocation frontier's promised ceiling (almost every random code), and asks its authority (control, over NATS, many codes a message) only for what neither that nor its bloom hint over sealed segments settles. All of wrk's load comes from one address: past its budget of 404s the edge answers it 429.\n\n")
	e.unknownSection(b)
}

// unknownSection is what the edge answered unknown codes, from many
// addresses (the paced runs) and from one (wrk), and what they cost the
// authority.
func (e *env) unknownSection(b *strings.Builder) {
	r := &e.res
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	type row struct {
		what, scenario, tool string
	}
	rows := []row{
		{fmt.Sprintf("redirect mix (10%% unknown), paced at half the edge's peak, %d addresses", e.o.conns), "latency-half", "paced"},
		{fmt.Sprintf("scan (90%% unknown), paced, %d addresses", scanAddresses), "scan-many", "paced"},
		{"scan (90% unknown), wrk, one address", "scan", "wrk"},
	}
	t := report.Table{Header: []string{"traffic", "unknown codes", "answered 404", "429", "503", "authority round trips per 100,000 misses", "edge p99 ÷ bare", "edge ÷ bare req/CPU-s"}, Align: "lrrrrrrr"}
	for _, x := range rows {
		var unknown, by404, by429, by503, trips float64
		for _, run := range r.runs {
			if run.scenario != x.scenario || run.server != "edgelink-edge" {
				continue
			}
			trips += run.authority
			if x.tool == "paced" {
				unknown += float64(run.unknown)
				by404 += float64(run.unknownBy["404"])
				by429 += float64(run.unknownBy["429"])
				by503 += float64(run.unknownBy["503"])
				continue
			}
			// wrk does not tell the statuses apart: the edge's counters do.
			by404 += run.edge[`edge_requests_total{outcome="not_found"}`]
			by429 += run.edge[`edge_requests_total{outcome="rate_limited"}`]
			by503 += run.edge[`edge_requests_total{outcome="unavailable"}`]
			unknown = by404 + by429 + by503
		}
		if unknown == 0 {
			continue
		}
		share := func(n float64) string { return fmt.Sprintf("%.0f (%.2f%%)", n, 100*n/unknown) }
		p99 := e.ratioSummary(x.scenario, "pinned", "edgelink-edge", func(r runRec) float64 { return float64(r.p99) })
		per := e.ratioSummary(x.scenario, "pinned", "edgelink-edge", func(r runRec) float64 { return r.perCPU })
		p99s, pers := "—", "—"
		if x.tool == "paced" {
			p99s = p99.Ratio()
		}
		if per.N > 0 {
			pers = per.Ratio()
		}
		t.Add(x.what, fmt.Sprintf("%.0f", unknown), share(by404), share(by429), share(by503),
			fmt.Sprintf("%.0f", 100_000*trips/unknown), p99s, pers)
	}
	p("## Unknown codes\n\n")
	p("What the edge answered the requests for unknown codes, summed over the rounds, and its authority round trips (`edge_authority_requests_total`) per 100,000 of them. Each address of the paced runs stays within the edge's default budget of 404s; wrk's one address does not. Ratios are taken round by round against bare fasthttp in the same scenario.\n\n")
	p("%s\n", t.Markdown())
}
