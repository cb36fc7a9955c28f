package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/link"
)

// The stats routes of issue 22 (docs/api.md#stats): series by hour or
// day in a time zone, breakdowns, a tenant's overview and its export. The
// numbers come from control/statsquery, which the console's pages read
// too.

// Query parameters of each route, besides a link's domain.
var (
	seriesParams    = []string{"interval", "from", "to", "tz", "format"}
	breakdownParams = []string{"dimension", "limit", "from", "to", "tz", "format"}
	overviewParams  = []string{"interval", "limit", "from", "to", "tz"}
	exportParams    = []string{"from", "to", "format"}
)

// statsQuery parses the query of a tenant stats route: the names given,
// each at most once, nothing else (a misspelt parameter is refused, never
// ignored).
func statsQuery(r *http.Request, names ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errInput("the query string is malformed")
	}
	for name, vals := range q {
		if !contains(names, name) {
			return nil, errInput("unknown query parameter %.40q; the parameters are %s", name, strings.Join(names, ", "))
		}
		if len(vals) > 1 {
			return nil, errInput("send %s once, not %d times", name, len(vals))
		}
	}
	return q, nil
}

func errInput(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{link.ErrInvalidInput}, args...)...)
}

func rangeParams(q url.Values) statsquery.Params {
	return statsquery.Params{Interval: q.Get("interval"), From: q.Get("from"), To: q.Get("to"), TZ: q.Get("tz")}
}

func (s *Server) statsLimits() statsquery.Limits {
	return statsquery.Limits{HourRetention: s.cfg.HourRetention}
}

// linkScope resolves the route's link for a stats request whose query has
// parsed: another tenant's link, or an unknown one, is a 404 alike.
func (s *Server) linkScope(r *http.Request, tenant int64, domain string) (statsquery.Scope, *linkHead, error) {
	l, err := s.links.Get(r.Context(), tenant, domain, r.PathValue("code"))
	if err != nil {
		return statsquery.Scope{}, nil, err
	}
	return statsquery.Scope{Tenant: tenant, Link: &statsquery.LinkRef{Domain: l.DomainID, Code: l.Code}},
		&linkHead{Domain: s.short.domainOf(l), Code: l.Code}, nil
}

// linkHead names the link an answer is about.
type linkHead struct {
	Domain string `json:"domain"`
	Code   string `json:"code"`
}

// statsRequest is what every stats route reads first: the query and the
// range, and whether the answer is CSV. When there is nothing to serve it
// has answered and ok is false.
type statsRequest struct {
	q   url.Values
	rng statsquery.Range
	csv bool
}

func (s *Server) parseStats(w http.ResponseWriter, r *http.Request, q url.Values, err error, series bool) (statsRequest, bool) {
	var req statsRequest
	if err == nil && s.cfg.Stats == nil {
		err = errNoStats
	}
	if err == nil {
		req.q = q
		req.csv, err = wantsCSV(r, q)
	}
	if err == nil {
		req.rng, err = statsquery.ParseRange(rangeParams(q), s.cfg.Now(), s.statsLimits(), series)
	}
	if err != nil {
		s.writeError(w, r, err)
		return req, false
	}
	return req, true
}

func (s *Server) linkSeries(w http.ResponseWriter, r *http.Request, tenant int64) {
	domain, q, err := s.linkQuery(r, seriesParams...)
	req, ok := s.parseStats(w, r, q, err, true)
	if !ok {
		return
	}
	sc, head, err := s.linkScope(r, tenant, domain)
	if err == nil {
		s.serveSeries(w, r, sc, head, req)
		return
	}
	s.writeError(w, r, err)
}

func (s *Server) tenantSeries(w http.ResponseWriter, r *http.Request, tenant int64) {
	q, err := statsQuery(r, seriesParams...)
	if req, ok := s.parseStats(w, r, q, err, true); ok {
		s.serveSeries(w, r, statsquery.Scope{Tenant: tenant}, nil, req)
	}
}

func (s *Server) serveSeries(w http.ResponseWriter, r *http.Request, sc statsquery.Scope, head *linkHead, req statsRequest) {
	series, err := statsquery.ReadSeries(r.Context(), s.cfg.Stats, sc, req.rng)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.csv {
		s.writeSeriesCSV(w, r, fileName(head, "series", req.rng.FirstDay, req.rng.LastDay), series)
		return
	}
	writeJSON(w, http.StatusOK, seriesBodyOf(head, series))
}

func (s *Server) linkBreakdown(w http.ResponseWriter, r *http.Request, tenant int64) {
	domain, q, err := s.linkQuery(r, breakdownParams...)
	req, ok := s.parseStats(w, r, q, err, false)
	if !ok {
		return
	}
	dims, limit, err := breakdownOptions(q, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sc, head, err := s.linkScope(r, tenant, domain)
	if err == nil {
		s.serveBreakdown(w, r, sc, head, req, dims, limit)
		return
	}
	s.writeError(w, r, err)
}

func (s *Server) tenantBreakdown(w http.ResponseWriter, r *http.Request, tenant int64) {
	q, err := statsQuery(r, breakdownParams...)
	req, ok := s.parseStats(w, r, q, err, false)
	if !ok {
		return
	}
	dims, limit, err := breakdownOptions(q, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveBreakdown(w, r, statsquery.Scope{Tenant: tenant}, nil, req, dims, limit)
}

func breakdownOptions(q url.Values, forLink bool) ([]string, int, error) {
	dims, err := statsquery.ParseDimensions(q.Get("dimension"), forLink)
	if err != nil {
		return nil, 0, err
	}
	limit, err := statsquery.ParseLimit(q.Get("limit"), statsquery.DefaultLimit)
	return dims, limit, err
}

func (s *Server) serveBreakdown(w http.ResponseWriter, r *http.Request, sc statsquery.Scope, head *linkHead, req statsRequest, dims []string, limit int) {
	b, err := statsquery.ReadBreakdown(r.Context(), s.cfg.Stats, sc, req.rng, dims, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.csv {
		s.writeBreakdownCSV(w, r, fileName(head, "breakdown", b.FirstDay.Format(dateOnly), b.LastDay.Format(dateOnly)), b)
		return
	}
	writeJSON(w, http.StatusOK, breakdownBodyOf(head, req.rng.TZ, b))
}

func (s *Server) tenantOverview(w http.ResponseWriter, r *http.Request, tenant int64) {
	q, err := statsQuery(r, overviewParams...)
	req, ok := s.parseStats(w, r, q, err, true)
	if !ok {
		return
	}
	limit, err := statsquery.ParseLimit(q.Get("limit"), statsquery.DefaultLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := statsquery.ReadOverview(r.Context(), s.cfg.Stats, tenant, req.rng, nil, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, overviewBodyOf(req.rng.TZ, o))
}

// tenantExport streams every link's clicks per UTC day as CSV
// (stats_csv.go).
func (s *Server) tenantExport(w http.ResponseWriter, r *http.Request, tenant int64) {
	q, err := statsQuery(r, exportParams...)
	if err == nil && q.Get("format") != "" && q.Get("format") != "csv" {
		err = errInput("the export is CSV only: format must be csv or left out")
	}
	req, ok := s.parseStats(w, r, q, err, false)
	if ok {
		s.streamExport(w, r, tenant, req.rng)
	}
}

// The JSON answers.

type visitorCounts struct {
	counts
	// VisitorDays is null where not every bucket has visitors.
	VisitorDays *int64 `json:"visitor_days"`
}

type bucketBody struct {
	Start string `json:"start"`
	Date  string `json:"date"`
	counts
	Visitors    *int64 `json:"visitors"`
	Approximate bool   `json:"approximate"`
	CountedFrom string `json:"counted_from"`
	CountedTo   string `json:"counted_to"`
}

type seriesBody struct {
	*linkHead
	Interval    string        `json:"interval"`
	TZ          string        `json:"tz"`
	From        string        `json:"from"`
	To          string        `json:"to"`
	FirstDay    string        `json:"first_day"`
	LastDay     string        `json:"last_day"`
	HoursFrom   string        `json:"hours_kept_from"`
	Approximate bool          `json:"approximate"`
	Totals      visitorCounts `json:"totals"`
	Buckets     []bucketBody  `json:"buckets"`
}

func cnt(c statsquery.Counts) counts { return counts{Human: c.Human, Bot: c.Bot} }

func seriesBodyOf(head *linkHead, sr statsquery.Series) seriesBody {
	in := func(t time.Time) string { return t.In(sr.Loc).Format(time.RFC3339) }
	utc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	out := seriesBody{linkHead: head, Interval: string(sr.Interval), TZ: sr.TZ, From: in(sr.From), To: in(sr.To),
		FirstDay: sr.FirstDay, LastDay: sr.LastDay, HoursFrom: utc(sr.HoursFrom), Approximate: sr.Approximate,
		Totals: visitorCounts{counts: cnt(sr.Totals)}, Buckets: make([]bucketBody, 0, len(sr.Buckets))}
	if sr.HasVisitorDays {
		out.Totals.VisitorDays = &sr.VisitorDays
	}
	for _, b := range sr.Buckets {
		bb := bucketBody{Start: in(b.Start), Date: b.Day, counts: cnt(b.Counts), Approximate: b.Approximate,
			CountedFrom: utc(b.CountedFrom), CountedTo: utc(b.CountedTo)}
		if b.HasVisitors {
			v := b.Visitors
			bb.Visitors = &v
		}
		out.Buckets = append(out.Buckets, bb)
	}
	return out
}

type dimensionBody struct {
	Dimension string        `json:"dimension"`
	Values    []valueCounts `json:"values"`
	Other     counts        `json:"other"`
	None      counts        `json:"none"`
}

type breakdownBody struct {
	*linkHead
	TZ          string          `json:"tz"`
	FirstDay    string          `json:"first_day"`
	LastDay     string          `json:"last_day"`
	Approximate bool            `json:"approximate"`
	Totals      visitorCounts   `json:"totals"`
	Dimensions  []dimensionBody `json:"dimensions"`
}

func dimensionsOf(b statsquery.Breakdown) []dimensionBody {
	out := make([]dimensionBody, 0, len(b.Dimensions))
	for _, d := range b.Dimensions {
		db := dimensionBody{Dimension: d.Name, Values: make([]valueCounts, 0, len(d.Values)), Other: cnt(d.Other), None: cnt(d.None)}
		for _, v := range d.Values {
			db.Values = append(db.Values, valueCounts{Value: v.Value, counts: cnt(v.Counts)})
		}
		out = append(out, db)
	}
	return out
}

func breakdownBodyOf(head *linkHead, tz string, b statsquery.Breakdown) breakdownBody {
	vd := b.VisitorDays
	return breakdownBody{linkHead: head, TZ: tz, FirstDay: b.FirstDay.Format(dateOnly), LastDay: b.LastDay.Format(dateOnly),
		Approximate: b.Approximate, Totals: visitorCounts{counts: cnt(b.Totals), VisitorDays: &vd}, Dimensions: dimensionsOf(b)}
}

type topLinkBody struct {
	Domain string `json:"domain"`
	Code   string `json:"code"`
	Status string `json:"status"`
	counts
}

type overviewBody struct {
	TZ          string          `json:"tz"`
	FirstDay    string          `json:"first_day"`
	LastDay     string          `json:"last_day"`
	Approximate bool            `json:"approximate"`
	Totals      visitorCounts   `json:"totals"`
	LiveLinks   int64           `json:"live_links"`
	TopLinks    []topLinkBody   `json:"top_links"`
	Dimensions  []dimensionBody `json:"dimensions"`
	Series      seriesBody      `json:"series"`
}

func overviewBodyOf(tz string, o statsquery.Overview) overviewBody {
	b := o.Breakdown
	vd := b.VisitorDays
	out := overviewBody{TZ: tz, FirstDay: b.FirstDay.Format(dateOnly), LastDay: b.LastDay.Format(dateOnly), Approximate: b.Approximate,
		Totals: visitorCounts{counts: cnt(b.Totals), VisitorDays: &vd}, LiveLinks: o.LiveLinks,
		TopLinks: make([]topLinkBody, 0, len(o.TopLinks)), Dimensions: dimensionsOf(b), Series: seriesBodyOf(nil, o.Series)}
	for _, l := range o.TopLinks {
		out.TopLinks = append(out.TopLinks, topLinkBody{Domain: l.Host, Code: l.Code, Status: string(l.Status), counts: cnt(l.Counts)})
	}
	return out
}
