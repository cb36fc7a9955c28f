package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
)

// attackResult is what `suite attack` prints as JSON: an open-loop run at a
// fixed rate, with every answer checked against the request file.
type attackResult struct {
	Rate         float64        `json:"rate"`       // requests per second sent
	Throughput   float64        `json:"throughput"` // answered per second
	Requests     uint64         `json:"requests"`
	P50          time.Duration  `json:"p50"`
	P90          time.Duration  `json:"p90"`
	P99          time.Duration  `json:"p99"`
	P999         time.Duration  `json:"p999"`
	Max          time.Duration  `json:"max"`
	Codes        map[string]int `json:"codes"`
	Wrong        int            `json:"wrong"` // answers with a wrong status or Location (429/503 counted apart)
	Errors       int            `json:"errors"`
	FirstWrong   string         `json:"first_wrong,omitempty"`
	LoadCPUSecs  float64        `json:"load_cpu_seconds"`
	RequestsSent int            `json:"sent"`
	// Unknown counts the answers to requests for unknown codes (a 404 is
	// right), and UnknownBy what they were answered: 404, 429 (the
	// client's budget of 404s spent), 503 (shed or the authority out of
	// reach).
	Unknown   int            `json:"unknown"`
	UnknownBy map[string]int `json:"unknown_by"`
}

// attack runs the paced generator (pace) in its own process, so it can be
// pinned to its own CPU and its CPU kept apart from the server's: `suite
// attack -url U -requests FILE -rate R -duration D`. `suite attack
// creates …` and `suite attack pgx …` are the writes scenario's
// generators (attackCreates, attackPgx).
func attack(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "creates":
			return attackCreates(args[1:], os.Stdout)
		case "pgx":
			return attackPgx(args[1:], os.Stdout)
		}
	}
	fs := flag.NewFlagSet("attack", flag.ContinueOnError)
	base := fs.String("url", "", "server base URL (http://IPv4:port)")
	file := fs.String("requests", "", "requests file (dataset.WriteRequests)")
	rate := fs.Int("rate", 1000, "requests per second")
	d := fs.Duration("duration", 3*time.Second, "attack length")
	conns := fs.Int("connections", 64, "keep-alive connections")
	sources := fs.Int("sources", 0, "distinct loopback source addresses the connections come from (127.1.x.y); 0 is the default one")
	check := fs.Bool("check", true, "check status and Location of every answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	reqs, err := dataset.ReadRequestsFile(*file)
	if err != nil {
		return err
	}
	if len(reqs) == 0 {
		return errors.New("attack: no requests")
	}
	addr, ok := strings.CutPrefix(*base, "http://")
	if !ok {
		return fmt.Errorf("attack: -url %q: want http://host:port", *base)
	}
	cfg := paceConfig{addr: addr, rate: *rate, duration: *d, conns: *conns, sources: *sources, timeout: 5 * time.Second}
	for _, q := range reqs {
		cfg.paths = append(cfg.paths, q.Path)
	}
	unknownBy := map[int]int{}
	unknown := 0
	cfg.answer = func(i, status int, location []byte) bool {
		q := &reqs[i%len(reqs)]
		if q.Status == http.StatusNotFound {
			unknown++
			unknownBy[status]++
		}
		if !*check || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			return true // not judged, or refused: counted apart
		}
		return status == q.Status && (status != http.StatusFound || string(location) == q.Location)
	}
	p, err := pace(cfg)
	if err != nil {
		return err
	}
	r := attackResult{Codes: map[string]int{}, Wrong: p.wrong, Errors: p.errors, RequestsSent: p.sent,
		Requests: uint64(len(p.latencies)), Rate: float64(p.sent) / d.Seconds(), Unknown: unknown, UnknownBy: map[string]int{}}
	for code, n := range unknownBy {
		r.UnknownBy[strconv.Itoa(code)] = n
	}
	if p.elapsed > 0 {
		r.Throughput = float64(len(p.latencies)) / p.elapsed.Seconds()
	}
	for code, n := range p.codes {
		r.Codes[strconv.Itoa(code)] = n
	}
	if p.firstWrong >= 0 {
		q := reqs[p.firstWrong%len(reqs)]
		r.FirstWrong = fmt.Sprintf("%s: got %s, want %d %q", q.Path, p.firstGot, q.Status, q.Location)
	}
	if n := len(p.latencies); n > 0 {
		at := func(q float64) time.Duration { return p.latencies[min(n-1, int(q*float64(n)))] }
		r.P50, r.P90, r.P99, r.P999, r.Max = at(0.50), at(0.90), at(0.99), at(0.999), p.latencies[n-1]
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// wrkResult is one wrk run.
type wrkResult struct {
	Requests int64
	RPS      float64
	Non3xx   int64
	Errors   int64 // socket errors: connect, read, write, timeout
}

var (
	reRequests = regexp.MustCompile(`(\d+) requests in`)
	reRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reNon      = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	reSockErr  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func parseWrk(out []byte) (wrkResult, error) {
	var w wrkResult
	if m := reRequests.FindSubmatch(out); m != nil {
		w.Requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := reRPS.FindSubmatch(out); m != nil {
		w.RPS, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := reNon.FindSubmatch(out); m != nil {
		w.Non3xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := reSockErr.FindSubmatch(out); m != nil {
		for _, g := range m[1:] {
			n, _ := strconv.ParseInt(string(g), 10, 64)
			w.Errors += n
		}
	}
	if w.Requests == 0 {
		return w, fmt.Errorf("wrk output not understood:\n%s", out)
	}
	return w, nil
}

// wrkLua replays the request file's paths, each wrk thread from its own
// offset; it keeps wrk's per-request work to a table index.
func wrkLua(requestsFile string) string {
	return `-- Replays the benchmark's request sample (first field of each line).
local paths = {}
local i = 1
init = function(args)
  for line in io.lines("` + requestsFile + `") do
    paths[#paths + 1] = line:match("^[^\t]+")
  end
  i = math.random(#paths)
end
request = function()
  i = i + 1
  if i > #paths then i = 1 end
  return wrk.format("GET", paths[i])
end
`
}

func durSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second).Seconds()))) + "s"
}

func trimLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// createsResult is what `suite attack creates` and `suite attack pgx`
// print as JSON: single creates at a fixed rate (open loop, latency from
// when each was due) or as fast as they are answered (closed loop).
type createsResult struct {
	Mode       string         `json:"mode"`    // "api" (POST /api/v1/links) or "pgx" (the raw insert loop)
	Offered    float64        `json:"offered"` // creates per second scheduled; 0 in a closed loop
	Clients    int            `json:"clients"` // connections
	Sent       int            `json:"sent"`
	Created    int            `json:"created"`    // answered 201 (pgx: committed)
	Throughput float64        `json:"throughput"` // created per second of the run
	Codes      map[string]int `json:"codes"`      // answers by status
	Errors     int            `json:"errors"`     // unanswered within the timeout, broken connections, failed inserts
	Problem    string         `json:"problem,omitempty"`
	P50        time.Duration  `json:"p50"`
	P90        time.Duration  `json:"p90"`
	P99        time.Duration  `json:"p99"`
	P999       time.Duration  `json:"p999"`
	Max        time.Duration  `json:"max"`
	Elapsed    time.Duration  `json:"elapsed"`
	// Apply is when the edge applied each create's version, when it was
	// watched.
	Apply *applyResult `json:"apply,omitempty"`
}

// applyResult is each create's apply delay: from its 201 to the first read
// of the edge's position that showed its version applied. A read's time is
// when its answer arrived, so a delay is at most one read interval (and
// one read) late, never early.
type applyResult struct {
	Reads      int           `json:"reads"`
	ReadErrors int           `json:"read_errors"`
	Every      time.Duration `json:"every"` // mean time between reads
	P50        time.Duration `json:"p50"`
	P99        time.Duration `json:"p99"`
	Max        time.Duration `json:"max"`
	Over1s     int           `json:"over_1s"`     // applied more than 1 s after the 201
	Early      int           `json:"early"`       // applied before the 201 was read (delay 0)
	NotApplied int           `json:"not_applied"` // created, not applied when the watch ended
	NoVersion  int           `json:"no_version"`  // a 201 without a version in its body
}

// answered is one create's answer: when it arrived (from the run's start),
// its status (0: none) and its version.
type answered struct {
	at      time.Duration
	status  int
	version uint64
}

// position is one read of the edge's applied version.
type position struct {
	at      time.Duration
	version uint64
}

// applyDelays times every 201 of answers against the position reads (in
// the order they were taken). A version not applied by the last read is
// counted as not applied.
func applyDelays(answers []answered, reads []position) applyResult {
	var r applyResult
	// The running maximum, in case a read ever went back.
	high := make([]uint64, len(reads))
	var m uint64
	for i, p := range reads {
		m = max(m, p.version)
		high[i] = m
	}
	var delays []time.Duration
	for _, a := range answers {
		if a.status != http.StatusCreated {
			continue
		}
		if a.version == 0 {
			r.NoVersion++
			continue
		}
		k, _ := slices.BinarySearch(high, a.version)
		if k == len(high) {
			r.NotApplied++
			continue
		}
		d := reads[k].at - a.at
		if d <= 0 {
			d = 0
			r.Early++
		}
		if d > time.Second {
			r.Over1s++
		}
		delays = append(delays, d)
	}
	slices.Sort(delays)
	if n := len(delays); n > 0 {
		r.P50, r.P99, r.Max = quantile(delays, 0.5), quantile(delays, 0.99), delays[n-1]
	}
	r.Reads = len(reads)
	if len(reads) > 1 {
		r.Every = (reads[len(reads)-1].at - reads[0].at) / time.Duration(len(reads)-1)
	}
	return r
}

// versionOf reads "version":N from a create's answer without decoding the
// rest: the generator's thread has no time for a JSON decoder.
func versionOf(body []byte) uint64 {
	_, rest, ok := bytes.Cut(body, []byte(`"version":`))
	if !ok {
		return 0
	}
	rest = bytes.TrimLeft(rest, " ")
	var v uint64
	for _, d := range rest {
		if d < '0' || d > '9' {
			break
		}
		v = v*10 + uint64(d-'0')
	}
	return v
}

// createRequest returns the request builder of `suite attack creates`:
// POST /api/v1/links with a target of its own per request (target, the
// request's index, then suffix), so no two are alike.
func createRequest(host, key, target, suffix string) func(dst []byte, i int) []byte {
	head := "POST /api/v1/links HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: "
	open, tail := `{"url":"`+target, suffix+`"}`
	return func(dst []byte, i int) []byte {
		var num [20]byte
		n := strconv.AppendInt(num[:0], int64(i), 10)
		dst = append(dst, head...)
		dst = strconv.AppendInt(dst, int64(len(open)+len(n)+len(tail)), 10)
		dst = append(dst, "\r\n\r\n"...)
		dst = append(dst, open...)
		dst = append(dst, n...)
		return append(dst, tail...)
	}
}

// attackCreates is `suite attack creates -url CONTROL -key-file F -rate R
// -duration D [-edge EDGE]`: single creates through control's API at a
// fixed rate from the paced generator, every answer's status and version
// kept; with -edge, the edge's applied version read every -read-every
// from its metrics, on another thread, until it has applied the last
// create or -watch has passed.
func attackCreates(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("attack creates", flag.ContinueOnError)
	base := fs.String("url", "", "control's base URL (http://IPv4:port)")
	keyFile := fs.String("key-file", "", "file holding the tenant's API key")
	rate := fs.Int("rate", 5000, "creates per second")
	d := fs.Duration("duration", 30*time.Second, "attack length")
	conns := fs.Int("connections", 256, "keep-alive connections")
	target := fs.String("target", "https://shop.example/spring-sale/", "targets start so, then the request's index")
	suffix := fs.String("suffix", "?utm_source=newsletter&utm_medium=email&utm_campaign=spring", "and end so")
	edge := fs.String("edge", "", "edge base URL whose applied version is watched; empty: not watched")
	every := fs.Duration("read-every", 20*time.Millisecond, "interval of the edge's position reads")
	watch := fs.Duration("watch", 30*time.Second, "how long after the last answer the edge may take to apply the last create")
	timeout := fs.Duration("timeout", 15*time.Second, "a create unanswered this long after it was due is an error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr, ok := strings.CutPrefix(*base, "http://")
	if !ok {
		return fmt.Errorf("attack creates: -url %q: want http://host:port", *base)
	}
	kb, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("attack creates: %w", err)
	}
	key := strings.TrimSpace(string(kb))
	if key == "" || strings.ContainsAny(key, "\r\n ") {
		return fmt.Errorf("attack creates: %s holds no API key", *keyFile)
	}
	if *rate <= 0 || *d <= 0 {
		return errors.New("attack creates: want a rate and a duration above 0")
	}
	total := int(float64(*rate) * d.Seconds())
	ans := make([]answered, total)
	r := createsResult{Mode: "api", Offered: float64(*rate), Clients: *conns, Codes: map[string]int{}}
	cfg := paceConfig{addr: addr, rate: *rate, duration: *d, conns: *conns, timeout: *timeout,
		request: createRequest(addr, key, *target, *suffix),
		seen: func(i, status int, _, at time.Duration, body []byte) {
			a := answered{at: at, status: status}
			if status == http.StatusCreated {
				a.version = versionOf(body)
			} else if r.Problem == "" {
				r.Problem = fmt.Sprintf("request %d: %d %.300s", i, status, body)
			}
			ans[i] = a
		}}

	var reads *positionReader
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if *edge != "" {
		reads = &positionReader{url: *edge + "/-/metrics", every: *every}
		if err := reads.first(ctx); err != nil {
			return fmt.Errorf("attack creates: %w", err)
		}
		go reads.run(ctx)
	}
	p, err := pace(cfg)
	if err != nil {
		return err
	}
	r.Sent, r.Errors, r.Elapsed = p.sent, p.errors, p.elapsed
	var last uint64
	for _, a := range ans {
		if a.status == http.StatusCreated {
			r.Created++
			last = max(last, a.version)
		}
	}
	for code, n := range p.codes {
		r.Codes[strconv.Itoa(code)] = n
	}
	if p.elapsed > 0 {
		r.Throughput = float64(r.Created) / p.elapsed.Seconds()
	}
	if n := len(p.latencies); n > 0 {
		r.P50, r.P90, r.P99, r.P999, r.Max = quantile(p.latencies, 0.5), quantile(p.latencies, 0.9), quantile(p.latencies, 0.99),
			quantile(p.latencies, 0.999), p.latencies[n-1]
	}
	if reads != nil {
		reads.until(last, *watch)
		cancel()
		samples, errs := reads.taken(p.start)
		a := applyDelays(ans, samples)
		a.ReadErrors = errs
		r.Apply = &a
	}
	return json.NewEncoder(stdout).Encode(r)
}

// positionReader reads the edge's applied version from its metrics, every
// interval, on its own goroutine (so on a thread other than the paced
// generator's).
type positionReader struct {
	url   string
	every time.Duration

	mu    sync.Mutex
	reads []timedRead
	errs  int
	high  uint64
}

type timedRead struct {
	at      time.Time
	version uint64
}

var appliedSeries = []byte("\nedge_changefeed_applied_version ")

func (p *positionReader) read(ctx context.Context, c *http.Client) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", p.url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", p.url, resp.Status)
	}
	_, rest, ok := bytes.Cut(b, appliedSeries)
	if !ok {
		return 0, fmt.Errorf("%s has no edge_changefeed_applied_version", p.url)
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	v, err := strconv.ParseFloat(string(bytes.TrimSpace(line)), 64)
	if err != nil {
		return 0, fmt.Errorf("edge_changefeed_applied_version %q: %w", line, err)
	}
	return uint64(v), nil
}

var positionClient = &http.Client{Timeout: 5 * time.Second}

// first reads once, so a wrong URL fails the run before it starts.
func (p *positionReader) first(ctx context.Context) error {
	_, err := p.read(ctx, positionClient)
	return err
}

func (p *positionReader) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		v, err := p.read(ctx, positionClient)
		at := time.Now()
		p.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				p.errs++
			}
		} else {
			p.reads = append(p.reads, timedRead{at, v})
			p.high = max(p.high, v)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// until waits until a read showed version applied, or within.
func (p *positionReader) until(version uint64, within time.Duration) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	deadline := time.After(within)
	for {
		p.mu.Lock()
		done := p.high >= version
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-deadline:
			return
		case <-t.C:
		}
	}
}

// taken returns the reads so far, timed from start.
func (p *positionReader) taken(start time.Time) ([]position, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]position, len(p.reads))
	for i, r := range p.reads {
		out[i] = position{at: r.at.Sub(start), version: r.version}
	}
	return out, p.errs
}
