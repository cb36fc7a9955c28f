package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/shared/link"
)

// The rules scenario (issue 23, decided at the edge). The statements
// measured:
//
//   - links without rules keep the same req per server CPU-second as
//     before rules were evaluated (within noise, rulesSameTolerance), and
//     0 allocations per hit: the edge of the commit before the change
//     (-rules-baseline, built from git archive) beside the edge of this
//     one, both serving the redirect scenario's sample;
//   - a link with 3 rules costs less than rulesBound times a plain hit per
//     server CPU-second: one edge serving requests for ruleLinks plain
//     links and for as many links with 3 rules (iOS, Android, a country
//     list), from the same clients.
//
// Every request of both comparisons carries a browser's User-Agent and an
// X-Forwarded-For from a public address (the edges trust the loopback
// proxy and have the run's country data), so the edges differ only in
// what they do with them.
const (
	rulesSameTolerance = 0.05
	rulesBound         = 1.3
	ruleLinks          = 10_000
	scenRulesBefore    = "rules-before"
	scenRulesAfter     = "rules-after"
	scenRulesPlain     = "rules-plain"
	scenRulesThree     = "rules-three"
)

// ruleUAs are the requests' User-Agents, in the shares they are drawn: an
// iPhone and an Android phone match their rules, the desktops neither
// device rule, so their country is looked up.
var ruleUAs = []struct {
	ua    string
	share int // of 100
}{
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", 45},
	{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36", 30},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", 15},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15", 10},
}

// ruleCountries is the third rule's country list.
var ruleCountries = []string{"AT", "CH", "DE"}

// ruleTargets are the three rules' targets of rule link i.
func ruleTargets(i int) [3]string {
	return [3]string{fmt.Sprintf("https://apps.apple.com/app/id%d", 1000+i),
		fmt.Sprintf("https://play.google.com/store/apps/details?id=com.example.app%d", i),
		fmt.Sprintf("https://www.example.de/aktion/%d", i)}
}

// rulesResult is what the scenario measured, for its section.
type rulesResult struct {
	baseline, baselineRev string
	before, after         string // the edges' names
	checked               int
	plain, ruled          int // links of each kind created
	// profiles are the edge after's CPU profiles of a plain and a rules
	// run (with -pprof), taken after the pairs.
	profiles []rulesProfile
}

// rulesProfile is the edge's CPU profile over one untimed run of a sample.
type rulesProfile struct {
	sample string
	perCPU float64
	prof   *profileSplit
}

// rulesProfiles runs the plain and the rules sample once more each on the
// edge after, pinned as the pairs were, profiling the edge over the run:
// where a rule hit's cost goes. The runs are not among the pairs' (the
// profiler takes some of the edge's CPU).
func (e *env) rulesProfiles(after *server, debugAddr string, files map[string]string) []rulesProfile {
	var out []rulesProfile
	if err := e.pin("pinned"); err != nil {
		return nil
	}
	defer e.pin("")
	if err := measure.SetAffinity([]int{after.proc.PID()}, e.o.serverCPU); err != nil {
		return nil
	}
	defer measure.SetAffinity([]int{after.proc.PID()}, "")
	d := max(6*time.Second, e.o.duration*3/2)
	for _, x := range []struct{ sample, file string }{{"plain", "plain"}, {"rules", "ruled"}} {
		// Settled here, before the profiler starts: a timed run settles
		// inside e.wrk, up to 20 s on a busy machine, which a profile
		// started beside it would spend with no load (a first run's
		// profiles had no samples). "warmup" runs do not settle again.
		e.settle()
		e.st.pauseClicks()
		prof := make(chan *profileSplit, 1)
		go func() { prof <- e.profile(debugAddr, "rules-"+x.sample+"-edge", d) }()
		r, err := e.wrk(after, "warmup", "pinned", 0, files[x.file]+".lua", d)
		e.st.resumeClicks()
		p := <-prof
		if err != nil && p.err == nil {
			p.err = err
		}
		out = append(out, rulesProfile{sample: x.sample, perCPU: r.perCPU, prof: p})
		fmt.Printf("   rules profile %-6s %.0f req per CPU-s, profile %s %v\n", x.sample, r.perCPU, filepath.Base(p.file), p.err)
	}
	return out
}

// ruleRequest is one replayed request: the path, the client's address
// and User-Agent, and the answer it must get.
type ruleRequest struct {
	dataset.Request
	xff netip.Addr
	ua  string
}

// ruleClientsOf draws n requests' clients: User-Agents by their shares,
// addresses from sources.
func ruleClientsOf(seed uint64, n int, sources []netip.Addr) (uas []string, xffs []netip.Addr) {
	r := rand.New(rand.NewPCG(seed, 0x1e5))
	var pool []string
	for _, c := range ruleUAs {
		for range c.share {
			pool = append(pool, c.ua)
		}
	}
	for range n {
		uas = append(uas, pool[r.IntN(len(pool))])
		xffs = append(xffs, sources[r.IntN(len(sources))])
	}
	return uas, xffs
}

// ruleAnswer is where rule link i sends a client: its device rule's
// target, else the country rule's when the client's country is listed,
// else the link's own.
func ruleAnswer(t *geo.Table, i int, own, ua string, xff netip.Addr) string {
	targets := ruleTargets(i)
	switch redirect.RuleDevice([]byte(ua)) {
	case link.DeviceIOS:
		return targets[0]
	case link.DeviceAndroid:
		return targets[1]
	}
	if cc, ok := t.Lookup(xff); ok {
		for _, c := range ruleCountries {
			if string(cc[:]) == c {
				return targets[2]
			}
		}
	}
	return own
}

// writeRuleRequests writes requests as wrk replays them, one a line:
// path, X-Forwarded-For, User-Agent, status, location; and the Lua
// script, file+".lua".
func writeRuleRequests(file string, reqs []ruleRequest) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, q := range reqs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", q.Path, q.xff, q.ua, q.Status, q.Location)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(file+".lua", []byte(`-- Replays the request sample, each request from its client (address
-- forwarded by a trusted proxy, and User-Agent).
local paths, xff, ua = {}, {}, {}
local i = 1
init = function(args)
  for line in io.lines("`+file+`") do
    local p, a, u = line:match("^([^\t]+)\t([^\t]+)\t([^\t]+)")
    paths[#paths + 1] = p
    xff[#xff + 1] = a
    ua[#ua + 1] = u
  end
  i = math.random(#paths)
end
request = function()
  i = i + 1
  if i > #paths then i = 1 end
  return wrk.format(nil, paths[i], {["X-Forwarded-For"] = xff[i], ["User-Agent"] = ua[i]})
end
`), 0o644)
}

// buildEdgeAt builds the edge binary of rev from git archive into dir.
func (e *env) buildEdgeAt(rev string) (bin, hash string, err error) {
	out, err := exec.CommandContext(e.ctx, "git", "rev-parse", "--short=12", rev).Output()
	if err != nil {
		return "", "", fmt.Errorf("git rev-parse %s: %w", rev, err)
	}
	hash = strings.TrimSpace(string(out))
	src := filepath.Join(e.dir, "baseline-"+hash)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	archive := exec.CommandContext(e.ctx, "sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", strconv.Quote(rev), strconv.Quote(src)))
	if out, err := archive.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("git archive %s: %w: %s", rev, err, out)
	}
	bin = filepath.Join(e.dir, "edge-"+hash)
	build := exec.CommandContext(e.ctx, "go", "build", "-o", bin, "./edge/cmd/edge")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build the baseline edge: %w: %s", err, out)
	}
	return bin, hash, nil
}

// startRulesEdge starts an edge of bin fed by the run's stack, trusting
// the loopback proxy, with the country data; it serves once it has
// applied version. With debug, it serves its pprof profiles on a free
// loopback port, returned as debugAddr.
func (e *env) startRulesEdge(bin, name, geoip string, version uint64, debug bool) (s *server, debugAddr string, err error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := append(edgeArgv(bin, addr, e.st.natsURL, name, filepath.Join(e.dir, name), e.st.codeKeys),
		"--trusted-proxies", "127.0.0.1", "--geoip", geoip)
	if debug {
		dport, err := freePort()
		if err != nil {
			return nil, "", err
		}
		debugAddr = "127.0.0.1:" + strconv.Itoa(dport)
		argv = append(argv, "--debug-listen", debugAddr)
	}
	p, err := e.procs.Start(name, argv, "", nil, e.log, e.log)
	if err != nil {
		return nil, "", err
	}
	s = &server{name: name, url: "http://" + addr, pids: func() []int { return []int{p.PID()} }, proc: p}
	if err := waitHTTP(e.ctx, s.url+"/-/livez", 200, time.Minute); err != nil {
		p.Stop(5 * time.Second)
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	if err := waitApplied(e.ctx, s.url, version, 10*time.Minute); err != nil {
		p.Stop(5 * time.Second)
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return s, debugAddr, nil
}

// createRuleLinks creates n plain and n rule links through the batch API
// (1,000 a batch) and returns them, each kind in creation order.
func (e *env) createRuleLinks(n int) (plainCodes, plainURLs, ruleCodes, ruleURLs []string, err error) {
	var after uint64
	if err := e.st.pool.QueryRow(e.ctx, `SELECT coalesce(max(id), 0) FROM links`).Scan(&after); err != nil {
		return nil, nil, nil, nil, err
	}
	r := rand.New(rand.NewPCG(e.o.seed, 0x3ee1))
	var body bytes.Buffer
	for first := 0; first < 2*n; first += 1000 {
		body.Reset()
		body.WriteString(`{"links":[`)
		for i := first; i < min(first+1000, 2*n); i++ {
			if i > first {
				body.WriteByte(',')
			}
			item := map[string]any{"url": dataset.Target(r)}
			if i%2 == 1 {
				t := ruleTargets(i / 2)
				item["rules"] = []map[string]any{
					{"url": t[0], "device": []string{"ios"}},
					{"url": t[1], "device": []string{"android"}},
					{"url": t[2], "country": ruleCountries},
				}
			}
			b, _ := json.Marshal(item)
			body.Write(b)
		}
		body.WriteString(`]}`)
		want := min(1000, 2*n-first)
		got, err := e.st.postBatch(e.ctx, body.Bytes())
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if got != want {
			return nil, nil, nil, nil, fmt.Errorf("batch created %d of %d links", got, want)
		}
	}
	rows, err := e.st.pool.Query(e.ctx, `SELECT code, url, rules IS NOT NULL FROM links WHERE id > $1 ORDER BY id`, after)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c, u string
		var ruled bool
		if err := rows.Scan(&c, &u, &ruled); err != nil {
			return nil, nil, nil, nil, err
		}
		if ruled {
			ruleCodes, ruleURLs = append(ruleCodes, c), append(ruleURLs, u)
		} else {
			plainCodes, plainURLs = append(plainCodes, c), append(plainURLs, u)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, nil, err
	}
	if len(plainCodes) != n || len(ruleCodes) != n {
		return nil, nil, nil, nil, fmt.Errorf("read back %d plain and %d rule links, want %d each", len(plainCodes), len(ruleCodes), n)
	}
	return plainCodes, plainURLs, ruleCodes, ruleURLs, nil
}

// checkRuleAnswers asks s the first n requests of file, each from its
// client, and fails on a wrong status or Location.
func checkRuleAnswers(ctx context.Context, s *server, file string, n int) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	asked := 0
	for asked < n && sc.Scan() {
		fs := strings.SplitN(sc.Text(), "\t", 5)
		if len(fs) != 5 {
			return asked, fmt.Errorf("%s: line %d: want 5 fields", file, asked+1)
		}
		status, err := strconv.Atoi(fs[3])
		if err != nil {
			return asked, err
		}
		req, err := http.NewRequestWithContext(ctx, "GET", s.url+fs[0], nil)
		if err != nil {
			return asked, err
		}
		req.Header.Set("X-Forwarded-For", fs[1])
		req.Header.Set("User-Agent", fs[2])
		resp, err := noFollow.Do(req)
		if err != nil {
			return asked, err
		}
		resp.Body.Close()
		asked++
		if resp.StatusCode != status || (status == http.StatusFound && resp.Header.Get("Location") != fs[4]) {
			return asked, fmt.Errorf("%s %s from %s (%.30s): got %d %q, want %d %q", s.name, fs[0], fs[1], fs[2], resp.StatusCode, resp.Header.Get("Location"), status, fs[4])
		}
	}
	return asked, sc.Err()
}

// rules runs the scenario with the Tor-format data in dataDir and the
// baseline revision rev.
func (e *env) rules(dataDir, rev string) error {
	table, err := geo.LoadTor(dataDir)
	if err != nil {
		return fmt.Errorf("%w (`go tool task geoip` fetches it; `go tool task bench` does)", err)
	}
	rr := &rulesResult{baselineRev: rev}
	oldBin, hash, err := e.buildEdgeAt(rev)
	if err != nil {
		return err
	}
	rr.baseline = hash
	plainCodes, plainURLs, ruleCodes, ruleURLs, err := e.createRuleLinks(ruleLinks)
	if err != nil {
		return err
	}
	rr.plain, rr.ruled = len(plainCodes), len(ruleCodes)
	var version uint64
	if err := e.st.pool.QueryRow(e.ctx, `SELECT coalesce(max(version), 0) FROM links`).Scan(&version); err != nil {
		return err
	}
	sources, _, _, _ := geoSourceAddrs(table, e.o.seed, geoSources)
	// A quarter of the clients' addresses in the rule's countries, so the
	// country rule is taken as well as passed over.
	r := rand.New(rand.NewPCG(e.o.seed, 0xde))
	var listed []netip.Addr
	for tries := 0; len(listed) < geoSources/4 && tries < 10_000_000; tries++ {
		a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		if cc, ok := table.Lookup(a); ok && (string(cc[:]) == "DE" || string(cc[:]) == "AT" || string(cc[:]) == "CH") {
			listed = append(listed, a)
		}
	}
	sources = append(sources[:geoSources-len(listed)], listed...)

	mix, err := dataset.ReadRequestsFile(e.mixFile)
	if err != nil {
		return err
	}
	n := len(mix)
	uas, xffs := ruleClientsOf(e.o.seed, n, sources)
	files := map[string][]ruleRequest{}
	withClients := func(reqs []dataset.Request) []ruleRequest {
		out := make([]ruleRequest, len(reqs))
		for i, q := range reqs {
			out[i] = ruleRequest{Request: q, ua: uas[i%n], xff: xffs[i%n]}
		}
		return out
	}
	files["mix"] = withClients(mix)
	cfg := dataset.SampleConfig{Requests: e.o.samples, S: 1.1, Seed: e.o.seed}
	files["plain"] = withClients(dataset.Sample(plainCodes, plainURLs, cfg))
	ruled := withClients(dataset.Sample(ruleCodes, ruleURLs, cfg))
	index := make(map[string]int, len(ruleCodes))
	for i, c := range ruleCodes {
		index["/"+c] = i
	}
	for i := range ruled {
		q := &ruled[i]
		q.Location = ruleAnswer(table, index[q.Path], q.Location, q.ua, q.xff)
	}
	files["ruled"] = ruled
	paths := map[string]string{}
	for name, reqs := range files {
		paths[name] = filepath.Join(e.dir, "rules-"+name+".tsv")
		if err := writeRuleRequests(paths[name], reqs); err != nil {
			return err
		}
	}
	before, _, err := e.startRulesEdge(oldBin, "edge-before", dataDir, version, false)
	if err != nil {
		return err
	}
	defer before.proc.Stop(5 * time.Second)
	after, debugAddr, err := e.startRulesEdge(filepath.Join(e.dir, "edge"), "edge-after", dataDir, version, e.o.pprof != "")
	if err != nil {
		return err
	}
	defer after.proc.Stop(5 * time.Second)
	rr.before, rr.after = before.name, after.name
	fmt.Printf("   edges up: %s (pid %d, %s) and %s (pid %d, this tree); %d plain and %d rule links created\n",
		before.name, before.proc.PID(), hash, after.name, after.proc.PID(), rr.plain, rr.ruled)
	for _, c := range []struct {
		s    *server
		file string
	}{{before, "mix"}, {after, "mix"}, {after, "plain"}, {after, "ruled"}} {
		k, err := checkRuleAnswers(e.ctx, c.s, paths[c.file], 3000)
		if err != nil {
			return fmt.Errorf("answers check: %w", err)
		}
		rr.checked = k
	}
	if err := e.rulesPairs(before, after, paths); err != nil {
		return err
	}
	if debugAddr != "" {
		rr.profiles = e.rulesProfiles(after, debugAddr, paths)
	}
	dir, stem := e.outName()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	body, err := e.rulesSection(rr, dir, stem)
	if err != nil {
		return err
	}
	e.res.sections = append(e.res.sections, section{title: "Rules: plain links before and after, and a link with 3 rules", body: body})
	return nil
}

// rulesPairs runs both comparisons in back-to-back pinned pairs, the order
// within each alternating pair by pair: the mix on the edge before and
// after, then the plain and the rule links on the edge after.
func (e *env) rulesPairs(before, after *server, files map[string]string) error {
	for _, w := range []struct {
		s    *server
		file string
	}{{before, "mix"}, {after, "mix"}, {after, "plain"}, {after, "ruled"}} {
		if _, err := e.wrk(w.s, "warmup", "unpinned", 0, files[w.file]+".lua", time.Second); err != nil {
			return err
		}
	}
	if err := e.pin("pinned"); err != nil {
		return err
	}
	defer e.pin("")
	edges := []int{before.proc.PID(), after.proc.PID()}
	if err := measure.SetAffinity(edges, e.o.serverCPU); err != nil {
		return err
	}
	defer measure.SetAffinity(edges, "")
	d := max(2*time.Second, e.o.duration*3/4)
	type run struct {
		scenario string
		s        *server
		file     string
	}
	for i := 1; i <= max(1, e.o.pairs); i++ {
		for _, pair := range [][2]run{
			{{scenRulesBefore, before, "mix"}, {scenRulesAfter, after, "mix"}},
			{{scenRulesPlain, after, "plain"}, {scenRulesThree, after, "ruled"}},
		} {
			if i%2 == 0 {
				pair[0], pair[1] = pair[1], pair[0]
			}
			for _, x := range pair {
				m, err := edgeMetrics(e.ctx, x.s.url)
				if err != nil {
					return err
				}
				r, err := e.wrk(x.s, x.scenario, "pinned", i, files[x.file]+".lua", d)
				if err != nil {
					return err
				}
				if err := e.edgeDelta(&r, x.s, m); err != nil {
					return err
				}
				e.res.runs = append(e.res.runs, r)
			}
		}
		ratio := func(num, den, sNum, sDen string) float64 {
			a := e.res.pick(num, "pinned", sNum, func(x runRec) float64 { return x.perCPU })
			b := e.res.pick(den, "pinned", sDen, func(x runRec) float64 { return x.perCPU })
			return a[len(a)-1] / b[len(b)-1]
		}
		fmt.Printf("   rules pair %2d  after/before %.3f  plain/rules (a rule hit's cost) %.3f\n", i,
			ratio(scenRulesAfter, scenRulesBefore, after.name, before.name), ratio(scenRulesPlain, scenRulesThree, after.name, after.name))
	}
	return nil
}
