package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
)

type options struct {
	links       int
	rounds      int
	pairs       int
	duration    time.Duration // wrk run per server per round
	latDuration time.Duration // paced run per server per round
	rate        int           // paced rate; 0 picks half the slowest server's peak
	samples     int
	seed        uint64
	conns       int
	serverCPU   string
	loadCPU     string
	scenarios   map[string]bool
	out         string
	propagation int
	createDur   time.Duration
	soak        time.Duration
	soakRate    int
	keepTemp    bool
}

// env is one run: its processes, stack, servers and recorded figures.
type env struct {
	o        options
	ctx      context.Context
	procs    *measure.Group
	dir      string
	self     string
	log      *os.File // processes' output and the progress log
	st       *benchStack
	codes    []string
	urls     []string
	servers  []*server // in report order, bare first
	mixFile  string    // request sample with 10% unknown codes
	scanFile string    // 90% unknown codes
	commands []string  // the exact commands, for the report
	res      results
}

func run(ctx context.Context, args []string) (err error) {
	// A panic must not skip the deferred cleanup below.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.links, "links", 1_000_000, "links to create through control's batch API")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; servers are interleaved within each round")
	fs.IntVar(&o.pairs, "pairs", 8, "back-to-back pinned wrk pairs of the edge and bare fasthttp (the edge's efficiency target)")
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "wrk run per server per round")
	fs.DurationVar(&o.latDuration, "latency-duration", 3*time.Second, "paced fixed-rate run per server per round")
	fs.IntVar(&o.rate, "rate", 0, "paced rate (requests/s) for every server; 0 is half the slowest server's median wrk throughput, at most 20000")
	fs.IntVar(&o.samples, "samples", 200_000, "requests in each replayed sample")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the data set and samples")
	fs.IntVar(&o.conns, "connections", 64, "connections of wrk and the paced generator")
	fs.StringVar(&o.serverCPU, "server-cpu", "0", "CPUs of the servers in the pinned variant (taskset list)")
	fs.StringVar(&o.loadCPU, "load-cpu", "1", "CPUs of the load generator in the pinned variant")
	scen := fs.String("scenarios", "redirect,scan,propagation,coldstart,create", "scenarios to run")
	fs.StringVar(&o.out, "out", "bench/results", "folder for the results file and charts")
	fs.IntVar(&o.propagation, "propagation", 200, "creates timed until their first 302")
	fs.DurationVar(&o.createDur, "create-duration", 2*time.Second, "phase length of bench/create")
	fs.DurationVar(&o.soak, "soak", 0, "run the soak instead of the suite: this long under load, memory sampled")
	fs.IntVar(&o.soakRate, "soak-rate", 2000, "soak request rate (requests/s)")
	fs.BoolVar(&o.keepTemp, "keep", false, "keep the temporary folder (logs, configs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.scenarios = map[string]bool{}
	for _, s := range strings.Split(*scen, ",") {
		o.scenarios[strings.TrimSpace(s)] = true
	}
	if o.soak > 0 {
		o.scenarios = map[string]bool{}
	}
	for _, tool := range []string{"wrk", "nginx", "redis-server", "taskset", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: `go tool task bench` installs wrk, nginx-light and redis-server with apt-get", tool)
		}
	}

	e := &env{o: o, ctx: ctx, procs: measure.NewGroup(nil)}
	e.dir, err = os.MkdirTemp("", "edgelink-bench-")
	if err != nil {
		return err
	}
	if err := os.Chmod(e.dir, 0o755); err != nil {
		return err
	}
	if o.keepTemp {
		fmt.Println("temporary folder:", e.dir)
	} else {
		defer os.RemoveAll(e.dir)
	}
	e.log, err = os.Create(filepath.Join(e.dir, "processes.log"))
	if err != nil {
		return err
	}
	defer e.log.Close()
	e.procs = measure.NewGroup(io.MultiWriter(e.log, os.Stdout))
	// Stop everything this run started, whatever happens, SIGINT included:
	// ctx is cancelled by the signal and every step below returns.
	defer func() {
		e.procs.Stop()
		if e.st != nil {
			e.st.stop()
		}
	}()
	if e.self, err = os.Executable(); err != nil {
		return err
	}
	e.res.started = time.Now()
	e.res.machine = machine()
	e.res.opts = o

	step := func(name string, fn func() error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Printf("== %s\n", name)
		t := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("   %s done in %s\n", name, time.Since(t).Round(100*time.Millisecond))
		return nil
	}
	if err := step("build", e.build); err != nil {
		return err
	}
	if err := step("stack and data set", e.setup); err != nil {
		return err
	}
	if err := step("baselines", e.startBaselines); err != nil {
		return err
	}
	if err := step("answers check", e.checkAnswers); err != nil {
		return err
	}
	if o.soak > 0 {
		return step("soak", e.soakRun)
	}
	e.memory()
	for _, s := range []struct {
		name string
		fn   func() error
	}{
		{"redirect", e.redirect},
		{"scan", e.scan},
		{"propagation", e.propagate},
		{"coldstart", e.coldStart},
		{"create", e.create},
	} {
		if !o.scenarios[s.name] {
			continue
		}
		if err := step(s.name, s.fn); err != nil {
			if ctx.Err() != nil {
				return err
			}
			// One scenario failing does not lose the others: it is
			// reported as failed.
			fmt.Fprintln(os.Stderr, err)
			e.res.failures = append(e.res.failures, err.Error())
		}
	}
	e.res.finished = time.Now()
	return step("report", e.writeReport)
}

func (e *env) build() error {
	for _, b := range [][2]string{{"edge", "./edge/cmd/edge"}, {"create", "./bench/create"}} {
		if b[0] == "create" && !e.o.scenarios["create"] {
			continue
		}
		out, err := exec.CommandContext(e.ctx, "go", "build", "-o", filepath.Join(e.dir, b[0]), b[1]).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %w\n%s", b[1], err, out)
		}
	}
	return nil
}

func (e *env) setup() error {
	var err error
	e.st, err = startStack(e.ctx, e.dir, e.procs, filepath.Join(e.dir, "edge"), e.log)
	if err != nil {
		return err
	}
	fmt.Printf("   stack up: control %s, edge %s (pid %d)\n", e.st.controlURL, e.st.edgeURL, e.st.edge.PID())
	took, err := e.st.loadLinks(e.ctx, e.o.links, e.o.seed, 4, os.Stdout)
	if err != nil {
		return err
	}
	e.res.loadTook = took
	var maxV uint64
	e.codes, e.urls, maxV, err = e.st.dump(e.ctx)
	if err != nil {
		return err
	}
	if len(e.codes) != e.o.links {
		return fmt.Errorf("the authority holds %d active links, want %d", len(e.codes), e.o.links)
	}
	t := time.Now()
	if err := waitApplied(e.ctx, e.st.edgeURL, maxV, 10*time.Minute); err != nil {
		return err
	}
	e.res.streamTook = time.Since(t) // beyond the load itself
	var total int
	for _, u := range e.urls {
		total += len(u)
	}
	e.res.avgURL = float64(total) / float64(len(e.urls))
	fmt.Printf("   %d links loaded in %s (%.0f links/s); edge caught up %s later; average target %.1f bytes\n",
		len(e.codes), took.Round(time.Second), float64(len(e.codes))/took.Seconds(), e.res.streamTook.Round(100*time.Millisecond), e.res.avgURL)
	if err := writeLinks(filepath.Join(e.dir, "links.tsv"), e.codes, e.urls); err != nil {
		return err
	}
	write := func(name string, unknown float64) (string, error) {
		reqs := dataset.Sample(e.codes, e.urls, dataset.SampleConfig{Requests: e.o.samples, S: 1.1, Unknown: unknown, Seed: e.o.seed})
		f := filepath.Join(e.dir, name)
		w, err := os.Create(f)
		if err != nil {
			return "", err
		}
		if err := dataset.WriteRequests(w, reqs); err != nil {
			w.Close()
			return "", err
		}
		if err := w.Close(); err != nil {
			return "", err
		}
		if err := os.WriteFile(f+".lua", []byte(wrkLua(f)), 0o644); err != nil {
			return "", err
		}
		return f, nil
	}
	if e.mixFile, err = write("mix.tsv", 0.10); err != nil {
		return err
	}
	e.scanFile, err = write("scan.tsv", 0.90)
	return err
}

func (e *env) startBaselines() error {
	links := filepath.Join(e.dir, "links.tsv")
	bare, err := startSelf(e.procs, e.self, kindBare, links, "", e.log)
	if err != nil {
		return err
	}
	bare.name = "bare-fasthttp"
	t := time.Now()
	ngx, err := startNginx(e.procs, e.dir, e.codes, e.urls, e.log)
	if err != nil {
		return err
	}
	raddr, rproc, err := startRedis(e.ctx, e.procs, e.dir, e.codes, e.urls, e.log)
	if err != nil {
		return err
	}
	rs, err := startSelf(e.procs, e.self, kindRedis, links, raddr, e.log)
	if err != nil {
		return err
	}
	rs.name = "fasthttp+redis"
	rs.extra = func() []int { return []int{rproc.PID()} }
	rs.note = "CPU column: the fasthttp process; redis-server's CPU is reported beside it"
	e.res.redisAddr = raddr
	gm, err := startSelf(e.procs, e.self, kindGoMap, links, "", e.log)
	if err != nil {
		return err
	}
	gm.name = "net/http+map"
	edge := &server{name: "edgelink-edge", url: e.st.edgeURL, pids: func() []int { return []int{e.st.edge.PID()} }, proc: e.st.edge,
		note: "the edge binary with its defaults, data from the change stream"}
	e.servers = []*server{bare, ngx, rs, gm, edge}
	// Every server answers a known code with 302 before it is measured.
	known := "/" + e.codes[len(e.codes)/2]
	for _, s := range e.servers {
		if err := waitHTTP(e.ctx, s.url+known, 302, 5*time.Minute); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	fmt.Printf("   baselines up in %s\n", time.Since(t).Round(100*time.Millisecond))
	return nil
}

// checkAnswers asks every server the first 3,000 requests of the mix
// sample and compares status and Location: a fast wrong answer is a
// failure, not a result.
func (e *env) checkAnswers() error {
	f, err := os.Open(e.mixFile)
	if err != nil {
		return err
	}
	reqs, err := dataset.ReadRequests(f)
	f.Close()
	if err != nil {
		return err
	}
	reqs = reqs[:min(3000, len(reqs))]
	for _, s := range e.servers {
		c := checkResult{server: s.name}
		for _, q := range reqs {
			resp, err := noFollow.Get(s.url + q.Path)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			resp.Body.Close()
			c.asked++
			switch {
			case s.name == "bare-fasthttp":
				// The ceiling answers every code alike: not checked.
				c.skipped = true
			case resp.StatusCode == q.Status && (q.Status != 302 || resp.Header.Get("Location") == q.Location):
				c.right++
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
				c.refused++
			default:
				c.wrong++
				if c.example == "" {
					c.example = fmt.Sprintf("%s: got %d %q, want %d %q", q.Path, resp.StatusCode, resp.Header.Get("Location"), q.Status, q.Location)
				}
			}
		}
		e.res.checks = append(e.res.checks, c)
		fmt.Printf("   %-15s %d asked, %d right, %d refused (429/503), %d wrong %s\n", s.name, c.asked, c.right, c.refused, c.wrong, c.example)
	}
	return nil
}

// memory records each server's resident memory with the links loaded.
func (e *env) memory() {
	for _, s := range e.servers {
		_, rss := measure.Usage(s.pids())
		m := memRec{server: s.name, rss: rss}
		if s.extra != nil {
			_, m.extraRSS = measure.Usage(s.extra())
			m.redisUsed, _ = redisMemory(e.ctx, e.res.redisAddr)
		}
		e.res.mem = append(e.res.mem, m)
	}
}

// measured is one server's usage over one load run.
type usage struct {
	serverCPU, extraCPU, machineBusy, wall float64
}

// during measures s while fn runs the load. A quiet run (every timed
// comparison; not the warm-up or the soak, which keep the whole system
// running) starts on a quiet machine with the click rollup paused.
func (e *env) during(s *server, quiet bool, fn func() (loadCPU float64, err error)) (u usage, loadCPU float64, err error) {
	if quiet && e.st != nil {
		// The back end first rolls up what earlier runs sent, then rests.
		e.settle()
		e.st.pauseClicks()
		defer e.st.resumeClicks()
	}
	pids := s.pids()
	var extra []int
	if s.extra != nil {
		extra = s.extra()
	}
	c0, _ := measure.Usage(pids)
	x0, _ := measure.Usage(extra)
	m0, err := measure.ReadMachineCPU()
	if err != nil {
		return u, 0, err
	}
	t0 := time.Now()
	loadCPU, err = fn()
	u.wall = time.Since(t0).Seconds()
	c1, _ := measure.Usage(pids)
	x1, _ := measure.Usage(extra)
	m1, _ := measure.ReadMachineCPU()
	u.serverCPU, u.extraCPU, u.machineBusy = c1-c0, x1-x0, m1.Busy-m0.Busy
	return u, loadCPU, err
}

func quietRun(scenario string) bool { return scenario != "warmup" && scenario != "soak" }

// settle waits, up to 20 s, until the machine is quiet (under a tenth of a
// core busy over a quarter second): the previous run's work must not
// spill into the next, like the edge's back end rolling up the clicks of
// the edge's run during whichever server's run comes after it.
func (e *env) settle() {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m0, err := measure.ReadMachineCPU()
		if err != nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
		m1, err := measure.ReadMachineCPU()
		if err != nil || (m1.Busy-m0.Busy)/0.25 < 0.1 {
			return
		}
	}
	e.res.unsettled++
}

// runLoad runs a load generator command and returns its CPU seconds.
func (e *env) runLoad(argv []string) ([]byte, float64, error) {
	cmd := exec.CommandContext(e.ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	cpu := 0.0
	if cmd.ProcessState != nil {
		cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return []byte(out.String()), cpu, fmt.Errorf("%s: %w\n%s", measure.Quote(argv), err, trimLines(out.String(), 20))
	}
	return []byte(out.String()), cpu, nil
}

func (e *env) record(cmd []string) {
	q := measure.Quote(cmd)
	if !slices.Contains(e.commands, q) {
		e.commands = append(e.commands, q)
	}
}

// wrk runs wrk against s and returns the run's record.
func (e *env) wrk(s *server, scenario, variant string, round int, luaFile string, d time.Duration) (runRec, error) {
	cpus := ""
	if variant == "pinned" {
		cpus = e.o.loadCPU
	}
	argv := measure.Pinned(cpus, "wrk", "-t1", fmt.Sprintf("-c%d", e.o.conns), "-d"+durSeconds(d), "--timeout", "5s", "-s", luaFile, s.url)
	e.record(measure.Pinned(cpus, "wrk", "-t1", fmt.Sprintf("-c%d", e.o.conns), "-d"+durSeconds(d), "--timeout", "5s", "-s", filepath.Base(luaFile), "http://127.0.0.1:PORT"))
	var w wrkResult
	u, loadCPU, err := e.during(s, quietRun(scenario), func() (float64, error) {
		out, cpu, err := e.runLoad(argv)
		if err != nil {
			return cpu, err
		}
		w, err = parseWrk(out)
		return cpu, err
	})
	if err != nil {
		return runRec{}, err
	}
	r := runRec{scenario: scenario, variant: variant, server: s.name, round: round, tool: "wrk",
		requests: float64(w.Requests), rps: w.RPS, serverCPU: u.serverCPU, extraCPU: u.extraCPU, loadCPU: loadCPU,
		otherCPU: max(0, u.machineBusy-u.serverCPU-u.extraCPU-loadCPU), wall: u.wall, non3xx: w.Non3xx, sockErr: w.Errors}
	r.perCPU = r.requests / r.serverCPU
	return r, nil
}

// paced runs `suite attack` (the paced open-loop generator) against s at
// the given rate.
func (e *env) paced(s *server, scenario, variant string, round int, file string, rate int, d time.Duration) (runRec, attackResult, error) {
	cpus := ""
	if variant == "pinned" {
		cpus = e.o.loadCPU
	}
	args := []string{"attack", "-url", s.url, "-requests", file, "-rate", fmt.Sprint(rate), "-duration", d.String(), "-connections", fmt.Sprint(e.o.conns)}
	if s.name == base {
		args = append(args, "-check=false") // a constant answer
	}
	argv := measure.Pinned(cpus, append([]string{e.self}, args...)...)
	e.record(measure.Pinned(cpus, append([]string{"suite"}, "attack", "-url", "http://127.0.0.1:PORT", "-requests", filepath.Base(file),
		"-rate", fmt.Sprint(rate), "-duration", d.String(), "-connections", fmt.Sprint(e.o.conns))...))
	var a attackResult
	u, loadCPU, err := e.during(s, quietRun(scenario), func() (float64, error) {
		out, cpu, err := e.runLoad(argv)
		if err != nil {
			return cpu, err
		}
		return cpu, json.Unmarshal(out, &a)
	})
	if err != nil {
		return runRec{}, a, err
	}
	r := runRec{scenario: scenario, variant: variant, server: s.name, round: round, tool: "paced",
		requests: float64(a.Requests), rps: a.Throughput, serverCPU: u.serverCPU, extraCPU: u.extraCPU, loadCPU: loadCPU,
		otherCPU: max(0, u.machineBusy-u.serverCPU-u.extraCPU-loadCPU), wall: u.wall,
		p50: a.P50, p90: a.P90, p99: a.P99, p999: a.P999, pmax: a.Max, wrong: a.Wrong, refused: a.Codes["429"] + a.Codes["503"],
		sockErr: int64(a.Errors), sentRate: a.Rate}
	r.perCPU = r.requests / r.serverCPU
	if a.Wrong > 0 {
		e.res.wrong = append(e.res.wrong, fmt.Sprintf("%s %s round %d: %d wrong answers, e.g. %s", scenario, s.name, round, a.Wrong, a.FirstWrong))
	}
	return r, a, nil
}

func (e *env) pin(variant string) error {
	cpus, stackCPUs := "", ""
	if variant == "pinned" {
		cpus, stackCPUs = e.o.serverCPU, e.o.loadCPU
	}
	var pids []int
	for _, s := range e.servers {
		pids = append(pids, s.pids()...)
		if s.extra != nil {
			pids = append(pids, s.extra()...)
		}
	}
	// The edge's own back end (control and NATS in this process, and
	// PostgreSQL) is not on its request path, and in production runs on
	// other machines; it still takes the edge's clicks into JetStream
	// during the edge's runs (their rollup waits: during). Left unpinned
	// it would share the servers' core and charge its interference to the
	// edge alone, so the pinned variant puts it beside the load generator.
	// Redis stays with fasthttp+redis: it is on that baseline's request path.
	if err := measure.SetAffinity(stackPIDs(), stackCPUs); err != nil {
		return err
	}
	return measure.SetAffinity(pids, cpus)
}

// stackPIDs is this process (control and NATS run in it) and the
// PostgreSQL processes it started.
func stackPIDs() []int {
	self := os.Getpid()
	out := []int{self}
	for _, pid := range measure.Tree(self)[1:] {
		if st, err := measure.ReadStat(pid); err == nil && st.Comm == "postgres" {
			out = append(out, pid)
		}
	}
	return out
}

// order rotates the servers by round so none always runs first or last.
func (e *env) order(round int) []*server {
	n := len(e.servers)
	out := make([]*server, n)
	for i := range n {
		out[i] = e.servers[(i+round)%n]
	}
	return out
}

// pairs measures the edge against bare fasthttp, pinned, in back-to-back
// pairs whose order alternates (edge first, then bare first): the machine's
// speed drifts by tens of percent over seconds on a shared host, and a
// ratio of two runs taken right after each other, many times over, is the
// least disturbed figure of the edge's efficiency target.
func (e *env) pairs(mixLua string) error {
	var edge, bare *server
	for _, s := range e.servers {
		switch s.name {
		case "edgelink-edge":
			edge = s
		case base:
			bare = s
		}
	}
	if edge == nil || bare == nil || e.o.pairs <= 0 {
		return nil
	}
	if err := e.pin("pinned"); err != nil {
		return err
	}
	d := max(2*time.Second, e.o.duration*3/4)
	for i := 1; i <= e.o.pairs; i++ {
		order := []*server{edge, bare}
		if i%2 == 0 {
			order = []*server{bare, edge}
		}
		for _, s := range order {
			r, err := e.wrk(s, "pairs", "pinned", i, mixLua, d)
			if err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
		}
		a, b := e.res.runs[len(e.res.runs)-2], e.res.runs[len(e.res.runs)-1]
		if a.server != edge.name {
			a, b = b, a
		}
		fmt.Printf("   pair %2d  edge %9.0f req/CPU-s  bare %9.0f req/CPU-s  edge/bare %.2f\n", i, a.perCPU, b.perCPU, a.perCPU/b.perCPU)
	}
	return nil
}

func (e *env) redirect() error {
	mixLua := e.mixFile + ".lua"
	// Warm every server (page in its data, grow buffers) outside the
	// measurement.
	for _, s := range e.servers {
		if _, err := e.wrk(s, "warmup", "unpinned", 0, mixLua, time.Second); err != nil {
			return err
		}
	}
	for _, variant := range []string{"pinned", "unpinned"} {
		if err := e.pin(variant); err != nil {
			return err
		}
		for round := 1; round <= e.o.rounds; round++ {
			for _, s := range e.order(round) {
				r, err := e.wrk(s, "redirect", variant, round, mixLua, e.o.duration)
				if err != nil {
					return err
				}
				e.res.runs = append(e.res.runs, r)
				fmt.Printf("   %-8s round %d %-15s %9.0f req/s %9.0f req/CPU-s  other CPU %.2f cores\n", variant, round, s.name, r.rps, r.perCPU, r.otherCPU/r.wall)
			}
		}
	}
	if err := e.pairs(mixLua); err != nil {
		return err
	}
	// Latency without coordinated omission: the paced generator at one
	// fixed rate for every server, pinned; then the edge and the servers
	// that can take it at half the edge's own peak, the load its latency
	// target is set at.
	if err := e.pin("pinned"); err != nil {
		return err
	}
	rate := e.o.rate
	if rate == 0 {
		slowest := 0.0
		for _, s := range e.servers {
			m := median(e.res.pick("redirect", "pinned", s.name, func(r runRec) float64 { return r.rps }))
			if slowest == 0 || m < slowest {
				slowest = m
			}
		}
		rate = min(20000, max(500, int(slowest/2/100)*100))
	}
	e.res.rate = rate
	for round := 1; round <= e.o.rounds; round++ {
		for _, s := range e.order(round) {
			r, a, err := e.paced(s, "latency", "pinned", round, e.mixFile, rate, e.o.latDuration)
			if err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
			fmt.Printf("   latency  round %d %-15s sent %6.0f/s p50 %8s p99 %8s p99.9 %8s wrong %d refused %d\n", round, s.name, a.Rate, a.P50, a.P99, a.P999, a.Wrong, r.refused)
		}
	}
	edgePeak := median(e.res.pick("redirect", "pinned", "edgelink-edge", func(r runRec) float64 { return r.rps }))
	// Capped like the shared rate: above about 20,000 requests/s the
	// generator's own core, shared with the edge's back end, runs out
	// first here, and its queue would be measured instead of the server's.
	half := min(20000, int(edgePeak/2/100)*100)
	e.res.halfRate, e.res.edgePeak = half, edgePeak
	if half > 0 {
		for round := 1; round <= e.o.rounds; round++ {
			for _, s := range e.order(round) {
				// Only servers whose own median peak is at least 1.5 times
				// the rate: an overloaded server's queue says nothing.
				if peak := median(e.res.pick("redirect", "pinned", s.name, func(r runRec) float64 { return r.rps })); peak < 1.5*float64(half) {
					continue
				}
				r, a, err := e.paced(s, "latency-half", "pinned", round, e.mixFile, half, e.o.latDuration)
				if err != nil {
					return err
				}
				e.res.runs = append(e.res.runs, r)
				fmt.Printf("   latency at the edge's half peak round %d %-15s sent %6.0f/s p50 %8s p99 %8s p99.9 %8s\n", round, s.name, a.Rate, a.P50, a.P99, a.P999)
			}
		}
	}
	return e.pin("")
}

// scan is 90% random codes: closed loop with wrk (what a scanner gets
// through), pinned, with the edge's authority calls counted.
func (e *env) scan() error {
	if err := e.pin("pinned"); err != nil {
		return err
	}
	defer e.pin("")
	lua := e.scanFile + ".lua"
	for round := 1; round <= e.o.rounds; round++ {
		for _, s := range e.order(round) {
			var before map[string]float64
			if s.name == "edgelink-edge" {
				before, _ = edgeMetrics(e.ctx, s.url)
			}
			r, err := e.wrk(s, "scan", "pinned", round, lua, e.o.duration)
			if err != nil {
				return err
			}
			if before != nil {
				after, err := edgeMetrics(e.ctx, s.url)
				if err != nil {
					return err
				}
				r.edge = map[string]float64{}
				for k, v := range after {
					r.edge[k] = v - before[k]
				}
				r.authority = r.edge["edge_authority_requests_total"]
			} else if s.name == "fasthttp+redis" {
				r.authority = r.requests // one Redis GET per request, found or not
			}
			e.res.runs = append(e.res.runs, r)
			fmt.Printf("   scan     round %d %-15s %9.0f req/s %9.0f req/CPU-s authority/Redis calls %.0f\n", round, s.name, r.rps, r.perCPU, r.authority)
		}
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func machine() machineInfo {
	m := machineInfo{goVersion: runtime.Version(), cores: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		l, _, _ := strings.Cut(string(b), "\n")
		m.memory = strings.Join(strings.Fields(l)[1:], " ")
	}
	for _, v := range [][]string{{"nginx", "-v"}, {"redis-server", "--version"}, {"wrk", "-v"}} {
		out, _ := exec.Command(v[0], v[1:]...).CombinedOutput()
		l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		m.tools = append(m.tools, l)
	}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "status", "--porcelain").Output(); err == nil && len(out) > 0 {
		m.dirty = true
	}
	return m
}
