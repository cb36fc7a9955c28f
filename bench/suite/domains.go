package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
)

// The domains scenario (issue 20, "edge cost"): what serving many domains
// costs the edge. The statement measured: with mixed Host headers, req per
// server CPU-second within 5% of the single-domain figure; authority round
// trips for random codes on an FF1 domain under 2% of the codes asked.
const (
	domainCount = 8
	// domainsTolerance is how far below the single-domain figure the
	// mixed-host one may be (req per server CPU-second).
	domainsTolerance = 0.05
	// scanTripBound is the miss path's bound: authority round trips per
	// code asked.
	scanTripBound = 0.02
)

// domainHost is the host of the scenario's i-th domain (0-based). The
// names need no DNS: wrk connects to the edge's address and sends them as
// Host.
func domainHost(i int) string { return fmt.Sprintf("d%d.bench.test", i+1) }

// hostLink is one link of the domains scenario: its domain's host, code
// and target.
type hostLink struct{ host, code, url string }

// hostRequest is one replayed request with the Host it is sent with.
type hostRequest struct {
	host string
	dataset.Request
}

// hostSample draws cfg.Requests requests over links in the shape of
// dataset.Sample: known links by Zipf rank (cfg.S) through a seeded
// permutation, and a cfg.Unknown share of random 6-character codes, each
// on a domain drawn uniformly from hosts and not a link there. A known
// link's request carries its own domain's host.
func hostSample(links []hostLink, hosts []string, cfg dataset.SampleConfig) []hostRequest {
	r := rand.New(rand.NewPCG(cfg.Seed, 0xd0a1))
	known := make(map[[2]string]struct{}, len(links))
	for _, l := range links {
		known[[2]string{l.host, l.code}] = struct{}{}
	}
	z := dataset.NewZipf(r, cfg.S, len(links))
	perm := r.Perm(len(links))
	out := make([]hostRequest, cfg.Requests)
	for i := range out {
		if r.Float64() < cfg.Unknown {
			h := hosts[r.IntN(len(hosts))]
			c := dataset.RandomCode(r)
			for {
				if _, ok := known[[2]string{h, c}]; !ok {
					break
				}
				c = dataset.RandomCode(r)
			}
			out[i] = hostRequest{host: h, Request: dataset.Request{Path: "/" + c, Status: http.StatusNotFound}}
			continue
		}
		l := links[perm[z.Rank()]]
		out[i] = hostRequest{host: l.host, Request: dataset.Request{Path: "/" + l.code, Status: http.StatusFound, Location: l.url}}
	}
	return out
}

// onHost is reqs, each sent with host.
func onHost(host string, reqs []dataset.Request) []hostRequest {
	out := make([]hostRequest, len(reqs))
	for i, q := range reqs {
		out[i] = hostRequest{host: host, Request: q}
	}
	return out
}

// writeHostRequests writes one request per line: host, path, status,
// location, tab-separated (what hostLua reads), and the wrk script beside
// it, file+".lua".
func writeHostRequests(file string, reqs []hostRequest) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, q := range reqs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", q.host, q.Path, q.Status, q.Location)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(file+".lua", []byte(hostLua(file)), 0o644)
}

// hostLua replays a writeHostRequests file, each request with its own Host
// header. The single-domain and the mixed-host mixes both go through it,
// so wrk's own cost per request (a Lua table for the headers) is the same
// for both and the comparison is the edge's alone.
func hostLua(file string) string {
	return `-- Replays the benchmark's request sample with each line's Host.
local hosts = {}
local paths = {}
local i = 1
init = function(args)
  for line in io.lines("` + file + `") do
    local h, p = line:match("^([^\t]+)\t([^\t]+)")
    hosts[#hosts + 1] = h
    paths[#paths + 1] = p
  end
  i = math.random(#paths)
end
request = function()
  i = i + 1
  if i > #paths then i = 1 end
  return wrk.format(nil, paths[i], {Host = hosts[i]})
end
`
}

// checkHostAnswers asks the edge the first n requests of reqs, each with
// its Host, and fails on the first wrong status or Location: a fast wrong
// answer is a failure, not a result. It returns how many it asked and how
// many were refused (429/503, the edge's budget of 404s for one address).
func checkHostAnswers(ctx context.Context, edgeURL string, reqs []hostRequest, n int) (asked, refused int, err error) {
	for _, q := range reqs[:min(n, len(reqs))] {
		req, err := http.NewRequestWithContext(ctx, "GET", edgeURL+q.Path, nil)
		if err != nil {
			return asked, refused, err
		}
		req.Host = q.host
		resp, err := noFollow.Do(req)
		if err != nil {
			return asked, refused, err
		}
		resp.Body.Close()
		asked++
		switch {
		case resp.StatusCode == q.Status && (q.Status != http.StatusFound || resp.Header.Get("Location") == q.Location):
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
			refused++
		default:
			return asked, refused, fmt.Errorf("Host %s %s: got %d %q, want %d %q", q.host, q.Path, resp.StatusCode, resp.Header.Get("Location"), q.Status, q.Location)
		}
	}
	return asked, refused, nil
}

// domainsResult is what the scenario measured, for its section.
type domainsResult struct {
	hosts          []string
	platformHost   string
	links          int
	loadTook       time.Duration
	singleChecked  int
	mixedChecked   int
	refusedChecked int
}

// domains creates the tenant's FF1 domains through the API, bulk-loads as
// many links as the run's over them, waits until the edge has applied
// them, then measures the single-domain and the mixed-host mixes in
// back-to-back pinned wrk pairs, and a scan of random codes on one FF1
// domain with the edge's authority round trips counted.
func (e *env) domains() error {
	dr := &domainsResult{links: e.o.links}
	for i := range domainCount {
		host := domainHost(i)
		a := e.st.client.Do(e.ctx, "POST", "/api/v1/domains", fmt.Sprintf(`{"host": %q}`, host))
		if a.Err != nil {
			return fmt.Errorf("create domain %s: %w", host, a.Err)
		}
		var d struct {
			Host     string `json:"host"`
			CodeMode string `json:"code_mode"`
		}
		if a.Status != http.StatusCreated || json.Unmarshal(a.Body, &d) != nil {
			return fmt.Errorf("create domain %s: %s", host, a)
		}
		if d.Host != host || d.CodeMode != "ff1" {
			return fmt.Errorf("create domain %s: got host %q, code mode %q; want %q, ff1", host, d.Host, d.CodeMode, host)
		}
		dr.hosts = append(dr.hosts, host)
	}
	if err := e.st.pool.QueryRow(e.ctx, `SELECT host FROM domains WHERE id = 0`).Scan(&dr.platformHost); err != nil {
		return fmt.Errorf("platform host: %w", err)
	}
	took, err := e.st.loadLinks(e.ctx, e.o.links, e.o.seed^0xd0, 4, dr.hosts, os.Stdout, nil)
	if err != nil {
		return err
	}
	dr.loadTook = took
	links, maxV, err := e.st.domainLinks(e.ctx, dr.hosts)
	if err != nil {
		return err
	}
	if len(links) != e.o.links {
		return fmt.Errorf("the authority holds %d active links on the %d domains, want %d", len(links), domainCount, e.o.links)
	}
	if err := waitApplied(e.ctx, e.st.edgeURL, maxV, 10*time.Minute); err != nil {
		return err
	}
	fmt.Printf("   %d links on %d FF1 domains loaded in %s and applied by the edge\n", len(links), domainCount, took.Round(100*time.Millisecond))

	// The single-domain mix is the redirect scenario's sample, sent with
	// the platform's host; the mixed-host mix has its shape over the
	// domains' links.
	mix, err := dataset.ReadRequestsFile(e.mixFile)
	if err != nil {
		return err
	}
	single := onHost(dr.platformHost, mix)
	mixed := hostSample(links, dr.hosts, dataset.SampleConfig{Requests: e.o.samples, S: 1.1, Unknown: 0.10, Seed: e.o.seed})
	// The scan: every request a random code on one FF1 domain.
	scan := hostSample(links, dr.hosts[:1], dataset.SampleConfig{Requests: e.o.samples, S: 1.1, Unknown: 1, Seed: e.o.seed + 1})
	files := map[string][]hostRequest{"domains-single.tsv": single, "domains-mixed.tsv": mixed, "domains-scan.tsv": scan}
	for name, reqs := range files {
		if err := writeHostRequests(filepath.Join(e.dir, name), reqs); err != nil {
			return err
		}
	}
	var refused int
	for _, c := range []struct {
		reqs []hostRequest
		n    *int
	}{{single, &dr.singleChecked}, {mixed, &dr.mixedChecked}} {
		asked, ref, err := checkHostAnswers(e.ctx, e.st.edgeURL, c.reqs, 3000)
		if err != nil {
			return fmt.Errorf("answers check: %w", err)
		}
		*c.n, refused = asked, refused+ref
	}
	dr.refusedChecked = refused
	if err := e.domainPairs(filepath.Join(e.dir, "domains-single.tsv.lua"), filepath.Join(e.dir, "domains-mixed.tsv.lua")); err != nil {
		return err
	}
	if err := e.domainScan(filepath.Join(e.dir, "domains-scan.tsv.lua")); err != nil {
		return err
	}
	dir, stem := e.outName()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	body, err := e.domainsSection(dr, dir, stem)
	if err != nil {
		return err
	}
	e.res.sections = append(e.res.sections, section{title: "Domains: the edge's cost of many hosts", body: body})
	return nil
}

// The runs' scenario names, and the edge's series each reads.
const (
	scenDomainSingle  = "domains-single"
	scenDomainMixed   = "domains-mixed"
	scenDomainScan    = "domains-scan"
	metricMallocs     = "go_memstats_mallocs_total"
	metricHits        = `edge_requests_total{outcome="redirect"}`
	metricAsked       = "edge_authority_questions_total"
	metricTrips       = "edge_authority_requests_total"
	metricSnapHits    = `edge_hits_total{layer="snapshot"}`
	metricOverlayHits = `edge_hits_total{layer="overlay"}`
)

func (e *env) edgeServer() (*server, error) {
	for _, s := range e.servers {
		if s.name == "edgelink-edge" {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no edge among the servers")
}

// domainPairs runs the two mixes on the edge in back-to-back pinned pairs,
// the order alternating pair by pair, as pairs does for the edge against
// bare fasthttp: the ratio of two runs taken right after each other is the
// least disturbed figure on a shared machine.
func (e *env) domainPairs(singleLua, mixedLua string) error {
	edge, err := e.edgeServer()
	if err != nil {
		return err
	}
	// Warm both mixes outside the measurement (the domains' links page in).
	for _, lua := range []string{singleLua, mixedLua} {
		if _, err := e.wrk(edge, "warmup", "unpinned", 0, lua, time.Second); err != nil {
			return err
		}
	}
	if err := e.pin("pinned"); err != nil {
		return err
	}
	defer e.pin("")
	d := max(2*time.Second, e.o.duration*3/4)
	mixes := []struct{ scenario, lua string }{{scenDomainSingle, singleLua}, {scenDomainMixed, mixedLua}}
	for i := 1; i <= max(1, e.o.pairs); i++ {
		order := mixes
		if i%2 == 0 {
			order = []struct{ scenario, lua string }{mixes[1], mixes[0]}
		}
		for _, m := range order {
			before, err := edgeMetrics(e.ctx, edge.url)
			if err != nil {
				return err
			}
			r, err := e.wrk(edge, m.scenario, "pinned", i, m.lua, d)
			if err != nil {
				return err
			}
			if err := e.edgeDelta(&r, edge, before); err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
		}
		s := e.res.pick(scenDomainSingle, "pinned", edge.name, func(x runRec) float64 { return x.perCPU })
		m := e.res.pick(scenDomainMixed, "pinned", edge.name, func(x runRec) float64 { return x.perCPU })
		fmt.Printf("   domains pair %2d  single %9.0f req/CPU-s  mixed %9.0f req/CPU-s  mixed/single %.3f\n", i, s[len(s)-1], m[len(m)-1], m[len(m)-1]/s[len(s)-1])
	}
	return nil
}

// domainScan runs the scan sample (random codes on one FF1 domain) with
// wrk, pinned, once a round, and records the edge's authority round trips.
// The edge resolves a miss before it charges the client's budget of 404s,
// so wrk's one address sees every code reach the miss path even when its
// answer is 429.
func (e *env) domainScan(lua string) error {
	edge, err := e.edgeServer()
	if err != nil {
		return err
	}
	if err := e.pin("pinned"); err != nil {
		return err
	}
	defer e.pin("")
	for round := 1; round <= e.o.rounds; round++ {
		before, err := edgeMetrics(e.ctx, edge.url)
		if err != nil {
			return err
		}
		r, err := e.wrk(edge, scenDomainScan, "pinned", round, lua, e.o.duration)
		if err != nil {
			return err
		}
		if err := e.edgeDelta(&r, edge, before); err != nil {
			return err
		}
		e.res.runs = append(e.res.runs, r)
		fmt.Printf("   domains scan round %d  %9.0f req/s  authority round trips %.0f for %.0f codes (%.4f%%)\n", round, r.rps, r.authority, r.requests, 100*r.authority/r.requests)
	}
	return nil
}

// domainLinks reads the active links on hosts back from the authority, in
// ID order, and the newest version among them.
func (s *benchStack) domainLinks(ctx context.Context, hosts []string) ([]hostLink, uint64, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.host, l.code, l.url, l.version FROM links l JOIN domains d ON d.id = l.domain_id
		WHERE d.host = ANY($1) AND l.status = 'active' ORDER BY l.id`, hosts)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []hostLink
	var maxV int64
	for rows.Next() {
		var l hostLink
		var v int64
		if err := rows.Scan(&l.host, &l.code, &l.url, &v); err != nil {
			return nil, 0, err
		}
		out, maxV = append(out, l), max(maxV, v)
	}
	return out, uint64(maxV), rows.Err()
}
