package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/report"
)

func testLinks(hosts []string, n int) []hostLink {
	var out []hostLink
	for i := range n {
		// The same codes on every host: a link is (host, code).
		code := fmt.Sprintf("c%05d", i/len(hosts))
		out = append(out, hostLink{host: hosts[i%len(hosts)], code: code, url: "https://example.com/" + hosts[i%len(hosts)] + "/" + code})
	}
	return out
}

// TestHostSample: every known request carries its own link's host and
// target, the unknown share is the configured one (a sampling tolerance,
// not a timing), an unknown code is no link on its host, and a seed
// repeats the sample.
func TestHostSample(t *testing.T) {
	hosts := []string{"d1.bench.test", "d2.bench.test", "d3.bench.test"}
	links := testLinks(hosts, 600)
	byKey := map[[2]string]string{}
	for _, l := range links {
		byKey[[2]string{l.host, l.code}] = l.url
	}
	cfg := dataset.SampleConfig{Requests: 20_000, S: 1.1, Unknown: 0.10, Seed: 3}
	reqs := hostSample(links, hosts, cfg)
	if len(reqs) != cfg.Requests {
		t.Fatalf("%d requests, want %d", len(reqs), cfg.Requests)
	}
	unknown, seenHosts := 0, map[string]int{}
	for _, q := range reqs {
		seenHosts[q.host]++
		url, isLink := byKey[[2]string{q.host, q.Path[1:]}]
		switch q.Status {
		case http.StatusFound:
			if !isLink || url != q.Location {
				t.Fatalf("known request %+v: not its link's host and target (link: %v, %q)", q, isLink, url)
			}
		case http.StatusNotFound:
			unknown++
			if isLink {
				t.Fatalf("unknown request %+v is a link on its host", q)
			}
			if len(q.Path) != 7 {
				t.Fatalf("unknown request %+v: want a 6-character code", q)
			}
		default:
			t.Fatalf("request %+v: status %d", q, q.Status)
		}
	}
	if share := float64(unknown) / float64(len(reqs)); share < 0.09 || share > 0.11 {
		t.Errorf("unknown share %.3f, want about 0.10", share)
	}
	for _, h := range hosts {
		if seenHosts[h] < len(reqs)/10 {
			t.Errorf("host %s got %d of %d requests: the hosts are not mixed", h, seenHosts[h], len(reqs))
		}
	}
	again := hostSample(links, hosts, cfg)
	for i := range reqs {
		if reqs[i] != again[i] {
			t.Fatalf("request %d differs with the same seed: %+v, %+v", i, reqs[i], again[i])
		}
	}
	// A scan: every request unknown, all on the one host given.
	for _, q := range hostSample(links, hosts[:1], dataset.SampleConfig{Requests: 2000, S: 1.1, Unknown: 1, Seed: 4}) {
		if q.Status != http.StatusNotFound || q.host != hosts[0] {
			t.Fatalf("scan request %+v: want an unknown code on %s", q, hosts[0])
		}
	}
}

// TestHostLuaSendsEachLinesHost runs wrk with the script against a server
// that records what it was asked: every request has the Host of its own
// line, and every host of the file is sent.
func TestHostLuaSendsEachLinesHost(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatal("wrk not found: `go tool task wrk` installs it (apt-get install wrk)")
	}
	hosts := []string{"d1.bench.test", "d2.bench.test", "127.0.0.1"}
	links := testLinks(hosts, 90)
	reqs := hostSample(links, hosts, dataset.SampleConfig{Requests: 500, S: 1.1, Unknown: 0.10, Seed: 1})
	file := filepath.Join(t.TempDir(), "reqs.tsv")
	if err := writeHostRequests(file, reqs); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, q := range reqs {
		want[q.host+q.Path] = true
	}
	var mu sync.Mutex
	got := map[string]int{}
	bad := []string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !want[r.Host+r.URL.Path] {
			bad = append(bad, r.Host+r.URL.Path)
		}
		got[r.Host]++
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	out, err := exec.Command("wrk", "-t1", "-c2", "-d1s", "-s", file+".lua", srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	if _, err := parseWrk(out); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d requests with a host and path not on one line of the file, e.g. %q", len(bad), bad[0])
	}
	for _, h := range hosts {
		if got[h] == 0 {
			t.Errorf("no request with Host %s (got %v)", h, got)
		}
	}
}

func TestWriteHostRequests(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.tsv")
	reqs := []hostRequest{
		{host: "d1.bench.test", Request: dataset.Request{Path: "/abcDEF", Status: 302, Location: "https://a.example/x?y=1"}},
		{host: "127.0.0.1", Request: dataset.Request{Path: "/zzzzzz", Status: 404}},
	}
	if err := writeHostRequests(file, reqs); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	want := []string{"d1.bench.test\t/abcDEF\t302\thttps://a.example/x?y=1", "127.0.0.1\t/zzzzzz\t404\t"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("file:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	lua, err := os.ReadFile(file + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lua), `io.lines("`+file+`")`) || !strings.Contains(string(lua), "{Host = hosts[i]}") {
		t.Errorf("script does not replay %s with its hosts:\n%s", file, lua)
	}
}

// TestCheckHostAnswers: a right answer passes, a refusal is counted, and a
// wrong Location or a wrong host's answer fails naming the request.
func TestCheckHostAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Host + r.URL.Path {
		case "d1.bench.test/aaaaaa":
			w.Header().Set("Location", "https://one.example/")
			w.WriteHeader(http.StatusFound)
		case "d2.bench.test/aaaaaa":
			w.Header().Set("Location", "https://two.example/")
			w.WriteHeader(http.StatusFound)
		case "d1.bench.test/limitd":
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	req := func(host, path string, status int, loc string) hostRequest {
		return hostRequest{host: host, Request: dataset.Request{Path: path, Status: status, Location: loc}}
	}
	good := []hostRequest{
		req("d1.bench.test", "/aaaaaa", 302, "https://one.example/"),
		req("d2.bench.test", "/aaaaaa", 302, "https://two.example/"),
		req("d1.bench.test", "/bbbbbb", 404, ""),
		req("d1.bench.test", "/limitd", 404, ""),
	}
	asked, refused, err := checkHostAnswers(t.Context(), srv.URL, good, 10)
	if err != nil || asked != 4 || refused != 1 {
		t.Fatalf("checkHostAnswers = %d, %d, %v; want 4, 1, nil", asked, refused, err)
	}
	wrong := append(good[:1:1], req("d2.bench.test", "/aaaaaa", 302, "https://one.example/"))
	if _, _, err := checkHostAnswers(t.Context(), srv.URL, wrong, 10); err == nil || !strings.Contains(err.Error(), "d2.bench.test /aaaaaa") {
		t.Errorf("a wrong Location for d2.bench.test: err %v, want it named", err)
	}
	if asked, _, err := checkHostAnswers(t.Context(), srv.URL, wrong, 1); err != nil || asked != 1 {
		t.Errorf("checking the first 1: %d, %v; want 1, nil", asked, err)
	}
}

// TestDomainPairs: runs pair up by round (an incomplete pair is left out),
// the ratio is mixed over single, and the verdicts hold at their bounds.
func TestDomainPairs(t *testing.T) {
	run := func(scenario string, round int, perCPU float64) runRec {
		return runRec{scenario: scenario, round: round, perCPU: perCPU, server: "edgelink-edge"}
	}
	runs := []runRec{
		run(scenDomainSingle, 1, 100), run(scenDomainMixed, 1, 96),
		run("redirect", 1, 5), // another scenario's
		run(scenDomainMixed, 2, 90), run(scenDomainSingle, 2, 100),
		run(scenDomainSingle, 3, 100), // no mixed run: left out
	}
	pairs := domainPairsOf(runs)
	if len(pairs) != 2 {
		t.Fatalf("%d pairs, want 2: %+v", len(pairs), pairs)
	}
	if got := []float64{pairs[0].ratio(), pairs[1].ratio()}; got[0] != 0.96 || got[1] != 0.9 {
		t.Errorf("ratios %v, want [0.96 0.9]", got)
	}
	for _, c := range []struct {
		ratios []float64
		kept   bool
		noisy  bool
	}{{[]float64{0.96, 0.95, 0.99}, true, false}, {[]float64{0.94, 0.93, 1.0}, false, false}, {[]float64{1.02}, true, false},
		{[]float64{0.90, 1.16, 1.64}, true, true}, {[]float64{0.80, 0.90, 1.10}, false, true}} {
		v := domainsVerdict(report.Summarize(c.ratios))
		if strings.Contains(v, ": kept") != c.kept || strings.Contains(v, "not conclusive") != c.noisy {
			t.Errorf("domainsVerdict(%v) = %q, want kept %v, inconclusive %v", c.ratios, v, c.kept, c.noisy)
		}
	}
	if v := domainsVerdict(report.Summarize(nil)); v != "not measured" {
		t.Errorf("no pairs: %q", v)
	}
	for _, c := range []struct {
		trips, codes float64
		kept         bool
	}{{0, 1000, true}, {19, 1000, true}, {20, 1000, false}, {900, 1000, false}} {
		if v := scanVerdict(c.trips, c.codes); strings.HasSuffix(v, ": kept") != c.kept {
			t.Errorf("scanVerdict(%v, %v) = %q, want kept %v", c.trips, c.codes, v, c.kept)
		}
	}
	if got := perRequest(runRec{requests: 200, edge: map[string]float64{metricMallocs: 50}}, metricMallocs); got != 0.25 {
		t.Errorf("perRequest = %v, want 0.25", got)
	}
}

// TestDomainsSection renders the section and its chart from recorded runs.
func TestDomainsSection(t *testing.T) {
	e := &env{o: options{conns: 64}}
	for i := 1; i <= 3; i++ {
		e.res.runs = append(e.res.runs,
			runRec{scenario: scenDomainSingle, round: i, perCPU: 100_000, rps: 50_000, requests: 150_000, wall: 3, edge: map[string]float64{metricMallocs: 3000, metricSnapHits: 90, metricOverlayHits: 10}},
			runRec{scenario: scenDomainMixed, round: i, perCPU: 97_000 + float64(i)*1000, rps: 49_000, requests: 147_000, wall: 3, edge: map[string]float64{metricMallocs: 3100, metricOverlayHits: 5}})
	}
	// A fourth pair with other processes busy during its mixed run: in the
	// median of all, not in the quiet pairs'.
	e.res.runs = append(e.res.runs, runRec{scenario: scenDomainSingle, round: 4, perCPU: 100_000, requests: 1, wall: 3},
		runRec{scenario: scenDomainMixed, round: 4, perCPU: 50_000, requests: 1, wall: 3, otherCPU: 3})
	e.res.runs = append(e.res.runs, runRec{scenario: scenDomainScan, round: 1, requests: 200_000, rps: 66_000, wall: 3,
		edge: map[string]float64{metricTrips: 40, metricAsked: 60, `edge_requests_total{outcome="not_found"}`: 1000}})
	dr := &domainsResult{hosts: []string{"d1.bench.test", "d2.bench.test"}, platformHost: "127.0.0.1", links: 1000, singleChecked: 3000, mixedChecked: 3000}
	dir := t.TempDir()
	body, err := e.domainsSection(dr, dir, "stem")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0.98× (0.50–1.00)", "median of 4 pairs", "within 5%: kept.", "Over the 3 pairs where neither run had other processes above 0.25 of a core: 0.99× (0.98–1.00)", "0.020 / 0.021", "0.90 / 0.00", "40 authority round trips for 200000 codes asked, 0.0200%", "under 2%: kept", "stem-domains.png"} {
		if !strings.Contains(body, want) {
			t.Errorf("section lacks %q:\n%s", want, body)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "stem-domains.png")); err != nil {
		t.Errorf("chart: %v", err)
	}
}
