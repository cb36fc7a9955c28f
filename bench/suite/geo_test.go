package main

import (
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/edge/geo"
)

// fixtureTable places most public space in a country, leaving
// carrier-grade NAT (100.64.0.0/10) in none, so drawing sources is quick.
func fixtureTable(t *testing.T) *geo.Table {
	t.Helper()
	tb, err := geo.ReadTor("test", strings.NewReader("16777216,1681915903,US\n1686110208,3758096383,DE\n"+
		"2000::,23ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,JP\n2a00::,2a0f:ffff:ffff:ffff:ffff:ffff:ffff:ffff,NL\n"))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestGeoSourceAddrs: the sources are as many as asked, each of the kind
// counted (a country for IPv4 and IPv6, none for the rest), about 70/28/2.
func TestGeoSourceAddrs(t *testing.T) {
	tb := fixtureTable(t)
	addrs, v4, v6, nowhere := geoSourceAddrs(tb, 1, 2000)
	if len(addrs) != 2000 || v4+v6+nowhere != 2000 {
		t.Fatalf("%d addresses, %d+%d+%d by kind; want 2000", len(addrs), v4, v6, nowhere)
	}
	var k4, k6, none int
	for _, a := range addrs {
		_, ok := tb.Lookup(a)
		switch {
		case !ok:
			none++
		case a.Is4():
			k4++
		default:
			k6++
		}
	}
	if k4 != v4 || k6 != v6 || none != nowhere {
		t.Errorf("looked up: %d IPv4, %d IPv6 with a country, %d without; counted %d, %d, %d", k4, k6, none, v4, v6, nowhere)
	}
	if math.Abs(float64(v4)/2000-0.70) > 0.05 || math.Abs(float64(v6)/2000-0.28) > 0.05 || nowhere == 0 {
		t.Errorf("shares %d/%d/%d of 2000, want about 70%%/28%%/2%%", v4, v6, nowhere)
	}
	again, _, _, _ := geoSourceAddrs(tb, 1, 2000)
	if again[1999] != addrs[1999] {
		t.Error("the same seed drew other addresses")
	}
}

// TestGeoLuaSendsEachLinesClient: wrk replays the file, each request with
// its own line's X-Forwarded-For.
func TestGeoLuaSendsEachLinesClient(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatal("wrk not found: `go tool task wrk` installs it (apt-get install wrk)")
	}
	tb := fixtureTable(t)
	sources, _, _, _ := geoSourceAddrs(tb, 2, 50)
	reqs := []dataset.Request{{Path: "/aaaaaa", Status: 302, Location: "https://a.example/"}, {Path: "/bbbbbb", Status: 404},
		{Path: "/cccccc", Status: 302, Location: "https://c.example/x?y=1"}}
	var many []dataset.Request
	for range 40 {
		many = append(many, reqs...)
	}
	file := filepath.Join(t.TempDir(), "geo.tsv")
	if err := writeGeoRequests(file, many, sources); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i, q := range many {
		want[q.Path+" "+sources[i%len(sources)].String()] = true
	}
	var mu sync.Mutex
	var bad []string
	got := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if k := r.URL.Path + " " + r.Header.Get("X-Forwarded-For"); !want[k] {
			bad = append(bad, k)
		}
		got++
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	out, err := exec.Command("wrk", "-t1", "-c2", "-d1s", "-s", file+".lua", srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 || got == 0 {
		t.Fatalf("%d requests, %d with a path and client not on one line of the file, e.g. %q", got, len(bad), bad)
	}
}

// TestCheckGeoAnswers: right answers pass, a wrong Location fails naming
// the request and its client.
func TestCheckGeoAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/aaaaaa" && r.Header.Get("X-Forwarded-For") != "" {
			w.Header().Set("Location", "https://a.example/")
			w.WriteHeader(http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	tb := fixtureTable(t)
	sources, _, _, _ := geoSourceAddrs(tb, 3, 2)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tsv")
	if err := writeGeoRequests(good, []dataset.Request{{Path: "/aaaaaa", Status: 302, Location: "https://a.example/"}, {Path: "/bbbbbb", Status: 404}}, sources); err != nil {
		t.Fatal(err)
	}
	s := &server{name: "test", url: srv.URL}
	if n, err := checkGeoAnswers(t.Context(), s, good, 10); err != nil || n != 2 {
		t.Fatalf("checkGeoAnswers = %d, %v; want 2, nil", n, err)
	}
	wrong := filepath.Join(dir, "wrong.tsv")
	if err := writeGeoRequests(wrong, []dataset.Request{{Path: "/aaaaaa", Status: 302, Location: "https://b.example/"}}, sources); err != nil {
		t.Fatal(err)
	}
	if _, err := checkGeoAnswers(t.Context(), s, wrong, 10); err == nil || !strings.Contains(err.Error(), "/aaaaaa from "+sources[0].String()) {
		t.Errorf("a wrong Location: %v, want the request and client named", err)
	}
}

// TestGeoPairs: runs pair up by round, the ratio is with over without, and
// the verdict holds at its bound and says when the pairs are too spread.
func TestGeoPairs(t *testing.T) {
	runs := []runRec{
		{scenario: scenGeoOff, round: 1, perCPU: 100}, {scenario: scenGeoOn, round: 1, perCPU: 96},
		{scenario: scenGeoOn, round: 2, perCPU: 90}, {scenario: scenGeoOff, round: 2, perCPU: 100},
		{scenario: scenGeoOff, round: 3, perCPU: 100}, // no partner: left out
	}
	pairs := geoPairsOf(runs)
	if len(pairs) != 2 || pairs[0].ratio() != 0.96 || pairs[1].ratio() != 0.9 {
		t.Fatalf("pairs %+v", pairs)
	}
	for _, c := range []struct {
		s    report.Summary
		want string
	}{
		{report.Summary{Median: 0.95, Min: 0.95, Max: 0.95, N: 1}, "kept"},
		{report.Summary{Median: 0.949, Min: 0.94, Max: 0.95, N: 2}, "not kept"},
		{report.Summary{Median: 1.0, Min: 0.8, Max: 1.2, N: 3}, "not conclusive"},
		{report.Summary{}, "not measured"},
	} {
		if v := geoVerdict(c.s); !strings.Contains(v, c.want) || (c.want == "kept" && strings.Contains(v, "not")) {
			t.Errorf("geoVerdict(%+v) = %q, want %q", c.s, v, c.want)
		}
	}
}
