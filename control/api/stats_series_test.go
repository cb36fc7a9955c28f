package api

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// click is one click as an edge would have sent it.
type click struct {
	code     string
	domain   link.DomainID
	at       time.Time
	bot      bool
	country  string // "" unknown
	browser  string
	referrer string
	visitor  uint64 // 0: none hashed
}

// mix spreads a small visitor number over 64 bits, as the edge's keyed
// hash does, so HyperLogLog sees it as a hash.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rollupOf is what the click roller applies for cs: each link's days
// (with their visitors), hours and values. Every click was served by the
// link's own target, so its UTM is the target's.
func rollupOf(cs []click, last uint64) *clickroll.Rollup {
	type lk struct {
		d    link.DomainID
		code string
		t    int64
	}
	type vk struct {
		lk
		dim, val string
	}
	days, hours, vals := map[lk]*clickroll.LinkDay{}, map[lk]*clickroll.LinkHour{}, map[vk]*clickroll.BreakdownDay{}
	for _, c := range cs {
		bot := int64(0)
		if c.bot {
			bot = 1
		}
		day := c.at.UTC().Truncate(24 * time.Hour)
		dk := lk{c.domain, c.code, day.Unix()}
		d := days[dk]
		if d == nil {
			d = &clickroll.LinkDay{Domain: c.domain, Code: c.code, Day: day}
			days[dk] = d
		}
		d.Clicks, d.BotClicks, d.OwnClicks, d.OwnBots = d.Clicks+1, d.BotClicks+bot, d.OwnClicks+1, d.OwnBots+bot
		if c.visitor != 0 && !c.bot {
			if d.Visitors == nil {
				d.Visitors = new(hll.Sketch)
			}
			d.Visitors.Add(mix(c.visitor))
		}
		hour := c.at.UTC().Truncate(time.Hour)
		hk := lk{c.domain, c.code, hour.Unix()}
		if hours[hk] == nil {
			hours[hk] = &clickroll.LinkHour{Domain: c.domain, Code: c.code, Hour: hour}
		}
		hours[hk].Clicks, hours[hk].BotClicks = hours[hk].Clicks+1, hours[hk].BotClicks+bot
		browser := cmp.Or(c.browser, "chrome")
		for _, dv := range [][2]string{{"country", c.country}, {"browser", browser}, {"os", "windows"}, {"device", "desktop"},
			{"referrer", c.referrer}, {"status", "302"}, {"edge", "edge-1"}} {
			k := vk{dk, dv[0], dv[1]}
			if vals[k] == nil {
				vals[k] = &clickroll.BreakdownDay{Domain: c.domain, Code: c.code, Day: day, Dimension: dv[0], Value: dv[1]}
			}
			vals[k].Clicks, vals[k].BotClicks = vals[k].Clicks+1, vals[k].BotClicks+bot
		}
	}
	r := &clickroll.Rollup{Stream: clicks.Stream, Prev: last - 1, Last: last}
	for _, d := range days {
		r.Links = append(r.Links, *d)
	}
	for _, h := range hours {
		r.Hours = append(r.Hours, *h)
	}
	for _, v := range vals {
		r.Breakdown = append(r.Breakdown, *v)
	}
	return r
}

// statsEnv is an env serving stats at a fixed clock, hours kept for
// retention (0: the default), with a tenant and a link of its own.
type statsEnv struct {
	*env
	key, other string
	tenant     int64
	last       uint64
}

func newStatsQueryEnv(t *testing.T, now time.Time, retention time.Duration, opts ...envOption) *statsEnv {
	t.Helper()
	opts = append(opts, func(c *Config, st *postgres.Store) {
		c.Stats, c.Now, c.HourRetention = st, func() time.Time { return now }, retention
	})
	e := newEnv(t, opts...)
	s := &statsEnv{env: e, key: e.tenant(t, "acme"), other: e.tenant(t, "other")}
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM tenants WHERE name = 'acme'`).Scan(&s.tenant); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *statsEnv) link(t *testing.T, code, target string) {
	t.Helper()
	if r := s.do(t, "POST", "/api/v1/links", s.key, []byte(`{"url": "`+target+`", "code": "`+code+`"}`)); r.status != http.StatusCreated {
		t.Fatalf("create %s: %v", code, r)
	}
}

func (s *statsEnv) apply(t *testing.T, cs []click) {
	t.Helper()
	// Each rollup moves the stream position by one, as the roller does.
	s.last++
	if err := s.store.ApplyClicks(context.Background(), rollupOf(cs, s.last)); err != nil {
		t.Fatal(err)
	}
}

// get reads path as JSON into out, which must answer 200.
func (s *statsEnv) get(t *testing.T, path string, out any) {
	t.Helper()
	r := s.do(t, "GET", path, s.key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %v", path, r)
	}
	if err := json.Unmarshal(r.body, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// The answers as a client reads them.
type (
	jsonBucket struct {
		Start, Date string
		Human       int64 `json:"human_clicks"`
		Bot         int64 `json:"bot_clicks"`
		Visitors    *int64
		Approximate bool
		CountedFrom string `json:"counted_from"`
		CountedTo   string `json:"counted_to"`
	}
	jsonTotals struct {
		Human       int64  `json:"human_clicks"`
		Bot         int64  `json:"bot_clicks"`
		VisitorDays *int64 `json:"visitor_days"`
	}
	jsonSeries struct {
		Domain, Code, Interval, TZ, From, To string
		FirstDay                             string `json:"first_day"`
		LastDay                              string `json:"last_day"`
		HoursFrom                            string `json:"hours_kept_from"`
		Approximate                          bool
		Totals                               jsonTotals
		Buckets                              []jsonBucket
	}
	statValue struct {
		Value string
		Human int64 `json:"human_clicks"`
		Bot   int64 `json:"bot_clicks"`
	}
	jsonDimension struct {
		Dimension   string
		Values      []statValue
		Other, None statValue
	}
	jsonBreakdown struct {
		Domain, Code, TZ string
		FirstDay         string `json:"first_day"`
		LastDay          string `json:"last_day"`
		Approximate      bool
		Totals           jsonTotals
		Dimensions       []jsonDimension
	}
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestSeriesInUTC: a link's and its tenant's clicks per day and per hour
// in UTC, every bucket listed, zeros included; a UTC day has its unique
// visitors and visitor-days sum them; an hour has none.
func TestSeriesInUTC(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T15:20:00Z"), 0)
	s.link(t, "sale", "https://example.com/sale")
	s.link(t, "other", "https://example.com/other")
	var cs []click
	for i := range 5 {
		cs = append(cs, click{code: "sale", at: at("2030-01-08T09:10:00Z").Add(time.Duration(i) * time.Minute), visitor: uint64(1 + i%3)})
	}
	cs = append(cs, click{code: "sale", at: at("2030-01-08T23:59:59Z"), bot: true},
		click{code: "sale", at: at("2030-01-10T00:00:00Z"), visitor: 9},
		click{code: "sale", at: at("2030-01-10T14:59:00Z"), visitor: 1},
		click{code: "other", at: at("2030-01-10T14:30:00Z"), visitor: 1})
	s.apply(t, cs)

	var sr jsonSeries
	s.get(t, "/api/v1/links/sale/stats/series?from=2030-01-08&to=2030-01-10", &sr)
	if sr.Code != "sale" || sr.Domain != platformHost || sr.Interval != "day" || sr.TZ != "UTC" || sr.From != "2030-01-08T00:00:00Z" || sr.To != "2030-01-11T00:00:00Z" {
		t.Errorf("series head %+v", sr)
	}
	want := []struct {
		human, bot, visitors int64
	}{{5, 1, 3}, {0, 0, 0}, {2, 0, 2}}
	if len(sr.Buckets) != 3 {
		t.Fatalf("%d buckets; want 3: %+v", len(sr.Buckets), sr.Buckets)
	}
	for i, w := range want {
		b := sr.Buckets[i]
		if b.Human != w.human || b.Bot != w.bot || b.Visitors == nil || *b.Visitors != w.visitors || b.Approximate || b.CountedFrom != b.Start {
			t.Errorf("day %d: %+v; want %+v exact with visitors", i, b, w)
		}
	}
	if sr.Totals.Human != 7 || sr.Totals.Bot != 1 || sr.Totals.VisitorDays == nil || *sr.Totals.VisitorDays != 5 || sr.Approximate {
		t.Errorf("totals %+v (visitor days %v); want 7 human, 1 bot, 5 visitor-days, exact", sr.Totals, sr.Totals.VisitorDays)
	}

	// Hours: the day's 24, the clicks in theirs, no visitors.
	s.get(t, "/api/v1/links/sale/stats/series?interval=hour&from=2030-01-08&to=2030-01-08", &sr)
	if len(sr.Buckets) != 24 || sr.Buckets[9].Human != 5 || sr.Buckets[23].Bot != 1 || sr.Buckets[0].Start != "2030-01-08T00:00:00Z" ||
		sr.Totals.VisitorDays != nil || sr.Buckets[9].Visitors != nil {
		t.Errorf("hours of 2030-01-08: %d buckets %+v, totals %+v", len(sr.Buckets), sr.Buckets, sr.Totals)
	}
	// Instants: every hour that overlaps [from, to).
	s.get(t, "/api/v1/links/sale/stats/series?interval=hour&from=2030-01-10T13:30:00Z&to=2030-01-10T15:00:00Z", &sr)
	if len(sr.Buckets) != 2 || sr.Buckets[1].Human != 1 || sr.From != "2030-01-10T13:00:00Z" || sr.To != "2030-01-10T15:00:00Z" {
		t.Errorf("hours 13:30 to 15:00: %+v", sr)
	}
	// Defaults: 30 days to today; 24 hours to the end of this one.
	s.get(t, "/api/v1/links/sale/stats/series", &sr)
	if len(sr.Buckets) != 30 || sr.FirstDay != "2029-12-12" || sr.LastDay != "2030-01-10" || sr.Totals.Human != 7 {
		t.Errorf("default day series: %d buckets %s to %s, %+v", len(sr.Buckets), sr.FirstDay, sr.LastDay, sr.Totals)
	}
	s.get(t, "/api/v1/links/sale/stats/series?interval=hour", &sr)
	if len(sr.Buckets) != 24 || sr.From != "2030-01-09T16:00:00Z" || sr.To != "2030-01-10T16:00:00Z" || sr.Totals.Human != 2 ||
		sr.HoursFrom != "2030-01-03T15:00:00Z" {
		t.Errorf("default hour series: %d buckets %s to %s, %+v, hours from %s", len(sr.Buckets), sr.From, sr.To, sr.Totals, sr.HoursFrom)
	}

	// The tenant's: both links, a visitor of both counted once a day.
	sr = jsonSeries{}
	s.get(t, "/api/v1/stats/series?from=2030-01-10&to=2030-01-10", &sr)
	if len(sr.Buckets) != 1 || sr.Buckets[0].Human != 3 || *sr.Buckets[0].Visitors != 2 || sr.Domain != "" || sr.Code != "" {
		t.Errorf("tenant's 2030-01-10: %+v; want 3 clicks by 2 visitors", sr)
	}
	// Another tenant has none of it.
	r := s.do(t, "GET", "/api/v1/stats/series?from=2030-01-10&to=2030-01-10", s.other, nil)
	if m := r.json(t); r.status != http.StatusOK || m["totals"].(map[string]any)["human_clicks"].(float64) != 0 {
		t.Errorf("other tenant: %v", r)
	}
}

// TestSeriesInAZoneWithDST: Berlin's days around the switch to summer
// time (2030-03-31: 23 hours) are exact from the hours kept, each hour in
// the day it belongs to there; the hour series labels them with their
// offsets; days older than the hours kept count as the UTC day they
// mostly overlap and say so; the days still abut, so the series' total is
// every click of the interval it counted, each once.
func TestSeriesInAZoneWithDST(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-04-02T12:00:00Z"), 0) // hours kept from 2030-03-26T12:00Z
	s.link(t, "de-berlin", "https://example.com/b")
	cs := []click{
		{code: "de-berlin", at: at("2030-03-20T23:30:00Z")}, // Berlin's 03-21, counted in UTC's 03-20
		{code: "de-berlin", at: at("2030-03-21T10:00:00Z")},
		{code: "de-berlin", at: at("2030-03-26T22:30:00Z")},            // Berlin's 03-26 23:30, read from UTC's day 03-26
		{code: "de-berlin", at: at("2030-03-27T22:30:00Z")},            // Berlin's 03-27 23:30: the hour 22:00Z
		{code: "de-berlin", at: at("2030-03-27T23:30:00Z")},            // Berlin's 03-28 00:30
		{code: "de-berlin", at: at("2030-03-30T22:10:00Z")},            // Berlin's 03-30 23:10
		{code: "de-berlin", at: at("2030-03-30T23:10:00Z")},            // Berlin's 03-31 00:10 (CET)
		{code: "de-berlin", at: at("2030-03-31T01:10:00Z"), bot: true}, // 03:10 CEST
		{code: "de-berlin", at: at("2030-03-31T21:50:00Z")},            // 03-31 23:50 CEST
		{code: "de-berlin", at: at("2030-03-31T22:10:00Z")},            // 04-01 00:10 CEST
	}
	s.apply(t, cs)
	var sr jsonSeries
	s.get(t, "/api/v1/links/de-berlin/stats/series?tz=Europe/Berlin&from=2030-03-30&to=2030-04-01", &sr)
	type day struct {
		date, start  string
		human, bot   int64
		approx       bool
		visitorsNull bool
	}
	var got []day
	for _, b := range sr.Buckets {
		got = append(got, day{b.Date, b.Start, b.Human, b.Bot, b.Approximate, b.Visitors == nil})
	}
	want := []day{
		{"2030-03-30", "2030-03-30T00:00:00+01:00", 1, 0, false, true},
		{"2030-03-31", "2030-03-31T00:00:00+01:00", 2, 1, false, true},
		{"2030-04-01", "2030-04-01T00:00:00+02:00", 1, 0, false, true},
	}
	if !slices.Equal(got, want) || sr.Approximate || sr.Totals.VisitorDays != nil {
		t.Errorf("Berlin's days:\n got %+v\nwant %+v (approximate %v, visitor days %v)", got, want, sr.Approximate, sr.Totals.VisitorDays)
	}
	if b := sr.Buckets[1]; b.CountedFrom != "2030-03-30T23:00:00Z" || b.CountedTo != "2030-03-31T22:00:00Z" {
		t.Errorf("2030-03-31 counted %s to %s; want its 23 hours", b.CountedFrom, b.CountedTo)
	}

	// The short day's hours: 23, from +01:00 to +02:00.
	s.get(t, "/api/v1/links/de-berlin/stats/series?interval=hour&tz=Europe/Berlin&from=2030-03-31&to=2030-03-31", &sr)
	if len(sr.Buckets) != 23 || sr.Buckets[0].Start != "2030-03-31T00:00:00+01:00" || sr.Buckets[2].Start != "2030-03-31T03:00:00+02:00" ||
		sr.Buckets[0].Human != 1 || sr.Buckets[2].Bot != 1 || sr.Buckets[22].Human != 1 || sr.To != "2030-04-01T00:00:00+02:00" {
		t.Errorf("hours of Berlin's 2030-03-31: %d, %+v", len(sr.Buckets), sr.Buckets)
	}

	// Across the hours kept: older days are approximate, newer exact,
	// and the total is each click of the counted interval once.
	s.get(t, "/api/v1/links/de-berlin/stats/series?tz=Europe/Berlin&from=2030-03-20&to=2030-04-01", &sr)
	byDate := map[string]jsonBucket{}
	for _, b := range sr.Buckets {
		byDate[b.Date] = b
	}
	if b := byDate["2030-03-21"]; !b.Approximate || b.CountedFrom != "2030-03-21T00:00:00Z" || b.CountedTo != "2030-03-22T00:00:00Z" || b.Human != 1 {
		t.Errorf("Berlin's 2030-03-21 (before the hours kept): %+v; want UTC's 2030-03-21, approximate, 1 click", b)
	}
	if b := byDate["2030-03-27"]; !b.Approximate || b.CountedFrom != "2030-03-27T00:00:00Z" || b.CountedTo != "2030-03-27T23:00:00Z" || b.Human != 1 {
		t.Errorf("Berlin's 2030-03-27 (UTC's day start to its own end): %+v", b)
	}
	if b := byDate["2030-03-28"]; b.Approximate || b.Human != 1 {
		t.Errorf("Berlin's 2030-03-28: %+v; want exact, 1 click", b)
	}
	if !sr.Approximate || sr.Totals.Human != 9 || sr.Totals.Bot != 1 {
		t.Errorf("totals %+v approximate %v; want all 10 clicks of the counted interval, approximate", sr.Totals, sr.Approximate)
	}
	for i := 1; i < len(sr.Buckets); i++ {
		if sr.Buckets[i].CountedFrom != sr.Buckets[i-1].CountedTo {
			t.Errorf("days %d and %d do not abut: %s, %s", i-1, i, sr.Buckets[i-1].CountedTo, sr.Buckets[i].CountedFrom)
		}
	}
}

// TestSeriesInAHalfHourZone: Kolkata's midnight is 18:30 UTC, between
// two UTC hours, so even within the hours kept its days are approximate
// (by the half hour, each day from the UTC hour its midnight falls in);
// its hours are UTC hours, shown at :30.
func TestSeriesInAHalfHourZone(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	s.link(t, "delhi", "https://example.com/d")
	s.apply(t, []click{
		{code: "delhi", at: at("2030-01-08T18:10:00Z")}, // Kolkata's 01-08 23:40, counted in 01-09 (from 18:00Z)
		{code: "delhi", at: at("2030-01-08T18:40:00Z")}, // 01-09 00:10
		{code: "delhi", at: at("2030-01-09T12:00:00Z")}, // 01-09 17:30
	})
	var sr jsonSeries
	s.get(t, "/api/v1/links/delhi/stats/series?tz=Asia/Kolkata&from=2030-01-08&to=2030-01-09", &sr)
	if len(sr.Buckets) != 2 || !sr.Approximate {
		t.Fatalf("Kolkata's days: %+v", sr)
	}
	b := sr.Buckets[1]
	if b.Start != "2030-01-09T00:00:00+05:30" || b.CountedFrom != "2030-01-08T18:00:00Z" || b.CountedTo != "2030-01-09T18:00:00Z" || b.Human != 3 || !b.Approximate || b.Visitors != nil {
		t.Errorf("Kolkata's 2030-01-09: %+v", b)
	}
	if sr.Buckets[0].Human != 0 || sr.Buckets[0].CountedTo != b.CountedFrom {
		t.Errorf("Kolkata's 2030-01-08: %+v", sr.Buckets[0])
	}
	s.get(t, "/api/v1/links/delhi/stats/series?interval=hour&tz=Asia/Kolkata&from=2030-01-09T00:00:00%2B05:30&to=2030-01-09T02:00:00%2B05:30", &sr)
	if len(sr.Buckets) != 3 || sr.Buckets[0].Start != "2030-01-08T23:30:00+05:30" || sr.Buckets[0].Human != 2 || sr.Buckets[1].Human != 0 {
		t.Errorf("Kolkata's hours around midnight: %+v", sr.Buckets)
	}
}

// TestSeriesBounds: ranges at their limits pass, one past them is a 400
// that says what is allowed; hours reach back exactly as far as they are
// kept.
func TestSeriesBounds(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-06-15T10:30:00Z"), 40*24*time.Hour) // hours kept from 2030-05-06T10:00Z
	s.link(t, "at-bounds", "https://example.com/")
	for _, c := range []struct {
		query   string
		status  int
		buckets int
		says    string
	}{
		{"from=2029-06-15&to=2030-06-15", 200, 366, ""},
		{"from=2029-06-14&to=2030-06-15", 400, 0, "at most 366 days"},
		{"from=2030-06-15&to=2030-06-15", 200, 1, ""},
		{"from=2030-06-16&to=2030-06-15", 400, 0, "from must not be after to"},
		{"interval=hour&from=2030-05-06T10:00:00Z&to=2030-06-06T10:00:00Z", 200, 744, ""},
		{"interval=hour&from=2030-05-06T10:00:00Z&to=2030-06-06T11:00:00Z", 400, 0, "at most 744 hours"},
		{"interval=hour&from=2030-05-06T09:59:59Z&to=2030-05-07T00:00:00Z", 400, 0, "the earliest hour kept is 2030-05-06T10:00:00Z"},
		{"interval=hour&from=2030-06-15T10:00:00Z&to=2030-06-15T10:00:00Z", 400, 0, "from must be before to"},
		{"interval=hour&from=2030-06-15T11:00:00Z&to=2030-06-15T10:00:00Z", 400, 0, "from must be before to"},
		{"interval=hour&tz=America/New_York&from=2030-06-14&to=2030-06-14", 200, 24, ""},
	} {
		r := s.do(t, "GET", "/api/v1/links/at-bounds/stats/series?"+c.query, s.key, nil)
		if r.status != c.status || (c.says != "" && !strings.Contains(string(r.body), c.says)) {
			t.Errorf("?%s: %v; want %d saying %q", c.query, r, c.status, c.says)
			continue
		}
		if c.status == 200 {
			var sr jsonSeries
			if err := json.Unmarshal(r.body, &sr); err != nil || len(sr.Buckets) != c.buckets || sr.Totals.Human != 0 {
				t.Errorf("?%s: %d buckets, %+v; want %d empty ones", c.query, len(sr.Buckets), sr.Totals, c.buckets)
			}
		}
	}
}

// TestBreakdownsSumToTotals: each dimension's values, other and none
// sum to the range's totals, for a link and its tenant, whatever the
// limit; values are largest first; a hostile referrer is data, not markup.
func TestBreakdownsSumToTotals(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	s.link(t, "mixed", "https://example.com/m?utm_source=news&utm_medium=email")
	s.link(t, "plain", "https://example.com/p")
	var cs []click
	countries := []string{"US", "US", "US", "DE", "DE", "JP", "", "BR"}
	referrers := []string{"t.co", "t.co", "news.example", "", "=cmd|'/c calc'!A1", "t.co", "", "x.example"}
	for i := range 24 {
		code := "mixed"
		if i%3 == 0 {
			code = "plain"
		}
		cs = append(cs, click{code: code, at: at("2030-01-09T08:00:00Z").Add(time.Duration(i) * time.Minute), bot: i%5 == 0,
			country: countries[i%len(countries)], referrer: referrers[i%len(referrers)], browser: []string{"chrome", "safari", "firefox"}[i%3], visitor: uint64(i%7 + 1)})
	}
	s.apply(t, cs)
	for _, path := range []string{"/api/v1/links/mixed/stats/breakdown", "/api/v1/links/plain/stats/breakdown", "/api/v1/stats/breakdown"} {
		for _, limit := range []string{"1", "2", "100"} {
			var b jsonBreakdown
			s.get(t, path+"?from=2030-01-08&to=2030-01-10&limit="+limit, &b)
			if b.FirstDay != "2030-01-08" || b.LastDay != "2030-01-10" || b.Approximate || b.Totals.Human+b.Totals.Bot == 0 {
				t.Errorf("%s: days %s to %s, approximate %v, totals %+v", path, b.FirstDay, b.LastDay, b.Approximate, b.Totals)
			}
			wantDims := 10
			if path == "/api/v1/stats/breakdown" {
				wantDims = 8
			}
			if len(b.Dimensions) != wantDims {
				t.Errorf("%s: %d dimensions; want %d", path, len(b.Dimensions), wantDims)
			}
			for _, d := range b.Dimensions {
				sum := statValue{Human: d.Other.Human + d.None.Human, Bot: d.Other.Bot + d.None.Bot}
				for i, v := range d.Values {
					sum.Human, sum.Bot = sum.Human+v.Human, sum.Bot+v.Bot
					if i > 0 && v.Human+v.Bot > d.Values[i-1].Human+d.Values[i-1].Bot {
						t.Errorf("%s %s: values not largest first: %+v", path, d.Dimension, d.Values)
					}
				}
				if sum.Human != b.Totals.Human || sum.Bot != b.Totals.Bot || len(d.Values) > atoi(limit) {
					t.Errorf("%s?limit=%s %s: values %+v + other %+v + none %+v = %+v; totals %+v", path, limit, d.Dimension, d.Values, d.Other, d.None, sum, b.Totals)
				}
				if d.Dimension == "utm_source" && strings.Contains(path, "plain") && (d.None.Human+d.None.Bot != b.Totals.Human+b.Totals.Bot || len(d.Values) != 0) {
					t.Errorf("plain has no UTM: %+v", d)
				}
			}
		}
	}
	// The countries of the mixed link, in full, with the unknown as "".
	var b jsonBreakdown
	s.get(t, "/api/v1/links/mixed/stats/breakdown?dimension=country,utm_source&from=2030-01-09&to=2030-01-09&limit=100", &b)
	if len(b.Dimensions) != 2 || b.Dimensions[0].Dimension != "country" || b.Dimensions[1].Dimension != "utm_source" ||
		b.Dimensions[1].Values[0] != (statValue{"news", b.Totals.Human, b.Totals.Bot}) {
		t.Fatalf("country and utm_source: %+v", b)
	}
	var names []string
	for _, v := range b.Dimensions[0].Values {
		names = append(names, v.Value)
	}
	// Of equal counts, by value: "" (unknown) sorts first.
	if strings.Join(names, ",") != "US,DE,,BR,JP" {
		t.Errorf("countries %q", names)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestBreakdownInAZone: a breakdown reads UTC days; in a zone whose day
// is not one it reads the nearest and says approximate.
func TestBreakdownInAZone(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	s.link(t, "zoned", "https://example.com/z")
	s.apply(t, []click{{code: "zoned", at: at("2030-01-08T20:00:00Z"), country: "JP"}, {code: "zoned", at: at("2030-01-09T20:00:00Z"), country: "JP"}})
	var b jsonBreakdown
	s.get(t, "/api/v1/links/zoned/stats/breakdown?tz=Asia/Tokyo&from=2030-01-09&to=2030-01-09&dimension=country", &b)
	// Tokyo's 01-09 is 01-08T15:00Z to 01-09T15:00Z: mostly UTC's 01-09.
	if b.FirstDay != "2030-01-09" || b.LastDay != "2030-01-09" || !b.Approximate || b.TZ != "Asia/Tokyo" || b.Totals.Human != 1 {
		t.Errorf("Tokyo's 2030-01-09: %+v", b)
	}
	s.get(t, "/api/v1/links/zoned/stats/breakdown?tz=UTC&from=2030-01-08&to=2030-01-09", &b)
	if b.Approximate || b.Totals.Human != 2 {
		t.Errorf("UTC days: %+v", b)
	}
}

// TestOverview: the tenant's totals, visitor-days, live links, top links
// (deleted ones too), dimensions and series in one answer, each equal to
// its own endpoint's.
func TestOverview(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	for _, c := range []string{"link-1", "link-2", "link-3"} {
		s.link(t, c, "https://example.com/"+c)
	}
	var cs []click
	for i := range 12 {
		code := []string{"link-1", "link-1", "link-1", "link-2", "link-2", "link-3"}[i%6]
		cs = append(cs, click{code: code, at: at("2030-01-09T10:00:00Z").Add(time.Duration(i) * time.Minute), country: "FR", referrer: "t.co", visitor: uint64(i%4 + 1)})
	}
	s.apply(t, cs)
	if r := s.do(t, "DELETE", "/api/v1/links/link-1", s.key, nil); r.status != http.StatusNoContent {
		t.Fatal(r)
	}
	var o struct {
		FirstDay  string `json:"first_day"`
		Totals    jsonTotals
		LiveLinks int64 `json:"live_links"`
		TopLinks  []struct {
			Domain, Code, Status string
			Human                int64 `json:"human_clicks"`
		} `json:"top_links"`
		Dimensions []jsonDimension
		Series     jsonSeries
	}
	s.get(t, "/api/v1/stats/overview?from=2030-01-08&to=2030-01-10&limit=2", &o)
	if o.Totals.Human != 12 || *o.Totals.VisitorDays != 4 || o.LiveLinks != 2 || len(o.TopLinks) != 2 ||
		o.TopLinks[0].Code != "link-1" || o.TopLinks[0].Status != "deleted" || o.TopLinks[0].Human != 6 || o.TopLinks[1].Code != "link-2" || o.TopLinks[0].Domain != platformHost {
		t.Errorf("overview: %+v", o)
	}
	var sr jsonSeries
	s.get(t, "/api/v1/stats/series?from=2030-01-08&to=2030-01-10", &sr)
	if len(o.Series.Buckets) != 3 || o.Series.Totals.Human != sr.Totals.Human || o.Series.Buckets[1].Human != sr.Buckets[1].Human ||
		*o.Series.Buckets[1].Visitors != *sr.Buckets[1].Visitors {
		t.Errorf("overview series %+v; the series endpoint %+v", o.Series, sr)
	}
	var b jsonBreakdown
	s.get(t, "/api/v1/stats/breakdown?from=2030-01-08&to=2030-01-10&limit=2&dimension=country,referrer,browser,os,device", &b)
	if len(o.Dimensions) != 5 || o.Dimensions[0].Dimension != "country" || o.Dimensions[0].Values[0] != b.Dimensions[0].Values[0] {
		t.Errorf("overview dimensions %+v; breakdown %+v", o.Dimensions, b.Dimensions)
	}
}
