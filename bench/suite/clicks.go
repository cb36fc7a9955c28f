package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/clicks"
)

// clickOptions are the clicks scenario's flags.
type clickOptions struct {
	rate     int
	duration time.Duration
	unknown  float64
}

// clickFlags adds the clicks scenario's flags to fs.
func clickFlags(fs *flag.FlagSet) *clickOptions {
	o := &clickOptions{}
	fs.IntVar(&o.rate, "clicks-rate", 50_000, "clicks scenario: clicks recorded per second")
	fs.DurationVar(&o.duration, "clicks-duration", 60*time.Second, "clicks scenario: how long clicks are recorded")
	fs.Float64Var(&o.unknown, "clicks-unknown", 0.01, "clicks scenario: share of clicks on codes that are no link")
	return o
}

// rollupSums is what the rollup tables hold, summed: the scenario compares
// them before and after.
type rollupSums struct {
	links, bots, tenants, days, unknown, redirects int64
	breakdown                                      map[string]int64 // "dimension=value" → clicks
	position                                       uint64
}

func (s *benchStack) rollupSums(ctx context.Context) (rollupSums, error) {
	r := rollupSums{breakdown: map[string]int64{}}
	var pos int64
	err := s.pool.QueryRow(ctx, `SELECT
	coalesce((SELECT sum(clicks) FROM link_clicks_daily), 0)::bigint,
	coalesce((SELECT sum(bot_clicks) FROM link_clicks_daily), 0)::bigint,
	coalesce((SELECT sum(clicks) FROM tenant_clicks_daily), 0)::bigint,
	coalesce((SELECT sum(clicks) FROM clicks_daily), 0)::bigint,
	coalesce((SELECT sum(unknown_clicks) FROM clicks_daily), 0)::bigint,
	(SELECT value FROM counters WHERE name = 'redirects_total'),
	coalesce((SELECT last_seq FROM click_positions WHERE stream = $1), 0)`, clicks.Stream).
		Scan(&r.links, &r.bots, &r.tenants, &r.days, &r.unknown, &r.redirects, &pos)
	if err != nil {
		return r, fmt.Errorf("rollup sums: %w", err)
	}
	r.position = uint64(pos)
	// A dimension's values past the top N of a link's day are in other
	// (schema 017), summed as "dimension=(other)".
	rows, err := s.pool.Query(ctx, `SELECT dimension || '=' || value, sum(clicks)::bigint FROM link_click_breakdown_daily GROUP BY 1
UNION ALL SELECT dimension || '=(other)', sum(clicks)::bigint FROM link_click_other_daily GROUP BY 1`)
	if err != nil {
		return r, fmt.Errorf("breakdown sums: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return r, err
		}
		r.breakdown[k] = n
	}
	return r, rows.Err()
}

// rolledUp is the click position and the clicks applied so far.
func (s *benchStack) rolledUp(ctx context.Context) (pos uint64, redirects int64, err error) {
	var p int64
	err = s.pool.QueryRow(ctx, `SELECT coalesce((SELECT last_seq FROM click_positions WHERE stream = $1), 0),
	(SELECT value FROM counters WHERE name = 'redirects_total')`, clicks.Stream).Scan(&p, &redirects)
	return uint64(p), redirects, err
}

func (s *benchStack) clickLastSeq(ctx context.Context) (uint64, error) {
	st, err := s.js.Stream(ctx, clicks.Stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// waitRolled waits until the stored click position reaches the stream's
// last sequence as read now, and returns when it did.
func (s *benchStack) waitRolled(ctx context.Context, timeout time.Duration) (time.Time, error) {
	last, err := s.clickLastSeq(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var pos uint64
	err = stack.Poll(ctx, "click rollup reaches the stream's end", timeout, func() bool {
		pos, _, err = s.rolledUp(ctx)
		return err == nil && pos >= last
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("click position %d, stream at %d: %w", pos, last, err)
	}
	return time.Now(), nil
}

// pgCPU is PostgreSQL's CPU seconds so far, per process: every postgres
// process under this one, and the postmaster's exited children (backends
// that closed), so a window's delta misses nothing that ran in it.
func pgCPU() map[int]float64 {
	out := map[int]float64{}
	for _, pid := range measure.Tree(os.Getpid())[1:] {
		st, err := measure.ReadStat(pid)
		if err != nil || st.Comm != "postgres" {
			continue
		}
		out[pid] = st.CPUSeconds()
		if pp, err := measure.ReadStat(st.PPID); err == nil && pp.Comm != "postgres" {
			out[-pid] = childCPU(pid) // the postmaster's reaped children
		}
	}
	return out
}

// childCPU is cutime+cstime of pid, in seconds.
func childCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 15 {
		return 0
	}
	cu, _ := strconv.ParseFloat(f[13], 64)
	cs, _ := strconv.ParseFloat(f[14], 64)
	return (cu + cs) / measure.ClockTicks
}

// cpuSince is the CPU seconds of b not yet in a (processes new in b count
// from 0).
func cpuSince(a, b map[int]float64) float64 {
	var s float64
	for pid, v := range b {
		s += max(0, v-a[pid])
	}
	return s
}

func procCPU(pid int) float64 {
	c, _ := measure.Usage([]int{pid})
	return c
}

// clickSample is one point of the scenario's time line.
type clickSample struct {
	at                             time.Duration // since the generator started
	recorded, rolled               int64
	roller, pg, suite, gen, wallDt float64 // CPU seconds in the interval, and its length
}

// clickRun is what the clicks scenario measured.
type clickRun struct {
	o                                             *clickOptions
	gen                                           genProgress
	genCPU                                        float64
	rollerCPU, pgCPU                              float64 // ready → caught up
	suiteCPU                                      float64
	rollWall                                      time.Duration
	trail                                         time.Duration
	before, after                                 rollupSums
	applied                                       int64 // click_sources.applied of the generator's boot
	stats                                         clickroll.Stats
	samples                                       []clickSample
	first, last                                   uint64 // the run's stream sequences
	consume, upsert                               rawResult
	consumeCPU, upsertCPU, consumeSuite, upsertPG float64
	profile                                       string
	rawBatch                                      int // messages per fetch and transaction of the baselines
}

// clicks records o.rate clicks/s for o.duration through the edge's
// recorder (`suite clickgen`, its own process) into the suite's JetStream
// and rolls them up with control's roller (`suite clickroll`, its own
// process); the in-process roller pauses meanwhile. Then the same stream
// range is consumed bare and upserted plainly, the baselines.
func (e *env) clicks(o *clickOptions) error {
	if o == nil {
		return errors.New("clicks: no options")
	}
	ctx := e.ctx
	st := e.st
	// What earlier scenarios sent is published by the edge and rolled up
	// first, so the run starts on an empty backlog and counts only its own
	// clicks; then the suite's own roller stops.
	var buffered float64
	if err := stack.Poll(ctx, "the edge publishes the clicks it holds", time.Minute, func() bool {
		m, err := edgeMetrics(ctx, st.edgeURL)
		buffered = m["edge_clicks_buffered"]
		return err == nil && buffered == 0
	}); err != nil {
		return fmt.Errorf("edge still holds %v clicks: %w", buffered, err)
	}
	if _, err := st.waitRolled(ctx, 5*time.Minute); err != nil {
		return err
	}
	st.pauseClicks()
	defer st.resumeClicks()
	cr := &clickRun{o: o, profile: filepath.Join(e.dir, "clickroll.pprof")}
	var err error
	if cr.before, err = st.rollupSums(ctx); err != nil {
		return err
	}
	cr.first = cr.before.position + 1

	var mu sync.Mutex
	ready := make(chan struct{})
	var readyOnce sync.Once
	rollOut := &lineWriter{fn: func(l []byte) {
		if string(l) == "ready" {
			readyOnce.Do(func() { close(ready) })
			return
		}
		mu.Lock()
		_ = json.Unmarshal(l, &cr.stats)
		mu.Unlock()
	}}
	rollArgv := []string{e.self, "clickroll", "-database", st.pg.DSN, "-nats", st.natsURL, "-cpuprofile", cr.profile}
	e.record([]string{"suite", "clickroll", "-database", "DSN", "-nats", "URL"})
	roller, err := e.procs.Start("clickroll", rollArgv, "", nil, rollOut, e.log)
	if err != nil {
		return err
	}
	defer func() { roller.Stop(10 * time.Second); e.procs.Forget(roller) }()
	select {
	case <-ready:
	case <-roller.Exited():
		return fmt.Errorf("clickroll exited: %v", roller.Err())
	case <-time.After(30 * time.Second):
		return errors.New("clickroll not ready within 30s")
	}
	rollStart, pg0, suite0 := procCPU(roller.PID()), pgCPU(), procCPU(os.Getpid())

	var latest genProgress
	genDone := make(chan genProgress, 1)
	genOut := &lineWriter{fn: func(l []byte) {
		var p genProgress
		if json.Unmarshal(l, &p) != nil {
			return
		}
		mu.Lock()
		latest = p
		mu.Unlock()
		if p.Done {
			genDone <- p
		}
	}}
	flags := []string{"-rate", fmt.Sprint(o.rate), "-duration", o.duration.String(), "-unknown", fmt.Sprint(o.unknown), "-seed", fmt.Sprint(e.o.seed)}
	e.record(append([]string{"suite", "clickgen", "-nats", "URL", "-links", "links.tsv"}, flags...))
	gen, err := e.procs.Start("clickgen", append([]string{e.self, "clickgen", "-nats", st.natsURL, "-links", filepath.Join(e.dir, "links.tsv")}, flags...),
		"", nil, genOut, e.log)
	if err != nil {
		return err
	}
	defer e.procs.Forget(gen)
	t0, tRoll := time.Now(), time.Now()

	// Sample every second until the generator is done and the rollup has
	// caught up with the stream's end.
	prevPG, prevSuite := pg0, suite0
	prevRoll, prevGen := rollStart, 0.0
	prevT := time.Now()
	sample := func() error {
		_, red, err := st.rolledUp(ctx)
		if err != nil {
			return err
		}
		now, pgNow := time.Now(), pgCPU()
		rNow, sNow := procCPU(roller.PID()), procCPU(os.Getpid())
		gNow := prevGen
		select {
		case <-gen.Exited():
		default:
			gNow = procCPU(gen.PID())
		}
		mu.Lock()
		rec := latest.Offered
		mu.Unlock()
		s := clickSample{at: now.Sub(t0), recorded: rec, rolled: red - cr.before.redirects,
			roller: rNow - prevRoll, pg: cpuSince(prevPG, pgNow), suite: sNow - prevSuite, gen: max(0, gNow-prevGen), wallDt: now.Sub(prevT).Seconds()}
		cr.samples = append(cr.samples, s)
		prevPG, prevSuite, prevRoll, prevGen, prevT = pgNow, sNow, rNow, gNow, now
		return nil
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var final genProgress
wait:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case final = <-genDone:
			break wait
		case <-gen.Exited():
			select {
			case final = <-genDone:
				break wait
			case <-time.After(time.Second):
			}
			return fmt.Errorf("clickgen exited without its summary: %v", gen.Err())
		case <-tick.C:
			if err := sample(); err != nil {
				return err
			}
		}
	}
	<-gen.Exited()
	cr.gen = final
	if ps := gen.Cmd.ProcessState; ps != nil {
		cr.genCPU = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	if cr.last, err = st.clickLastSeq(ctx); err != nil {
		return err
	}
	// The trail: from the last click recorded to the position at the
	// stream's last sequence, polled finely.
	var pos uint64
	err = stack.Poll(ctx, "the rollup catches up", 10*time.Minute, func() bool {
		pos, _, err = st.rolledUp(ctx)
		if err == nil && pos < cr.last {
			select {
			case <-tick.C:
				_ = sample()
			default:
			}
		}
		return err == nil && pos >= cr.last
	})
	if err != nil {
		return fmt.Errorf("rollup at %d, stream at %d: %w", pos, cr.last, err)
	}
	caught := time.Now()
	cr.trail = caught.Sub(time.Unix(0, final.LastRecord))
	cr.rollWall = caught.Sub(tRoll)
	cr.rollerCPU = procCPU(roller.PID()) - rollStart
	cr.pgCPU = cpuSince(pg0, pgCPU())
	cr.suiteCPU = procCPU(os.Getpid()) - suite0
	_ = sample()
	roller.Stop(10 * time.Second)
	if cr.after, err = st.rollupSums(ctx); err != nil {
		return err
	}
	if err := st.pool.QueryRow(ctx, `SELECT coalesce(sum(applied), 0)::bigint FROM click_sources WHERE edge = $1 AND boot = $2`,
		genEdge, final.Boot).Scan(&cr.applied); err != nil {
		return err
	}
	fmt.Printf("   clicks: %d offered, %d published, %d dropped; %d rolled up; trail %s; roller %.2f CPU-s, PostgreSQL %.2f CPU-s\n",
		final.Offered, final.Published, final.Dropped, cr.after.redirects-cr.before.redirects, cr.trail.Round(time.Millisecond), cr.rollerCPU, cr.pgCPU)

	// The baselines, over the same stream range, a transaction (and a
	// fetch) of as many messages as the roller's took on average.
	mu.Lock()
	cr.rawBatch = max(1, int(cr.last-cr.first+1)/max(1, int(cr.stats.Txs)))
	mu.Unlock()
	for _, mode := range []string{"consume", "upsert"} {
		argv := []string{e.self, "clickraw", "-mode", mode, "-nats", st.natsURL, "-database", st.pg.DSN,
			"-from", fmt.Sprint(cr.first), "-to", fmt.Sprint(cr.last), "-batch", fmt.Sprint(cr.rawBatch)}
		e.record([]string{"suite", "clickraw", "-mode", mode, "-nats", "URL", "-database", "DSN", "-from", "FIRST", "-to", "LAST", "-batch", "N"})
		p0, s0 := pgCPU(), procCPU(os.Getpid())
		out, cpu, err := e.runLoad(argv)
		if err != nil {
			return err
		}
		var res rawResult
		if err := json.Unmarshal(out, &res); err != nil {
			return fmt.Errorf("clickraw %s: %w: %s", mode, err, trimLines(string(out), 5))
		}
		pgc, sc := cpuSince(p0, pgCPU()), procCPU(os.Getpid())-s0
		if mode == "consume" {
			cr.consume, cr.consumeCPU, cr.consumeSuite = res, cpu, sc
		} else {
			cr.upsert, cr.upsertCPU, cr.upsertPG = res, cpu, pgc
		}
		fmt.Printf("   clickraw %s: %d messages in %.1f s, %.2f CPU-s (PostgreSQL %.2f)\n", mode, res.Messages, res.Seconds, cpu, pgc)
	}
	mu.Lock()
	defer mu.Unlock()
	return e.clickSection(cr)
}

// clickSection writes the scenario's report section and charts.
func (e *env) clickSection(cr *clickRun) error {
	dir, stem := e.outName()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g := cr.gen
	d := func(f func(rollupSums) int64) int64 { return f(cr.after) - f(cr.before) }
	perK := func(cpu float64, n int64) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f ms", 1e6*cpu/float64(n))
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Clicks recorded at %d/s for %s by the edge's own recorder (`edge/clickpub`, default ring and batches) in a process of their own (`suite clickgen`), published to the suite's JetStream as edge `%s`: codes from the %d loaded links by Zipf (s=1.1) with %.0f%% unknown codes, the redirect types of the links (mostly 302), %d real-looking User-Agents (phones, in-app browsers, desktops, a tablet, a TV, link-preview bots) and referrers (none, search, social, messengers, webmail, and %d blog hosts). ",
		cr.o.rate, cr.o.duration, genEdge, len(e.codes), 100*cr.o.unknown, len(userAgents), tailReferrers)
	p("Control's roller (`control/clickroll` with its defaults) runs alone in `suite clickroll` (the suite's own roller paused), so its CPU is its own; PostgreSQL's is summed over its processes (fsync on). NATS runs in the suite's process, whose CPU is reported beside. ")
	p("Baselines over the same stream range afterwards: a bare pull consumer fetching and acknowledging it (the floor of consuming), and a plain pgx upsert of the same aggregates (decoded, summed per fetch of %d messages in Go maps, as many as the roller's transactions took on average, one unnest `INSERT … ON CONFLICT` per table per transaction into a link-day table and a breakdown table as schema 004 laid them out; no link lookup, tenant, sources or position).\n\n", cr.rawBatch)

	lost := g.Published - d(func(r rollupSums) int64 { return r.redirects })
	t := report.Table{Header: []string{"", ""}, Align: "lr"}
	t.Add("clicks offered / published / dropped by the recorder", fmt.Sprintf("%d / %d / %d", g.Offered, g.Published, g.Dropped))
	t.Add("on links / on unknown codes", fmt.Sprintf("%d / %d", g.Known, g.Unknown))
	t.Add("rolled up (`counters.redirects_total`)", fmt.Sprint(d(func(r rollupSums) int64 { return r.redirects })))
	t.Add("**lost** (published − rolled up)", fmt.Sprintf("**%d**", lost))
	t.Add("**trail at the end** (last click recorded → position at the stream's last sequence)", fmt.Sprintf("**%.2f s** (target < 5 s)", cr.trail.Seconds()))
	t.Add("roller CPU per 1,000 clicks", perK(cr.rollerCPU, g.Published)+fmt.Sprintf(" (%.2f cores over %.1f s)", cr.rollerCPU/cr.rollWall.Seconds(), cr.rollWall.Seconds()))
	t.Add("PostgreSQL CPU per 1,000 clicks", perK(cr.pgCPU, g.Published)+fmt.Sprintf(" (%.2f cores)", cr.pgCPU/cr.rollWall.Seconds()))
	t.Add("suite process (NATS, idle control) CPU per 1,000 clicks", perK(cr.suiteCPU, g.Published))
	t.Add("recorder process CPU per 1,000 clicks", perK(cr.genCPU, g.Offered))
	t.Add("roller transactions", fmt.Sprintf("%d (%.0f clicks each)", cr.stats.Txs, float64(cr.stats.Clicks)/float64(max(1, cr.stats.Txs))))
	p("%s\n", t.Markdown())

	// Every rollup against what was recorded.
	t = report.Table{Header: []string{"rollup", "in the rollup (Δ)", "recorded", ""}, Align: "lrrl"}
	check := func(name string, got, want int64) {
		mark := "✓"
		if got != want {
			mark = fmt.Sprintf("✗ %+d", got-want)
		}
		t.Add(name, fmt.Sprint(got), fmt.Sprint(want), mark)
	}
	check("`clicks_daily.clicks`", d(func(r rollupSums) int64 { return r.days }), g.Published)
	check("`clicks_daily.unknown_clicks`", d(func(r rollupSums) int64 { return r.unknown }), g.Unknown)
	check("`link_clicks_daily.clicks`", d(func(r rollupSums) int64 { return r.links }), g.Known)
	check("`link_clicks_daily.bot_clicks`", d(func(r rollupSums) int64 { return r.bots }), g.Bots)
	check("`tenant_clicks_daily.clicks`", d(func(r rollupSums) int64 { return r.tenants }), g.Known)
	check("`click_sources.applied` (the generator's boot)", cr.applied, g.Published)
	check("`link_click_breakdown_daily`, edge = "+genEdge, cr.after.breakdown["edge="+genEdge]-cr.before.breakdown["edge="+genEdge], g.Known)
	for _, dim := range []string{"device", "status", "referrer"} {
		var got, want int64
		bad := 0
		for k, n := range g.Breakdown {
			if !strings.HasPrefix(k, dim+"=") {
				continue
			}
			dv := cr.after.breakdown[k] - cr.before.breakdown[k]
			got, want = got+dv, want+n
			if dv != n {
				bad++
			}
		}
		// Values past the top N of a link's day are counted in other: the
		// dimension's sum stays exact, and its values differ by what other
		// holds of them.
		other := cr.after.breakdown[dim+"=(other)"] - cr.before.breakdown[dim+"=(other)"]
		got += other
		name := fmt.Sprintf("`link_click_breakdown_daily` and `link_click_other_daily`, every %s value", dim)
		if bad > 0 {
			name += fmt.Sprintf(" (%d values differ: %d clicks in other, past the top %d of a link's day)", bad, other, clickroll.DefaultTopValues)
		}
		check(name, got, want)
	}
	p("Every rollup, its change over the run against what the generator recorded (unknown codes count in `clicks_daily` only; a dropped click would show here as a difference):\n\n%s\n", t.Markdown())

	t = report.Table{Header: []string{"same stream range", "wall s", "client CPU per 1,000 clicks", "PostgreSQL CPU per 1,000", "rows written", "roller ÷ this, client CPU", "roller ÷ this, PostgreSQL CPU"}, Align: "lrrrrrr"}
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	t.Add("control's roller (live, above)", fmt.Sprintf("%.1f", cr.rollWall.Seconds()), perK(cr.rollerCPU, g.Published), perK(cr.pgCPU, g.Published), "", "", "")
	t.Add("bare consumer: fetch and ack (suite/NATS CPU beside: "+perK(cr.consumeSuite, g.Published)+")", fmt.Sprintf("%.1f", cr.consume.Seconds), perK(cr.consumeCPU, g.Published), "—", "—", ratio(cr.rollerCPU, cr.consumeCPU), "—")
	t.Add("plain pgx upsert of the same aggregates", fmt.Sprintf("%.1f", cr.upsert.Seconds), perK(cr.upsertCPU, cr.upsert.Clicks), perK(cr.upsertPG, cr.upsert.Clicks),
		fmt.Sprintf("%d (%.2f per click)", cr.upsert.Rows, float64(cr.upsert.Rows)/float64(max(1, cr.upsert.Clicks))), ratio(cr.rollerCPU, cr.upsertCPU), ratio(cr.pgCPU, cr.upsertPG))
	p("Baselines (the roller's figures over its live run, which includes waiting for the clicks to arrive):\n\n%s\n", t.Markdown())
	p("![clicks recorded and rolled up](%s-clicks.png)\n\n![CPU over the clicks run](%s-clicks-cpu.png)\n\n", stem, stem)
	p("The roller's CPU profile of this run is `clickroll.pprof` in the run's temporary folder (kept with `-keep`).\n")
	e.res.sections = append(e.res.sections, section{title: fmt.Sprintf("Clicks at %d/s: recorded → JetStream → rollups", cr.o.rate), body: b.String()})

	var xs, rec, rolled, cRoll, cPG, cSuite, cGen []float64
	for _, s := range cr.samples {
		xs = append(xs, s.at.Seconds())
		rec, rolled = append(rec, float64(s.recorded)/1000), append(rolled, float64(s.rolled)/1000)
		w := max(s.wallDt, 1e-3)
		cRoll, cPG, cSuite, cGen = append(cRoll, s.roller/w), append(cPG, s.pg/w), append(cSuite, s.suite/w), append(cGen, s.gen/w)
	}
	if err := report.LineChart(filepath.Join(dir, stem+"-clicks.png"), fmt.Sprintf("Clicks at %d/s: recorded by the edge's recorder, rolled up into PostgreSQL", cr.o.rate),
		"seconds from the first click", "thousands of clicks", xs,
		[]report.Series{{Name: "recorded", Values: rec}, {Name: "rolled up", Values: rolled}}, false); err != nil {
		return err
	}
	return report.LineChart(filepath.Join(dir, stem+"-clicks-cpu.png"), "CPU during the clicks run (cores, per 1 s sample)",
		"seconds from the first click", "cores", xs,
		[]report.Series{{Name: "roller", Values: cRoll}, {Name: "PostgreSQL", Values: cPG}, {Name: "suite process (NATS)", Values: cSuite}, {Name: "recorder", Values: cGen}}, false)
}
