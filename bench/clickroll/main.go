// Command clickroll measures what the click roller costs per click with
// issue 22's dimensions (hours, browser, OS, country, UTM, visitors, top-N,
// tenant breakdowns) against the roller from before them, on the same
// machine, the same PostgreSQL and the same clicks, in alternating rounds.
//
// The baseline is the roller of a commit before schema 017 (-baseline, a
// git revision), built from `git archive` of it as its `suite clickroll`;
// the roller of this tree runs as `clickroll roll`, the same program. Each
// runs alone in a process of its own with control's defaults, against a
// migrated database of -links links (a third of them with UTM parameters
// in their targets, two tenants), while this process publishes clicks at
// -rate per second for -duration to an embedded JetStream: format 5
// batches as edges send them (links by Zipf s=1.1, 1% unknown codes,
// countries, browser and OS families and devices of a mobile-heavy
// campaign, referrers with a long tail of 2,000 hosts, visitors from a
// daily pool, 5% bots). A round rolls the same clicks with each roller,
// in alternating order, from empty rollups; it stops when the roller has
// caught up with the stream. Reported: the roller's and PostgreSQL's CPU
// per 1,000 clicks of each, and the ratio new/baseline per round (median
// and range). The baseline reads the clicks as format 4 would have them:
// it ignores what it does not know.
//
//	go run ./bench/clickroll -rounds 3
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/schema"
	"github.com/edgelink/edgelink/shared/clicks"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "roll" {
		if err := roll(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "clickroll roll:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clickroll:", err)
		os.Exit(1)
	}
}

type options struct {
	links, rate, rounds int
	duration            time.Duration
	baseline, out       string
	profile             string
	seed                uint64
}

func run() error {
	var o options
	flag.IntVar(&o.links, "links", 100_000, "links in the database")
	flag.IntVar(&o.rate, "rate", 50_000, "clicks published per second")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long clicks are published, each roller's run")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (each rolls the clicks with both rollers)")
	flag.StringVar(&o.baseline, "baseline", "9e23593^", "git revision whose roller is the baseline (the commit before schema 017)")
	flag.StringVar(&o.out, "out", "bench/results", "folder of the results file")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the clicks")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of this tree's roller here (its last run)")
	only := flag.String("only", "", "run only this roller (baseline or issue-22)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "bench-clickroll-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// PostgreSQL runs as its own user when this runs as root: it must
	// be able to enter the folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}

	fmt.Printf("building the baseline roller of %s\n", o.baseline)
	base, err := buildBaseline(ctx, o.baseline, dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: filepath.Join(dir, "pg"), Settings: []string{"max_connections=200", "shared_buffers=256MB"}})
	if err != nil {
		return err
	}
	defer pg.Stop()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoSigs: true, NoLog: true})
	if err != nil {
		return err
	}
	ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(30 * time.Second) {
		return errors.New("nats not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	dsn := pg.DSN("postgres")
	if err := setup(ctx, dsn, o.links); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Printf("generating %d s of clicks at %d/s\n", int(o.duration.Seconds()), o.rate)
	msgs, total := generate(o)

	rollers := map[string][]string{
		"baseline": {base, "clickroll", "-database", dsn, "-nats", ns.ClientURL()},
		"issue-22": {self, "roll", "-database", dsn, "-nats", ns.ClientURL(), "-cpuprofile", o.profile},
	}
	results := map[string][]result{}
	for round := range o.rounds {
		order := []string{"baseline", "issue-22"}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, name := range order {
			if *only != "" && name != *only {
				continue
			}
			res, err := rollOnce(ctx, pool, js, rollers[name], msgs, o)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, name, err)
			}
			res.clicks = total
			results[name] = append(results[name], res)
			fmt.Printf("round %d %-9s %d clicks: roller %.2f CPU-s, PostgreSQL %.2f CPU-s, caught up %s after the last click, %d transactions\n",
				round+1, name, total, res.roller, res.pg, res.trail.Round(time.Millisecond), res.txs)
		}
	}
	return write(o, results, total)
}

// buildBaseline builds the bench suite of rev (its `suite clickroll` runs
// that commit's roller alone) from git archive, once per commit: the
// binary is kept in .data/bench.
func buildBaseline(ctx context.Context, rev, dir string) (string, error) {
	hash, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", rev).Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse %s: %w", rev, err)
	}
	bin, err := filepath.Abs(filepath.Join(".data", "bench", "suite-"+strings.TrimSpace(string(hash))))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src := filepath.Join(dir, "baseline")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", strconv.Quote(rev), strconv.Quote(src)))
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w: %s", rev, err, out)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/suite")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the baseline: %w: %s", err, out)
	}
	return bin, nil
}

// setup migrates the database and writes the links: two tenants, a third
// of the targets with UTM parameters (a few campaigns).
func setup(ctx context.Context, dsn string, n int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := schema.Migrate(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `INSERT INTO tenants (name) VALUES ('acme'), ('beta')`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `
INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
SELECT i, lpad(i::text, 6, '0'), (SELECT id FROM tenants WHERE name = CASE WHEN i % 5 = 0 THEN 'beta' ELSE 'acme' END), 'custom', u, u,
	nextval('change_version_seq')
FROM generate_series(1, $1::bigint) i,
	LATERAL (SELECT 'https://shop.example/p/' || i || CASE i % 3 WHEN 0 THEN '?utm_source=newsletter&utm_medium=email&utm_campaign=winter-' || (i % 7)
		ELSE '' END AS u) x`, n); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `ANALYZE links`)
	return err
}

type weighted[T any] struct {
	v T
	w int
}

func pick[T any](r *rand.Rand, ws []weighted[T]) T {
	t := 0
	for _, w := range ws {
		t += w.w
	}
	x := r.IntN(t)
	for _, w := range ws {
		if x < w.w {
			return w.v
		}
		x -= w.w
	}
	return ws[len(ws)-1].v
}

type agent struct {
	device  clicks.Device
	browser clicks.Browser
	os      clicks.OS
	bot     bool
}

// generate builds the messages of o.duration at o.rate: one a 1,024 clicks,
// as an edge's publisher cuts them, their times filled in when sent.
func generate(o options) ([][]clicks.ClickView, int) {
	r := rand.New(rand.NewPCG(o.seed, 22))
	z := dataset.NewZipf(r, 1.1, o.links)
	perm := r.Perm(o.links)
	agents := []weighted[agent]{
		{agent{clicks.DeviceMobile, clicks.BrowserSafari, clicks.OSIOS, false}, 28}, {agent{clicks.DeviceMobile, clicks.BrowserChrome, clicks.OSAndroid, false}, 24},
		{agent{clicks.DeviceMobile, clicks.BrowserInApp, clicks.OSIOS, false}, 12}, {agent{clicks.DeviceMobile, clicks.BrowserSamsung, clicks.OSAndroid, false}, 4},
		{agent{clicks.DeviceDesktop, clicks.BrowserChrome, clicks.OSWindows, false}, 14}, {agent{clicks.DeviceDesktop, clicks.BrowserSafari, clicks.OSMacOS, false}, 5},
		{agent{clicks.DeviceDesktop, clicks.BrowserEdge, clicks.OSWindows, false}, 4}, {agent{clicks.DeviceDesktop, clicks.BrowserFirefox, clicks.OSLinux, false}, 2},
		{agent{clicks.DeviceTablet, clicks.BrowserSafari, clicks.OSIPadOS, false}, 1}, {agent{clicks.DeviceTV, clicks.BrowserOther, clicks.OSOther, false}, 1},
		{agent{clicks.DeviceUnknown, clicks.BrowserUnknown, clicks.OSUnknown, true}, 5},
	}
	countries := []weighted[string]{{"US", 30}, {"IN", 12}, {"BR", 8}, {"DE", 6}, {"GB", 6}, {"FR", 5}, {"JP", 4}, {"ID", 4}, {"MX", 3},
		{"CA", 3}, {"NG", 2}, {"ES", 2}, {"IT", 2}, {"PL", 1}, {"TR", 1}, {"", 4}, {"*", 7}}
	refs := []weighted[string]{{"", 34}, {"www.google.com", 12}, {"t.co", 9}, {"m.facebook.com", 7}, {"l.instagram.com", 6},
		{"mail.google.com", 5}, {"www.linkedin.com", 4}, {"www.baidu.com", 4}, {"weixin.qq.com", 4}, {"www.reddit.com", 3},
		{"outlook.live.com", 2}, {"news.ycombinator.com", 1}, {"*", 9}}
	total := int(o.duration.Seconds()) * o.rate
	var msgs [][]clicks.ClickView
	for n := 0; n < total; {
		k := min(1024, total-n)
		m := make([]clicks.ClickView, k)
		for i := range m {
			c := &m[i]
			if r.IntN(100) == 0 {
				c.Code = []byte(dataset.RandomCode(r))
			} else {
				c.Code = fmt.Appendf(nil, "%06d", perm[z.Rank()]+1)
			}
			a := pick(r, agents)
			c.Status, c.Device, c.Browser, c.OS, c.Bot = 302, a.device, a.browser, a.os, a.bot
			ref := pick(r, refs)
			if ref == "*" {
				ref = fmt.Sprintf("blog-%d.example-news.net", r.IntN(2000))
			}
			c.Referrer = []byte(ref)
			cc := pick(r, countries)
			if cc == "*" {
				cc = string([]byte{byte('A' + r.IntN(26)), byte('A' + r.IntN(26))})
			}
			copy(c.Country[:], cc)
			if r.IntN(50) != 0 {
				c.Visitor = uint64(r.IntN(2_000_000)) + 1
			}
		}
		msgs = append(msgs, m)
		n += k
	}
	return msgs, total
}

type result struct {
	clicks      int
	roller, pg  float64 // CPU seconds
	trail, wall time.Duration
	txs         uint64
}

// rollOnce empties the rollups, starts a roller at the stream's end,
// publishes msgs at o.rate, and measures until the roller caught up.
func rollOnce(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream, argv []string, msgs [][]clicks.ClickView, o options) (result, error) {
	var res result
	s, err := js.CreateOrUpdateStream(ctx, clicks.StreamConfig())
	if err != nil {
		return res, err
	}
	if err := s.Purge(ctx); err != nil {
		return res, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return res, err
	}
	last := info.State.LastSeq
	for _, sql := range []string{`TRUNCATE link_clicks_daily, link_click_values_daily, link_click_other_daily, link_clicks_hourly, tenant_clicks_daily,
	tenant_click_values_daily, tenant_click_other_daily, tenant_clicks_hourly, clicks_daily, click_sources, redirect_latency_daily, click_positions`,
		fmt.Sprintf(`INSERT INTO click_positions (stream, last_seq) VALUES ('CLICKS', %d)`, last), `CHECKPOINT`, `VACUUM ANALYZE`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return res, err
		}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		return res, fmt.Errorf("%s did not say ready", argv[0])
	}
	rest := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(out); rest <- b }()
	pg0, r0 := pgCPU(), procCPU(cmd.Process.Pid)
	start := time.Now()
	// Publish at the rate, stamping the clicks with the time they go.
	var buf []byte
	per := time.Second * time.Duration(1024) / time.Duration(o.rate)
	for i, m := range msgs {
		if d := time.Until(start.Add(time.Duration(i) * per)); d > 0 {
			time.Sleep(d)
		}
		at := time.Now().UnixMilli()
		buf = clicks.AppendHeader(buf[:0], clicks.Source{Edge: "bench", Boot: "b", Offered: uint64((i + 1) * 1024)}, len(m))
		for j := range m {
			m[j].At = at
			buf = clicks.AppendClick(buf, m[j])
		}
		if _, err := js.Publish(ctx, clicks.Subject("bench"), buf); err != nil {
			return res, err
		}
	}
	published := time.Now()
	final := last + uint64(len(msgs))
	for {
		var pos int64
		if err := pool.QueryRow(ctx, `SELECT last_seq FROM click_positions WHERE stream = 'CLICKS'`).Scan(&pos); err != nil {
			return res, err
		}
		if uint64(pos) >= final {
			break
		}
		if time.Since(published) > 10*time.Minute {
			return res, fmt.Errorf("roller at %d of %d ten minutes after the last click", pos, final)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	res.trail, res.wall = time.Since(published), time.Since(start)
	res.roller, res.pg = procCPU(cmd.Process.Pid)-r0, cpuSince(pg0, pgCPU())
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var st clickroll.Stats
	select {
	case b := <-rest:
		_ = json.Unmarshal(bytes.TrimSpace(b), &st)
	case <-time.After(30 * time.Second):
	}
	res.txs = st.Txs
	return res, nil
}

// roll is `clickroll roll`: this tree's roller alone with control's
// defaults, until SIGTERM, as the baseline's `suite clickroll`.
func roll(args []string) error {
	fs := flag.NewFlagSet("roll", flag.ContinueOnError)
	dsn := fs.String("database", "", "PostgreSQL URL")
	natsURL := fs.String("nats", "", "NATS URL")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the roller here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := nats.Connect(*natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	r := clickroll.New(postgres.New(pool), js, clickroll.Config{})
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Println("ready")
	err = r.Run(ctx)
	_ = json.NewEncoder(os.Stdout).Encode(r.Stats())
	return err
}

// pgCPU is PostgreSQL's CPU seconds so far, per process: every postgres
// process under this one, and the postmaster's reaped children.
func pgCPU() map[int]float64 {
	out := map[int]float64{}
	for _, pid := range measure.Tree(os.Getpid())[1:] {
		st, err := measure.ReadStat(pid)
		if err != nil || st.Comm != "postgres" {
			continue
		}
		out[pid] = st.CPUSeconds()
		if pp, err := measure.ReadStat(st.PPID); err == nil && pp.Comm != "postgres" {
			out[-pid] = childCPU(pid)
		}
	}
	return out
}

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

// write prints and stores the per-1,000-clicks costs and the ratios.
func write(o options, results map[string][]result, total int) error {
	perK := func(cpu float64) float64 { return 1e3 * 1e3 * cpu / float64(total) } // ms per 1,000 clicks
	col := func(name string, f func(result) float64) []float64 {
		var out []float64
		for _, r := range results[name] {
			out = append(out, f(r))
		}
		return out
	}
	var b strings.Builder
	commit, _ := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	fmt.Fprintf(&b, "# Click roller cost: issue 22's dimensions against %s\n\n", o.baseline)
	fmt.Fprintf(&b, "`go run ./bench/clickroll -links %d -rate %d -duration %s -rounds %d -baseline %s` at %s (this tree: %s). "+
		"Shared 2-core machine: indicative figures. Each round rolls the same %d clicks with each roller, alternating which goes first.\n\n",
		o.links, o.rate, o.duration, o.rounds, o.baseline, time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(commit)), total)
	t := report.Table{Header: []string{"per 1,000 clicks", "baseline", "issue 22", "ratio (median, range)"}, Align: "lrrr"}
	for _, m := range []struct {
		name string
		f    func(result) float64
	}{
		{"roller CPU", func(r result) float64 { return perK(r.roller) }},
		{"PostgreSQL CPU", func(r result) float64 { return perK(r.pg) }},
		{"roller + PostgreSQL CPU", func(r result) float64 { return perK(r.roller + r.pg) }},
	} {
		base, now := col("baseline", m.f), col("issue-22", m.f)
		t.Add(m.name, report.Summarize(base).Format("%.1f ms"), report.Summarize(now).Format("%.1f ms"), report.Summarize(report.Ratios(now, base)).Ratio())
	}
	trail := func(name string) string {
		var xs []float64
		for _, r := range results[name] {
			xs = append(xs, r.trail.Seconds())
		}
		return report.Summarize(xs).Format("%.1f s")
	}
	t.Add("caught up after the last click", trail("baseline"), trail("issue-22"), "")
	b.WriteString(t.Markdown())
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	stem := filepath.Join(o.out, fmt.Sprintf("%s-%s-clickroll", time.Now().UTC().Format(time.DateOnly), strings.TrimSpace(string(commit))))
	var series []report.Series
	for _, name := range []string{"baseline", "issue-22"} {
		med := func(f func(result) float64) float64 { return report.Summarize(col(name, f)).Median }
		series = append(series, report.Series{Name: name, Values: []float64{
			med(func(r result) float64 { return perK(r.roller) }), med(func(r result) float64 { return perK(r.pg) }),
		}})
	}
	if err := report.BarChart(stem+".png", "Click roller: CPU per 1,000 clicks (median)", "ms", []string{"roller", "PostgreSQL"}, series); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n![CPU per 1,000 clicks](%s)\n", filepath.Base(stem+".png"))
	fmt.Print(b.String())
	fmt.Println("wrote", stem+".md")
	return os.WriteFile(stem+".md", []byte(b.String()), 0o644)
}
