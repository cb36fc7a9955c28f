package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/shared/base62"
)

// bloomFigures is the budgeted snapshot's bloom as read from the file (its
// bits, probes, bytes and a false-positive rate measured on codes that are
// no link) and the same parameters computed for larger counts.
type bloomFigures struct {
	n           uint
	bits, k     uint
	bytes       int
	tested, fps int
	sized       []bloomSize
}

type bloomSize struct {
	n       float64
	bits, k uint
	fp      float64
}

// measureBloom decodes data (the snapshot's bloom section) and tests it on
// a million random codes beyond the links' IDs.
func measureBloom(data []byte, n int, seed uint64) (bloomFigures, error) {
	f := new(bloom.BloomFilter)
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		return bloomFigures{}, fmt.Errorf("bloom section: %w", err)
	}
	b := bloomFigures{n: uint(n), bits: f.Cap(), k: f.K(), bytes: len(data), tested: 1_000_000}
	r := rand.New(rand.NewPCG(seed, 0xf9))
	for i := 0; i < b.tested; {
		c := dataset.RandomCode(r)
		if id, err := base62.Digits([]byte(c)); err != nil || id <= uint64(n) {
			continue
		}
		i++
		if f.TestString(c) {
			b.fps++
		}
	}
	for _, m := range []float64{float64(n), 1e8, 3e9} {
		bits, k := bloom.EstimateParameters(uint(m), snapshots.BloomFalsePositive)
		b.sized = append(b.sized, bloomSize{n: m, bits: bits, k: k, fp: math.Pow(1-math.Exp(-float64(k)*m/float64(bits)), float64(k))})
	}
	return b, nil
}

func pct(part, whole uint64) string {
	if whole == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func size(bits uint) string {
	b := float64(bits) / 8
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	default:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
}

func writeResults(c config, runs []*edgeRun, bl bloomFigures, logf func(string, ...any)) error {
	stem := time.Now().UTC().Format("2006-01-02") + "-" + c.commit + "-budget"
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	full, budget := runs[0], runs[1]
	p("# Memory budget: %d links, budget %d (bench/budget)\n\n", c.links, c.budget)
	p("%s UTC, %d CPUs. Zipf(%.2f) over the links with %.0f%% codes that are no link; %d requests per edge measured after %d warming the long-tail cache (%d entries per edge), open loop at %d/s with up to %d in flight; both edges in one process with control, PostgreSQL and NATS, measured one after the other.",
		time.Now().UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), c.s, 100*c.unknown, c.requests, c.warmup, c.cache, c.rate, c.workers)
	if c.note != "" {
		p(" **%s**: the latencies are indicative only.", c.note)
	}
	p("\n\nThe budgeted snapshot holds the %d hottest links by a week of clicks (`postgres.Hotness`: %d links clicked, in proportion to the same Zipf), its bloom every code. Every answer was checked against the authority.\n\n", c.budget, 3*c.budget)
	t := report.Table{Header: []string{"edge", "snapshot entries", "file", "ready", "answered from memory", "from the long-tail cache", "from the authority", "authority round trips / 1,000 requests", "p50", "p99", "p99.9", "wrong", "failed"}, Align: "lrrrrrrrrrrrr"}
	for _, r := range runs {
		link := uint64(r.linkRequests)
		t.Add(r.name, fmt.Sprint(r.header.Entries), fmt.Sprintf("%.1f MiB", float64(r.fileBytes)/(1<<20)), r.ready.Round(time.Millisecond).String(),
			pct(r.snapshotHits+r.overlayHits, link), pct(r.cacheHits, link), pct(r.resolved-r.cacheHits, link),
			fmt.Sprintf("%.1f", 1000*float64(r.roundTrips)/float64(len(r.res.latencies))),
			ms(r.res.percentile(0.50)), ms(r.res.percentile(0.99)), ms(r.res.percentile(0.999)),
			fmt.Sprint(r.res.wrong.Load()), fmt.Sprint(r.res.failed.Load()))
	}
	p("%s\n", t.Markdown())
	p("Shares are of the requests for links (%d of %d). p99 of the budgeted edge: %.2f× the edge holding every link.\n\n",
		full.linkRequests, len(full.res.latencies), float64(budget.res.percentile(0.99))/float64(max(1, full.res.percentile(0.99))))
	p("## What it would be at 10⁸ links with a budget of 10⁷\n\n")
	p("Computed, not measured: a Zipf(s) request for a link falls on the N hottest of M with probability H(N)/H(M) (H the generalized harmonic number of order s), which the measured share from memory above is to check against; a long-tail cache of C entries holding the next C hottest (what its frequency-based admission aims at) adds (H(N+C) − H(N))/H(M). Authority round trips then follow from the measured codes per round trip of this run (%.2f).\n\n", budget.codesPerTrip())
	pt := report.Table{Header: []string{"links", "budget", "cache", "from memory (computed)", "from memory (measured)", "cache at best", "authority at least", "authority round trips / 1,000 requests"}, Align: "rrrrrrrr"}
	for _, sc := range [][3]int{{c.links, c.budget, c.cache}, {100_000_000, 10_000_000, 1_000_000}} {
		mem, cache := zipfShare(sc[0], sc[1], sc[2], c.s)
		measured := "—"
		if sc[0] == c.links {
			measured = pct(budget.snapshotHits+budget.overlayHits, uint64(budget.linkRequests))
		}
		auth := 1 - mem - cache
		pt.Add(fmt.Sprint(sc[0]), fmt.Sprint(sc[1]), fmt.Sprint(sc[2]), fmt.Sprintf("%.1f%%", 100*mem), measured,
			fmt.Sprintf("%.1f%%", 100*cache), fmt.Sprintf("%.1f%%", 100*auth),
			fmt.Sprintf("%.1f", 1000*(1-c.unknown)*auth/budget.codesPerTrip()))
	}
	p("%s\n", pt.Markdown())
	p("## The bloom of every code\n\n")
	p("Read from the budgeted snapshot: %d codes, %d bits (%s in the file), %d probes; %d of %d random codes that are no link passed it: %.3f%% false positives (target %.0f%%).\n\n",
		bl.n, bl.bits, fmt.Sprintf("%.1f MiB", float64(bl.bytes)/(1<<20)), bl.k, bl.fps, bl.tested, 100*float64(bl.fps)/float64(bl.tested), 100*snapshots.BloomFalsePositive)
	bt := report.Table{Header: []string{"codes", "bits", "size", "bytes per code", "probes", "false positives (computed)"}, Align: "rrrrrr"}
	for _, s := range bl.sized {
		bt.Add(fmt.Sprintf("%.0f", s.n), fmt.Sprint(s.bits), size(s.bits), fmt.Sprintf("%.2f", float64(s.bits)/8/s.n), fmt.Sprint(s.k), fmt.Sprintf("%.3f%%", 100*s.fp))
	}
	p("%s\n", bt.Markdown())
	p("Computed with bloom/v3's own sizing (`EstimateParameters`, as the snapshot builder sizes it) and (1 − e^(−kn/m))^k. At 3·10⁹ codes the bloom alone is the size above on every edge: a budget bounds the entries, not the bloom; past a few 10⁹ codes the bloom would be split by namespace or domain, or its rate raised.\n\n")
	png := stem + ".png"
	groups := []string{"from memory %", "from the cache %", "from the authority %"}
	var series []report.Series
	for _, r := range runs {
		link := float64(r.linkRequests)
		series = append(series, report.Series{Name: r.name, Values: []float64{
			100 * float64(r.snapshotHits+r.overlayHits) / link, 100 * float64(r.cacheHits) / link, 100 * float64(r.resolved-r.cacheHits) / link}})
	}
	if err := report.BarChart(filepath.Join(c.out, png), fmt.Sprintf("Where link requests were answered (%d links, budget %d)", c.links, c.budget), "% of link requests", groups, series); err != nil {
		return err
	}
	latPNG := stem + "-latency.png"
	var lat []report.Series
	for _, r := range runs {
		lat = append(lat, report.Series{Name: r.name, Values: []float64{
			float64(r.res.percentile(0.50)) / 1e6, float64(r.res.percentile(0.99)) / 1e6, float64(r.res.percentile(0.999)) / 1e6}})
	}
	if err := report.BarChart(filepath.Join(c.out, latPNG), "Latency from due time (open loop)", "ms", []string{"p50", "p99", "p99.9"}, lat); err != nil {
		return err
	}
	p("![where answers came from](%s)\n![latency](%s)\n", png, latPNG)
	if err := writeFigures(filepath.Join(c.out, stem+".json"), c, budget); err != nil {
		return err
	}
	file := filepath.Join(c.out, stem+".md")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return err
	}
	logf("results in %s", file)
	return nil
}

// zipfShare is the share of Zipf(s) requests over links that fall on the
// budget hottest, and on the next cache hottest.
func zipfShare(links, budget, cache int, s float64) (mem, next float64) {
	var h, hb, hc float64
	for r := 1; r <= links; r++ {
		h += math.Pow(float64(r), -s)
		if r == budget {
			hb = h
		}
		if r == min(links, budget+cache) {
			hc = h
		}
	}
	return hb / h, (hc - hb) / h
}

// codesPerTrip is how many codes an authority round trip carried.
func (r *edgeRun) codesPerTrip() float64 {
	if r.roundTrips == 0 {
		return 1
	}
	return max(1, float64(r.asked)/float64(r.roundTrips))
}

// figure is one hit ratio in the form bench/snapshot's scale table reads
// (its -budget flag): the share of link requests the budgeted edge
// answered from memory, measured at this run's size, and the one computed
// for 10⁸ links with a budget of 10⁷ (projected).
type figure struct {
	Links     int     `json:"links"`
	Budget    int     `json:"budget"`
	HitRatio  float64 `json:"hit_ratio"`
	Projected bool    `json:"projected,omitempty"`
}

func writeFigures(file string, c config, budget *edgeRun) error {
	measured := float64(budget.snapshotHits+budget.overlayHits) / float64(max(1, budget.linkRequests))
	projected, _ := zipfShare(100_000_000, 10_000_000, 0, c.s)
	figs := []figure{{Links: c.links, Budget: c.budget, HitRatio: measured}}
	if c.links != 100_000_000 {
		figs = append(figs, figure{Links: 100_000_000, Budget: 10_000_000, HitRatio: projected, Projected: true})
	}
	b, err := json.MarshalIndent(figs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
