package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// StatsReader is what the stats endpoints read: the click rollups, the
// live-link counter and the merged latency histograms. The routes of
// stats_query.go read through control/statsquery, as the console does.
type StatsReader interface {
	statsquery.Reader
	// ExportTenantDays streams every link's clicks per UTC day, calling
	// each per row as it is read (stats_csv.go).
	ExportTenantDays(ctx context.Context, tenantID int64, first, last time.Time, each func(statsquery.ExportRow) error) error
	// LinkClicks reads the link of code on domain d: the same code on
	// another domain is another link.
	LinkClicks(ctx context.Context, d link.DomainID, code string, from, to time.Time, perDimension int) ([]clickstats.Day, []clickstats.Breakdown, error)
	TenantClicks(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Day, int64, error)
	RedirectLatency(ctx context.Context, from, to time.Time) (map[time.Time]*clicks.Histogram, error)
	ClickPipelineStats(ctx context.Context) (clickstats.Pipeline, error)
}

// Stats ranges: whole UTC days, 30 ending today by default, at most 366.
const (
	defaultStatsDays = 30
	maxStatsDays     = 366
	// topValues bounds each breakdown (referrers, devices, ...) of a link.
	topValues = 50
	dateOnly  = "2006-01-02"
)

// counts are a number of clicks with bots kept apart: a human click is
// one whose User-Agent the edge did not classify as a bot.
type counts struct {
	Human int64 `json:"human_clicks"`
	Bot   int64 `json:"bot_clicks"`
}

func countsOf(clicks, bots int64) counts { return counts{Human: clicks - bots, Bot: bots} }

type dayCounts struct {
	Date string `json:"date"`
	counts
}

type valueCounts struct {
	Value string `json:"value"`
	counts
}

type linkStatsBody struct {
	Domain    string        `json:"domain"` // the link's domain's host
	Code      string        `json:"code"`
	From      string        `json:"from"`
	To        string        `json:"to"`
	Totals    counts        `json:"totals"`
	Daily     []dayCounts   `json:"daily"`
	Referrers []valueCounts `json:"referrers"`
	Devices   []valueCounts `json:"devices"`
	Statuses  []valueCounts `json:"statuses"`
	Edges     []valueCounts `json:"edges"`
}

type latencyBody struct {
	Date    string  `json:"date,omitempty"`
	Samples uint64  `json:"samples"`
	P50     float64 `json:"p50_us"`
	P95     float64 `json:"p95_us"`
	P99     float64 `json:"p99_us"`
}

type serviceBody struct {
	RedirectsTotal int64         `json:"redirects_total"`
	Latency        latencyBody   `json:"latency"`
	LatencyDaily   []latencyBody `json:"latency_daily"`
	EdgeDropped    int64         `json:"edge_dropped_clicks"`
	Unaccounted    int64         `json:"unaccounted_clicks"`
	StreamLost     int64         `json:"stream_messages_lost"`
}

type tenantStatsBody struct {
	From      string      `json:"from"`
	To        string      `json:"to"`
	Totals    counts      `json:"totals"`
	LiveLinks int64       `json:"live_links"`
	Daily     []dayCounts `json:"daily"`
	Service   serviceBody `json:"service"`
}

// statsRange reads from and to (YYYY-MM-DD, UTC, inclusive) from q.
func (s *Server) statsRange(q url.Values) (from, to time.Time, err error) {
	to = s.cfg.Now().UTC().Truncate(24 * time.Hour)
	if v := q.Get("to"); v != "" {
		if to, err = time.Parse(dateOnly, v); err != nil {
			return from, to, fmt.Errorf("%w: to must be a date, YYYY-MM-DD", link.ErrInvalidInput)
		}
	}
	from = to.AddDate(0, 0, 1-defaultStatsDays)
	if v := q.Get("from"); v != "" {
		if from, err = time.Parse(dateOnly, v); err != nil {
			return from, to, fmt.Errorf("%w: from must be a date, YYYY-MM-DD", link.ErrInvalidInput)
		}
	}
	switch days := int(to.Sub(from)/(24*time.Hour)) + 1; {
	case days < 1:
		return from, to, fmt.Errorf("%w: from must not be after to", link.ErrInvalidInput)
	case days > maxStatsDays:
		return from, to, fmt.Errorf("%w: at most %d days at a time", link.ErrInvalidInput, maxStatsDays)
	}
	return from, to, nil
}

// daily lists every day of the range, zeros included, so a chart needs
// no gap filling.
func daily(from, to time.Time, rows []clickstats.Day) ([]dayCounts, counts) {
	by := make(map[string]clickstats.Day, len(rows))
	for _, r := range rows {
		by[r.Day.UTC().Format(dateOnly)] = r
	}
	var out []dayCounts
	var total counts
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		key := d.Format(dateOnly)
		r := by[key]
		c := countsOf(r.Clicks, r.BotClicks)
		total.Human += c.Human
		total.Bot += c.Bot
		out = append(out, dayCounts{Date: key, counts: c})
	}
	return out, total
}

var errNoStats = errors.New("statistics are not configured on this server")

// statsRequest is the range a stats request asks for in q. When there is
// none to serve (no statistics here, or a bad range) it answers the error
// and ok is false.
func (s *Server) statsRequest(w http.ResponseWriter, r *http.Request, q url.Values) (from, to time.Time, ok bool) {
	err := errNoStats
	if s.cfg.Stats != nil {
		from, to, err = s.statsRange(q)
	}
	if err != nil {
		s.writeError(w, r, err)
		return from, to, false
	}
	return from, to, true
}

// statsParams are the query parameters of the stats routes besides a
// link's domain.
var statsParams = []string{"from", "to"}

func (s *Server) linkStats(w http.ResponseWriter, r *http.Request, tenant int64) {
	// ?domain= names the link's domain as on every link route (absent:
	// the platform's); a parameter the route does not know is refused, so
	// a misspelt domain never reads the platform's link of that code.
	domain, q, err := s.linkQuery(r, statsParams...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	from, to, ok := s.statsRequest(w, r, q)
	if !ok {
		return
	}
	// Tenant scope: another tenant's code or domain is a 404, exactly
	// like an unknown one.
	l, err := s.links.Get(r.Context(), tenant, domain, r.PathValue("code"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	days, breakdown, err := s.cfg.Stats.LinkClicks(r.Context(), l.DomainID, l.Code, from, to, topValues)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := linkStatsBody{Domain: s.short.domainOf(l), Code: l.Code, From: from.Format(dateOnly), To: to.Format(dateOnly),
		Referrers: []valueCounts{}, Devices: []valueCounts{}, Statuses: []valueCounts{}, Edges: []valueCounts{}}
	out.Daily, out.Totals = daily(from, to, days)
	for _, b := range breakdown {
		v := valueCounts{Value: b.Value, counts: countsOf(b.Clicks, b.BotClicks)}
		switch b.Dimension {
		case "referrer":
			out.Referrers = append(out.Referrers, v)
		case "device":
			out.Devices = append(out.Devices, v)
		case "status":
			out.Statuses = append(out.Statuses, v)
		case "edge":
			out.Edges = append(out.Edges, v)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) tenantStats(w http.ResponseWriter, r *http.Request, tenant int64) {
	from, to, ok := s.statsRequest(w, r, r.URL.Query())
	if !ok {
		return
	}
	ctx := r.Context()
	days, live, err := s.cfg.Stats.TenantClicks(ctx, tenant, from, to)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hists, err := s.cfg.Stats.RedirectLatency(ctx, from, to)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pipe, err := s.cfg.Stats.ClickPipelineStats(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := tenantStatsBody{From: from.Format(dateOnly), To: to.Format(dateOnly), LiveLinks: live}
	out.Daily, out.Totals = daily(from, to, days)
	out.Service = serviceBody{RedirectsTotal: pipe.RedirectsTotal, EdgeDropped: pipe.EdgeDropped,
		Unaccounted: pipe.Unaccounted, StreamLost: pipe.LostMsgs, LatencyDaily: []latencyBody{}}
	// Percentiles over the range come from the summed histograms, never
	// from averaging the days' percentiles.
	var all clicks.Histogram
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		h := hists[d]
		if h == nil {
			continue
		}
		all.Add(h)
		l := latencyOf(h)
		l.Date = d.Format(dateOnly)
		out.Service.LatencyDaily = append(out.Service.LatencyDaily, l)
	}
	out.Service.Latency = latencyOf(&all)
	writeJSON(w, http.StatusOK, out)
}

func latencyOf(h *clicks.Histogram) latencyBody {
	us := func(q float64) float64 { return math.Round(float64(h.Quantile(q))) / 1e3 }
	return latencyBody{Samples: h.Count(), P50: us(0.50), P95: us(0.95), P99: us(0.99)}
}
