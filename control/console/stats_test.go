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
	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// Values from the internet: a referrer that opens a script if a page
// writes it unescaped, one a spreadsheet would run as a formula, and a
// UTM campaign of the same kind in a target.
const (
	hostileReferrer = `x.example"><script>alert(1)</script>`
	formulaReferrer = `=HYPERLINK("http://evil.example","go")`
)

// statsNow is the clock of the stats tests: hours are kept from
// 2030-01-03T15:00Z.
var statsNow = time.Date(2030, 1, 10, 15, 20, 0, 0, time.UTC)

// visit is one click as an edge would have sent it.
type visit struct {
	code              string
	at                string // RFC 3339
	bot               bool
	country, referrer string
	browser, device   string
	visitor           uint64
}

// rollupOf is what the click roller applies for vs.
func rollupOf(t testing.TB, vs []visit) *clickroll.Rollup {
	t.Helper()
	type key struct {
		code string
		t    int64
	}
	type vkey struct {
		key
		dim, val string
	}
	days, hours, vals := map[key]*clickroll.LinkDay{}, map[key]*clickroll.LinkHour{}, map[vkey]*clickroll.BreakdownDay{}
	var order []key
	for _, v := range vs {
		at, err := time.Parse(time.RFC3339, v.at)
		if err != nil {
			t.Fatal(err)
		}
		bot := int64(0)
		if v.bot {
			bot = 1
		}
		day := at.UTC().Truncate(24 * time.Hour)
		dk := key{v.code, day.Unix()}
		if days[dk] == nil {
			days[dk] = &clickroll.LinkDay{Code: v.code, Day: day}
			order = append(order, dk)
		}
		d := days[dk]
		d.Clicks, d.BotClicks, d.OwnClicks, d.OwnBots = d.Clicks+1, d.BotClicks+bot, d.OwnClicks+1, d.OwnBots+bot
		if v.visitor != 0 && !v.bot {
			if d.Visitors == nil {
				d.Visitors = new(hll.Sketch)
			}
			d.Visitors.Add(v.visitor * 0x9e3779b97f4a7c15)
		}
		hk := key{v.code, at.Truncate(time.Hour).Unix()}
		if hours[hk] == nil {
			hours[hk] = &clickroll.LinkHour{Code: v.code, Hour: at.UTC().Truncate(time.Hour)}
		}
		hours[hk].Clicks, hours[hk].BotClicks = hours[hk].Clicks+1, hours[hk].BotClicks+bot
		for _, dv := range [][2]string{{clickstats.DimCountry, v.country}, {clickstats.DimReferrer, v.referrer}, {clickstats.DimBrowser, v.browser},
			{clickstats.DimOS, "android"}, {clickstats.DimDevice, v.device}, {clickstats.DimStatus, "302"}, {clickstats.DimEdge, "edge-1"}} {
			k := vkey{dk, dv[0], dv[1]}
			if vals[k] == nil {
				vals[k] = &clickroll.BreakdownDay{Code: v.code, Day: day, Dimension: dv[0], Value: dv[1]}
			}
			vals[k].Clicks, vals[k].BotClicks = vals[k].Clicks+1, vals[k].BotClicks+bot
		}
	}
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1}
	for _, k := range order {
		r.Links = append(r.Links, *days[k])
	}
	for _, h := range hours {
		r.Hours = append(r.Hours, *h)
	}
	for _, v := range vals {
		r.Breakdown = append(r.Breakdown, *v)
	}
	return r
}

// statsEnv is the console with clicks in its rollups, applied as the
// roller applies them, and the API over the same database.
type statsEnv struct {
	*env
	api http.Handler
}

func newStatsEnv(t *testing.T) *statsEnv {
	t.Helper()
	e := newEnv(t, console.Config{}) // its store is the stats reader
	e.clock.ns.Store(statsNow.UnixNano())
	ctx := context.Background()
	for _, c := range []struct{ code, url string }{
		{"stats-a", "https://example.com/a?utm_source=newsletter&utm_campaign=%3DSUM(A1)"},
		{"stats-b", "https://example.com/b"},
	} {
		if _, err := e.svc.Create(ctx, e.tenant, links.CreateRequest{URL: c.url, Code: c.code}); err != nil {
			t.Fatal(err)
		}
	}
	var vs []visit
	browsers := []string{"chrome", "safari", "firefox", "in-app"}
	countries := []string{"US", "DE", "", "IN", "US", "XK"}
	referrers := []string{"t.co", "", hostileReferrer, formulaReferrer, "t.co"}
	for i := range 60 {
		code := "stats-a"
		if i%4 == 3 {
			code = "stats-b"
		}
		// Over 2030-01-07 to 2030-01-10: some days before the hours kept,
		// some within, through Kolkata's and UTC's midnights.
		at := time.Date(2030, 1, 1, 0, 17, 0, 0, time.UTC).Add(time.Duration(i) * 230 * time.Minute)
		vs = append(vs, visit{code: code, at: at.Format(time.RFC3339), bot: i%7 == 0, country: countries[i%len(countries)],
			referrer: referrers[i%len(referrers)], browser: browsers[i%len(browsers)], device: []string{"mobile", "desktop"}[i%2], visitor: uint64(i%9 + 1)})
	}
	if err := e.store.ApplyClicks(ctx, rollupOf(t, vs)); err != nil {
		t.Fatal(err)
	}
	a := api.New(e.store, e.svc, api.Config{PublicURL: "http://sho.rt", Stats: e.store, Now: e.clock.now, RatePerSecond: -1, AuthFailuresPerSecond: -1})
	return &statsEnv{env: e, api: a}
}

func (e *statsEnv) apiGet(t *testing.T, path string, out any) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.Header.Set("Authorization", "Bearer "+e.key)
	w := httptest.NewRecorder()
	e.api.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("API %s: %d %s", path, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatal(err)
	}
}

// The API's answers, the fields a page shows.
type (
	apiCounts struct {
		Human int64 `json:"human_clicks"`
		Bot   int64 `json:"bot_clicks"`
	}
	apiSeries struct {
		Totals struct {
			apiCounts
			VisitorDays *int64 `json:"visitor_days"`
		}
		Buckets []struct {
			Start string
			apiCounts
			Visitors    *int64
			Approximate bool
		}
	}
	apiDimension struct {
		Dimension string
		Values    []struct {
			Value string
			apiCounts
		}
		Other, None apiCounts
	}
	apiBreakdown struct {
		FirstDay   string `json:"first_day"`
		LastDay    string `json:"last_day"`
		Totals     apiCounts
		Dimensions []apiDimension
		LiveLinks  int64 `json:"live_links"`
		TopLinks   []struct {
			Domain, Code string
			apiCounts
		} `json:"top_links"`
	}
)

// pageRow is a table row as the page shows it: its data attributes and
// its numbers.
type pageRow struct {
	attrs      string // start, or kind|value, or host/code
	human, bot int64
	visitors   string
}

var (
	regexpSeriesRow = regexp.MustCompile(`<tr data-start="([^"]*)"><td[^>]*>.*?</td><td data-label="Human">(\d+)</td><td data-label="Bot">(\d+)</td><td data-label="Unique visitors">([^<]*)</td></tr>`)
	regexpValueRow  = regexp.MustCompile(`<tr data-kind="([a-z]+)" data-value="([^"]*)"><td[^>]*>.*?</td><td data-label="Human">(\d+)</td><td data-label="Bot">(\d+)</td>`)
	regexpLinkRow   = regexp.MustCompile(`<tr data-code="([^"]*)" data-host="([^"]*)"><td[^>]*>.*?</td><td data-label="Human">(\d+)</td><td data-label="Bot">(\d+)</td>`)
	regexpFact      = regexp.MustCompile(`<dd id="([a-z-]+)">([^<]+)</dd>`)
)

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// table is the rows of the table with that id in body.
func table(body, id string) string {
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	return body[i : i+strings.Index(body[i:], "</table>")]
}

// seriesTable is the rows of the page's series: daily-table or
// hourly-table.
func seriesTable(body string) string {
	if t := table(body, "daily-table"); t != "" {
		return t
	}
	return table(body, "hourly-table")
}

func facts(body string) map[string]string {
	out := map[string]string{}
	for _, m := range regexpFact.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func sameRows(t *testing.T, what string, page, api []pageRow) {
	t.Helper()
	if len(page) != len(api) {
		t.Errorf("%s: the page shows %d rows, the API %d:\npage %+v\n API %+v", what, len(page), len(api), page, api)
		return
	}
	for i := range page {
		if page[i] != api[i] {
			t.Errorf("%s row %d: page %+v, API %+v", what, i, page[i], api[i])
		}
	}
}

// checkPage compares a stats page with the API's series and breakdown of
// the same range, and the tenant's page with its overview too.
func (e *statsEnv) checkPage(t *testing.T, body, seriesPath, breakdownPath, overviewPath string) {
	t.Helper()
	var sr apiSeries
	e.apiGet(t, seriesPath, &sr)
	f := facts(body)
	visitorDays := "—"
	if sr.Totals.VisitorDays != nil {
		visitorDays = strconv.FormatInt(*sr.Totals.VisitorDays, 10)
	}
	if f["total-human"] != strconv.FormatInt(sr.Totals.Human, 10) || f["total-bot"] != strconv.FormatInt(sr.Totals.Bot, 10) || f["visitor-days"] != visitorDays {
		t.Errorf("%s: totals on the page %v; the API %+v (visitor-days %s)", seriesPath, f, sr.Totals.apiCounts, visitorDays)
	}
	var page, want []pageRow
	for _, m := range regexpSeriesRow.FindAllStringSubmatch(seriesTable(body), -1) {
		page = append(page, pageRow{html.UnescapeString(m[1]), atoi(t, m[2]), atoi(t, m[3]), m[4]})
	}
	for _, b := range sr.Buckets {
		v := "—"
		if b.Visitors != nil {
			v = strconv.FormatInt(*b.Visitors, 10)
		}
		want = append(want, pageRow{b.Start, b.Human, b.Bot, v})
	}
	sameRows(t, seriesPath, page, want)
	if len(want) == 0 || sr.Totals.Human == 0 {
		t.Errorf("%s: the API's series is empty: the test compares nothing", seriesPath)
	}
	if approx := strings.Contains(body, `id="approximate"`); approx != (strings.Count(seriesTable(body), "≈") > 0) {
		t.Errorf("%s: the approximate note (%v) and the rows marked ≈ disagree", seriesPath, approx)
	}

	var b apiBreakdown
	e.apiGet(t, breakdownPath, &b)
	compared := 0
	if !strings.Contains(body, "Over whole UTC days, "+b.FirstDay+" to "+b.LastDay) {
		t.Errorf("%s: the page does not say the breakdown's days %s to %s", breakdownPath, b.FirstDay, b.LastDay)
	}
	for _, d := range b.Dimensions {
		var page, want []pageRow
		for _, m := range regexpValueRow.FindAllStringSubmatch(table(body, d.Dimension+"-table"), -1) {
			page = append(page, pageRow{m[1] + "|" + html.UnescapeString(m[2]), atoi(t, m[3]), atoi(t, m[4]), ""})
		}
		for _, v := range d.Values {
			want = append(want, pageRow{"value|" + v.Value, v.Human, v.Bot, ""})
		}
		if d.Other.Human+d.Other.Bot != 0 {
			want = append(want, pageRow{"other|", d.Other.Human, d.Other.Bot, ""})
		}
		if d.None.Human+d.None.Bot != 0 {
			want = append(want, pageRow{"none|", d.None.Human, d.None.Bot, ""})
		}
		sameRows(t, breakdownPath+" "+d.Dimension, page, want)
		compared += len(want)
	}
	if compared < 20 {
		t.Errorf("%s: only %d rows of breakdowns compared", breakdownPath, compared)
	}
	if overviewPath == "" {
		return
	}
	e.apiGet(t, overviewPath, &b)
	if f["live-links"] != strconv.FormatInt(b.LiveLinks, 10) {
		t.Errorf("live links: page %s, API %d", f["live-links"], b.LiveLinks)
	}
	page, want = nil, nil
	for _, m := range regexpLinkRow.FindAllStringSubmatch(table(body, "top-links-table"), -1) {
		page = append(page, pageRow{m[2] + "/" + m[1], atoi(t, m[3]), atoi(t, m[4]), ""})
	}
	for _, l := range b.TopLinks {
		want = append(want, pageRow{l.Domain + "/" + l.Code, l.Human, l.Bot, ""})
	}
	sameRows(t, "top links", page, want)
	if len(want) != 2 {
		t.Errorf("top links: %+v; want both links", want)
	}
}

// TestStatsPagesEqualTheAPI reads a link's and the tenant's stats pages
// and the API's JSON for the same range, by day and by hour, in UTC and
// in a zone whose days are approximate: every number is the same.
func TestStatsPagesEqualTheAPI(t *testing.T) {
	e := newStatsEnv(t)
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	for _, c := range []struct{ page, series, breakdown string }{
		{"from=2030-01-02&to=2030-01-10", "from=2030-01-02&to=2030-01-10", "from=2030-01-02&to=2030-01-10"},
		{"from=2030-01-02&to=2030-01-10&tz=Asia/Kolkata", "from=2030-01-02&to=2030-01-10&tz=Asia/Kolkata", "from=2030-01-02&to=2030-01-10&tz=Asia/Kolkata"},
		{"from=2030-01-08&to=2030-01-09&interval=hour&tz=America/New_York", "from=2030-01-08&to=2030-01-09&interval=hour&tz=America/New_York",
			"from=2030-01-08T05:00:00Z&to=2030-01-10T05:00:00Z&tz=America/New_York"},
	} {
		w := b.do("GET", "/console/links/stats-a/stats?"+c.page, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("link stats page ?%s: %d\n%.2000s", c.page, w.Code, w.Body)
		}
		e.checkPage(t, w.Body.String(), "/api/v1/links/stats-a/stats/series?"+c.series, "/api/v1/links/stats-a/stats/breakdown?limit=20&"+c.breakdown, "")
		if approx := strings.Contains(w.Body.String(), `id="approximate"`); approx != strings.Contains(c.page, "Kolkata") {
			t.Errorf("?%s: approximate %v", c.page, approx)
		}
		w = b.do("GET", "/console/stats?"+c.page, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("tenant stats page ?%s: %d\n%.2000s", c.page, w.Code, w.Body)
		}
		e.checkPage(t, w.Body.String(), "/api/v1/stats/series?"+c.series, "/api/v1/stats/breakdown?limit=20&"+c.breakdown, "/api/v1/stats/overview?limit=20&"+c.breakdown)
	}
}

// TestStatsPageShowsEverything: the tables a creator looks for are there
// with names (countries by name), the chart has its title, the clicks are
// not all in one row, and nothing of the data is left unescaped.
func TestStatsPageShowsEverything(t *testing.T) {
	e := newStatsEnv(t)
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	w := b.do("GET", "/console/links/stats-a/stats?from=2030-01-01&to=2030-01-10", nil)
	body := w.Body.String()
	for _, want := range []string{`id="country-table"`, "Germany (DE)", "United States (US)", "Kosovo (XK)", "Unknown (no country data)",
		`id="referrer-table"`, "None (direct, or not sent)", `id="browser-table"`, `id="os-table"`, `id="device-table"`,
		`id="utm_source-table"`, "newsletter", `id="utm_campaign-table"`, `id="utm_medium-table"`, "Not tagged", `id="status-table"`, `id="edge-table"`,
		`<svg class="chart"`, `<title id="series-title">`, `class="visitors"`, `id="csv"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the link's page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, `"><script`) || !strings.Contains(body, html.EscapeString(hostileReferrer)) {
		t.Errorf("the hostile referrer is in the page unescaped, or not at all")
	}
	w = b.do("GET", "/console/stats?from=2030-01-01&to=2030-01-10", nil)
	body = w.Body.String()
	for _, want := range []string{`id="top-links-table"`, `href="/console/links/stats-a/stats"`, `id="live-links">2<`, `id="export"`, `id="country-table"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the tenant's page lacks %q", want)
		}
	}
	if strings.Contains(body, `id="status-table"`) {
		t.Errorf("the tenant's page has statuses, which its rollups do not keep")
	}
}

// TestStatsCSV: a page's CSV holds exactly its numbers, formula cells
// guarded; the tenant's export is the API's, row for row.
func TestStatsCSV(t *testing.T) {
	e := newStatsEnv(t)
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	w := b.do("GET", "/console/links/stats-a/stats.csv?from=2030-01-01&to=2030-01-10&tz=Europe/Berlin", nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Disposition") != `attachment; filename=edgelink-stats-a-stats-2030-01-01-2030-01-10.csv` ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV: %d %v", w.Code, w.Header())
	}
	rows, err := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var sr apiSeries
	e.apiGet(t, "/api/v1/links/stats-a/stats/series?from=2030-01-01&to=2030-01-10&tz=Europe/Berlin", &sr)
	var bd apiBreakdown
	e.apiGet(t, "/api/v1/links/stats-a/stats/breakdown?from=2030-01-01&to=2030-01-10&tz=Europe/Berlin&limit=20", &bd)
	want := []string{"section|kind|value|human_clicks|bot_clicks|visitors|approximate"}
	for _, bk := range sr.Buckets {
		v := ""
		if bk.Visitors != nil {
			v = strconv.FormatInt(*bk.Visitors, 10)
		}
		want = append(want, fmt.Sprintf("day|bucket|%s|%d|%d|%s|%v", bk.Start, bk.Human, bk.Bot, v, bk.Approximate))
	}
	for _, d := range bd.Dimensions {
		for _, v := range d.Values {
			want = append(want, fmt.Sprintf("%s|value|%s|%d|%d||", d.Dimension, statsquery.CSVSafe(v.Value), v.Human, v.Bot))
		}
		for _, r := range []struct {
			kind string
			c    apiCounts
		}{{"other", d.Other}, {"none", d.None}} {
			if r.c.Human+r.c.Bot != 0 {
				want = append(want, fmt.Sprintf("%s|%s||%d|%d||", d.Dimension, r.kind, r.c.Human, r.c.Bot))
			}
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join(r, "|"))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CSV rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(w.Body.String(), `'=HYPERLINK(`) || !strings.Contains(w.Body.String(), `'=SUM(A1)`) {
		t.Errorf("formula cells are not guarded:\n%s", w.Body)
	}

	w = b.do("GET", "/console/stats/links.csv?from=2030-01-01&to=2030-01-10", nil)
	r := httptest.NewRequest("GET", "/api/v1/stats/export?from=2030-01-01&to=2030-01-10", nil)
	r.Header.Set("Authorization", "Bearer "+e.key)
	aw := httptest.NewRecorder()
	e.api.ServeHTTP(aw, r)
	if w.Code != http.StatusOK || aw.Code != http.StatusOK || w.Body.String() != aw.Body.String() || strings.Count(w.Body.String(), "\n") < 10 {
		t.Errorf("the console's export (%d) is not the API's (%d):\n%s\n---\n%s", w.Code, aw.Code, w.Body, aw.Body)
	}
}

// TestStatsScopeAndRanges: another tenant's link is unknown here, a range
// the API would refuse is a 400 with the form kept, hours asked from
// before they are kept start with the first kept and say so, and the
// default range is the API's.
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
	long := strings.Repeat("x", 3000)
	for _, c := range []struct{ query, msg, kept string }{
		{"from=yesterday&to=2030-01-10", "from must be a date", `value="yesterday"`},
		{"from=2030-01-10&to=2030-01-09", "from must not be after to", `value="2030-01-10"`},
		{"from=2028-01-01&to=2030-01-10", "at most 366 days", `value="2028-01-01"`},
		{"to=2030-13-01", "to must be a date", `value="2030-13-01"`},
		{"tz=Mars/Olympus", "tz names no time zone", `value="Mars/Olympus"`},
		{"tz=..%2F..%2Fetc%2Fpasswd", "tz must be an IANA time zone name", `value="../../etc/passwd"`},
		{"tz=%22%3E%3Cscript%3Ealert(1)%3C/script%3E", "tz must be an IANA", `value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`},
		{"interval=week", "interval must be hour or day", ""},
		{"from=" + long, "from is 3000 bytes long", ""},
	} {
		for _, path := range []string{"/console/links/stats-a/stats?", "/console/stats?", "/console/stats.csv?"} {
			w := b.do("GET", path+c.query, nil)
			body := w.Body.String()
			if w.Code != http.StatusBadRequest || !strings.Contains(body, c.msg) || !strings.Contains(body, c.kept) || strings.Contains(body, "<script>alert") {
				t.Errorf("%s%.60s: %d; want 400 saying %q with %s\n%.1500s", path, c.query, w.Code, c.msg, c.kept, body)
			}
		}
	}
	// Hours from before those kept: the first kept on, said so.
	w := b.do("GET", "/console/stats?interval=hour&from=2030-01-01&to=2030-01-10", nil)
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `id="range-notice"`) ||
		!strings.Contains(body, `data-start="2030-01-03T15:00:00Z"`) || strings.Contains(body, `data-start="2030-01-03T14:00:00Z"`) {
		t.Errorf("hours from before those kept: %d\n%.3000s", w.Code, body)
	}
	// The default range is the API's: the last 30 days ending today.
	w = b.do("GET", "/console/stats", nil)
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `id="to" name="to" value="2030-01-10"`) ||
		!strings.Contains(body, `id="from" name="from" value="2029-12-12"`) || strings.Count(seriesTable(body), "<tr data-start") != 30 {
		t.Errorf("default range: %d\n%.3000s", w.Code, body)
	}
	w = b.do("GET", "/console/stats?interval=hour", nil)
	if n := strings.Count(seriesTable(w.Body.String()), "<tr data-start"); w.Code != http.StatusOK || n != 24 {
		t.Errorf("default hours: %d, %d rows; want 24", w.Code, n)
	}
	if w := b.do("GET", "/console/stats/links.csv?from=2020-01-01", nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "at most 366 days") {
		t.Errorf("export of too long a range: %d", w.Code)
	}
}

// TestStatsOnADomain: a link on the tenant's own domain keeps its domain
// through the range form, so the page's numbers stay that link's.
func TestStatsOnADomain(t *testing.T) {
	e := newStatsEnv(t)
	e.addDomain(t, e.tenant, "go.acme.example")
	if _, err := e.svc.Create(context.Background(), e.tenant, links.CreateRequest{URL: "https://example.com/d", Code: "stats-a", Domain: "go.acme.example"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser("192.0.2.1")
	b.signIn(t, e.key)
	w := b.do("GET", "/console/links/stats-a/stats?domain=go.acme.example&from=2030-01-01&to=2030-01-10", nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `<input type="hidden" name="domain" value="go.acme.example">`) ||
		!strings.Contains(body, `id="total-human">0<`) || !strings.Contains(body, "domain=go.acme.example") {
		t.Errorf("stats of stats-a on go.acme.example: %d\n%.3000s", w.Code, body)
	}
}

// BenchmarkStatsPages renders a link's and the tenant's stats pages over
// the longest range, every day with clicks and the link's breakdowns full
// (50 referrers a day), an hourly page in a half-hour zone and the
// tenant's default page in a zone, from a real PostgreSQL, beside the
// keys page as a baseline: the server time of a page. The figures on a
// shared machine are indicative only; bench/console measures every page
// with 100,000 links.
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
	// The keys page is the baseline: a signed-in page of one small query,
	// so the ratios say what the stats cost beyond any page on the same
	// machine at the same time.
	for _, path := range []string{"/console/keys", "/console/links/busy-link/stats" + q, "/console/stats" + q, "/console/links/busy-link/stats.csv" + q,
		"/console/links/busy-link/stats?interval=hour&tz=Asia/Kolkata", "/console/stats?tz=America/New_York"} {
		b.Run(strings.TrimPrefix(path, "/console/"), func(b *testing.B) {
			for b.Loop() {
				if w := br.do("GET", path, nil); w.Code != http.StatusOK {
					b.Fatalf("%s: %d", path, w.Code)
				}
			}
		})
	}
}

// downStats is a stats store that cannot answer: a fault PostgreSQL will
// not make on demand.
type downStats struct{ statsquery.Reader }

func (downStats) LinkDays(context.Context, link.DomainID, string, time.Time, time.Time) ([]clickstats.Day, error) {
	return nil, fmt.Errorf("link days: %w", link.ErrUnavailable)
}

func (downStats) TenantDays(context.Context, int64, time.Time, time.Time) ([]clickstats.Day, error) {
	return nil, errors.New("tenant days: connection reset")
}

func (downStats) ExportTenantDays(context.Context, int64, time.Time, time.Time, func(statsquery.ExportRow) error) error {
	return errors.New("export: connection reset")
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
	for _, path := range []string{"/console/stats.csv", "/console/stats/links.csv"} {
		if w := b.do("GET", path, nil); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "human_clicks") {
			t.Errorf("%s with a failed store: %d; want 500 and no CSV\n%s", path, w.Code, w.Body)
		}
	}
}
