package api

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/link"
)

func readCSV(t *testing.T, r resp) [][]string {
	t.Helper()
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV answer: %v %v", r, r.header)
	}
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v\n%s", err, r.body)
	}
	return rows
}

func attachmentName(t *testing.T, r resp) string {
	t.Helper()
	kind, params, err := mime.ParseMediaType(r.header.Get("Content-Disposition"))
	if err != nil || kind != "attachment" {
		t.Fatalf("Content-Disposition %q: %v", r.header.Get("Content-Disposition"), err)
	}
	return params["filename"]
}

// TestStatsCSVEqualsJSON: the CSV of a series and of a breakdown, asked
// by format=csv or by Accept, holds the JSON's numbers row for row, with
// a file name, and a value a spreadsheet would run as a formula quoted.
func TestStatsCSVEqualsJSON(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	s.link(t, "csv-link", "https://example.com/c?utm_campaign=%3D1%2B1")
	s.apply(t, []click{
		{code: "csv-link", at: at("2030-01-09T10:00:00Z"), referrer: "=HYPERLINK(\"http://evil.example\")", country: "NL", visitor: 1},
		{code: "csv-link", at: at("2030-01-09T11:00:00Z"), referrer: "t.co", country: "NL", visitor: 2},
		{code: "csv-link", at: at("2030-01-10T11:00:00Z"), referrer: "+t.co", bot: true},
	})
	for _, path := range []string{"/api/v1/links/csv-link/stats/series?tz=Europe/Paris&from=2030-01-08&to=2030-01-10", "/api/v1/stats/series?interval=hour&from=2030-01-09"} {
		var sr jsonSeries
		s.get(t, path, &sr)
		for _, ask := range []struct{ query, accept string }{{"&format=csv", ""}, {"", "text/csv"}, {"", "application/json;q=0.5, text/csv"}} {
			r := s.do(t, "GET", path+ask.query, s.key, nil, "Accept", ask.accept)
			rows := readCSV(t, r)
			if strings.Join(rows[0], ",") != "start,date,human_clicks,bot_clicks,visitors,approximate,counted_from,counted_to" || len(rows) != len(sr.Buckets)+1 {
				t.Fatalf("%s%s: header %v, %d rows; want %d", path, ask.query, rows[0], len(rows)-1, len(sr.Buckets))
			}
			for i, b := range sr.Buckets {
				visitors := ""
				if b.Visitors != nil {
					visitors = strconv.FormatInt(*b.Visitors, 10)
				}
				want := []string{b.Start, b.Date, strconv.FormatInt(b.Human, 10), strconv.FormatInt(b.Bot, 10), visitors, strconv.FormatBool(b.Approximate), b.CountedFrom, b.CountedTo}
				if strings.Join(rows[i+1], "|") != strings.Join(want, "|") {
					t.Errorf("%s CSV row %d: %v; JSON %v", path, i, rows[i+1], want)
				}
			}
		}
	}
	// JSON when Accept ranks it first, or does not name CSV.
	for _, accept := range []string{"application/json, text/csv;q=0.9", "*/*", "text/html"} {
		if r := s.do(t, "GET", "/api/v1/stats/series", s.key, nil, "Accept", accept); !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("Accept %q: %s; want JSON", accept, r.header.Get("Content-Type"))
		}
	}

	var r resp
	for _, limit := range []string{"1", "10"} {
		var b jsonBreakdown
		s.get(t, "/api/v1/links/csv-link/stats/breakdown?from=2030-01-08&to=2030-01-10&limit="+limit, &b)
		r = s.do(t, "GET", "/api/v1/links/csv-link/stats/breakdown?from=2030-01-08&to=2030-01-10&format=csv&limit="+limit, s.key, nil)
		if name := attachmentName(t, r); name != "edgelink-sho.rt-csv-link-breakdown-2030-01-08-2030-01-10.csv" {
			t.Errorf("file name %q", name)
		}
		rows := readCSV(t, r)
		var want []string
		for _, d := range b.Dimensions {
			for _, v := range d.Values {
				want = append(want, fmt.Sprintf("%s|value|%s|%d|%d", d.Dimension, statsquery.CSVSafe(v.Value), v.Human, v.Bot))
			}
			want = append(want, fmt.Sprintf("%s|other||%d|%d", d.Dimension, d.Other.Human, d.Other.Bot), fmt.Sprintf("%s|none||%d|%d", d.Dimension, d.None.Human, d.None.Bot))
		}
		var got []string
		for _, row := range rows[1:] {
			got = append(got, strings.Join(row, "|"))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("breakdown CSV (limit %s):\n%s\nJSON:\n%s", limit, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// With every value listed: each that a spreadsheet would run is quoted.
	body := string(r.body)
	if !strings.Contains(body, `'=HYPERLINK(`) || !strings.Contains(body, "'=1+1") || strings.Contains(body, ",=") {
		t.Errorf("formula cells not guarded:\n%s", body)
	}
}

// TestStatsParametersRefused: malformed, oversized and hostile parameters
// are a 400 problem that says what is wrong, quoting little of what was
// sent and nothing of the server (no file path of a zone); another
// tenant's link is a 404 like an unknown one.
func TestStatsParametersRefused(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	s.link(t, "mine", "https://example.com/")
	if r := s.do(t, "POST", "/api/v1/links", s.other, []byte(`{"url": "https://example.com/", "code": "their-link"}`)); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	long := strings.Repeat("A", 5000)
	routes := []string{"/api/v1/links/mine/stats/series", "/api/v1/links/mine/stats/breakdown", "/api/v1/stats/series", "/api/v1/stats/breakdown", "/api/v1/stats/overview", "/api/v1/stats/export"}
	for _, c := range []struct {
		query, says string
		routes      []string // nil: every route
	}{
		{"tz=Mars/Olympus_Mons", "tz names no time zone", routes[:5]},
		{"tz=../../../../etc/passwd", "tz must be an IANA time zone name", routes[:5]},
		{"tz=%2Fetc%2Flocaltime", "tz must be an IANA time zone name", routes[:5]},
		{"tz=Local", "tz must be an IANA time zone name", routes[:5]},
		{"tz=Europe%2F%00Berlin", "tz must be an IANA", routes[:5]},
		{"tz=" + long, "tz is 5000 bytes long", routes[:5]},
		{"from=2030-01-10&to=2030-01-01", "from must not be after to", nil},
		{"from=2020-01-01&to=2030-01-01", "at most 366 days", nil},
		{"from=yesterday", "from must be a date", nil},
		{"to=2030-02-30", "to must be a date", nil},
		{"from=1969-12-31", "1970 or later", nil},
		{"from=" + long, "from is 5000 bytes long", nil},
		{"from=2030-01-01T00:00:00Z%27%3B+DROP+TABLE+links", "from must be a date", nil},
		{"interval=minute", "interval must be hour or day", []string{routes[0], routes[2], routes[4]}},
		{"interval=hour", "unknown query parameter", []string{routes[1], routes[3]}},
		{"interval=hour&from=2029-12-01T00:00:00Z", "the earliest hour kept", []string{routes[0], routes[2]}},
		{"dimension=country,..%2F..%2Fsecret", `unknown dimension \"../../secret\"`, []string{routes[1], routes[3]}},
		{"dimension=status", "unknown dimension", []string{routes[3]}},
		{"dimension=" + long, "dimension is 5000 bytes long", []string{routes[1], routes[3]}},
		{"limit=0", "limit must be a whole number from 1 to 100", []string{routes[1], routes[3], routes[4]}},
		{"limit=101", "limit must be", []string{routes[1], routes[3], routes[4]}},
		{"limit=1e3", "limit must be", []string{routes[1], routes[3], routes[4]}},
		{"format=xml", "format must be json or csv", []string{routes[0], routes[1], routes[2], routes[3]}},
		{"format=json", "the export is CSV only", []string{routes[5]}},
		{"from=2030-01-01&from=2030-01-02", "send from once", nil},
		{"frmo=2030-01-01", "unknown query parameter", nil},
		{"domain=sho.rt", "unknown query parameter", routes[2:]},
		{"from=%zz", "malformed", nil},
	} {
		rs := c.routes
		if rs == nil {
			rs = routes
		}
		for _, route := range rs {
			r := s.do(t, "GET", route+"?"+c.query, s.key, nil)
			body := string(r.body)
			if r.status != http.StatusBadRequest || !strings.Contains(body, c.says) || len(body) > 1000 || strings.Contains(body, "zoneinfo") || strings.Contains(body, "/usr/") {
				t.Errorf("%s?%.80s: %d %.600s; want 400 saying %q, short", route, c.query, r.status, body, c.says)
			}
		}
	}
	for _, path := range []string{"/api/v1/links/their-link/stats/series", "/api/v1/links/their-link/stats/breakdown", "/api/v1/links/nothing/stats/series",
		"/api/v1/links/mine/stats/series?domain=nowhere.example"} {
		if r := s.do(t, "GET", path, s.key, nil); r.status != http.StatusNotFound || strings.Contains(string(r.body), "their-link") {
			t.Errorf("%s: %v; want 404 saying nothing of the link", path, r)
		}
	}
	if r := s.do(t, "GET", "/api/v1/stats/export", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("export without a key: %v", r)
	}
}

// TestExport: every link's days of the tenant, deleted links too, none
// of another tenant's, in order, equal to the rollups; the range bounds
// are the other routes'.
func TestExport(t *testing.T) {
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0)
	var cs []click
	for i := range 30 {
		code := fmt.Sprintf("exp-%02d", i)
		s.link(t, code, "https://example.com/"+code)
		for d := range i % 4 {
			for k := range d + i {
				cs = append(cs, click{code: code, at: at("2030-01-05T10:00:00Z").AddDate(0, 0, d).Add(time.Duration(k) * time.Second), bot: k%3 == 0, visitor: uint64(k + 1)})
			}
		}
	}
	if r := s.do(t, "POST", "/api/v1/links", s.other, []byte(`{"url": "https://example.com/", "code": "exp-theirs"}`)); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	cs = append(cs, click{code: "exp-theirs", at: at("2030-01-05T10:00:00Z")})
	s.apply(t, cs)
	if r := s.do(t, "DELETE", "/api/v1/links/exp-03", s.key, nil); r.status != http.StatusNoContent {
		t.Fatal(r)
	}
	r := s.do(t, "GET", "/api/v1/stats/export?from=2030-01-01&to=2030-01-10", s.key, nil)
	if name := attachmentName(t, r); name != "edgelink-links-2030-01-01-2030-01-10.csv" {
		t.Errorf("file name %q", name)
	}
	rows := readCSV(t, r)
	if strings.Join(rows[0], ",") != "domain,code,date,human_clicks,bot_clicks,visitors" {
		t.Errorf("header %v", rows[0])
	}
	var want []string
	for i := range 30 {
		code := fmt.Sprintf("exp-%02d", i)
		days, err := s.store.LinkDays(context.Background(), link.DefaultDomain, code, at("2030-01-01T00:00:00Z"), at("2030-01-10T00:00:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			want = append(want, fmt.Sprintf("sho.rt|%s|%s|%d|%d|%d", code, d.Day.Format("2006-01-02"), d.Clicks-d.BotClicks, d.BotClicks, d.Visitors))
		}
	}
	var got []string
	for _, row := range rows[1:] {
		got = append(got, strings.Join(row, "|"))
	}
	if len(want) < 40 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("export (%d rows):\n%s\nwant (%d):\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	// A range without clicks: the header alone.
	if rows := readCSV(t, s.do(t, "GET", "/api/v1/stats/export?from=2029-01-01&to=2029-01-31&format=csv", s.key, nil)); len(rows) != 1 {
		t.Errorf("empty export: %v", rows)
	}
	if rows := readCSV(t, s.do(t, "GET", "/api/v1/stats/export?from=2030-01-05&to=2030-01-05", s.other, nil)); len(rows) != 2 || rows[1][1] != "exp-theirs" {
		t.Errorf("the other tenant's export: %v", rows)
	}
}

// slowExport is the real store whose export, after its first rows, waits
// for the client to have read one: an export that gathered its rows
// before sending would never let it.
type slowExport struct {
	*postgres.Store
	after    int
	received <-chan struct{}
}

func (s slowExport) ExportTenantDays(ctx context.Context, tenantID int64, first, last time.Time, each func(statsquery.ExportRow) error) error {
	n := 0
	return s.Store.ExportTenantDays(ctx, tenantID, first, last, func(r statsquery.ExportRow) error {
		if n++; n == s.after {
			select {
			case <-s.received:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return fmt.Errorf("the client had no row after %d were read from the database", n)
			}
		}
		return each(r)
	})
}

// TestExportStreams: rows reach the client while the database is still
// sending them, and a failure after the first rows cuts the transfer
// rather than ending a short file cleanly.
func TestExportStreams(t *testing.T) {
	received := make(chan struct{})
	var st *postgres.Store
	s := newStatsQueryEnv(t, at("2030-01-10T12:00:00Z"), 0, func(c *Config, store *postgres.Store) {
		st = store
	})
	var cs []click
	var batch []string
	for i := range 600 {
		batch = append(batch, fmt.Sprintf(`{"url": "https://example.com/", "code": "many-%03d"}`, i))
	}
	if r := s.do(t, "POST", "/api/v1/links/batch", s.key, []byte(`{"links": [`+strings.Join(batch, ",")+`]}`)); r.status != http.StatusOK || !strings.Contains(string(r.body), `"created":600`) {
		t.Fatalf("batch: %.300s", r)
	}
	for i := range 600 {
		code := fmt.Sprintf("many-%03d", i)
		for d := range 5 {
			cs = append(cs, click{code: code, at: at("2030-01-01T10:00:00Z").AddDate(0, 0, d)})
		}
	}
	s.apply(t, cs)
	srv := httptest.NewServer(New(st, s.svc, Config{PublicURL: "https://" + platformHost, RatePerSecond: -1, Now: func() time.Time { return at("2030-01-10T12:00:00Z") },
		Stats: slowExport{Store: st, after: 2 * flushRows, received: received}}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest("GET", srv.URL+"/api/v1/stats/export?from=2030-01-01&to=2030-01-10", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for range 2 { // the header and a first row, while the database waits
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("no row before the database finished: %v", err)
		}
	}
	close(received)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rest), "\n") + 1; n != 3000 {
		t.Errorf("%d rows; want 3000", n)
	}

	// A failure mid-stream: the connection is cut, the client sees an
	// incomplete transfer.
	failing := httptest.NewServer(New(st, s.svc, Config{PublicURL: "https://" + platformHost, RatePerSecond: -1, Now: func() time.Time { return at("2030-01-10T12:00:00Z") },
		Stats: failingExport{Store: st, after: 2 * flushRows}}))
	t.Cleanup(failing.Close)
	req, _ = http.NewRequest("GET", failing.URL+"/api/v1/stats/export?from=2030-01-01&to=2030-01-10", nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.ReadAll(res.Body); err == nil {
		t.Errorf("an export that failed half way read as a whole file")
	}
}

// failingExport is the real store whose export fails after some rows, as
// a connection lost mid-query would (a fault the database will not make
// on demand).
type failingExport struct {
	*postgres.Store
	after int
}

func (f failingExport) ExportTenantDays(ctx context.Context, tenantID int64, first, last time.Time, each func(statsquery.ExportRow) error) error {
	n := 0
	return f.Store.ExportTenantDays(ctx, tenantID, first, last, func(r statsquery.ExportRow) error {
		if n++; n > f.after {
			return fmt.Errorf("connection reset: %w", link.ErrUnavailable)
		}
		return each(r)
	})
}
