// Command edge is the edge's load benchmark: the real redirect handler over
// 1,000,000 links against a bare fasthttp server answering a constant 302,
// same machine, same run.
//
// It runs each server as its own process (this binary with -serve), drives
// it with wrk (closed loop, for peak throughput) using a Lua script that
// replays a Zipf(s) sample of paths with a share of misses, and divides the
// requests served by the CPU the server process used (utime+stime from
// /proc/<pid>/stat): on a small machine the load generator takes a core of
// its own, so requests per second alone hardly separates servers. Then it
// measures p99 latency open-loop with vegeta at half of each server's peak.
//
//	go run ./bench/edge                  # full run (bench/edge/run.sh installs wrk)
//	go run ./bench/edge -links 100000 -duration 5s
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clicks"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

func main() {
	var (
		serve    = flag.String("serve", "", "internal: run a server (edge or bare) on -addr")
		addr     = flag.String("addr", "127.0.0.1:0", "internal: listen address")
		links    = flag.Int("links", 1_000_000, "links in the edge's store")
		zipfS    = flag.Float64("zipf", 1.1, "Zipf exponent of link popularity")
		misses   = flag.Float64("misses", 0.10, "share of requests for unknown codes")
		samples  = flag.Int("samples", 200_000, "paths in the replayed sample")
		duration = flag.Duration("duration", 10*time.Second, "wrk run per server")
		conns    = flag.Int("connections", 64, "wrk connections")
		threads  = flag.Int("threads", 1, "wrk threads")
		latDur   = flag.Duration("latency-duration", 5*time.Second, "open-loop latency run per server")
	)
	flag.Parse()
	if *serve != "" {
		if err := runServer(*serve, *addr, *links); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := bench(*links, *zipfS, *misses, *samples, *duration, *conns, *threads, *latDur); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// linkID spreads links over a sealed segment: link i has ID base+i.
const base = 1_000_000_000

func runServer(kind, addr string, n int) error {
	var handler fasthttp.RequestHandler
	switch kind {
	case "bare":
		loc := []byte("https://example.com/landing/page?utm_source=bench")
		handler = func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetBytesV(fasthttp.HeaderLocation, loc)
			ctx.SetStatusCode(fasthttp.StatusFound)
		}
	case "edge":
		overlay := store.New()
		hint := store.NewHint(uint(n), 0.01)
		segs := new(store.Segments)
		for i := range n {
			code, _ := base62.Encode(uint64(base + i))
			overlay.Apply(&store.Entry{Code: code, URL: "https://example.com/landing/" + code + "?utm_source=bench",
				RedirectType: link.DefaultRedirect, Status: link.Active, Version: uint64(i + 1)})
			hint.Add(code)
		}
		// Misses are unknown codes of the same sealed segment: answered
		// 404 from the bloom hint, without the authority (there is none
		// here: a miss that needs it answers 503 and shows up in wrk's
		// non-2xx/3xx count).
		segs.Seal(base, base+2*uint64(n))
		cache, err := store.NewCache(100_000)
		if err != nil {
			return err
		}
		res := &resolve.Resolver{Cache: cache, Hint: hint, Segments: segs, Complete: func() bool { return true }}
		rec := clicks.New(discard{}, clicks.Config{Edge: "bench"})
		go rec.Run(context.Background())
		h := &redirect.Handler{Store: overlay, Miss: res, Clicks: rec}
		handler = h.Serve
	default:
		return fmt.Errorf("unknown server %q", kind)
	}
	srv := &fasthttp.Server{Handler: handler, NoDefaultServerHeader: true, NoDefaultContentType: true,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String()) // the parent waits for this line
	return srv.Serve(ln)
}

// discard stands in for JetStream so the benchmark measures the edge, not
// NATS; batches are still encoded.
type discard struct{}

func (discard) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{}, nil
}

func (discard) CreateOrUpdateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, nil
}

type result struct {
	name         string
	requests     int64
	rps          float64
	cpuSeconds   float64
	perCPUSecond float64
	non3xx       int64
	p50, p99     time.Duration
	latencyRate  int
}

func bench(n int, s, missShare float64, samples int, d time.Duration, conns, threads int, latDur time.Duration) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk not found: install it with `apt-get install -y wrk` (bench/edge/run.sh does)")
	}
	dir, err := os.MkdirTemp("", "edgelink-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	paths, err := writeSample(filepath.Join(dir, "paths.txt"), n, s, missShare, samples)
	if err != nil {
		return err
	}
	script := filepath.Join(dir, "zipf.lua")
	if err := os.WriteFile(script, []byte(luaScript(filepath.Join(dir, "paths.txt"))), 0o644); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var results []result
	for _, kind := range []string{"bare", "edge"} {
		r, err := benchServer(self, kind, n, script, paths, d, conns, threads, latDur)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\n%d links, Zipf s=%.2f, %.0f%% misses, wrk -t%d -c%d -d%s\n", n, s, missShare*100, threads, conns, d)
	fmt.Printf("%-6s %12s %12s %10s %16s %8s %10s %10s %10s\n", "server", "requests", "req/s", "cpu s", "req/cpu-second", "non-3xx", "rate", "p50", "p99")
	for _, r := range results {
		fmt.Printf("%-6s %12d %12.0f %10.2f %16.0f %8d %10d %10s %10s\n", r.name, r.requests, r.rps, r.cpuSeconds, r.perCPUSecond, r.non3xx, r.latencyRate, r.p50, r.p99)
	}
	fmt.Printf("edge/bare requests per CPU-second: %.3f\n", results[1].perCPUSecond/results[0].perCPUSecond)
	return nil
}

func benchServer(self, kind string, n int, script string, paths []string, d time.Duration, conns, threads int, latDur time.Duration) (result, error) {
	r := result{name: kind}
	cmd := exec.Command(self, "-serve", kind, "-links", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return r, fmt.Errorf("server did not start: %w", err)
	}
	url := "http://" + strings.TrimSpace(line)
	// Warm up (page in the store, grow buffers) outside the measurement.
	if _, err := runWrk(script, url, 2*time.Second, conns, threads); err != nil {
		return r, err
	}
	before, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	w, err := runWrk(script, url, d, conns, threads)
	if err != nil {
		return r, err
	}
	after, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.requests, r.rps, r.non3xx = w.requests, w.rps, w.non3xx
	r.cpuSeconds = after - before
	r.perCPUSecond = float64(r.requests) / r.cpuSeconds

	// p99 open-loop at half the peak.
	r.latencyRate = int(r.rps / 2)
	targets := make([]vegeta.Target, len(paths))
	for i, p := range paths {
		targets[i] = vegeta.Target{Method: "GET", URL: url + p}
	}
	att := vegeta.NewAttacker(vegeta.Redirects(vegeta.NoFollow), vegeta.KeepAlive(true), vegeta.Connections(conns),
		vegeta.MaxWorkers(uint64(conns)))
	var m vegeta.Metrics
	for res := range att.Attack(vegeta.NewStaticTargeter(targets...), vegeta.Rate{Freq: r.latencyRate, Per: time.Second}, latDur, kind) {
		m.Add(res)
	}
	m.Close()
	r.p50, r.p99 = m.Latencies.P50, m.Latencies.P99
	if m.Rate < float64(r.latencyRate)*0.95 {
		fmt.Fprintf(os.Stderr, "%s: vegeta reached only %.0f of %d req/s: the load generator is the limit on this machine\n", kind, m.Rate, r.latencyRate)
	}
	return r, nil
}

type wrkResult struct {
	requests int64
	rps      float64
	non3xx   int64
}

var (
	reRequests = regexp.MustCompile(`(\d+) requests in`)
	reRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reNon      = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

func runWrk(script, url string, d time.Duration, conns, threads int) (wrkResult, error) {
	out, err := exec.Command("wrk", "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(int(d.Seconds()))+"s", "-s", script, url).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	var w wrkResult
	if m := reRequests.FindSubmatch(out); m != nil {
		w.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := reRPS.FindSubmatch(out); m != nil {
		w.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := reNon.FindSubmatch(out); m != nil {
		w.non3xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if w.requests == 0 {
		return w, fmt.Errorf("wrk output not understood:\n%s", out)
	}
	return w, nil
}

// cpuSeconds is utime+stime of pid from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	return (ut + st) / clkTck, nil
}

// writeSample writes samples request paths: a Zipf(s) choice among n links
// (rank 0 the hottest), and a share of unknown codes from the same sealed
// segment. Both servers replay the same file.
func writeSample(file string, n int, s, missShare float64, samples int) ([]string, error) {
	rng := rand.New(rand.NewPCG(7, 11))
	z := rand.NewZipf(rng, s, 1, uint64(n-1))
	// Ranks map to links through a shuffle so hot links are spread over
	// the store, not its first IDs.
	perm := rng.Perm(n)
	paths := make([]string, samples)
	for i := range paths {
		var id uint64
		if rng.Float64() < missShare {
			id = base + uint64(n) + rng.Uint64N(uint64(n))
		} else {
			id = base + uint64(perm[z.Uint64()])
		}
		code, _ := base62.Encode(id)
		paths[i] = "/" + code
	}
	return paths, os.WriteFile(file, []byte(strings.Join(paths, "\n")+"\n"), 0o644)
}

func luaScript(pathsFile string) string {
	return `-- Replays a Zipf sample of paths, each wrk thread from its own offset.
local paths = {}
local i = 1
init = function(args)
  for line in io.lines("` + pathsFile + `") do paths[#paths + 1] = line end
  i = math.random(#paths)
end
request = function()
  i = i + 1
  if i > #paths then i = 1 end
  return wrk.format("GET", paths[i])
end
`
}
