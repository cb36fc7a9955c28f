package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgelink/edgelink/bench/report"
)

type machineInfo struct {
	cpu, kernel, goVersion, memory, commit string
	cores                                  int
	tools                                  []string
	dirty                                  bool
}

type runRec struct {
	scenario, variant, server, tool string
	round                           int
	requests, rps, perCPU           float64
	serverCPU, extraCPU, loadCPU    float64
	otherCPU, wall                  float64
	non3xx, sockErr                 int64
	p50, p90, p99, p999, pmax       time.Duration
	wrong, refused                  int
	sentRate, authority             float64
	edge                            map[string]float64
	// unknown counts the paced answers to unknown codes, unknownBy what
	// they were answered (status → count).
	unknown   int
	unknownBy map[string]int
}

type memRec struct {
	server        string
	rss, extraRSS int64
	redisUsed     int64
}

type checkResult struct {
	server                       string
	asked, right, refused, wrong int
	skipped                      bool
	example                      string
}

type propRec struct{ create, first, applied time.Duration }

type coldRec struct {
	kind  string
	round int
	took  time.Duration
	rss   int64
}

type soakRec struct {
	server string
	at     time.Duration
	rss    int64
}

type results struct {
	started, finished    time.Time
	machine              machineInfo
	opts                 options
	loadTook, streamTook time.Duration
	bulk                 *bulkTrace
	avgURL               float64
	redisAddr            string
	runs                 []runRec
	rate, halfRate       int
	unsettled            int // runs started before the machine went quiet
	edgePeak             float64
	mem                  []memRec
	checks               []checkResult
	prop                 []propRec
	cold                 []coldRec
	snapBuild            time.Duration
	snapBytes            int64
	edgeSnapBoot         bool
	createOut            []string
	createRatios         []map[string]float64
	soak                 []soakRec
	// sections are the reports of scenarios that render themselves (their
	// own file: a Markdown section and its charts), in the order they ran.
	sections        []section
	wrong, failures []string
}

// section is one scenario's part of the report: Markdown under its own
// "## title" heading.
type section struct{ title, body string }

// pick returns f of the runs of one scenario, variant and server, in round
// order.
func (r *results) pick(scenario, variant, server string, f func(runRec) float64) []float64 {
	var out []float64
	for _, x := range r.runs {
		if x.scenario == scenario && x.variant == variant && x.server == server {
			out = append(out, f(x))
		}
	}
	return out
}

const base = "bare-fasthttp"

// noisy is the share of a core other processes may use during a run
// before the run is flagged.
const noisy = 0.25

func (e *env) serverNames() []string {
	var out []string
	for _, s := range e.servers {
		out = append(out, s.name)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func (e *env) outName() (dir, stem string) {
	commit := e.res.machine.commit
	if commit == "" {
		commit = "nocommit"
	}
	if e.res.machine.dirty {
		commit += "-dirty"
	}
	return e.o.out, e.res.started.Format("2006-01-02") + "-" + commit
}

func (e *env) writeReport() error {
	dir, stem := e.outName()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	r := &e.res
	m := r.machine
	p("# edgelink benchmark, %s, commit %s\n\n", r.started.Format("2006-01-02 15:04 MST"), stem[11:])
	p("Every figure is a median over %d rounds with (min–max), and every ratio is taken round by round against a baseline measured in the same run on the same machine. ", e.o.rounds)
	p("Only ratios mean anything across machines. What else used the machine's CPU during each run is measured: see [noise](#noise).\n\n")
	p("## Machine\n\n")
	var t report.Table
	t.Header = []string{"", ""}
	t.Add("CPU", fmt.Sprintf("%s, %d cores", m.cpu, m.cores))
	t.Add("kernel", m.kernel)
	t.Add("memory", m.memory)
	t.Add("Go", m.goVersion)
	t.Add("tools", strings.Join(m.tools, "; "))
	t.Add("run", fmt.Sprintf("%s → %s (%s)", r.started.Format("15:04:05"), r.finished.Format("15:04:05"), r.finished.Sub(r.started).Round(time.Second)))
	p("%s\n", t.Markdown())

	p("## Data set\n\n")
	p("%d links with generated targets (20 domains, 1–3 path segments, half with UTM query strings, a fifth with ref/id parameters; average %.1f bytes), created through control's `POST /api/v1/links/batch` (1,000 per request, 4 clients) into PostgreSQL (fsync on) in %s (%.0f links/s); the edge, started before the load, had applied them all from the JetStream change stream %s after the last batch returned. ",
		len(e.codes), r.avgURL, r.loadTook.Round(time.Second), float64(len(e.codes))/r.loadTook.Seconds(), r.streamTook.Round(100*time.Millisecond))
	p("The baselines were loaded from the same rows read back from PostgreSQL. Requests replay a sample of %d paths: Zipf popularity s=1.1 over the links (ranks shuffled over the ID space) with 10%% unknown codes (random 6-character codes) for the redirect mix, and 90%% unknown for the scan.\n\n", e.o.samples)

	p("## Systems\n\n")
	t = report.Table{Header: []string{"system", "what it is"}}
	t.Add(base, "fasthttp answering every request with a constant 302: the ceiling of this HTTP stack on this machine; not checked for correctness")
	t.Add("nginx", "Debian's nginx-light, `worker_processes auto`, access log off, one `map` of all links and `return 302` (below)")
	t.Add("fasthttp+redis", "the common cache-aside design of a shortener's jump path: fasthttp doing one Redis `GET short:link:{code}` per request (go-redis, pool of 64) against Debian's redis-server on loopback, no persistence, no TTL")
	t.Add("net/http+map", "Go's net/http with a `map[string]string`")
	t.Add("edgelink-edge", "the edge binary (`edge/cmd/edge`) with its default flags, its links applied from the change stream; it records every click to JetStream (the embedded NATS runs in the benchmark's own process, whose CPU is not counted for the edge)")
	p("%s\n", t.Markdown())
	p("**nginx and case.** nginx's `map` lower-cases its keys and the looked-up value, so `00000a` and `00000A` collide: a plain map cannot serve the base62 code space correctly, and a map of `~` regex entries is far too slow for %d links. This run keys the map by the code in lower case plus a case mask (`00000A` → `00000a-000001`, `dataset.CaseKey`); the location's regex captures the six characters and six two-entry maps (`\"~^[A-Z]$\" 1`) compute the mask per request. So nginx serves the real codes exactly, at the cost of a regex location and six small regex maps per request, which a plain-map nginx would not pay.\n\n", len(e.codes))

	p("## Method\n\n")
	p("- Throughput: wrk (closed loop, 1 thread, %d connections, %s per run, Lua script replaying the sample). Latency: `suite attack`, an open-loop generator in the manner of wrk2 (one thread, an epoll loop over %d raw keep-alive connections, a timerfd for the next due request), at one fixed rate for every system (%d requests/s: half the slowest system's median wrk throughput, capped at 20,000), then at half the edge's own median peak (%d requests/s) for the systems whose peak is at least 1.5 times that. Latency counts from when each request was due, so a stall is charged to every request queued behind it (no coordinated omission); it checks the status and `Location` of every answer. (vegeta, used before, added tens of milliseconds of its own at p99 on this 2-core machine: goroutines per request sharing one core.)\n", e.o.conns, e.o.duration, e.o.conns, r.rate, r.halfRate)
	p("- Pinned variant: every server process (all threads, `taskset -a -p -c %s`; redis-server too, being on that baseline's request path) on CPU %s, the load generator on CPU %s (`taskset -c %s`), and the edge's back end (control, NATS, PostgreSQL: not on its request path, on other machines in production) beside the load generator. During every timed run (of any server) the click rollup is paused: the edge still publishes each click to JetStream, but rolling them up into PostgreSQL (about half a core at the edge's rate here) waits until the run is over, so it does not take the load generator's CPU and with it the edge's offered load. Unpinned: no affinity. Servers are interleaved round by round, the order rotating each round; each got a 1 s warm-up before the first round.\n", e.o.serverCPU, e.o.serverCPU, e.o.loadCPU, e.o.loadCPU)
	p("- Efficiency: requests per server CPU-second, from the kernel's per-process accounting (utime+stime in `/proc/<pid>/stat`, summed over the server's processes: nginx's master and workers; for fasthttp+redis the fasthttp process, with redis-server's CPU beside it). On 2 cores the load generator saturates its own core, so req/s hardly separates servers; req per CPU-second does.\n")
	p("- Noise: the machine's busy CPU (`/proc/stat`) minus the server, its helper and the load generator is \"other CPU\", recorded per run; runs where it exceeds %.2f of a core are flagged. Before each run the suite waits (up to 20 s) until the machine is quiet, under 0.1 of a core busy, so one run's after-work (the edge's back end rolling up its clicks) does not land in the next; %d runs started without that.\n", noisy, r.unsettled)
	p("- Answers: before any timing, every system is asked the first 3,000 requests of the sample and status and `Location` are compared (table below); the paced generator checks every answer it times; wrk's non-3xx count is compared with the 10%% of unknown codes.\n\n")
	p("Commands (ports and temporary paths elided):\n\n```\n%s\n```\n\n", strings.Join(e.commands, "\n"))

	findings := e.findings()
	if len(findings) > 0 {
		p("## Findings\n\n")
		for _, f := range findings {
			p("- %s\n", f)
		}
		p("\n")
	}

	if len(r.pick("redirect", "pinned", base, func(x runRec) float64 { return x.rps })) > 0 {
		e.redirectSection(&b, dir, stem)
	}
	if len(r.pick("scan", "pinned", base, func(x runRec) float64 { return x.rps })) > 0 {
		e.scanSection(&b)
	}
	if len(r.prop) > 0 {
		e.propSection(&b)
	}
	e.memSection(&b)
	if len(r.createRatios) > 0 {
		e.createSection(&b)
	}
	if err := e.bulkSection(dir, stem); err != nil {
		return err
	}
	for _, s := range r.sections {
		p("## %s\n\n%s\n", s.title, strings.TrimSpace(s.body)+"\n")
	}
	p("## Answers checked\n\n")
	t = report.Table{Header: []string{"system", "asked", "right", "refused (429/503)", "wrong", "first wrong"}, Align: "lrrrrl"}
	for _, c := range r.checks {
		if c.skipped {
			t.Add(c.server, fmt.Sprint(c.asked), "not checked", "", "", "constant answer")
			continue
		}
		t.Add(c.server, fmt.Sprint(c.asked), fmt.Sprint(c.right), fmt.Sprint(c.refused), fmt.Sprint(c.wrong), c.example)
	}
	p("%s\n", t.Markdown())
	if len(r.wrong) > 0 {
		p("Wrong answers while timed:\n\n")
		for _, w := range r.wrong {
			p("- %s\n", w)
		}
		p("\n")
	}
	e.noiseSection(&b)
	if len(r.failures) > 0 {
		p("## Failed scenarios\n\n")
		for _, f := range r.failures {
			p("- %s\n", strings.ReplaceAll(f, "\n", " "))
		}
		p("\n")
	}
	file := filepath.Join(dir, stem+".md")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Println("   wrote", file)
	return nil
}

// ratioSummary is x/base round by round for one scenario and variant.
func (e *env) ratioSummary(scenario, variant, server string, f func(runRec) float64) report.Summary {
	return report.Summarize(report.Ratios(e.res.pick(scenario, variant, server, f), e.res.pick(scenario, variant, base, f)))
}

func (e *env) propSection(b *strings.Builder) {
	r := &e.res
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var c, f, a []time.Duration
	for _, x := range r.prop {
		c, f, a = append(c, x.create), append(f, x.first), append(a, x.applied)
	}
	c, f, a = sortedDurations(c), sortedDurations(f), sortedDurations(a)
	p("## Propagation (create → first 302 on the edge)\n\n")
	p("%d single creates (`POST /api/v1/links`), one after another; after each 201 the edge is asked for the code every millisecond until it answers 302 (with the right `Location`), and its `/metrics` until its change feed has applied the link's version. Baseline: the create's own round trip.\n\n", len(r.prop))
	t := report.Table{Header: []string{"from the create request's start", "p50 ms", "p99 ms", "max ms", "p50 × create", "p99 × create"}, Align: "lrrrrr"}
	row := func(name string, s []time.Duration) {
		t.Add(name, fmt.Sprintf("%.2f", ms(quantile(s, 0.5))), fmt.Sprintf("%.2f", ms(quantile(s, 0.99))), fmt.Sprintf("%.2f", ms(s[len(s)-1])),
			fmt.Sprintf("%.2f×", float64(quantile(s, 0.5))/float64(quantile(c, 0.5))), fmt.Sprintf("%.2f×", float64(quantile(s, 0.99))/float64(quantile(c, 0.99))))
	}
	row("201 received (baseline)", c)
	row("first 302 on the edge", f)
	row("applied from the change stream", a)
	p("%s\n", t.Markdown())
	p("A first 302 before the stream has delivered the change comes from the edge's authority lookup (the visibility contract); the stream time is the relay's and JetStream's delay, polled every millisecond.\n\n")
}

func (e *env) memSection(b *strings.Builder) {
	r := &e.res
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	n := float64(len(e.codes))
	p("## Memory per link and cold start\n\n")
	if len(r.mem) > 0 {
		p("Resident memory of each running server with all %d links loaded, divided by the links (runtime and buffers included, so it overstates the per-link cost of a small set). nginx's figure sums RSS over its master and workers, which share the map's pages after fork, so it overstates nginx up to its process count (3 here):\n\n", len(e.codes))
		t := report.Table{Header: []string{"system", "RSS MiB", "bytes per link", "× net/http+map"}, Align: "lrrr"}
		var gm float64
		for _, m := range r.mem {
			if m.server == "net/http+map" {
				gm = float64(m.rss)
			}
		}
		for _, m := range r.mem {
			name, rss := m.server, float64(m.rss)
			if m.extraRSS > 0 {
				rss += float64(m.extraRSS)
				name += fmt.Sprintf(" (with redis-server; its used_memory %.0f B/link)", float64(m.redisUsed)/n)
			}
			t.Add(name, fmt.Sprintf("%.0f", rss/(1<<20)), fmt.Sprintf("%.0f", rss/n), fmt.Sprintf("%.2f×", rss/gm))
		}
		p("%s\n", t.Markdown())
	}
	if len(r.cold) > 0 {
		p("Cold start: from spawning the process to its first correct 302 (the edge: and to `/-/readyz` 200, i.e. caught up), and its memory then (nginx's summed over its processes, as above). The snapshot was built by control's builder (`control/snapshots`) in %s, %.1f MiB (%.1f bytes per link), and published to the object store. The \"snapshot\" row is shared/snapshot's reader served directly by a minimal fasthttp server (the format's own cost). ",
			r.snapBuild.Round(100*time.Millisecond), float64(r.snapBytes)/(1<<20), float64(r.snapBytes)/n)
		if r.edgeSnapBoot {
			p("The edge row is the edge binary booting from that snapshot: it fetched the published snapshot from JetStream into an empty folder, loaded it and replayed the stream after it.\n\n")
		} else {
			p("**The edge binary cannot boot from a snapshot yet**, so the edge row is today's boot path: replaying the whole change stream.\n\n")
		}
		t := report.Table{Header: []string{"system", "cold start s", "× net/http+map", "RSS MiB", "bytes per link", "× net/http+map"}, Align: "lrrrrr"}
		pick := func(kind string, f func(coldRec) float64) []float64 {
			var out []float64
			for _, x := range r.cold {
				if x.kind == kind {
					out = append(out, f(x))
				}
			}
			return out
		}
		took := func(x coldRec) float64 { return x.took.Seconds() }
		rss := func(x coldRec) float64 { return float64(x.rss) }
		for _, k := range []string{"net/http+map", "snapshot", "nginx", "edgelink-edge"} {
			t.Add(k, report.Summarize(pick(k, took)).Format("%.2f"), report.Summarize(report.Ratios(pick(k, took), pick("net/http+map", took))).Ratio(),
				report.Summarize(pick(k, func(x coldRec) float64 { return rss(x) / (1 << 20) })).Format("%.0f"),
				report.Summarize(pick(k, func(x coldRec) float64 { return rss(x) / n })).Format("%.0f"),
				report.Summarize(report.Ratios(pick(k, rss), pick("net/http+map", rss))).Ratio())
		}
		p("%s\n", t.Markdown())
	}
}

func (e *env) createSection(b *strings.Builder) {
	r := &e.res
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Create load (bench/create)\n\n")
	p("`bench/create` (its own PostgreSQL, fsync on; control's API in-process; vegeta against `POST /api/v1/links` and `/batch` beside a raw pgx insert loop writing the same rows) ran once per round, %s per phase. Its ratios:\n\n", e.o.createDur)
	var keys []string
	for k := range r.createRatios[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	t := report.Table{Header: []string{"ratio", "median (min–max)"}, Align: "lr"}
	for _, k := range keys {
		var xs []float64
		for _, m := range r.createRatios {
			if v, ok := m[k]; ok {
				xs = append(xs, v)
			}
		}
		t.Add(k, report.Summarize(xs).Ratio())
	}
	p("%s\n", t.Markdown())
	p("Its full output, last round:\n\n```\n%s\n```\n\n", strings.TrimSpace(r.createOut[len(r.createOut)-1]))
}

func (e *env) noiseSection(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Noise\n\n")
	var flagged, total int
	t := report.Table{Header: []string{"scenario", "variant", "round", "system", "req/s", "server CPU s", "load gen CPU s", "other CPU (cores)", ""}, Align: "lllrrrrrl"}
	for _, x := range e.res.runs {
		if x.scenario == "warmup" {
			continue
		}
		total++
		other := x.otherCPU / x.wall
		flag := ""
		if other > noisy {
			flag, flagged = "noisy", flagged+1
		}
		t.Add(x.scenario, x.variant, fmt.Sprint(x.round), x.server, fmt.Sprintf("%.0f", x.rps), fmt.Sprintf("%.2f", x.serverCPU),
			fmt.Sprintf("%.2f", x.loadCPU), fmt.Sprintf("%.2f", other), flag)
	}
	p("%d of %d timed runs had other processes using more than %.2f of a core (flagged below). Ratios are taken within a round, which cancels slow drifts but not a burst during one system's run; the min–max ranges show how much that moved them.\n\n", flagged, total, noisy)
	p("<details><summary>Every run</summary>\n\n%s\n</details>\n\n", t.Markdown())
}

// latencyTable writes the latency table of one scenario (servers without
// runs in it are left out) and returns the chart's series.
func (e *env) latencyTable(b *strings.Builder, scenario, title string) []report.Series {
	r := &e.res
	b.WriteString(title)
	t := report.Table{Header: []string{"system", "sent/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "p99 × bare", "server CPU per request × bare", "generator CPU (cores)", "wrong", "429/503"}, Align: "lrrrrrrrrrrr"}
	cpuPerReq := func(x runRec) float64 { return x.serverCPU / x.requests }
	var series []report.Series
	for _, s := range e.servers {
		if len(r.pick(scenario, "pinned", s.name, func(runRec) float64 { return 0 })) == 0 {
			continue
		}
		q := func(f func(runRec) time.Duration) report.Summary {
			return report.Summarize(r.pick(scenario, "pinned", s.name, func(x runRec) float64 { return ms(f(x)) }))
		}
		p50, p90, p99, p999, pmax := q(func(x runRec) time.Duration { return x.p50 }), q(func(x runRec) time.Duration { return x.p90 }),
			q(func(x runRec) time.Duration { return x.p99 }), q(func(x runRec) time.Duration { return x.p999 }), q(func(x runRec) time.Duration { return x.pmax })
		wrong := report.Summarize(r.pick(scenario, "pinned", s.name, func(x runRec) float64 { return float64(x.wrong) }))
		ref := report.Summarize(r.pick(scenario, "pinned", s.name, func(x runRec) float64 { return float64(x.refused) }))
		t.Add(s.name, report.Summarize(r.pick(scenario, "pinned", s.name, func(x runRec) float64 { return x.sentRate })).Format("%.0f"),
			p50.Format("%.3f"), p90.Format("%.3f"), p99.Format("%.3f"), p999.Format("%.3f"), pmax.Format("%.1f"),
			e.ratioSummary(scenario, "pinned", s.name, func(x runRec) float64 { return ms(x.p99) }).Ratio(),
			e.ratioSummary(scenario, "pinned", s.name, cpuPerReq).Ratio(),
			report.Summarize(r.pick(scenario, "pinned", s.name, func(x runRec) float64 { return x.loadCPU / x.wall })).Format("%.2f"),
			wrong.Format("%.0f"), ref.Format("%.0f"))
		series = append(series, report.Series{Name: s.name, Values: []float64{p50.Median, p90.Median, p99.Median, p999.Median}})
	}
	b.WriteString(t.Markdown() + "\n")
	for _, x := range r.runs {
		if x.scenario == scenario && x.wall > 0 && x.loadCPU/x.wall > 0.85 {
			b.WriteString("**The generator used more than 0.85 of its core in at least one of these runs**: there, its own queue is part of the latencies.\n\n")
			break
		}
	}
	return series
}

// findings states, in words, where edgelink wins and loses in this run.
func (e *env) findings() []string {
	r := &e.res
	var out []string
	per := func(x runRec) float64 { return x.perCPU }
	edge := r.pick("redirect", "pinned", "edgelink-edge", per)
	if len(edge) == 0 {
		return nil
	}
	if pr := e.ratioSummary("pairs", "pinned", "edgelink-edge", per); pr.N > 0 {
		out = append(out, fmt.Sprintf("In %d back-to-back pinned pairs, the edge served %s the requests per server CPU-second of bare fasthttp (target: at least 0.9×).", pr.N, pr.Ratio()))
	}
	for _, s := range e.servers {
		if s.name == "edgelink-edge" {
			continue
		}
		ratio := report.Summarize(report.Ratios(edge, r.pick("redirect", "pinned", s.name, per)))
		word := "more"
		if ratio.Median < 1 {
			word = "fewer"
		}
		out = append(out, fmt.Sprintf("Pinned, the edge served %s requests per server CPU-second than %s: %s.", word, s.name, ratio.Ratio()))
	}
	if r.streamTook > 10*time.Second {
		out = append(out, fmt.Sprintf("Loading %d links through the batch API took %s (%.0f links/s), but the edge had them all only %s later: the outbox relay and the change stream delivered about %.0f changes/s, so a bulk load reaches edges at the relay's pace, not the API's.",
			len(e.codes), r.loadTook.Round(time.Second), float64(len(e.codes))/r.loadTook.Seconds(), r.streamTook.Round(time.Second),
			float64(len(e.codes))/(r.loadTook+r.streamTook).Seconds()))
	}
	p99 := func(x runRec) float64 { return ms(x.p99) }
	ep := r.pick("latency", "pinned", "edgelink-edge", p99)
	for _, s := range e.servers {
		if s.name == "edgelink-edge" || len(ep) == 0 {
			continue
		}
		ratio := report.Summarize(report.Ratios(ep, r.pick("latency", "pinned", s.name, p99)))
		if ratio.Median > 1.1 {
			out = append(out, fmt.Sprintf("The edge's p99 at %d req/s was higher than %s's: %s.", r.rate, s.name, ratio.Ratio()))
		}
	}
	if hp := report.Summarize(r.pick("latency-half", "pinned", "edgelink-edge", p99)); hp.N > 0 {
		line := fmt.Sprintf("At half its own peak (%d req/s, pinned, %d client addresses) the edge's p99 was %s ms", r.halfRate, e.o.conns, hp.Format("%.2f"))
		if bp := report.Summarize(r.pick("latency-half", "pinned", base, p99)); bp.N > 0 {
			line += fmt.Sprintf("; bare-fasthttp's at the same rate %s ms; edge ÷ bare %s (target: at most 1.5×)", bp.Format("%.2f"),
				e.ratioSummary("latency-half", "pinned", "edgelink-edge", p99).Ratio())
		}
		out = append(out, line+".")
	}
	for _, sc := range []string{"latency-half", "scan-many"} {
		var unknown, by404, trips float64
		for _, x := range r.runs {
			if x.scenario == sc && x.server == "edgelink-edge" {
				unknown, by404, trips = unknown+float64(x.unknown), by404+float64(x.unknownBy["404"]), trips+x.authority
			}
		}
		if unknown > 0 {
			out = append(out, fmt.Sprintf("From many addresses (%s), the edge answered %.2f%% of %.0f unknown codes 404 (target: 100%% with the authority up), with %.0f authority round trips per 100,000 misses (target: under 2,000).",
				sc, 100*by404/unknown, unknown, 100_000*trips/unknown))
		}
	}
	var edgeRefused float64
	for _, c := range r.checks {
		if c.server == "edgelink-edge" && c.refused > 0 {
			edgeRefused = float64(c.refused) / float64(c.asked)
		}
	}
	if edgeRefused > 0 {
		out = append(out, fmt.Sprintf("The answers check (one address, 127.0.0.1) got %.1f%% of its requests answered 429 or 503 by the edge rather than 404: past a client's budget of 404s (1,000, then 50/s) unknown codes are answered 429. The baselines answer 404 from their own data.", 100*edgeRefused))
	}
	return out
}

func (e *env) writeSoakReport() error {
	dir, stem := e.outName()
	stem += "-soak"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := e.res.machine
	p("# edgelink soak, %s\n\n", e.res.started.Format("2006-01-02 15:04 MST"))
	p("Machine: %s, %d cores, kernel %s, %s. %d links created through the batch API; then for %s vegeta alternated %d req/s of the redirect mix (10%% unknown codes) between the edge and net/http+map (the baseline), while 5 links/s were created through the API. Resident memory sampled every 10 s. Commands:\n\n```\n%s\n```\n\n",
		m.cpu, m.cores, m.kernel, m.goVersion, len(e.codes), e.o.soak, e.o.soakRate, strings.Join(e.commands, "\n"))
	series := map[string][]float64{}
	var xs []float64
	t := report.Table{Header: []string{"elapsed", "edgelink-edge RSS MiB", "net/http+map RSS MiB", "edge ÷ map"}, Align: "rrrr"}
	for i := 0; i+1 < len(e.res.soak); i += 2 {
		a, g := e.res.soak[i], e.res.soak[i+1]
		xs = append(xs, a.at.Minutes())
		series[a.server] = append(series[a.server], float64(a.rss)/(1<<20))
		series[g.server] = append(series[g.server], float64(g.rss)/(1<<20))
		t.Add(a.at.Round(time.Second).String(), fmt.Sprintf("%.0f", float64(a.rss)/(1<<20)), fmt.Sprintf("%.0f", float64(g.rss)/(1<<20)), fmt.Sprintf("%.2f×", float64(a.rss)/float64(g.rss)))
	}
	if n := len(series["edgelink-edge"]); n > 1 {
		s := series["edgelink-edge"]
		p("Edge RSS at the end ÷ at the start: %.2f× (net/http+map: %.2f×).\n\n", s[n-1]/s[0], series["net/http+map"][n-1]/series["net/http+map"][0])
	}
	p("![memory](%s.png)\n\n%s\n", stem, t.Markdown())
	if len(e.res.failures) > 0 {
		p("Failures: %s\n", strings.Join(e.res.failures, "; "))
	}
	if err := report.LineChart(filepath.Join(dir, stem+".png"), "Resident memory under load", "minutes", "MiB", xs,
		[]report.Series{{Name: "edgelink-edge", Values: series["edgelink-edge"]}, {Name: "net/http+map", Values: series["net/http+map"]}}, false); err != nil {
		return err
	}
	file := filepath.Join(dir, stem+".md")
	fmt.Println("   wrote", file)
	return os.WriteFile(file, []byte(b.String()), 0o644)
}
