package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
)

// apiTotals are the totals of the API's stats JSON.
type apiTotals struct {
	Totals struct {
		Human int64 `json:"human_clicks"`
		Bot   int64 `json:"bot_clicks"`
	} `json:"totals"`
}

func apiGet(t *testing.T, c stack.Client, path string, out any) {
	t.Helper()
	a := c.Do(context.Background(), "GET", path, "")
	if a.Status != http.StatusOK {
		t.Fatalf("GET %s: %s", path, a)
	}
	if err := json.Unmarshal(a.Body, out); err != nil {
		t.Fatal(err)
	}
}

func totalsOf(t *testing.T, c stack.Client, path string) apiTotals {
	t.Helper()
	var out apiTotals
	apiGet(t, c, path, &out)
	return out
}

// startStatsStack is startStack with an edge that knows countries (the
// IPFire fixture of edge/geo) and trusts the loopback proxy in front of
// it, so a click's X-Forwarded-For is its client: the test's clicks come
// from addresses of known countries.
func startStatsStack(t *testing.T) *env {
	t.Helper()
	pg := stack.SharedPostgres(t)
	natsURL := stack.NewNATS(t, stack.NATSConfig{}).URL()
	keys := stack.CodeKeys(t)
	e := stack.NewEdge(t, edgeserver.Config{NATSURL: natsURL, Name: "console", SnapshotDir: t.TempDir(), CodeKeysFile: keys,
		GeoIP: []string{"../../edge/geo/testdata"}, TrustedProxies: []string{"127.0.0.1/32"}})
	c := stack.NewControl(t, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: natsURL, PublicURL: e.URL,
		Snapshots: snapshots.Schedule{Disabled: true}, CodeKeysFile: keys, DomainKey: stack.CodeKeyName})
	tenant, key := pg.NewTenant(t, "console-"+t.Name())
	return &env{controlURL: c.URL, edgeURL: e.URL, pg: pg, tenant: tenant, key: key}
}

// statsVisits are the clicks the test makes: from addresses the fixture
// places (edge/geo's known ones), as browsers and a crawler, from a few
// referrers.
var statsVisits = []struct{ addr, agent, referrer string }{
	{"8.8.8.8", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36", "https://news.example.com/a"},
	{"193.0.6.139", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1", "https://t.co/x"},
	{"202.12.27.33", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15", ""},
	{"1.1.1.1", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", ""},
	{"194.25.2.129", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "https://t.co/y"},
	{"8.8.8.8", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36", ""},
}

// visit follows code on the edge as statsVisits[i] would.
func visit(t *testing.T, edgeURL, code string, i int) {
	t.Helper()
	v := statsVisits[i%len(statsVisits)]
	req, err := http.NewRequest("GET", edgeURL+"/"+code, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", v.agent)
	req.Header.Set("X-Forwarded-For", v.addr)
	if v.referrer != "" {
		req.Header.Set("Referer", v.referrer)
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("edge: %d; want 302", resp.StatusCode)
	}
}

// pageRows reads the rows of a stats table from the page: the series'
// (start, human, bot, visitors) or a breakdown's (kind|value, human, bot).
const pageRows = `((sel) => [...document.querySelectorAll(sel + " tbody tr")].map(tr => {
  const td = [...tr.querySelectorAll("td")].map(x => x.textContent.trim());
  const key = tr.dataset.start !== undefined ? tr.dataset.start : tr.dataset.kind + "|" + tr.dataset.value;
  return [key, td[1], td[2], tr.dataset.start !== undefined ? td[3] : ""].join(" ");
}))`

// apiSeriesRows are the API's series as pageRows shows them.
func apiSeriesRows(t *testing.T, c stack.Client, path string) []string {
	t.Helper()
	var sr struct {
		Buckets []struct {
			Start    string
			Human    int64 `json:"human_clicks"`
			Bot      int64 `json:"bot_clicks"`
			Visitors *int64
		}
	}
	apiGet(t, c, path, &sr)
	var out []string
	for _, b := range sr.Buckets {
		v := "—"
		if b.Visitors != nil {
			v = strconv.FormatInt(*b.Visitors, 10)
		}
		out = append(out, fmt.Sprintf("%s %d %d %s", b.Start, b.Human, b.Bot, v))
	}
	return out
}

// apiDimensionRows are the API's breakdown of one dimension as pageRows
// shows it: values, then other and none where they have clicks.
func apiDimensionRows(t *testing.T, c stack.Client, path, dim string) []string {
	t.Helper()
	type counts struct {
		Human int64 `json:"human_clicks"`
		Bot   int64 `json:"bot_clicks"`
	}
	var b struct {
		Dimensions []struct {
			Dimension string
			Values    []struct {
				Value string
				counts
			}
			Other, None counts
		}
	}
	apiGet(t, c, path, &b)
	var out []string
	for _, d := range b.Dimensions {
		if d.Dimension != dim {
			continue
		}
		for _, v := range d.Values {
			out = append(out, fmt.Sprintf("value|%s %d %d ", v.Value, v.Human, v.Bot))
		}
		for _, r := range []struct {
			kind string
			c    counts
		}{{"other", d.Other}, {"none", d.None}} {
			if r.c.Human+r.c.Bot != 0 {
				out = append(out, fmt.Sprintf("%s| %d %d ", r.kind, r.c.Human, r.c.Bot))
			}
		}
	}
	return out
}

func sameList(t *testing.T, what string, page, api []string) {
	t.Helper()
	if fmt.Sprint(page) != fmt.Sprint(api) {
		t.Errorf("%s: the page shows\n%q\nthe API\n%q", what, page, api)
	}
}

// TestStatsInChromium follows links on the edge from clients of known
// countries, as browsers and a crawler, waits for the clicks to reach the
// rollups through control's roller, and reads the link's and the tenant's
// stats pages in Chromium, per day, per hour and in another zone: their
// totals, every row of the series and of the countries, referrers and
// browsers are the API's.
func TestStatsInChromium(t *testing.T) {
	b := newBrowser(t)
	s := startStatsStack(t)
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	for _, code := range []string{"stats-e2e", "stats-two"} {
		if r := c.CreatePatiently(context.Background(), stack.Link{URL: "https://example.com/" + code + "?utm_source=e2e", Code: code}); r.Status != http.StatusCreated {
			t.Fatalf("create: %d %v", r.Status, r.Problem)
		}
		if st, _, err := stack.FollowUntil(s.edgeURL, code, time.Minute, func(st int, _ string) bool { return st == http.StatusFound }); err != nil || st != http.StatusFound {
			t.Fatalf("edge: %d %v; want 302", st, err)
		}
	}
	const clicks = 24
	for i := range clicks {
		code := "stats-e2e"
		if i%3 == 2 {
			code = "stats-two"
		}
		visit(t, s.edgeURL, code, i)
	}
	// Every click applied, the two FollowUntil hits included: then no
	// number moves while the pages are read.
	stack.Eventually(t, "the clicks reach the rollups", time.Minute, func() bool {
		got := totalsOf(t, c, "/api/v1/stats/series").Totals
		return got.Human+got.Bot >= clicks+2
	})
	today := time.Now().UTC().Format("2006-01-02")

	b.signIn(t, s.controlURL, s.key)
	b.do(t, "open the link's stats from its page",
		chromedp.Navigate(s.controlURL+"/console/links/stats-e2e"),
		chromedp.WaitVisible(chromedp.ID("stats-link")),
		chromedp.Click(chromedp.ID("stats-link")),
		chromedp.WaitVisible(chromedp.ID("total-human")),
	)
	for _, view := range []struct{ page, api, breakdown string }{
		{"", "", ""},
		{"?interval=hour&from=" + today + "&to=" + today, "?interval=hour&from=" + today + "&to=" + today,
			"?from=" + today + "&to=" + today},
		{"?tz=Asia/Kolkata", "?tz=Asia/Kolkata", "?tz=Asia/Kolkata"},
	} {
		for _, scope := range []struct{ console, api string }{{"/console/links/stats-e2e/stats", "/api/v1/links/stats-e2e/stats"}, {"/console/stats", "/api/v1/stats"}} {
			if view.page != "" {
				b.do(t, "open "+scope.console+view.page, chromedp.Navigate(s.controlURL+scope.console+view.page), chromedp.WaitVisible(chromedp.ID("total-human")))
			} else if scope.console == "/console/stats" {
				b.do(t, "open the tenant's stats from the nav", chromedp.Click(chromedp.CSS(`nav a[href="/console/stats"]`)), chromedp.WaitVisible(chromedp.ID("live-links")))
			}
			where := scope.console + view.page
			want := totalsOf(t, c, scope.api+"/series"+view.api).Totals
			if human, bot := b.text(t, "#total-human"), b.text(t, "#total-bot"); human != strconv.FormatInt(want.Human, 10) || bot != strconv.FormatInt(want.Bot, 10) {
				t.Errorf("%s shows %s human, %s bot; the API %+v", where, human, bot, want)
			}
			sameList(t, where+" series", run(t, b, "series rows", chromedp.Evaluate[[]string](pageRows+`("table.series")`)),
				apiSeriesRows(t, c, scope.api+"/series"+view.api))
			q := "?limit=20"
			if view.breakdown != "" {
				q = view.breakdown + "&limit=20"
			}
			for _, dim := range []string{"country", "referrer", "browser", "utm_source"} {
				rows := run(t, b, dim+" rows", chromedp.Evaluate[[]string](pageRows+`("#`+dim+`-table")`))
				sameList(t, where+" "+dim, rows, apiDimensionRows(t, c, scope.api+"/breakdown"+q, dim))
				if dim == "country" && len(rows) < 5 {
					t.Errorf("%s: countries %q; want the five of the clicks' addresses", where, rows)
				}
			}
		}
	}
	// The countries are named: the tenant's, the addresses of both links.
	b.do(t, "open the tenant's stats", chromedp.Navigate(s.controlURL+"/console/stats"), chromedp.WaitVisible(chromedp.ID("country-table")))
	names := run(t, b, "country names", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#country-table tbody tr")].map(tr => tr.dataset.value + "=" + tr.querySelector("td").textContent)`))
	for _, want := range []string{"JP=Japan (JP)", "NL=Netherlands (NL)", "US=United States (US)", "=Unknown (no country data)"} {
		if !slices.Contains(names, want) {
			t.Errorf("countries shown as %q; want %s among them", names, want)
		}
	}
	if n := run(t, b, "charts", chromedp.Evaluate[int](`document.querySelectorAll("svg.chart title").length`)); n == 0 {
		t.Errorf("the link's stats page has no chart with a title")
	}
	// Every view of the pages passes the accessibility check (axe: WCAG
	// 2 A and AA, best practices), at desktop and phone width: by day, by
	// hour, in a zone with approximate days (their note and marks), hours
	// asked from before those kept (the notice), a refused range (the
	// problem tied to its field).
	views := []struct{ path, wait string }{
		{"/console/stats", "#country-table"},
		{"/console/links/stats-e2e/stats", "#country-table"},
		{"/console/stats?interval=hour&tz=" + url.QueryEscape("America/New_York"), "#hourly-table"},
		{"/console/links/stats-e2e/stats?tz=Asia/Kolkata", "#approximate"},
		{"/console/stats?interval=hour&from=2020-01-01", "#range-notice"},
		{"/console/stats?from=2030-01-10&to=2030-01-01", "#range-problem"},
	}
	for _, w := range screenWidths {
		b.do(t, "viewport", viewport(w.width, w.height, w.mobile))
		for _, v := range views {
			b.do(t, "open "+v.path, chromedp.Navigate(s.controlURL+v.path), chromedp.WaitVisible(chromedp.CSS(v.wait)))
			if bad := run(t, b, "unnamed controls", chromedp.Evaluate[[]string](unnamedControls)); len(bad) > 0 {
				t.Errorf("%s has controls without an accessible name: %v", v.path, bad)
			}
			b.check(t, v.path+" ("+w.name+")")
		}
	}
}
