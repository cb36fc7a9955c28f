package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// Referrer hosts come from the internet: one that opens a script if a
// page writes it unescaped, one a spreadsheet would run as a formula.
const (
	hostileReferrer = `x.example"><script>alert(1)</script>`
	formulaReferrer = `=HYPERLINK("http://evil.example","go")`
)

// apiValue and apiStats are the API's stats JSON, the fields a page
// shows.
type apiValue struct {
	Value string `json:"value"`
	Date  string `json:"date"`
	Human int64  `json:"human_clicks"`
	Bot   int64  `json:"bot_clicks"`
}

type apiStats struct {
	Totals    apiValue   `json:"totals"`
	LiveLinks int64      `json:"live_links"`
	Daily     []apiValue `json:"daily"`
	Referrers []apiValue `json:"referrers"`
	Devices   []apiValue `json:"devices"`
	Statuses  []apiValue `json:"statuses"`
	Edges     []apiValue `json:"edges"`
}

// pageStats are the same numbers as read from a stats page.
type pageStats struct {
	human, bot, live int64
	daily            []apiValue
	by               map[string][]apiValue // dimension → rows
}

var (
	regexpDay   = regexp.MustCompile(`<tr><td data-label="Day \(UTC\)">([^<]*)</td><td data-label="Human">(\d+)</td><td data-label="Bot">(\d+)</td></tr>`)
	regexpValue = regexp.MustCompile(`<tr><td data-label="Value" class="target">(.*?)</td><td data-label="Human">(\d+)</td><td data-label="Bot">(\d+)</td>`)
	regexpFact  = regexp.MustCompile(`<dd id="([a-z-]+)">(\d+)</dd>`)
)

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readStatsPage(t *testing.T, body string) pageStats {
	t.Helper()
	p := pageStats{by: map[string][]apiValue{}}
	for _, m := range regexpFact.FindAllStringSubmatch(body, -1) {
		switch m[1] {
		case "total-human":
			p.human = atoi(t, m[2])
		case "total-bot":
			p.bot = atoi(t, m[2])
		case "live-links":
			p.live = atoi(t, m[2])
		}
	}
	for _, m := range regexpDay.FindAllStringSubmatch(body, -1) {
		p.daily = append(p.daily, apiValue{Date: m[1], Human: atoi(t, m[2]), Bot: atoi(t, m[3])})
	}
	for _, dim := range []string{"referrer", "device", "status", "edge"} {
		i := strings.Index(body, `id="`+dim+`-table"`)
		if i < 0 {
			continue
		}
		table := body[i:]
		table = table[:strings.Index(table, "</table>")]
		for _, m := range regexpValue.FindAllStringSubmatch(table, -1) {
			v := html.UnescapeString(m[1])
			if v == "<em>none</em>" {
				v = ""
			}
			p.by[dim] = append(p.by[dim], apiValue{Value: v, Human: atoi(t, m[2]), Bot: atoi(t, m[3])})
		}
	}
	return p
}

func sameValues(t *testing.T, what string, page, api []apiValue) {
	t.Helper()
	if len(page) != len(api) {
		t.Errorf("%s: the page shows %d rows, the API %d: %+v vs %+v", what, len(page), len(api), page, api)
		return
	}
	for i := range page {
		if page[i] != api[i] {
			t.Errorf("%s row %d: page %+v, API %+v", what, i, page[i], api[i])
		}
	}
}

// statsEnv is the console with clicks in its rollups, applied as the
// roller applies them, and the API over the same database.
type statsEnv struct {
	*env
	api   http.Handler
	codes []string
}

var (
	day8 = time.Date(2030, 1, 8, 0, 0, 0, 0, time.UTC)
	day9 = time.Date(2030, 1, 9, 0, 0, 0, 0, time.UTC)
)

func newStatsEnv(t *testing.T) *statsEnv {
	t.Helper()
	e := newEnv(t, console.Config{}) // its store is the stats reader
	ctx := context.Background()
	var codes []string
	for _, c := range []string{"stats-a", "stats-b"} {
		if _, err := e.svc.Create(ctx, e.tenant, links.CreateRequest{URL: "https://example.com/" + c, Code: c}); err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c)
	}
	err := e.store.ApplyClicks(ctx, &clickroll.Rollup{Stream: clicks.Stream, Last: 5,
		Links: []clickroll.LinkDay{{Code: "stats-a", Day: day8, Clicks: 6, BotClicks: 1}, {Code: "stats-a", Day: day9, Clicks: 9, BotClicks: 2},
			{Code: "stats-b", Day: day9, Clicks: 4, BotClicks: 4}},
		Breakdown: []clickroll.BreakdownDay{
			{Code: "stats-a", Day: day8, Dimension: "referrer", Value: hostileReferrer, Clicks: 3},
			{Code: "stats-a", Day: day9, Dimension: "referrer", Value: formulaReferrer, Clicks: 2, BotClicks: 1},
			{Code: "stats-a", Day: day9, Dimension: "referrer", Value: "t.co", Clicks: 5},
			{Code: "stats-a", Day: day8, Dimension: "referrer", Value: "", Clicks: 3, BotClicks: 1},
			{Code: "stats-a", Day: day9, Dimension: "referrer", Value: "", Clicks: 2, BotClicks: 1},
			{Code: "stats-a", Day: day8, Dimension: "device", Value: "mobile", Clicks: 6, BotClicks: 1},
			{Code: "stats-a", Day: day9, Dimension: "device", Value: "desktop", Clicks: 9, BotClicks: 2},
			{Code: "stats-a", Day: day9, Dimension: "status", Value: "302", Clicks: 15, BotClicks: 3},
			{Code: "stats-a", Day: day9, Dimension: "edge", Value: "edge-1", Clicks: 15, BotClicks: 3},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := api.New(e.store, e.svc, api.Config{PublicURL: "http://sho.rt", Stats: e.store, Now: e.clock.now, RatePerSecond: -1, AuthFailuresPerSecond: -1})
	return &statsEnv{env: e, api: a, codes: codes}
}

func (e *statsEnv) apiStats(t *testing.T, path string) apiStats {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.Header.Set("Authorization", "Bearer "+e.key)
	w := httptest.NewRecorder()
	e.api.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("API %s: %d %s", path, w.Code, w.Body)
	}
	var out apiStats
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatsPagesEqualTheAPI reads a link's and the tenant's stats pages
// and the API's JSON for the same range: every number is the same.
func TestStatsPagesEqualTheAPI(t *testing.T) {
	e := newStatsEnv(t)
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	const rng = "?from=2030-01-07&to=2030-01-10"

	w := b.do("GET", "/console/links/stats-a/stats"+rng, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("link stats page: %d\n%.2000s", w.Code, w.Body)
	}
	page, want := readStatsPage(t, w.Body.String()), e.apiStats(t, "/api/v1/links/stats-a/stats"+rng)
	if page.human != want.Totals.Human || page.bot != want.Totals.Bot || want.Totals.Human != 12 {
		t.Errorf("link totals: page %d human %d bot, API %+v", page.human, page.bot, want.Totals)
	}
	sameValues(t, "daily", page.daily, want.Daily)
	sameValues(t, "referrers", page.by["referrer"], want.Referrers)
	sameValues(t, "devices", page.by["device"], want.Devices)
	sameValues(t, "statuses", page.by["status"], want.Statuses)
	sameValues(t, "edges", page.by["edge"], want.Edges)
	if len(want.Daily) != 4 || len(want.Referrers) != 4 {
		t.Fatalf("the API's answer is not the test's data: %+v", want)
	}

	w = b.do("GET", "/console/stats"+rng, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("tenant stats page: %d\n%.2000s", w.Code, w.Body)
	}
	page, want = readStatsPage(t, w.Body.String()), e.apiStats(t, "/api/v1/stats"+rng)
	if page.human != want.Totals.Human || page.bot != want.Totals.Bot || page.live != want.LiveLinks || want.Totals.Bot != 7 {
		t.Errorf("tenant totals: page %d/%d live %d, API %+v live %d", page.human, page.bot, page.live, want.Totals, want.LiveLinks)
	}
	sameValues(t, "tenant daily", page.daily, want.Daily)
	if len(page.by) != 0 {
		t.Errorf("the tenant's page shows breakdowns: %v", page.by)
	}
}

// TestStatsEscapeWhatTheInternetSent: a referrer host is written as text
// in the page's tables and chart, and guarded in the CSV.
func TestStatsEscapeWhatTheInternetSent(t *testing.T) {
	e := newStatsEnv(t)
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	w := b.do("GET", "/console/links/stats-a/stats?from=2030-01-07&to=2030-01-10", nil)
	body := w.Body.String()
	if strings.Contains(body, "<script>alert") || strings.Contains(body, `"><script`) {
		t.Errorf("the hostile referrer is in the page unescaped")
	}
	if !strings.Contains(body, html.EscapeString(hostileReferrer)) {
		t.Errorf("the hostile referrer is not shown as text")
	}
	if !strings.Contains(body, "<svg class=\"chart\"") || !strings.Contains(body, "<title id=\"daily-title\">") {
		t.Errorf("no chart with a title in the page")
	}

	w = b.do("GET", "/console/links/stats-a/stats.csv?from=2030-01-07&to=2030-01-10", nil)
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Disposition"), "attachment;") ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV: %d %v", w.Code, w.Header())
	}
	rows, err := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := e.apiStats(t, "/api/v1/links/stats-a/stats?from=2030-01-07&to=2030-01-10")
	var got []string
	for _, r := range rows[1:] {
		got = append(got, strings.Join(r, "|"))
	}
	var exp []string
	for _, d := range want.Daily {
		exp = append(exp, "day|"+d.Date+"|"+strconv.FormatInt(d.Human, 10)+"|"+strconv.FormatInt(d.Bot, 10))
	}
	for _, s := range []struct {
		dim string
		vs  []apiValue
	}{{"referrer", want.Referrers}, {"device", want.Devices}, {"status", want.Statuses}, {"edge", want.Edges}} {
		for _, v := range s.vs {
			val := v.Value
			if strings.HasPrefix(val, "=") {
				val = "'" + val
			}
			exp = append(exp, s.dim+"|"+val+"|"+strconv.FormatInt(v.Human, 10)+"|"+strconv.FormatInt(v.Bot, 10))
		}
	}
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Errorf("CSV rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
	if !strings.Contains(w.Body.String(), `'=HYPERLINK(`) {
		t.Errorf("the formula referrer is not guarded:\n%s", w.Body)
	}
}

// TestStatsScopeAndRanges: another tenant's link is unknown here, and a
// range the API would refuse is a 400 with the form kept.
func TestStatsScopeAndRanges(t *testing.T) {
	e := newStatsEnv(t)
	ctx := context.Background()
	other, _, err := e.store.CreateTenantWithKey(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(ctx, other, links.CreateRequest{URL: "https://example.com/their-link", Code: "their-link"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	for _, path := range []string{"/console/links/their-link/stats", "/console/links/their-link/stats.csv", "/console/links/nothing/stats"} {
		if w := b.do("GET", path, nil); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d; want 404", path, w.Code)
		}
	}
	for _, c := range []struct{ query, msg, kept string }{
		{"from=yesterday&to=2030-01-10", "from must be a date", `value="yesterday"`},
		{"from=2030-01-10&to=2030-01-09", "from must not be after to", `value="2030-01-10"`},
		{"from=2028-01-01&to=2030-01-10", "at most 366 days", `value="2028-01-01"`},
		{"to=2030-13-01", "to must be a date", `value="2030-13-01"`},
	} {
		for _, path := range []string{"/console/links/stats-a/stats?", "/console/stats?", "/console/stats.csv?"} {
			w := b.do("GET", path+c.query, nil)
			body := w.Body.String()
			if w.Code != http.StatusBadRequest || !strings.Contains(body, c.msg) || !strings.Contains(body, c.kept) {
				t.Errorf("%s%s: %d; want 400 saying %q with %s\n%.1500s", path, c.query, w.Code, c.msg, c.kept, body)
			}
		}
	}
	// The default range is the API's: the last 30 days ending today.
	w := b.do("GET", "/console/stats", nil)
	today := e.clock.now().UTC().Format("2006-01-02")
	first := e.clock.now().UTC().AddDate(0, 0, -29).Format("2006-01-02")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="to" name="to" value="`+today+`"`) ||
		!strings.Contains(w.Body.String(), `id="from" name="from" value="`+first+`"`) || len(readStatsPage(t, w.Body.String()).daily) != 30 {
		t.Errorf("default range: %d\n%.3000s", w.Code, w.Body)
	}
}

// BenchmarkStatsPages renders a link's and the tenant's stats pages over
// the longest range, every day with clicks and the link's breakdowns full
// (50 referrers), from a real PostgreSQL: the server time of a page. The
// figures on a shared machine are indicative only.
func BenchmarkStatsPages(b *testing.B) {
	e := newEnv(b, console.Config{})
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, e.tenant, links.CreateRequest{URL: "https://example.com/busy", Code: "busy-link"}); err != nil {
		b.Fatal(err)
	}
	to := e.clock.now().UTC().Truncate(24 * time.Hour)
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1}
	for i := range 366 {
		day := to.AddDate(0, 0, -i)
		r.Links = append(r.Links, clickroll.LinkDay{Code: "busy-link", Day: day, Clicks: int64(100 + i), BotClicks: int64(i % 7)})
		for j := range 50 {
			r.Breakdown = append(r.Breakdown, clickroll.BreakdownDay{Code: "busy-link", Day: day, Dimension: "referrer",
				Value: "ref" + strconv.Itoa(j) + ".example", Clicks: 2})
		}
	}
	if err := e.store.ApplyClicks(ctx, r); err != nil {
		b.Fatal(err)
	}
	br := e.browser("192.0.2.1")
	br.signIn(b, e.key)
	q := "?from=" + to.AddDate(0, 0, -365).Format("2006-01-02") + "&to=" + to.Format("2006-01-02")
	for _, path := range []string{"/console/links/busy-link/stats", "/console/stats", "/console/links/busy-link/stats.csv"} {
		b.Run(strings.TrimPrefix(path, "/console/"), func(b *testing.B) {
			for b.Loop() {
				if w := br.do("GET", path+q, nil); w.Code != http.StatusOK {
					b.Fatalf("%s: %d", path, w.Code)
				}
			}
		})
	}
}

// downStats is a stats store that cannot answer.
type downStats struct{}

func (downStats) LinkClicks(context.Context, link.DomainID, string, time.Time, time.Time, int) ([]clickstats.Day, []clickstats.Breakdown, error) {
	return nil, nil, fmt.Errorf("link clicks: %w", link.ErrUnavailable)
}

func (downStats) TenantClicks(context.Context, int64, time.Time, time.Time) ([]clickstats.Day, int64, error) {
	return nil, 0, errors.New("tenant clicks: connection reset")
}

// TestStatsWhenTheStoreFails: an unavailable store is a 503 to retry,
// any other failure a 500, neither with a half page.
func TestStatsWhenTheStoreFails(t *testing.T) {
	e := newEnv(t, console.Config{Stats: downStats{}})
	if _, err := e.svc.Create(context.Background(), e.tenant, links.CreateRequest{URL: "https://example.com/", Code: "down-link"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	if w := b.do("GET", "/console/links/down-link/stats", nil); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("unavailable store: %d %v; want 503 with Retry-After", w.Code, w.Header())
	}
	if w := b.do("GET", "/console/stats.csv", nil); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "section,value") {
		t.Errorf("failed store: %d; want 500 and no CSV\n%s", w.Code, w.Body)
	}
}
