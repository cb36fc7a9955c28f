package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// browser is a signed-in console session: a cookie jar and no redirects
// followed, so every answer is the page asked for.
type browser struct {
	base   string
	client *http.Client
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn opens a console session with key, as the sign-in form does.
func signIn(ctx context.Context, base, key string) (*browser, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	b := &browser{base: base, client: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, body, _, err := b.get(ctx, "/console/sign-in")
	if err != nil {
		return nil, err
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		return nil, fmt.Errorf("no CSRF field on the sign-in page")
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/console/sign-in", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {key}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/links" {
		return nil, fmt.Errorf("sign-in answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return b, nil
}

// get asks for path and returns its status, body and the server's time
// (Server-Timing's console;dur, in milliseconds).
func (b *browser) get(ctx context.Context, path string) (int, string, float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+path, nil)
	if err != nil {
		return 0, "", 0, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", 0, err
	}
	ms := -1.0
	if v, ok := strings.CutPrefix(resp.Header.Get("Server-Timing"), "console;dur="); ok {
		if ms, err = strconv.ParseFloat(v, 64); err != nil {
			return 0, "", 0, fmt.Errorf("Server-Timing %q: %w", v, err)
		}
	}
	return resp.StatusCode, string(body), ms, nil
}

// page is one console page the benchmark asks for.
type page struct {
	name, path string
}

var (
	regexpNext = regexp.MustCompile(`href="(/console/links\?[^"]+)" rel="next"`)
	regexpRow  = regexp.MustCompile(`<tr id="row-`)
)

// pagesOf is every console page, for tenant t: the links list (first page,
// a page ten pages in), each search, filter and order, a link's detail and
// statistics, the tenant's statistics, the keys and the forms; the bulk
// upload page when the console has it.
func pagesOf(ctx context.Context, t *tenant) ([]page, error) {
	thirty := time.Now().UTC().AddDate(0, -6, 0)
	ps := []page{
		{"list: first page", "/console/links"},
		{"list: page 11", ""},
		{"search: code prefix", "/console/links?q=" + t.name + "-promo-1"},
		{"search: target host", "/console/links?q=bluepeak.io"},
		{"search: title", "/console/links?q=" + url.QueryEscape("spring clearance")},
		{"filter: active", "/console/links?status=active"},
		{"filter: expired", "/console/links?status=expired"},
		{"filter: disabled", "/console/links?status=disabled"},
		{"filter: deleted", "/console/links?status=deleted"},
		{"filter: tag (a fifth)", "/console/links?tag=sale"},
		{"filter: tag (1%)", "/console/links?tag=vip"},
		{"filter: domain (15%)", "/console/links?domain=" + url.QueryEscape(t.domains[0])},
		{"filter: created in a month", "/console/links?from=" + thirty.Format("2006-01-02") + "&to=" + thirty.AddDate(0, 1, 0).Format("2006-01-02")},
		{"sort: oldest", "/console/links?sort=oldest"},
		{"sort: code", "/console/links?sort=code"},
		{"sort: target host", "/console/links?sort=host"},
		{"link detail", linkPath("/console/links/", t.hot, t.domains)},
		{"link statistics", statsPath(t)},
		{"tenant statistics", "/console/stats"},
		{"API keys", "/console/keys"},
		{"new link form", "/console/links/new"},
	}
	// Ten pages in, following the Next links as a creator does.
	next := "/console/links"
	for range 10 {
		_, body, _, err := t.browser.get(ctx, next)
		if err != nil {
			return nil, err
		}
		m := regexpNext.FindStringSubmatch(body)
		if m == nil {
			return nil, fmt.Errorf("no next page after %s", next)
		}
		next = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	ps[1].path = next
	if st, _, _, err := t.browser.get(ctx, "/console/imports"); err == nil && st == http.StatusOK {
		ps = append(ps, page{"bulk upload", "/console/imports"})
	}
	// Every page must answer 200 with what it is for: a fast error page
	// is not a result.
	for _, p := range ps {
		st, body, ms, err := t.browser.get(ctx, p.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if st != http.StatusOK || ms < 0 {
			return nil, fmt.Errorf("%s (%s): %d, Server-Timing %v\n%.500s", p.name, p.path, st, ms, body)
		}
		if strings.HasPrefix(p.name, "list") || strings.HasPrefix(p.name, "search") || strings.HasPrefix(p.name, "filter") ||
			strings.HasPrefix(p.name, "sort") {
			if len(regexpRow.FindAllString(body, -1)) == 0 {
				return nil, fmt.Errorf("%s (%s) lists no link: the benchmark's data does not exercise it", p.name, p.path)
			}
		}
	}
	return ps, nil
}

func statsPath(t *tenant) string {
	p := linkPath("/console/links/", t.hot, t.domains)
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i] + "/stats" + p[i:]
	}
	return p + "/stats"
}

// sample is one page's measurements in one tenant.
type sample struct {
	server, client []float64 // milliseconds
	rows           int
}

// measure asks every page of every tenant rounds times, after two rounds
// that are not kept (warm caches, prepared plans), alternating tenants
// and pages so the machine's noise falls on all alike.
func measure(ctx context.Context, ts []*tenant, rounds int) (*results, error) {
	res := &results{tenants: ts, samples: make([][]sample, len(ts))}
	for i := range ts {
		res.samples[i] = make([]sample, len(ts[i].pages))
	}
	for round := -2; round < rounds; round++ {
		for p := range ts[0].pages {
			for i, t := range ts {
				pg := t.pages[p]
				start := time.Now()
				st, body, ms, err := t.browser.get(ctx, pg.path)
				took := float64(time.Since(start).Microseconds()) / 1000
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", t.name, pg.name, err)
				}
				if st != http.StatusOK {
					return nil, fmt.Errorf("%s %s: %d", t.name, pg.name, st)
				}
				if round < 0 {
					continue
				}
				s := &res.samples[i][p]
				s.server, s.client = append(s.server, ms), append(s.client, took)
				s.rows = len(regexpRow.FindAllString(body, -1))
			}
		}
	}
	return res, nil
}
