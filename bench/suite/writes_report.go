package main

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/bench/report"
)

// cpuSpent is CPU seconds over one run, by part, and what PostgreSQL
// wrote meanwhile.
type cpuSpent struct {
	suite, edge, generator float64 // the generator's is filled by its caller
	pg                     map[string]float64
	machine                float64
	walBytes               float64
	xids                   float64 // transactions that wrote
}

type cpuSample struct {
	suite, edge, machine float64
	pg                   map[int]pgProc
	reaped               float64 // the postmaster's exited children, all time
	wal                  float64 // bytes since 0/0
	xid                  int64
}

type pgProc struct {
	role string
	cpu  float64
}

func (c cpuSample) minus(b cpuSample) cpuSpent {
	s := cpuSpent{suite: c.suite - b.suite, edge: c.edge - b.edge, machine: c.machine - b.machine, pg: map[string]float64{},
		xids: float64(c.xid - b.xid)}
	for pid, p := range c.pg {
		s.pg[p.role] += p.cpu - b.pg[pid].cpu
	}
	// A process that exited during the run left its CPU in the
	// postmaster's reaped children, whatever its role (mostly backends
	// whose client went away, and autovacuum workers): what it spent
	// before the run is taken off.
	reaped := c.reaped - b.reaped
	for pid, p := range b.pg {
		if _, ok := c.pg[pid]; !ok {
			reaped -= p.cpu
		}
	}
	s.pg["exited"] += reaped
	s.walBytes = c.wal - b.wal
	return s
}

// cpuNow reads the CPU of this process (control and NATS), the edge, every
// PostgreSQL process and the machine, and PostgreSQL's WAL position and
// next transaction id.
func (e *env) cpuNow() (cpuSample, error) {
	var c cpuSample
	c.suite, _ = measure.Usage([]int{os.Getpid()})
	c.edge, _ = measure.Usage([]int{e.st.edge.PID()})
	m, err := measure.ReadMachineCPU()
	if err != nil {
		return c, err
	}
	c.machine = m.Busy
	postmaster, err := e.postmaster()
	if err != nil {
		return c, err
	}
	c.pg = map[int]pgProc{}
	for _, pid := range measure.Tree(postmaster) {
		st, err := measure.ReadStat(pid)
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		c.pg[pid] = pgProc{role: pgRole(pid == postmaster, string(cmd)), cpu: st.CPUSeconds()}
	}
	c.reaped, err = reapedCPU(postmaster)
	if err != nil {
		return c, err
	}
	// The next transaction id counts the transactions that wrote, without
	// taking one; the WAL position, the bytes they wrote.
	err = e.st.pool.QueryRow(e.ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::float8,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&c.wal, &c.xid)
	return c, err
}

// postmaster is the PostgreSQL server's process id, from its data folder.
func (e *env) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(e.st.pg.Server.DataDir(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL's postmaster: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// perfPostgres samples PostgreSQL's processes (those running now: control's
// pooled backends, the WAL writer, …) with perf over most of a run of
// length d and returns perf's report of where they spent it, by shared
// object and symbol (kernel ones included). Without perf it returns "".
func (e *env) perfPostgres(name string, d time.Duration) (string, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return "", nil
	}
	postmaster, err := e.postmaster()
	if err != nil {
		return "", err
	}
	var pids []string
	for _, pid := range measure.Tree(postmaster) {
		pids = append(pids, strconv.Itoa(pid))
	}
	file := filepath.Join(e.dir, name+".perf.data")
	secs := strconv.Itoa(max(1, int(d.Seconds())-2))
	if out, err := exec.CommandContext(e.ctx, perf, "record", "-q", "-F", "499", "-p", strings.Join(pids, ","), "-o", file, "--", "sleep", secs).CombinedOutput(); err != nil {
		return "", fmt.Errorf("perf record: %w: %s", err, trimLines(string(out), 5))
	}
	out, err := exec.CommandContext(e.ctx, perf, "report", "-i", file, "--stdio", "--no-children", "--sort", "dso,symbol", "--percent-limit", "0.7").Output()
	if err != nil {
		return "", fmt.Errorf("perf report: %w", err)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if t := strings.TrimSpace(l); t != "" && (!strings.HasPrefix(t, "#") || strings.Contains(t, "Samples") || strings.Contains(t, "Overhead")) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[:min(len(keep), 40)], "\n"), nil
}

// pgRole is a PostgreSQL process's group by its title ("postgres:
// walwriter", "postgres: user db 127.0.0.1(port) idle", …).
func pgRole(postmaster bool, cmdline string) string {
	title := strings.ReplaceAll(cmdline, "\x00", " ")
	switch {
	case postmaster:
		return "other"
	case strings.Contains(title, "walwriter"):
		return "WAL writer"
	case strings.Contains(title, "("): // a client's address and port
		return "backends"
	}
	return "other"
}

// reapedCPU is the CPU seconds of pid's exited and reaped children
// (cutime and cstime, fields 16 and 17 of /proc/<pid>/stat).
func reapedCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	var sum float64
	for _, v := range f[13:15] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += float64(n) / measure.ClockTicks
	}
	return sum, nil
}

// profileSplit is a CPU profile of this process during a run, split by
// the component its samples ran in.
type profileSplit struct {
	file  string
	total time.Duration
	by    map[string]time.Duration
	top   string // go tool pprof -top, abridged
	err   error
}

// profile takes a CPU profile of the Go process serving pprof on addr over
// most of a run of length d, saves it next to the results file and splits
// it.
func (e *env) profile(addr, name string, d time.Duration) *profileSplit {
	p := &profileSplit{by: map[string]time.Duration{}}
	secs := max(1, int(d.Seconds())-2)
	dir, stem := e.outName()
	p.file = filepath.Join(dir, stem+"-"+name+".pprof")
	host, port, _ := net.SplitHostPort(addr)
	if host == "" {
		host = "127.0.0.1"
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", net.JoinHostPort(host, port), secs))
	if err != nil {
		p.err = err
		return p
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		p.err = fmt.Errorf("profile: %s %v", resp.Status, err)
		return p
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.err = err
		return p
	}
	if p.err = os.WriteFile(p.file, buf.Bytes(), 0o644); p.err != nil {
		return p
	}
	traces, err := exec.CommandContext(e.ctx, "go", "tool", "pprof", "-traces", p.file).Output()
	if err != nil {
		p.err = fmt.Errorf("go tool pprof -traces: %w", err)
		return p
	}
	p.by, p.total = splitTraces(traces)
	// Flat (where the CPU is spent) and cumulative (which paths spend it).
	flat, _ := exec.CommandContext(e.ctx, "go", "tool", "pprof", "-top", "-nodecount=20", p.file).Output()
	cum, _ := exec.CommandContext(e.ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", p.file).Output()
	p.top = trimLines(string(flat), 26) + "\n\n" + trimLines(string(cum), 31)
	return p
}

// splitTraces sums the samples of `go tool pprof -traces` output by the
// component each stack ran in: NATS (the embedded server), control (its
// API, create path, relay and their drivers), the Go runtime (garbage
// collection, scheduler), or other.
func splitTraces(out []byte) (map[string]time.Duration, time.Duration) {
	by := map[string]time.Duration{}
	var total time.Duration
	for _, block := range strings.Split(string(out), "-----------+-------------------------------------------------------") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		f := strings.Fields(lines[0])
		if len(f) < 2 {
			continue
		}
		v, err := time.ParseDuration(f[0])
		if err != nil {
			continue
		}
		stack := block
		var part string
		switch {
		case strings.Contains(stack, "nats-server"):
			part = "NATS server"
		case strings.Contains(stack, "edgelink/edgelink/control"), strings.Contains(stack, "jackc/pgx"), strings.Contains(stack, "net/http"),
			strings.Contains(stack, "nats-io/nats.go"), strings.Contains(stack, "encoding/json"):
			part = "control"
		case strings.Contains(stack, "runtime.gcBgMarkWorker"), strings.Contains(stack, "runtime.bgsweep"), strings.Contains(stack, "runtime.bgscavenge"),
			strings.Contains(stack, "runtime.mallocgc"), strings.Contains(stack, "runtime.schedule"), strings.Contains(stack, "runtime.mcall"):
			part = "Go runtime (GC, scheduler)"
		default:
			part = "other"
		}
		by[part] += v
		total += v
	}
	return by, total
}

// section renders the scenario's report and writes its chart.
func (w *writesRuns) section(dir, stem string) (string, error) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o, e := w.o, w.e
	var api, open, closed []writeRun
	for _, r := range w.runs {
		switch r.what {
		case "api", "search":
			api = append(api, r)
		case "pgx-open":
			open = append(open, r)
		case "pgx-closed":
			closed = append(closed, r)
		}
	}
	slices.SortStableFunc(api, func(a, b writeRun) int { return int(a.res.Offered - b.res.Offered) })
	p("Single creates (`POST /api/v1/links`, a target of its own each, no idempotency key) from `suite attack creates`: the paced generator (one thread, epoll, latency counted from when each create was due) in its own process with %d keep-alive connections, open loop at each rate for %s (search steps %s), ", o.conns, o.duration, o.searchDur)
	p("against the stack as the data set ran it: control with its outbox relay and the embedded NATS JetStream in the suite's process, the edge binary applying every change from the stream, PostgreSQL with fsync and synchronous_commit on, all unpinned on this machine's %d cores with the generator. ", e.res.machine.cores)
	p("The suite's tenant had its limit raised as an operator would (`control tenants set-limits bench --rate R --burst R`, above every rate offered). ")
	p("Every answer's status and version were kept; the edge's applied version (`edge_changefeed_applied_version` in its `/-/metrics`) was read every %s from another thread of the generator, and a create's apply delay runs from its 201 to the first read that showed its version: up to one read interval late, never early. ", o.readEvery)
	p("Baseline in the same run: `suite attack pgx`, the raw pgx loop writing the same link and outbox rows one per transaction (bench/create's statement), on the same PostgreSQL server in a database of its own (no relay reads its outbox), open loop at the same rates for %s (latency from when due, however long a create waited for one of its connections) and closed loop.\n\n", o.rawDuration)

	for _, r := range api {
		if r.what != "api" {
			continue
		}
		verdict := "**held**"
		if !r.holds() {
			verdict = "**did not hold**"
		}
		a := r.res.Apply
		line := fmt.Sprintf("- At %.0f creates/s: %d of %d answered 201, p99 %.1f ms (target < %.0f ms): %s; applied on the edge p99 %.0f ms after the 201 (max %.0f ms), %d later than 1 s, %d not applied within the watch.",
			r.res.Offered, r.res.Created, r.res.Sent, ms(r.res.P99), ms(p99Target), verdict, ms(a.P99), ms(a.Max), a.Over1s, a.NotApplied)
		for _, x := range open {
			if x.res.Offered == r.res.Offered {
				line += fmt.Sprintf(" The raw pgx loop at the same rate: p99 %.1f ms (API ÷ raw %.2f×).", ms(x.res.P99), float64(r.res.P99)/float64(x.res.P99))
			}
		}
		p("%s\n", line)
	}
	if lo, hi := w.bounds(); lo > 0 {
		p("- The best rate that held (every create 201, p99 under %.0f ms): **%d creates/s**", ms(p99Target), lo)
		if hi > 0 {
			p(" (the least that did not: %d/s)", hi)
		}
		p(".\n")
	} else {
		p("- No rate tried held (every create 201 and p99 under %.0f ms).\n", ms(p99Target))
	}
	for _, x := range closed {
		p("- The raw pgx loop, closed loop with %d connections: %.0f creates/s (p99 %.1f ms).\n", x.res.Clients, x.res.Throughput, ms(x.res.P99))
	}
	p("\n")

	t := report.Table{Header: []string{"run", "offered/s", "sent", "201", "other answers", "errors", "201/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms",
		"applied p50 ms", "applied p99 ms", "applied max ms", "> 1 s", "not applied", "holds"}, Align: "lrrrlrrrrrrrrrrrrl"}
	f1 := func(d time.Duration) string { return fmt.Sprintf("%.1f", ms(d)) }
	f2 := func(d time.Duration) string { return fmt.Sprintf("%.2f", ms(d)) }
	others := func(c map[string]int) string {
		var parts []string
		for code, n := range c {
			if code != "201" {
				parts = append(parts, fmt.Sprintf("%s×%d", code, n))
			}
		}
		slices.Sort(parts)
		return strings.Join(parts, " ")
	}
	for _, r := range append(slices.Clone(api), open...) {
		x := r.res
		row := []string{r.what, fmt.Sprintf("%.0f", x.Offered), fmt.Sprint(x.Sent), fmt.Sprint(x.Created), others(x.Codes), fmt.Sprint(x.Errors),
			fmt.Sprintf("%.0f", x.Throughput), f2(x.P50), f2(x.P90), f2(x.P99), f2(x.P999), f1(x.Max)}
		if a := x.Apply; a != nil {
			held := "yes"
			if !r.holds() {
				held = "no"
			}
			row = append(row, f1(a.P50), f1(a.P99), f1(a.Max), fmt.Sprint(a.Over1s), fmt.Sprint(a.NotApplied), held)
		} else {
			row = append(row, "—", "—", "—", "—", "—", "—")
		}
		t.Add(row...)
	}
	p("%s\n", t.Markdown())
	if len(api) > 0 && api[0].res.Apply != nil {
		a := api[0].res.Apply
		p("The edge's position was read every %s on average (%d reads in the first run, %d failed). ", a.Every.Round(10*time.Microsecond), a.Reads, a.ReadErrors)
	}
	p("`pgx-open` is the raw baseline (its latency includes waiting for one of its %d connections). A create answered but not applied by the end of the watch (%s after the last answer) counts as not applied.\n\n", o.rawConns, 30*time.Second)
	if len(closed) > 0 {
		t := report.Table{Header: []string{"raw pgx, closed loop", "creates/s", "p50 ms", "p99 ms", "errors"}, Align: "lrrrr"}
		for _, x := range closed {
			t.Add(fmt.Sprintf("%d connections", x.res.Clients), fmt.Sprintf("%.0f", x.res.Throughput), f2(x.res.P50), f2(x.res.P99), fmt.Sprint(x.res.Errors))
		}
		p("%s\n", t.Markdown())
	}

	p("### Where the CPU goes, per create\n\n")
	p("µs of CPU per create answered 201 (committed, for the raw loop), from the kernel's accounting of each process over the whole run (`/proc/<pid>/stat`): the suite's process (control, its relay and the embedded NATS server; the baselines are idle processes of their own), the edge (less what reading its position cost it: %.0f µs a read, measured alone before the runs), PostgreSQL's processes by role (backends: those alive at the run's end; exited: processes that ended during the run, through the postmaster's reaped children: the raw loop's backends, which end with its process, and autovacuum workers; other: postmaster, checkpointer, background writer, autovacuum launcher), the generator (with its position reads), and the machine's busy time: what none of these spent is other work on the shared machine. Write transactions and WAL bytes are PostgreSQL's own counters (next transaction id, WAL position).\n\n", w.edgePerRead*1e6)
	t = report.Table{Header: []string{"run", "offered/s", "control + NATS", "edge", "PG backends", "PG exited", "PG WAL writer", "PG other", "generator", "sum", "machine busy", "other work", "write tx per create", "WAL bytes per create"}, Align: "lrrrrrrrrrrrrr"}
	for _, r := range append(append(slices.Clone(api), open...), closed...) {
		n := float64(r.res.Created)
		if n == 0 {
			continue
		}
		c := r.cpu
		edge := c.edge
		if r.res.Apply != nil {
			edge = max(0, edge-w.edgePerRead*float64(r.res.Apply.Reads))
		}
		// A clock tick of rounding can take a difference below 0.
		us := func(s float64) string { return fmt.Sprintf("%.0f", max(0, s)/n*1e6) }
		sum := c.suite + edge + c.pg["backends"] + c.pg["exited"] + c.pg["WAL writer"] + c.pg["other"] + c.generator
		offered := fmt.Sprintf("%.0f", r.res.Offered)
		if r.what == "pgx-closed" {
			offered = fmt.Sprintf("closed, %d conns", r.res.Clients)
		}
		t.Add(r.what, offered, us(c.suite), us(edge), us(c.pg["backends"]), us(c.pg["exited"]), us(c.pg["WAL writer"]), us(c.pg["other"]), us(c.generator), us(sum), us(c.machine),
			us(max(0, c.machine-sum)), fmt.Sprintf("%.3f", c.xids/n), fmt.Sprintf("%.0f", c.walBytes/n))
	}
	p("%s\n", t.Markdown())
	w.profileSection(&b, api)

	xs, series := w.chartSeries(api, open)
	chart := stem + "-writes.png"
	p("![single creates](%s)\n\n", chart)
	if err := report.LineChart(filepath.Join(dir, chart), "Single creates through the whole stack (open loop)", "creates per second offered (thousands)", "milliseconds (log scale)", xs, series, true); err != nil {
		return b.String(), fmt.Errorf("writes chart: %w", err)
	}
	return b.String(), nil
}

// profileSection splits the suite process's profiles by component.
func (w *writesRuns) profileSection(b *strings.Builder, api []writeRun) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	parts := []string{"control", "NATS server", "Go runtime (GC, scheduler)", "other"}
	t := report.Table{Header: append([]string{"run", "offered/s", "profiled CPU s"}, parts...), Align: "lrrrrrr"}
	var top, failed string
	for _, r := range api {
		pr := r.prof
		if pr == nil {
			continue
		}
		if pr.err != nil {
			failed = pr.err.Error()
			continue
		}
		row := []string{r.what, fmt.Sprintf("%.0f", r.res.Offered), fmt.Sprintf("%.1f", pr.total.Seconds())}
		for _, part := range parts {
			// The profile covers most of the run: its shares, applied to
			// the process's CPU per create, give µs per create by part.
			share := pr.by[part].Seconds() / max(pr.total.Seconds(), 1e-9)
			row = append(row, fmt.Sprintf("%.0f%% (%.0f µs)", 100*share, share*r.cpu.suite/float64(max(1, r.res.Created))*1e6))
		}
		t.Add(row...)
		// The top functions at the first rate asked for (5,000/s by
		// default), else the first profiled.
		if top == "" || r.what == "api" && r.res.Offered == float64(w.o.rates[0]) {
			top = fmt.Sprintf("`go tool pprof -top %s` and with `-cum` (%.0f/s):\n\n```\n%s\n```\n", filepath.Base(pr.file), r.res.Offered, pr.top)
		}
	}
	var edgeTop string
	for _, r := range api {
		if pr := r.edge; pr != nil && pr.err == nil && (edgeTop == "" || r.what == "api" && r.res.Offered == float64(w.o.rates[0])) {
			edgeTop = fmt.Sprintf("`go tool pprof -top %s` and with `-cum` (the edge, %.0f/s):\n\n```\n%s\n```\n", filepath.Base(pr.file), r.res.Offered, pr.top)
		}
	}
	switch {
	case len(t.Rows) > 0:
		p("The suite process's CPU profile (`-pprof`) over each run, split by the component each sample's stack ran in (share of the profile, and µs per create of the process's CPU):\n\n%s\n<details><summary>Top functions</summary>\n\n%s\n</details>\n\n", t.Markdown(), top)
	case failed != "":
		p("The suite process's profile failed: %s.\n\n", failed)
	default:
		p("With `-pprof 127.0.0.1:6060` the suite also profiles its own process (control and NATS) during each run and splits the profile by component here.\n\n")
	}
	if edgeTop != "" {
		p("<details><summary>The edge's profile, top functions</summary>\n\n%s\n</details>\n\n", edgeTop)
	}
	for _, r := range api {
		if r.pg != "" && r.what == "api" && r.res.Offered == float64(w.o.rates[0]) {
			p("<details><summary>PostgreSQL's processes under perf (%.0f/s)</summary>\n\n`perf record -F 499 -p <PostgreSQL's processes>`, `perf report --no-children --sort dso,symbol`:\n\n```\n%s\n```\n\n</details>\n\n", r.res.Offered, r.pg)
		}
	}
}

// chartSeries is the chart's data: latency percentiles and apply delay by
// offered rate, the raw loop's p99 where it ran, and the target.
func (w *writesRuns) chartSeries(api, open []writeRun) ([]float64, []report.Series) {
	var rates []float64
	for _, r := range append(slices.Clone(api), open...) {
		if !slices.Contains(rates, r.res.Offered) {
			rates = append(rates, r.res.Offered)
		}
	}
	slices.Sort(rates)
	nan := func() []float64 {
		v := make([]float64, len(rates))
		for i := range v {
			v[i] = math.NaN()
		}
		return v
	}
	p50, p99, a50, a99, raw, target := nan(), nan(), nan(), nan(), nan(), nan()
	xs := make([]float64, len(rates))
	for i, rate := range rates {
		xs[i] = rate / 1000
		target[i] = ms(p99Target)
		for _, r := range api {
			if r.res.Offered == rate {
				p50[i], p99[i] = ms(r.res.P50), ms(r.res.P99)
				if a := r.res.Apply; a != nil {
					a50[i], a99[i] = ms(max(a.P50, 10*time.Microsecond)), ms(max(a.P99, 10*time.Microsecond))
				}
			}
		}
		for _, r := range open {
			if r.res.Offered == rate {
				raw[i] = ms(r.res.P99)
			}
		}
	}
	return xs, []report.Series{{Name: "API p50", Values: p50}, {Name: "API p99", Values: p99}, {Name: "applied on the edge, p50 after the 201", Values: a50},
		{Name: "applied, p99", Values: a99}, {Name: "raw pgx loop p99", Values: raw}, {Name: "p99 target", Values: target}}
}
