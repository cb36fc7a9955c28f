package console

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/link"
)

// StatsReader is what the stats pages read: the rollups, through
// control/statsquery exactly as the API's stats routes read them, so a
// page's numbers are the API's; and the tenant's export, streamed.
type StatsReader interface {
	statsquery.Reader
	ExportTenantDays(ctx context.Context, tenantID int64, first, last time.Time, each func(statsquery.ExportRow) error) error
}

// statsLimit is the values a page lists per dimension, and its top links;
// the rest of a dimension is its Other row.
const statsLimit = 20

// statsForm is the range form as typed, so a refused range shows it back.
type statsForm struct {
	From, To, TZ, Interval string
	Domain                 string // a link's domain off the platform's, kept across the form
}

// commonZones are offered as the time zone field's suggestions; any IANA
// name may be typed.
var commonZones = []string{"UTC", "Europe/London", "Europe/Berlin", "Europe/Moscow", "America/New_York", "America/Chicago",
	"America/Denver", "America/Los_Angeles", "America/Sao_Paulo", "Africa/Lagos", "Asia/Dubai", "Asia/Kolkata",
	"Asia/Shanghai", "Asia/Tokyo", "Australia/Sydney", "Pacific/Auckland"}

type statsData struct {
	Code string // empty on the tenant's page
	// Link is the link's row (nil on the tenant's page): its domain, and
	// its pages' paths.
	Link    *row
	Form    statsForm
	Zones   []string
	Limit   int // values listed per dimension
	Problem string
	Notice  string // the range was changed to one the rollups hold
	// Shown is false when the range was refused: no numbers.
	Shown bool
	Range statsquery.Range
	// Series is the chart's and its table's; Buckets its rows.
	Series      statsquery.Series
	Buckets     []bucketRow
	Chart       template.HTML
	VisitorDays string // "" when not every bucket has visitors
	// Breakdown is over UTC days (statsquery.UTCDays).
	Breakdown  statsquery.Breakdown
	Dimensions []dimensionView
	TopLinks   []topLinkRow
	LiveLinks  int64
	// Links of the page: itself per hour and per day, its CSV, the
	// tenant's export, and the API's equivalents.
	PerDay, PerHour, CSV, Export template.URL
	APISeries, APIBreakdown      string
}

// statsPage reads the range and the numbers of the link named by the
// path, or of the tenant when forLink is false. A refused range is a 400
// with the form kept; ok is false when it answered.
func (s *Server) statsPage(w http.ResponseWriter, r *http.Request, sess Session, forLink bool) (statsData, string, bool) {
	data := statsData{Zones: commonZones, Limit: statsLimit}
	title := "Statistics"
	sc := statsquery.Scope{Tenant: sess.TenantID}
	if forLink {
		l, ok := s.getLink(w, r, sess)
		if !ok {
			return data, title, false
		}
		lr := s.row(l)
		data.Code, data.Link = l.Code, &lr
		title = "Statistics of " + l.Code
		sc.Link = &statsquery.LinkRef{Domain: l.DomainID, Code: l.Code}
		if l.DomainID != link.DefaultDomain {
			data.Form.Domain = l.Domain
		}
	}
	if s.cfg.Stats == nil {
		s.errorPage(w, r, http.StatusNotFound, "Statistics are not configured on this server.")
		return data, title, false
	}
	q := r.URL.Query()
	p := statsquery.Params{Interval: strings.TrimSpace(q.Get("interval")), From: strings.TrimSpace(q.Get("from")),
		To: strings.TrimSpace(q.Get("to")), TZ: strings.TrimSpace(q.Get("tz"))}
	data.Form.From, data.Form.To, data.Form.TZ, data.Form.Interval = p.From, p.To, p.TZ, p.Interval
	lim := statsquery.Limits{HourRetention: s.cfg.HourRetention}
	rng, err := statsquery.ParseRange(p, s.cfg.Now(), lim, true)
	if errors.Is(err, statsquery.ErrHoursNotKept) {
		// Hours asked from before they are kept (the day view's range,
		// say): show those that are, and say so.
		from := p.From
		p.From = lim.HoursFrom(s.cfg.Now()).Format(time.RFC3339)
		if clamped, cerr := statsquery.ParseRange(p, s.cfg.Now(), lim, true); cerr == nil {
			rng, err = clamped, nil
			data.Notice = "Hours are kept for a limited time: the hours from " + from + " on are not all kept, so these start with the first hour kept."
		}
	}
	if err != nil {
		data.Problem = "Cannot show that range: " + strings.TrimPrefix(err.Error(), link.ErrInvalidInput.Error()+": ") + "."
		s.render(w, r, http.StatusBadRequest, "stats", page{Title: title, Session: &sess, Data: data})
		return data, title, false
	}
	ctx := r.Context()
	if data.Series, err = statsquery.ReadSeries(ctx, s.cfg.Stats, sc, rng); err == nil {
		if forLink {
			data.Breakdown, err = statsquery.ReadBreakdown(ctx, s.cfg.Stats, sc, rng, statsquery.LinkDimensions, statsLimit)
		} else {
			var o statsquery.Overview
			o, err = statsquery.ReadOverview(ctx, s.cfg.Stats, sess.TenantID, rng, statsquery.TenantDimensions, statsLimit)
			data.Breakdown, data.LiveLinks = o.Breakdown, o.LiveLinks
			data.TopLinks = s.topLinkRows(o.TopLinks)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return data, title, false
	}
	data.Shown, data.Range = true, rng
	data.Form.From, data.Form.To, data.Form.TZ, data.Form.Interval = rng.FirstDay, rng.LastDay, rng.TZ, string(rng.Interval)
	data.Buckets = bucketRows(data.Series)
	if data.Series.HasVisitorDays {
		data.VisitorDays = itoa(data.Series.VisitorDays)
	}
	data.Dimensions = dimensionViews(data.Breakdown)
	data.links(rng)
	return data, title, true
}

// links fills the page's links from its range: the CSV holds exactly the
// page's numbers (an hour range by its instants), the API's the same.
func (d *statsData) links(rng statsquery.Range) {
	q := url.Values{"tz": {rng.TZ}, "interval": {string(rng.Interval)}}
	if rng.Interval == statsquery.Hour {
		q.Set("from", rng.From.Format(time.RFC3339))
		q.Set("to", rng.To.Format(time.RFC3339))
	} else {
		q.Set("from", rng.FirstDay)
		q.Set("to", rng.LastDay)
	}
	day := url.Values{"tz": {rng.TZ}}
	hour := url.Values{"tz": {rng.TZ}, "interval": {"hour"}}
	bq := url.Values{"tz": {rng.TZ}, "from": {q.Get("from")}, "to": {q.Get("to")}, "limit": {itoa(statsLimit)}}
	if d.Link != nil {
		d.PerDay, d.PerHour = d.Link.Href("stats", flat(day)...), d.Link.Href("stats", flat(hour)...)
		d.CSV = d.Link.Href("stats.csv", flat(q)...)
		api := "/api/v1/links/" + url.PathEscape(d.Code) + "/stats/"
		if d.Form.Domain != "" {
			q.Set("domain", d.Form.Domain)
			bq.Set("domain", d.Form.Domain)
		}
		d.APISeries, d.APIBreakdown = api+"series?"+q.Encode(), api+"breakdown?"+bq.Encode()
		return
	}
	d.PerDay = template.URL(Prefix + "stats?" + day.Encode())
	d.PerHour = template.URL(Prefix + "stats?" + hour.Encode())
	d.CSV = template.URL(Prefix + "stats.csv?" + q.Encode())
	first, last, _ := statsquery.UTCDays(rng)
	d.Export = template.URL(Prefix + "stats/links.csv?" + url.Values{"from": {first.Format(statsquery.DateOnly)}, "to": {last.Format(statsquery.DateOnly)}}.Encode())
	d.APISeries, d.APIBreakdown = "/api/v1/stats/series?"+q.Encode(), "/api/v1/stats/overview?"+bq.Encode()
}

// flat is q as the name, value pairs Href takes.
func flat(q url.Values) []string {
	var kv []string
	for k, vs := range q {
		kv = append(kv, k, vs[0])
	}
	return kv
}

func (s *Server) linkStats(w http.ResponseWriter, r *http.Request, sess Session) {
	data, title, ok := s.statsPage(w, r, sess, true)
	if !ok {
		return
	}
	data.Chart = seriesChart("series", chartTitle(data, data.Link.Host+"/"+data.Code), data.Buckets)
	s.render(w, r, http.StatusOK, "stats", page{Title: title, Session: &sess, Data: data})
}

func (s *Server) tenantStats(w http.ResponseWriter, r *http.Request, sess Session) {
	data, title, ok := s.statsPage(w, r, sess, false)
	if !ok {
		return
	}
	data.Chart = seriesChart("series", chartTitle(data, "every link"), data.Buckets)
	s.render(w, r, http.StatusOK, "stats", page{Title: title, Session: &sess, Data: data})
}

func chartTitle(d statsData, of string) string {
	per := "day"
	if d.Range.Interval == statsquery.Hour {
		per = "hour"
	}
	return "Clicks per " + per + " of " + of + ", " + d.Range.FirstDay + " to " + d.Range.LastDay + " (" + d.Range.TZ + ")"
}

func (s *Server) linkStatsCSV(w http.ResponseWriter, r *http.Request, sess Session) {
	if data, _, ok := s.statsPage(w, r, sess, true); ok {
		s.writeStatsCSV(w, r, "edgelink-"+fileStem(data.Link), data)
	}
}

func (s *Server) tenantStatsCSV(w http.ResponseWriter, r *http.Request, sess Session) {
	if data, _, ok := s.statsPage(w, r, sess, false); ok {
		s.writeStatsCSV(w, r, "edgelink", data)
	}
}

// fileStem names a link's downloads: its code, with its domain when
// that is not the platform's (two domains may have the code). A host's
// alphabet and a code's need no quoting; an IPv6 literal's colons are
// made '_' for file systems that refuse them.
func fileStem(r *row) string {
	if r.DomainID == link.DefaultDomain {
		return r.Code
	}
	return strings.ReplaceAll(r.Domain, ":", "_") + "-" + r.Code
}
