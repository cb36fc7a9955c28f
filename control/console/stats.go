package console

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/link"
)

// StatsReader is what the stats pages read: the same store methods the
// API's stats endpoints read, so a page's numbers are the API's. A link's
// clicks are read by (domain, code).
type StatsReader interface {
	LinkClicks(ctx context.Context, d link.DomainID, code string, from, to time.Time, perDimension int) ([]clickstats.Day, []clickstats.Breakdown, error)
	TenantClicks(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Day, int64, error)
}

// Stats ranges are the API's: whole UTC days, the last 30 ending today by
// default, at most 366; each breakdown shows a link's top 50 values.
const (
	defaultStatsDays = 30
	maxStatsDays     = 366
	topValues        = 50
	dateOnly         = "2006-01-02"
)

// statsForm is the range form as typed, so a refused range shows it back.
type statsForm struct{ From, To string }

// dayRow is a day's clicks, human and bot apart.
type dayRow struct {
	Date       string
	Human, Bot int64
}

// valueRow is one value of a breakdown with its bar's length.
type valueRow struct {
	Value      string
	Human, Bot int64
	Percent    int // of the breakdown's busiest value, for its bar
}

// breakdown is one dimension of a link's clicks as a table.
type breakdown struct {
	Name, Dimension string
	Rows            []valueRow
}

type statsData struct {
	Code string // empty on the tenant's page
	// Link is the link's row (nil on the tenant's page): its domain, and
	// its pages' paths.
	Link       *row
	Form       statsForm
	Problem    string
	From, To   string // the range shown
	Days       []dayRow
	Human, Bot int64
	LiveLinks  int64
	Chart      template.HTML
	Breakdowns []breakdown
	CSV        template.URL
}

// parseStatsRange reads from and to as the API does (control/api
// statsRange), with messages for the page.
func parseStatsRange(q url.Values, now time.Time) (statsForm, time.Time, time.Time, error) {
	f := statsForm{From: strings.TrimSpace(q.Get("from")), To: strings.TrimSpace(q.Get("to"))}
	to := now.UTC().Truncate(24 * time.Hour)
	var err error
	if f.To != "" {
		if to, err = time.Parse(dateOnly, f.To); err != nil {
			return f, time.Time{}, time.Time{}, errors.New("to must be a date, YYYY-MM-DD")
		}
	}
	from := to.AddDate(0, 0, 1-defaultStatsDays)
	if f.From != "" {
		if from, err = time.Parse(dateOnly, f.From); err != nil {
			return f, time.Time{}, time.Time{}, errors.New("from must be a date, YYYY-MM-DD")
		}
	}
	switch days := int(to.Sub(from)/(24*time.Hour)) + 1; {
	case days < 1:
		return f, from, to, errors.New("from must not be after to")
	case days > maxStatsDays:
		return f, from, to, fmt.Errorf("at most %d days at a time", maxStatsDays)
	}
	return f, from, to, nil
}

// dailyRows lists every day of the range, zeros included, as the API's
// daily series does, and sums them.
func dailyRows(from, to time.Time, rows []clickstats.Day) ([]dayRow, int64, int64) {
	by := make(map[string]clickstats.Day, len(rows))
	for _, r := range rows {
		by[r.Day.UTC().Format(dateOnly)] = r
	}
	var out []dayRow
	var human, bot int64
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		key := d.Format(dateOnly)
		r := by[key]
		row := dayRow{Date: key, Human: r.Clicks - r.BotClicks, Bot: r.BotClicks}
		human += row.Human
		bot += row.Bot
		out = append(out, row)
	}
	return out, human, bot
}

var dimensions = []struct{ dim, name string }{
	{"referrer", "Referrers"}, {"device", "Devices"}, {"status", "Redirect statuses"}, {"edge", "Edges"},
}

func breakdowns(bs []clickstats.Breakdown) []breakdown {
	out := make([]breakdown, len(dimensions))
	for i, d := range dimensions {
		out[i] = breakdown{Name: d.name, Dimension: d.dim}
		var peak int64
		for _, b := range bs {
			if b.Dimension == d.dim {
				peak = max(peak, b.Clicks)
			}
		}
		for _, b := range bs {
			if b.Dimension == d.dim {
				out[i].Rows = append(out[i].Rows, valueRow{Value: b.Value, Human: b.Clicks - b.BotClicks, Bot: b.BotClicks, Percent: barPercent(b.Clicks, peak)})
			}
		}
	}
	return out
}

// stats reads the range and the numbers of the link named by the path,
// or of the tenant when forLink is false. A refused range is a 400
// with the form kept; ok is false when it answered.
func (s *Server) stats(w http.ResponseWriter, r *http.Request, sess Session, forLink bool) (statsData, bool) {
	var data statsData
	title := "Statistics"
	if forLink {
		l, ok := s.getLink(w, r, sess)
		if !ok {
			return data, false
		}
		lr := s.row(l)
		data.Code, data.Link = l.Code, &lr
		title = "Statistics of " + l.Code
	}
	if s.cfg.Stats == nil {
		s.errorPage(w, r, http.StatusNotFound, "Statistics are not configured on this server.")
		return data, false
	}
	form, from, to, err := parseStatsRange(r.URL.Query(), s.cfg.Now())
	data.Form = form
	if err != nil {
		data.Problem = "Cannot show that range: " + err.Error() + "."
		s.render(w, r, http.StatusBadRequest, "stats", page{Title: title, Session: &sess, Data: data})
		return data, false
	}
	var days []clickstats.Day
	var bs []clickstats.Breakdown
	if forLink {
		days, bs, err = s.cfg.Stats.LinkClicks(r.Context(), data.Link.DomainID, data.Code, from, to, topValues)
	} else {
		days, data.LiveLinks, err = s.cfg.Stats.TenantClicks(r.Context(), sess.TenantID, from, to)
	}
	if err != nil {
		s.fail(w, r, err)
		return data, false
	}
	data.From, data.To = from.Format(dateOnly), to.Format(dateOnly)
	if data.Form.From == "" {
		data.Form.From = data.From
	}
	if data.Form.To == "" {
		data.Form.To = data.To
	}
	data.Days, data.Human, data.Bot = dailyRows(from, to, days)
	if forLink {
		data.Breakdowns = breakdowns(bs)
	}
	if forLink {
		data.CSV = data.Link.Href("stats.csv", "from", data.From, "to", data.To)
	} else {
		data.CSV = template.URL(Prefix + "stats.csv?" + url.Values{"from": {data.From}, "to": {data.To}}.Encode())
	}
	return data, true
}

func (s *Server) linkStats(w http.ResponseWriter, r *http.Request, sess Session) {
	if data, ok := s.stats(w, r, sess, true); ok {
		data.Chart = dailyChart("daily", "Clicks per day of "+data.Link.Host+"/"+data.Code+", "+data.From+" to "+data.To, data.Days)
		s.render(w, r, http.StatusOK, "stats", page{Title: "Statistics of " + data.Code, Session: &sess, Data: data})
	}
}

func (s *Server) tenantStats(w http.ResponseWriter, r *http.Request, sess Session) {
	if data, ok := s.stats(w, r, sess, false); ok {
		data.Chart = dailyChart("daily", "Clicks per day of every link, "+data.From+" to "+data.To, data.Days)
		s.render(w, r, http.StatusOK, "stats", page{Title: "Statistics", Session: &sess, Data: data})
	}
}

func (s *Server) linkStatsCSV(w http.ResponseWriter, r *http.Request, sess Session) {
	if data, ok := s.stats(w, r, sess, true); ok {
		s.writeStatsCSV(w, r, "edgelink-"+fileStem(data.Link), data)
	}
}

func (s *Server) tenantStatsCSV(w http.ResponseWriter, r *http.Request, sess Session) {
	if data, ok := s.stats(w, r, sess, false); ok {
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

// writeStatsCSV writes the page's numbers, row for row: the days, then
// each breakdown's values. Values come from the internet (a referrer is
// any host a browser sent), so each is guarded against being read as a
// formula by a spreadsheet.
func (s *Server) writeStatsCSV(w http.ResponseWriter, r *http.Request, name string, data statsData) {
	var b strings.Builder
	cw := csv.NewWriter(&b)
	rows := [][]string{{"section", "value", "human_clicks", "bot_clicks"}}
	for _, d := range data.Days {
		rows = append(rows, []string{"day", d.Date, strconv.FormatInt(d.Human, 10), strconv.FormatInt(d.Bot, 10)})
	}
	for _, bd := range data.Breakdowns {
		for _, v := range bd.Rows {
			rows = append(rows, []string{bd.Dimension, csvSafe(v.Value), strconv.FormatInt(v.Human, 10), strconv.FormatInt(v.Bot, 10)})
		}
	}
	if err := cw.WriteAll(rows); err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	// The name is ours: a code's alphabet and the dates, nothing to quote.
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-stats-%s-%s.csv"`, name, data.From, data.To))
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	_, _ = w.Write([]byte(b.String()))
}

// csvSafe keeps a spreadsheet from reading v as a formula: a value that
// starts with one of the characters that begin one gets a leading quote
// (OWASP's advice for CSV injection).
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}
