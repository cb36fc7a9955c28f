package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// newStatsEnv is newEnv with the stats endpoints backed by the same
// database, and a fixed clock (so default ranges are known).
func newStatsEnv(t *testing.T, now time.Time) *env {
	t.Helper()
	return newEnv(t, func(c *Config, st *postgres.Store) {
		c.Stats, c.Now = st, func() time.Time { return now }
	})
}

func TestStats(t *testing.T) {
	now := time.Date(2030, 1, 10, 15, 0, 0, 0, time.UTC)
	e := newStatsEnv(t, now)
	key, other := e.tenant(t, "acme"), e.tenant(t, "other")
	var codes []string
	for range 3 {
		r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/"}`))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %v", r)
		}
		codes = append(codes, r.json(t)["code"].(string))
	}
	if r := e.do(t, "DELETE", "/api/v1/links/"+codes[2], key, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %v", r)
	}
	d8, d9 := time.Date(2030, 1, 8, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 9, 0, 0, 0, 0, time.UTC)
	var h clicks.Histogram
	for v := 1; v <= 100; v++ {
		h[clicks.Bucket(uint64(v*1000))]++ // 1µs … 100µs
	}
	var lat []clickroll.LatencyBucket
	for i, c := range h {
		if c != 0 {
			lat = append(lat, clickroll.LatencyBucket{Day: d9, Bucket: i, Count: int64(c)})
		}
	}
	// What the click roller would have applied.
	err := e.store.ApplyClicks(context.Background(), &clickroll.Rollup{Stream: clicks.Stream, Last: 3,
		Links: []clickroll.LinkDay{{Code: codes[0], Day: d8, Clicks: 5, BotClicks: 1}, {Code: codes[0], Day: d9, Clicks: 7, BotClicks: 2},
			{Code: codes[1], Day: d9, Clicks: 1}},
		Breakdown: []clickroll.BreakdownDay{
			{Code: codes[0], Day: d8, Dimension: "referrer", Value: "t.co", Clicks: 4},
			{Code: codes[0], Day: d9, Dimension: "referrer", Value: "t.co", Clicks: 3, BotClicks: 1},
			{Code: codes[0], Day: d9, Dimension: "referrer", Value: "", Clicks: 5, BotClicks: 2},
			{Code: codes[0], Day: d9, Dimension: "device", Value: "mobile", Clicks: 7, BotClicks: 2},
		},
		Latency: lat,
	})
	if err != nil {
		t.Fatal(err)
	}

	r := e.do(t, "GET", "/api/v1/links/"+codes[0]+"/stats?from=2030-01-08&to=2030-01-10", key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("link stats: %v", r)
	}
	var ls linkStatsBody
	if err := json.Unmarshal(r.body, &ls); err != nil {
		t.Fatal(err)
	}
	if ls.Totals != (counts{Human: 9, Bot: 3}) || len(ls.Daily) != 3 || ls.Daily[2].Human != 0 || ls.Daily[1].Human != 5 {
		t.Errorf("link stats totals %+v daily %+v", ls.Totals, ls.Daily)
	}
	// Referrers over the range, largest first; "" is no referrer.
	if len(ls.Referrers) != 2 || ls.Referrers[0] != (valueCounts{"t.co", counts{6, 1}}) || ls.Referrers[1] != (valueCounts{"", counts{3, 2}}) {
		t.Errorf("referrers %+v", ls.Referrers)
	}
	if len(ls.Devices) != 1 || ls.Devices[0].Value != "mobile" {
		t.Errorf("devices %+v", ls.Devices)
	}

	// Default range: the 30 days ending today.
	r = e.do(t, "GET", "/api/v1/links/"+codes[0]+"/stats", key, nil)
	if m := r.json(t); m["from"] != "2029-12-12" || m["to"] != "2030-01-10" || len(m["daily"].([]any)) != 30 {
		t.Errorf("default range: from %v to %v, %d days", m["from"], m["to"], len(m["daily"].([]any)))
	}
	// Tenant scope: another tenant's code is unknown.
	if r := e.do(t, "GET", "/api/v1/links/"+codes[0]+"/stats", other, nil); r.status != http.StatusNotFound {
		t.Errorf("another tenant's link stats: %v; want 404", r)
	}
	for _, q := range []string{"from=2030-01-11&to=2030-01-10", "from=2020-01-01&to=2030-01-10", "to=yesterday", "from=2030-1-1"} {
		if r := e.do(t, "GET", "/api/v1/links/"+codes[0]+"/stats?"+q, key, nil); r.status != http.StatusBadRequest {
			t.Errorf("?%s: %v; want 400", q, r)
		}
	}
	if r := e.do(t, "GET", "/api/v1/stats", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("stats without a key: %v; want 401", r)
	}

	r = e.do(t, "GET", "/api/v1/stats?from=2030-01-08&to=2030-01-09", key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("tenant stats: %v", r)
	}
	var ts tenantStatsBody
	if err := json.Unmarshal(r.body, &ts); err != nil {
		t.Fatal(err)
	}
	if ts.Totals != (counts{Human: 10, Bot: 3}) || ts.LiveLinks != 2 || ts.Service.RedirectsTotal != 13 {
		t.Errorf("tenant stats totals %+v, live %d, redirects %d; want 10+3, 2, 13", ts.Totals, ts.LiveLinks, ts.Service.RedirectsTotal)
	}
	// p50 of 1..100µs is 50µs, reported as its bucket's upper bound.
	l := ts.Service.Latency
	if l.Samples != 100 || l.P50 < 50 || l.P50 > 53.2 || l.P99 < 99 || l.P99 > 105.4 || len(ts.Service.LatencyDaily) != 1 {
		t.Errorf("latency %+v, %d days", l, len(ts.Service.LatencyDaily))
	}
	// The other tenant sees none of it but the service-wide numbers.
	r = e.do(t, "GET", "/api/v1/stats", other, nil)
	if m := r.json(t); m["live_links"].(float64) != 0 || m["totals"].(map[string]any)["human_clicks"].(float64) != 0 {
		t.Errorf("other tenant: %s", r.body)
	}
}

// TestLinkStatsByDomain: a code is a link per domain, so a link's stats
// are its own domain's: ?domain= picks the link as on every link route
// (any spelling of the host; absent or the platform's host: the
// platform's), the same code on two domains answers two sets of numbers,
// and a domain the tenant may not use, or a parameter the route does not
// know, reads nobody's clicks.
func TestLinkStatsByDomain(t *testing.T) {
	now := time.Date(2030, 1, 10, 15, 0, 0, 0, time.UTC)
	e := newEnv(t, withDomains, func(c *Config, st *postgres.Store) {
		c.Stats, c.Now = st, func() time.Time { return now }
	})
	alice, bob := e.tenant(t, "alice"), e.tenant(t, "bob")
	if r := e.do(t, "POST", "/api/v1/domains", alice, []byte(`{"host": "go.alice.example"}`)); r.status != http.StatusCreated {
		t.Fatalf("create domain: %v", r)
	}
	if r := e.do(t, "POST", "/api/v1/domains", bob, []byte(`{"host": "go.bob.example"}`)); r.status != http.StatusCreated {
		t.Fatalf("create domain: %v", r)
	}
	for _, c := range []struct{ key, body string }{
		{alice, `{"url": "https://alice.example/p", "code": "spring-sale"}`},
		{alice, `{"domain": "go.alice.example", "url": "https://alice.example/d", "code": "spring-sale"}`},
		{bob, `{"domain": "go.bob.example", "url": "https://bob.example/", "code": "spring-sale"}`},
	} {
		if r := e.do(t, "POST", "/api/v1/links", c.key, []byte(c.body)); r.status != http.StatusCreated {
			t.Fatalf("create %s: %v", c.body, r)
		}
	}
	var aliceDomain, bobDomain int32
	if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT id FROM domains WHERE host = 'go.alice.example'), (SELECT id FROM domains WHERE host = 'go.bob.example')`).
		Scan(&aliceDomain, &bobDomain); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2030, 1, 9, 0, 0, 0, 0, time.UTC)
	err := e.store.ApplyClicks(context.Background(), &clickroll.Rollup{Stream: clicks.Stream, Last: 1,
		Links: []clickroll.LinkDay{{Code: "spring-sale", Day: day, Clicks: 5, BotClicks: 1}, {Domain: link.DomainID(aliceDomain), Code: "spring-sale", Day: day, Clicks: 3},
			{Domain: link.DomainID(bobDomain), Code: "spring-sale", Day: day, Clicks: 100}},
		Breakdown: []clickroll.BreakdownDay{{Code: "spring-sale", Day: day, Dimension: "referrer", Value: "t.co", Clicks: 5, BotClicks: 1},
			{Domain: link.DomainID(aliceDomain), Code: "spring-sale", Day: day, Dimension: "referrer", Value: "news.example", Clicks: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		query, domain, referrer string
		want                    counts
	}{
		{"", platformHost, "t.co", counts{4, 1}},
		{"?domain=" + platformHost, platformHost, "t.co", counts{4, 1}},
		{"?domain=go.alice.example", "go.alice.example", "news.example", counts{3, 0}},
		{"?domain=GO.Alice.Example.&from=2030-01-09&to=2030-01-09", "go.alice.example", "news.example", counts{3, 0}},
	} {
		r := e.do(t, "GET", "/api/v1/links/spring-sale/stats"+tt.query, alice, nil)
		if r.status != http.StatusOK {
			t.Fatalf("stats%s: %v", tt.query, r)
		}
		var ls linkStatsBody
		if err := json.Unmarshal(r.body, &ls); err != nil {
			t.Fatal(err)
		}
		if ls.Domain != tt.domain || ls.Code != "spring-sale" || ls.Totals != tt.want || len(ls.Referrers) != 1 || ls.Referrers[0].Value != tt.referrer {
			t.Errorf("stats%s: domain %q, totals %+v, referrers %+v; want %q, %+v, %s", tt.query, ls.Domain, ls.Totals, ls.Referrers, tt.domain, tt.want, tt.referrer)
		}
	}
	for _, tt := range []struct {
		query  string
		status int
	}{
		{"?domain=go.bob.example", http.StatusNotFound}, // bob's domain: alice may not use it
		{"?domain=nowhere.example", http.StatusNotFound},
		{"?domian=go.alice.example", http.StatusBadRequest},
		{"?domain=a%20b", http.StatusBadRequest},
		{"?domain=go.alice.example&domain=go.alice.example", http.StatusBadRequest},
	} {
		if r := e.do(t, "GET", "/api/v1/links/spring-sale/stats"+tt.query, alice, nil); r.status != tt.status {
			t.Errorf("stats%s: %v; want %d", tt.query, r, tt.status)
		}
	}
	// Bob's own link of that code has his domain's clicks only; alice's
	// domain is not his to read (404), and the platform's spring-sale is
	// alice's link, not his.
	r := e.do(t, "GET", "/api/v1/links/spring-sale/stats?domain=go.bob.example", bob, nil)
	if r.status != http.StatusOK {
		t.Errorf("bob's spring-sale: %v", r)
	} else if m := r.json(t); m["domain"] != "go.bob.example" || m["totals"].(map[string]any)["human_clicks"].(float64) != 100 {
		t.Errorf("bob's spring-sale: %s; want go.bob.example's 100 clicks", r.body)
	}
	for _, q := range []string{"?domain=go.alice.example", ""} {
		if r := e.do(t, "GET", "/api/v1/links/spring-sale/stats"+q, bob, nil); r.status != http.StatusNotFound {
			t.Errorf("bob reading alice's spring-sale%s: %v; want 404", q, r)
		}
	}
}
