package grafana

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/scrape"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
)

func TestMain(m *testing.M) { stack.Main(m) }

type env struct {
	controlURL, edgeURL, key string
}

// startStack runs control and one edge in this process against a fresh
// database and an in-process JetStream; both stop when the test ends.
// Generated codes start at "LEAK00", so they are as easy to spot in a
// label as the custom ones.
func startStack(t *testing.T) env {
	t.Helper()
	pg := stack.SharedPostgres(t)
	nats := stack.NewNATS(t, stack.NATSConfig{})
	start, err := base62.Decode("LEAK00")
	if err != nil {
		t.Fatal(err)
	}
	e := stack.NewEdge(t, edgeserver.Config{NATSURL: nats.URL(), Name: "metrics-test"})
	c := stack.NewControl(t, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: nats.URL(),
		PublicURL: e.URL, IDStart: start, Snapshots: snapshots.Schedule{Disabled: true}})
	_, key := pg.NewTenant(t, "leaktenant")
	return env{controlURL: c.URL, edgeURL: e.URL, key: key}
}

// call sends a request to url with the tenant's key and extra header
// pairs and returns the status and body.
func (s env) call(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	a := stack.Client{Key: s.key}.Do(t.Context(), method, url, body, header...)
	if a.Err != nil {
		t.Fatalf("%s %s: %v", method, url, a.Err)
	}
	return a.Status, string(a.Body)
}

// follow polls the edge until code redirects to url.
func (s env) follow(t *testing.T, code, url string) {
	t.Helper()
	status, loc, err := stack.FollowUntil(s.edgeURL, code, 90*time.Second, func(st int, l string) bool {
		return st == http.StatusFound && l == url
	})
	if status != http.StatusFound || loc != url {
		t.Fatalf("edge: /%s does not redirect to %s after 90s (%d %q %v)", code, url, status, loc, err)
	}
}

func codeOf(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `"code":"`)
	code, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no code in %s", body)
	}
	return code
}

// TestMetricsLeakNothingAndDashboardMatches drives creates (custom and
// generated codes, idempotency keys, a batch) and redirects through a
// running control and edge, then scrapes both /metrics:
//   - no label value contains a code, a URL (or its host or path), an
//     idempotency key, the API key or the tenant, and every label name is
//     one of prom.LabelNames;
//   - the counters saw the traffic (so the check is not vacuous);
//   - every metric the Grafana dashboard queries is exported by one of
//     the two binaries.
func TestMetricsLeakNothingAndDashboardMatches(t *testing.T) {
	s := startStack(t)
	const (
		customCode = "LeakCustom7"
		customURL  = "https://leak-host-q7.example/leak-path-81?leakq=zz"
		genURL     = "https://leak-gen.example/gen-path-42"
		idemKey    = "leak-idem-key-5521"
		batchKey   = "leak-batch-key-8812"
	)
	forbidden := []string{customCode, customURL, "leak-host-q7.example", "leak-path-81", "leakq=zz", genURL,
		"leak-gen.example", "gen-path-42", idemKey, batchKey, s.key, s.key[len(s.key)-12:], "leaktenant",
		"leak", "Leak", "LEAK"}
	codes := map[string]string{}

	st, body := s.call(t, "POST", s.controlURL+"/api/v1/links", fmt.Sprintf(`{"url": %q, "code": %q}`, customURL, customCode),
		"Idempotency-Key", idemKey)
	if st != 201 {
		t.Fatalf("custom create: %d %s", st, body)
	}
	codes[customCode] = customURL
	for i := 0; i < 2; i++ { // the second is an idempotent replay
		st, body = s.call(t, "POST", s.controlURL+"/api/v1/links", fmt.Sprintf(`{"url": %q}`, genURL), "Idempotency-Key", idemKey+"-gen")
		if st != 201 {
			t.Fatalf("generated create: %d %s", st, body)
		}
	}
	codes[codeOf(t, body)] = genURL
	st, body = s.call(t, "POST", s.controlURL+"/api/v1/links/batch",
		fmt.Sprintf(`{"links": [{"url": %q}, {"url": %q}, {"url": "javascript:alert(1)"}]}`, genURL+"/b1", genURL+"/b2"),
		"Idempotency-Key", batchKey)
	if st != 200 || strings.Count(body, `"status":201`) != 2 {
		t.Fatalf("batch: %d %s", st, body)
	}
	for _, part := range strings.Split(body, `"code":"`)[1:] {
		code, _, _ := strings.Cut(part, `"`)
		_, rest, _ := strings.Cut(part, `"url":"`)
		url, _, _ := strings.Cut(rest, `"`)
		codes[code] = url
		forbidden = append(forbidden, code, url)
	}
	for code := range codes {
		forbidden = append(forbidden, code)
		if st, body := s.call(t, "GET", s.controlURL+"/api/v1/links/"+code, ""); st != 200 {
			t.Fatalf("get %s: %d %s", code, st, body)
		}
	}
	for code, url := range codes {
		s.follow(t, code, url)
	}
	// Misses: unknown custom-shaped and generated-shaped codes go to the
	// authority; a path that is no code is refused.
	for _, path := range []string{"/LeakMissing9", "/LEAKzz", "/leak!path"} {
		status, _, err := stack.Get(s.edgeURL + path)
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusNotFound {
			t.Fatalf("edge %s: %d; want 404", path, status)
		}
	}

	// Both binaries answer the probe paths the manifests point at: the
	// edge's under /-/.
	// Readiness follows the change feed catching up, which trails the
	// last create by a moment: poll, with a bound.
	for _, base := range []string{s.controlURL, s.edgeURL + "/-"} {
		for _, p := range []string{"/startupz", "/readyz", "/livez"} {
			var status int
			var body string
			_ = stack.Poll(t.Context(), "GET "+base+p, 30*time.Second, func() bool {
				var err error
				status, body, err = stack.Get(base + p)
				return err == nil && status == http.StatusOK
			})
			if status != http.StatusOK {
				t.Errorf("GET %s%s: %d %q; want 200 on a started, caught-up stack", base, p, status, body)
			}
		}
	}

	control, err := stack.Metrics(s.controlURL)
	if err != nil {
		t.Fatal(err)
	}
	edge, err := stack.EdgeMetrics(s.edgeURL)
	if err != nil {
		t.Fatal(err)
	}
	for what, fams := range map[string]map[string]*dto.MetricFamily{"control": control, "edge": edge} {
		for _, err := range scrape.CheckLabels(fams, forbidden) {
			t.Errorf("%s /metrics: %v", what, err)
		}
	}

	// The traffic shows, so the label check looked at live series.
	atLeast := func(what string, fams map[string]*dto.MetricFamily, want float64, name string, labels ...string) {
		t.Helper()
		if v, _ := scrape.Value(fams, name, labels...); v < want {
			t.Errorf("%s %s%v = %v; want at least %v", what, name, labels, v, want)
		}
	}
	atLeast("control", control, 3, "control_http_requests_total", "op", "POST /api/v1/links", "status", "201")
	atLeast("control", control, 1, "control_idempotent_replays_total", "op", "POST /api/v1/links")
	atLeast("control", control, 2, "control_batch_items_total", "status", "201")
	atLeast("control", control, 1, "control_batch_items_total", "status", "400")
	atLeast("control", control, 1, "control_idalloc_segment_loads_total")
	atLeast("control", control, 1, "control_idalloc_load_duration_seconds", "class", "ok")
	atLeast("control", control, 1, "control_authority_lookups_total", "outcome", "not_found")
	atLeast("edge", edge, float64(len(codes)), "edge_requests_total", "outcome", "redirect")
	atLeast("edge", edge, float64(len(codes)), "edge_hits_total")
	atLeast("edge", edge, 2, "edge_requests_total", "outcome", "not_found")
	atLeast("edge", edge, 1, "edge_requests_total", "outcome", "bad_code")
	atLeast("edge", edge, 1, "edge_changefeed_applied_version")

	// The dashboard asks only for what the binaries export.
	exported := append(scrape.Names(control), scrape.Names(edge)...)
	qs, err := Queries(Dashboard())
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, q := range qs {
		names, err := MetricNames(q.Expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
			continue
		}
		for _, n := range names {
			checked++
			if !slices.Contains(exported, n) {
				t.Errorf("panel %q queries %s, which neither control nor the edge exports (query %q)", q.Panel, n, q.Expr)
			}
		}
	}
	t.Logf("%d metric references in %d dashboard queries, all exported; %d control and %d edge families scraped",
		checked, len(qs), len(control), len(edge))
}
