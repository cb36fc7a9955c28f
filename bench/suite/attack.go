package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
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
// attack -url U -requests FILE -rate R -duration D`.
func attack(args []string) error {
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
