package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with -pprof
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
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
	pprof       string
	geoip       string // the Tor-format country data of the geo scenario
	// rulesBaseline is the git revision whose edge the rules scenario
	// runs beside this tree's.
	rulesBaseline string
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
	scen := fs.String("scenarios", "redirect,scan,propagation,coldstart,create,clicks,writes", "scenarios to run (also: domains, the edge's cost of many hosts; geo, its cost of a country per click; rules, plain links before and after rules and a link with 3 rules)")
	clickOpts := clickFlags(fs)
	writesOpts := writesFlags(fs)
	fs.StringVar(&o.out, "out", "bench/results", "folder for the results file and charts")
	fs.IntVar(&o.propagation, "propagation", 200, "creates timed until their first 302")
	fs.DurationVar(&o.createDur, "create-duration", 5*time.Second, "phase length of bench/create")
	fs.DurationVar(&o.soak, "soak", 0, "run the soak instead of the suite: this long under load, memory sampled")
	fs.IntVar(&o.soakRate, "soak-rate", 2000, "soak request rate (requests/s)")
	fs.BoolVar(&o.keepTemp, "keep", false, "keep the temporary folder (logs, configs)")
	fs.StringVar(&o.geoip, "geoip", ".data/geoip", "Tor-format country data (geoip, geoip6) of the geo scenario: `go tool task geoip` fetches it")
	fs.StringVar(&o.rulesBaseline, "rules-baseline", "f75bb04^", "git revision whose edge the rules scenario runs beside this tree's (default: the commit before the edge evaluated rules)")
	fs.StringVar(&o.pprof, "pprof", "", "serve Go's pprof profiles of this process (control, NATS, the loaders) on this loopback address, and the edge's on the next port")
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

	if o.pprof != "" {
		// Profiles of control, NATS and the loaders while a scenario runs;
		// the edge serves its own when EDGELINK_DEBUG_LISTEN is set.
		ln, err := net.Listen("tcp", o.pprof)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		defer ln.Close()
		go func() { _ = http.Serve(ln, nil) }()
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
		{"clicks", func() error { return e.clicks(clickOpts) }},
		{"writes", func() error { return e.writes(writesOpts) }},
		{"geo", func() error { return e.geo(o.geoip) }},
		{"rules", func() error { return e.rules(o.geoip, o.rulesBaseline) }},
		// Last: it adds as many links again, on other domains.
		{"domains", e.domains},
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
	trace := newBulkTrace()
	sctx, stopSampling := context.WithCancel(e.ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); trace.sample(sctx, e.st.edgeURL) }()
	defer func() { stopSampling(); <-sampled }()
	took, err := e.st.loadLinks(e.ctx, e.o.links, e.o.seed, 4, nil, os.Stdout, trace.batchDone)
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
	if err := waitApplied(e.ctx, e.st.edgeURL, maxV, 10*time.Minute); err != nil {
		return err
	}
	// One more sample after the wait, so the trace holds the moment the
	// edge had them all even if the sampler's last tick came before it.
	stopSampling()
	<-sampled
	trace.applied = append(trace.applied, bulkPoint{time.Since(trace.start), maxV})
	versions, err := e.st.linkVersions(e.ctx)
	if err != nil {
		return err
	}
	trace.finish(versions)
	e.res.bulk = trace
	e.res.streamTook = trace.allApplied - trace.lastBatch // beyond the load itself
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
	reqs, err := dataset.ReadRequestsFile(e.mixFile)
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
