package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
)

// writesOptions are the writes scenario's flags.
type writesOptions struct {
	rates       []int
	duration    time.Duration
	conns       int
	readEvery   time.Duration
	rawDuration time.Duration
	rawConns    int
	rawClients  []int
	search      int
	searchDur   time.Duration
}

func writesFlags(fs *flag.FlagSet) *writesOptions {
	o := &writesOptions{}
	fs.Func("writes-rates", "writes scenario: single creates per second, open loop, one run each (default 5000,10000)", func(s string) error {
		v, err := intList(s)
		o.rates = v
		return err
	})
	fs.DurationVar(&o.duration, "writes-duration", 30*time.Second, "writes scenario: length of each rate's run")
	fs.IntVar(&o.conns, "writes-connections", 256, "writes scenario: the generator's keep-alive connections to control")
	fs.DurationVar(&o.readEvery, "writes-read-every", 20*time.Millisecond, "writes scenario: interval of the edge's position reads (each renders its whole /-/metrics page: about 1 ms of the edge's CPU here)")
	fs.DurationVar(&o.rawDuration, "writes-raw-duration", 10*time.Second, "writes scenario: length of each raw pgx run")
	fs.IntVar(&o.rawConns, "writes-raw-connections", 64, "writes scenario: connections of the open-loop raw pgx runs")
	fs.Func("writes-raw-clients", "writes scenario: connections of the closed-loop raw pgx runs (default 8,64)", func(s string) error {
		v, err := intList(s)
		o.rawClients = v
		return err
	})
	fs.IntVar(&o.search, "writes-search", 3, "writes scenario: steps of the search for the best rate with p99 under 50 ms")
	fs.DurationVar(&o.searchDur, "writes-search-duration", 10*time.Second, "writes scenario: length of each search step")
	o.rates, o.rawClients = []int{5000, 10000}, []int{8, 64}
	return o
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive whole numbers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// p99Target is the bound on a single create's p99 at the seed's
// peak, through the whole stack.
const p99Target = 50 * time.Millisecond

// writeRun is one timed run of the writes scenario: the generator's
// figures and what every part of the machine spent meanwhile.
type writeRun struct {
	what string // "api", "search", "pgx-open", "pgx-closed"
	res  createsResult
	cpu  cpuSpent
	wall time.Duration
	prof *profileSplit // the suite process's profile, with -pprof
	edge *profileSplit // the edge's, when it serves profiles (EDGELINK_DEBUG_LISTEN)
	pg   string        // perf's report of PostgreSQL, with -pprof
}

// holds says whether an API run met the bar: every create
// answered 201 and p99 under the target.
func (w writeRun) holds() bool {
	return w.res.Sent > 0 && w.res.Created == w.res.Sent && w.res.Errors == 0 && w.res.P99 < p99Target
}

// writes measures single creates through the whole stack: the paced
// generator POSTs unique links to control at fixed rates, each create's
// status, latency from when it was due and version kept, the edge's
// applied version read every 20 ms (by default) to time each create's
// arrival there; beside it, on the same PostgreSQL server, the raw pgx
// loop writing the same rows one per transaction, open loop at the same
// rates and closed loop; CPU per create of every process; and a short
// search for the best rate that holds p99 under 50 ms.
func (e *env) writes(o *writesOptions) error {
	// Nothing is pinned here: the whole stack and the generator share the
	// machine, as on one machine in production.
	if err := e.pin("unpinned"); err != nil {
		return err
	}
	top := slices.Max(o.rates)
	if err := e.writesTenant(4 * top); err != nil {
		return err
	}
	keyFile := filepath.Join(e.dir, "bench.key")
	if err := os.WriteFile(keyFile, []byte(e.st.client.Key), 0o600); err != nil {
		return err
	}
	rawDSN, rawTenant, err := e.rawDatabase()
	if err != nil {
		return err
	}
	w := &writesRuns{e: e, o: o, keyFile: keyFile}
	runErr := w.runAll(rawDSN, rawTenant, top)
	if len(w.runs) == 0 {
		return runErr
	}
	// What ran is reported even when a later run failed.
	dir, stem := e.outName()
	body, err := w.section(dir, stem)
	if runErr != nil {
		body += fmt.Sprintf("\n**The scenario stopped early**: %s\n", strings.ReplaceAll(runErr.Error(), "\n", " "))
	}
	e.res.sections = append(e.res.sections, section{"Single creates through the whole stack", body})
	return errors.Join(runErr, err)
}

// runAll runs the calibration, the API's rates, the search and the raw
// baseline, in that order.
func (w *writesRuns) runAll(rawDSN string, rawTenant int64, top int) error {
	o := w.o
	// What reading the edge's position costs the edge: its CPU with the
	// reader running and a trickle of creates, less its CPU at rest.
	idle, err := w.edgeAtRest(3 * time.Second)
	if err != nil {
		return err
	}
	cal, err := w.api("calibration", 1, 3*time.Second)
	if err != nil {
		return err
	}
	if reads := cal.res.Apply.Reads; reads > 0 {
		w.edgePerRead = max(0, cal.cpu.edge-idle*cal.wall.Seconds()) / float64(reads)
		fmt.Printf("   writes   the edge at rest used %.3f cores; reading its position cost it %.0f µs of CPU a read (%d reads)\n", idle, w.edgePerRead*1e6, reads)
	}
	for _, r := range o.rates {
		run, err := w.api("api", r, o.duration)
		if err != nil {
			return err
		}
		w.runs = append(w.runs, run)
	}
	w.searchBest(top)
	for i, r := range o.rates {
		run, err := w.pgx(rawDSN, rawTenant, uint64(i+1)*100_000_000, r, o.rawDuration, o.rawConns)
		if err != nil {
			return err
		}
		w.runs = append(w.runs, run)
	}
	for i, c := range o.rawClients {
		run, err := w.pgx(rawDSN, rawTenant, uint64(len(o.rates)+i+1)*100_000_000, 0, o.rawDuration, c)
		if err != nil {
			return err
		}
		w.runs = append(w.runs, run)
	}
	return nil
}

// writesTenant gives the suite's tenant a limit above every rate the
// scenario offers, the way an operator would: control's own command.
func (e *env) writesTenant(limit int) error {
	bin := filepath.Join(e.dir, "control")
	if out, err := exec.CommandContext(e.ctx, "go", "build", "-o", bin, "./control/cmd/control").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./control/cmd/control: %w\n%s", err, out)
	}
	l := strconv.Itoa(min(limit, postgres.MaxTenantRate))
	args := []string{"tenants", "set-limits", "bench", "--rate", l, "--burst", l}
	e.record(append([]string{"control", "--database-url", "postgres://…/edgelink"}, args...))
	out, err := exec.CommandContext(e.ctx, bin, append([]string{"--database-url", e.st.pg.DSN}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("control tenants set-limits: %w\n%s", err, out)
	}
	fmt.Printf("   %s", out)
	return nil
}

// rawDatabase creates the raw baseline's database on the stack's
// PostgreSQL server (same WAL, same fsync), migrated, with one tenant:
// its rows never meet the stack's, and no relay reads its outbox.
func (e *env) rawDatabase() (dsn string, tenant int64, err error) {
	const db = "rawcreates"
	admin, err := pgxpool.New(e.ctx, e.st.pg.Server.DSN("postgres"))
	if err != nil {
		return "", 0, err
	}
	defer admin.Close()
	if _, err := admin.Exec(e.ctx, "CREATE DATABASE "+db); err != nil {
		return "", 0, fmt.Errorf("create the raw database: %w", err)
	}
	dsn = e.st.pg.Server.DSN(db)
	pool, err := pgxpool.New(e.ctx, dsn)
	if err != nil {
		return "", 0, err
	}
	defer pool.Close()
	if err := postgres.Migrate(e.ctx, pool); err != nil {
		return "", 0, fmt.Errorf("migrate the raw database: %w", err)
	}
	tenant, err = postgres.New(pool).CreateTenant(e.ctx, "raw")
	return dsn, tenant, err
}

// writesRuns is the scenario's state while it runs.
type writesRuns struct {
	e           *env
	o           *writesOptions
	keyFile     string
	edgePerRead float64 // the edge's CPU seconds per position read
	runs        []writeRun
}

// api runs `suite attack creates` at rate for d against control, the edge
// watched, and measures the machine meanwhile.
func (w *writesRuns) api(what string, rate int, d time.Duration) (writeRun, error) {
	e := w.e
	flags := []string{"-rate", strconv.Itoa(rate), "-duration", d.String(), "-connections", strconv.Itoa(w.o.conns),
		"-read-every", w.o.readEvery.String(), "-target", fmt.Sprintf("https://shop.example/spring-sale/%s-%d/", what, rate)}
	argv := append([]string{e.self, "attack", "creates", "-url", e.st.controlURL, "-key-file", w.keyFile, "-edge", e.st.edgeURL}, flags...)
	e.record(append([]string{"suite", "attack", "creates", "-url", "http://127.0.0.1:PORT", "-key-file", "bench.key", "-edge", "http://127.0.0.1:PORT"}, flags...))
	run := writeRun{what: what}
	profile := ""
	if e.o.pprof != "" && what != "calibration" {
		profile = fmt.Sprintf("writes-%d", rate)
	}
	if err := w.measured(&run, argv, profile, d); err != nil {
		return run, err
	}
	r := run.res
	a := r.Apply
	if a == nil {
		return run, fmt.Errorf("attack creates at %d/s: no apply figures", rate)
	}
	fmt.Printf("   writes   %-11s %6d/s: %d of %d answered 201 (%v, %d errors), p50 %s p99 %s max %s; applied p50 %s p99 %s max %s, %d over 1 s, %d not applied\n",
		what, rate, r.Created, r.Sent, r.Codes, r.Errors, r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(time.Millisecond),
		a.P50.Round(100*time.Microsecond), a.P99.Round(100*time.Microsecond), a.Max.Round(time.Millisecond), a.Over1s, a.NotApplied)
	if r.Problem != "" {
		fmt.Printf("            first answer other than 201: %s\n", r.Problem)
	}
	return run, nil
}

// pgx runs `suite attack pgx` on the raw database: open loop at rate, or
// closed loop (rate 0) with conns connections.
func (w *writesRuns) pgx(dsn string, tenant int64, firstID uint64, rate int, d time.Duration, conns int) (writeRun, error) {
	e := w.e
	flags := []string{"-rate", strconv.Itoa(rate), "-duration", d.String(), "-connections", strconv.Itoa(conns)}
	argv := append([]string{e.self, "attack", "pgx", "-dsn", dsn, "-tenant", strconv.FormatInt(tenant, 10), "-first-id", strconv.FormatUint(firstID, 10)}, flags...)
	e.record(append([]string{"suite", "attack", "pgx", "-dsn", "postgres://…/rawcreates", "-tenant", "ID", "-first-id", "N"}, flags...))
	run := writeRun{what: "pgx-open"}
	if rate == 0 {
		run.what = "pgx-closed"
	}
	if err := w.measured(&run, argv, "", d); err != nil {
		return run, err
	}
	r := run.res
	fmt.Printf("   writes   %-11s %6.0f/s, %d connections: %.0f creates/s, %d errors, p50 %s p99 %s\n", run.what, r.Offered, conns, r.Throughput, r.Errors,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
	return run, nil
}

// measured runs a generator on a quiet machine with the click rollup
// paused, and takes every part's CPU around it; with a profile name (and
// -pprof), a CPU profile of this process over most of the run's length d.
func (w *writesRuns) measured(run *writeRun, argv []string, profile string, d time.Duration) error {
	e := w.e
	e.settle()
	e.st.pauseClicks()
	defer e.st.resumeClicks()
	c0, err := e.cpuNow()
	if err != nil {
		return err
	}
	var prof, edgeProf chan *profileSplit
	var pgProf chan string
	if profile != "" {
		pgProf = make(chan string, 1)
		go func() {
			r, err := e.perfPostgres(profile, d)
			if err != nil {
				r = "perf failed: " + err.Error()
			}
			pgProf <- r
		}()
		prof = make(chan *profileSplit, 1)
		go func() { prof <- e.profile(e.o.pprof, profile, d) }()
		// The edge inherits this process's environment: it serves its
		// profiles when the suite was started with EDGELINK_DEBUG_LISTEN.
		if addr := os.Getenv("EDGELINK_DEBUG_LISTEN"); addr != "" {
			edgeProf = make(chan *profileSplit, 1)
			go func() { edgeProf <- e.profile(addr, profile+"-edge", d) }()
		}
	}
	t0 := time.Now()
	out, gen, err := e.runLoad(argv)
	run.wall = time.Since(t0)
	c1, cerr := e.cpuNow()
	if prof != nil {
		run.prof = <-prof
	}
	if edgeProf != nil {
		run.edge = <-edgeProf
	}
	if pgProf != nil {
		run.pg = <-pgProf
	}
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if err := json.Unmarshal(out, &run.res); err != nil {
		return fmt.Errorf("%s: %w\n%s", argv[2], err, trimLines(string(out), 10))
	}
	run.cpu = c1.minus(c0)
	run.cpu.generator = gen
	return nil
}

// edgeAtRest is the edge's CPU (cores) over d on a quiet machine with
// nothing asked of it.
func (w *writesRuns) edgeAtRest(d time.Duration) (float64, error) {
	e := w.e
	e.settle()
	e.st.pauseClicks()
	defer e.st.resumeClicks()
	c0, _ := measure.Usage([]int{e.st.edge.PID()})
	select {
	case <-e.ctx.Done():
		return 0, e.ctx.Err()
	case <-time.After(d):
	}
	c1, _ := measure.Usage([]int{e.st.edge.PID()})
	return (c1 - c0) / d.Seconds(), nil
}

// searchBest looks for the best rate that holds (every create 201, p99
// under the target) between the rates run: halving the gap between the
// best that held and the least that did not, or, when every rate held,
// going up by half, in at most o.search short runs.
func (w *writesRuns) searchBest(top int) {
	for range w.o.search {
		lo, hi := w.bounds()
		var next int
		switch {
		case hi == 0:
			next = lo * 3 / 2
		default:
			next = (lo + hi) / 2
		}
		next = next / 250 * 250
		if next <= lo || next > 3*top || hi != 0 && hi-lo <= 500 {
			return
		}
		run, err := w.api("search", next, w.o.searchDur)
		if err != nil {
			w.e.res.failures = append(w.e.res.failures, fmt.Sprintf("writes search at %d/s: %v", next, err))
			return
		}
		w.runs = append(w.runs, run)
	}
}

// bounds is the best rate that held and the least above it that did not
// (0: none).
func (w *writesRuns) bounds() (lo, hi int) {
	for _, r := range w.runs {
		if r.what != "api" && r.what != "search" {
			continue
		}
		rate := int(r.res.Offered)
		if r.holds() {
			lo = max(lo, rate)
		}
	}
	for _, r := range w.runs {
		if (r.what == "api" || r.what == "search") && !r.holds() {
			if rate := int(r.res.Offered); rate > lo && (hi == 0 || rate < hi) {
				hi = rate
			}
		}
	}
	return lo, hi
}

// rawInsert is the raw baseline of a create, as bench/create's: the link and
// its outbox row the API writes, xid before version, in one statement and
// one transaction, with nothing else around it.
const rawInsert = `
WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
i AS MATERIALIZED (
	SELECT t.*, nextval('change_version_seq') AS version
	FROM x, unnest($1::bigint[], $2::text[], $3::text[]) AS t(id, code, url)
),
l AS (
	INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url, redirect_type, status, version)
	SELECT id, code, $4, 'generated', 'default', url, url, 302, 'active', version FROM i
	RETURNING version
)
INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at)
SELECT i.version, x.xid, 'link', i.code, i.url, 302, 'active', NULL::timestamptz FROM l JOIN i USING (version), x`

// attackPgx is `suite attack pgx -dsn DSN -tenant ID -first-id N -rate R
// -duration D -connections C`: the raw baseline of single creates, one
// link and its outbox row per transaction from C pooled connections. At a
// rate, open loop: create i is due at start + i/rate and its latency
// counts from then, however long it waited for a free connection; with
// -rate 0, closed loop: each connection inserts as fast as it is answered.
// IDs count up from -first-id, so runs on one database never collide.
func attackPgx(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("attack pgx", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "PostgreSQL database (migrated)")
	tenant := fs.Int64("tenant", 0, "tenant id the links belong to")
	firstID := fs.Uint64("first-id", 1, "first link id")
	rate := fs.Int("rate", 5000, "creates per second; 0: closed loop")
	d := fs.Duration("duration", 10*time.Second, "run length")
	conns := fs.Int("connections", 64, "pooled connections, each with one create in flight")
	timeout := fs.Duration("timeout", 15*time.Second, "bound of one create, and how long after the run's end an open-loop create may still start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" || *tenant <= 0 || *rate < 0 || *d <= 0 || *conns <= 0 || *timeout <= 0 {
		return errors.New("attack pgx: want -dsn, -tenant, a duration and connections")
	}
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		return fmt.Errorf("attack pgx: %w", err)
	}
	pcfg.MaxConns, pcfg.MinConns = int32(*conns), int32(*conns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("attack pgx: %w", err)
	}
	defer pool.Close()
	// Every connection opened before the clock starts.
	if err := stack.Poll(ctx, "pool filled", time.Minute, func() bool { return pool.Stat().IdleConns() >= int32(*conns) }); err != nil {
		return fmt.Errorf("attack pgx: %w", err)
	}
	r := createsResult{Mode: "pgx", Offered: float64(*rate), Clients: *conns, Codes: map[string]int{}}
	var (
		next   atomic.Uint64
		unsent atomic.Int64
		mu     sync.Mutex
		lats   []time.Duration
		failed int
	)
	next.Store(*firstID - 1)
	insert := func(ctx context.Context) error {
		id := next.Add(1)
		code, err := base62.Encode(id)
		if err != nil {
			return err
		}
		_, err = pool.Exec(ctx, rawInsert, []int64{int64(id)}, []string{code},
			[]string{"https://shop.example/spring-sale/raw/" + strconv.FormatUint(id, 10) + "?utm_source=newsletter"}, *tenant)
		return err
	}
	done := func(lat time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		lats = append(lats, lat)
		if err != nil {
			failed++
			if r.Problem == "" {
				r.Problem = err.Error()
			}
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	if *rate == 0 {
		deadline := start.Add(*d)
		for range *conns {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					t0 := time.Now()
					err := insert(ctx)
					done(time.Since(t0), err)
				}
			})
		}
	} else {
		total := int(float64(*rate) * d.Seconds())
		interval := float64(time.Second) / float64(*rate)
		due := func(i int) time.Duration { return time.Duration(float64(i) * interval) }
		work := make(chan int, total)
		// As with the paced generator, a create not started this long
		// after the run's end fails unsent, so an overloaded run ends.
		giveUp := *d + *timeout
		for range *conns {
			wg.Go(func() {
				for i := range work {
					if time.Since(start) > giveUp {
						unsent.Add(1)
						continue
					}
					tctx, cancel := context.WithTimeout(ctx, *timeout)
					err := insert(tctx)
					cancel()
					done(time.Since(start)-due(i), err)
				}
			})
		}
		// Released in time; one that waits for a connection is charged
		// the wait.
		for i := range total {
			if w := due(i) - time.Since(start); w > 0 {
				time.Sleep(w)
			}
			work <- i
		}
		close(work)
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	slices.Sort(lats)
	r.Sent, r.Errors, r.Created = len(lats), failed+int(unsent.Load()), len(lats)-failed
	if n := unsent.Load(); n > 0 && r.Problem == "" {
		r.Problem = fmt.Sprintf("%d creates not started within %s of the run's end", n, *timeout)
	}
	r.Throughput = float64(r.Created) / r.Elapsed.Seconds()
	if n := len(lats); n > 0 {
		r.P50, r.P90, r.P99, r.P999, r.Max = quantile(lats, 0.5), quantile(lats, 0.9), quantile(lats, 0.99), quantile(lats, 0.999), lats[n-1]
	}
	return json.NewEncoder(stdout).Encode(r)
}
