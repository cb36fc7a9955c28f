package api

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/statsquery"
)

// wantsCSV reads the answer's format: format=csv or format=json, else
// the Accept header (CSV when it ranks text/csv above application/json;
// JSON otherwise, the default).
func wantsCSV(r *http.Request, q url.Values) (bool, error) {
	switch f := q.Get("format"); f {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
	default:
		return false, errInput("format must be json or csv, not %.20q", f)
	}
	var csvQ, jsonQ float64
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		weight := 1.0
		if v, ok := params["q"]; ok {
			if weight, err = strconv.ParseFloat(v, 64); err != nil || weight < 0 || weight > 1 {
				continue
			}
		}
		switch mt {
		case "text/csv":
			csvQ = max(csvQ, weight)
		case "application/json":
			jsonQ = max(jsonQ, weight)
		}
	}
	return csvQ > jsonQ, nil
}

// fileName names a download: the link's (its code, with its domain's host
// when that is not the platform's: two domains may have the code) or the
// tenant's, what it holds and its days. A code's and a host's alphabets
// need no quoting; an IPv6 literal's colons become '_' for file systems
// that refuse them.
func fileName(head *linkHead, kind, first, last string) string {
	stem := "edgelink"
	if head != nil {
		stem += "-" + strings.ReplaceAll(head.Domain, ":", "_") + "-" + head.Code
	}
	return fmt.Sprintf("%s-%s-%s-%s.csv", stem, kind, first, last)
}

// csvStream writes CSV to an answer as it is made: the header row first,
// then rows through a buffer flushed every flushRows rows, each flush
// moving the write deadline on by writeWindow, so a download as long as
// a year of 100,000 links' days is bounded by a stalled client, not by
// its length.
type csvStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     *bufio.Writer
	cw      *csv.Writer
	rows    int
	started bool
}

const (
	flushRows   = 1024
	writeWindow = 30 * time.Second
)

func newCSVStream(w http.ResponseWriter) *csvStream {
	buf := bufio.NewWriterSize(w, 32<<10)
	return &csvStream{w: w, rc: http.NewResponseController(w), buf: buf, cw: csv.NewWriter(buf)}
}

// start sends the headers and the header row.
func (c *csvStream) start(name string, header ...string) error {
	h := c.w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	_ = c.rc.SetWriteDeadline(time.Now().Add(writeWindow))
	c.w.WriteHeader(http.StatusOK)
	c.started = true
	return c.cw.Write(header)
}

// row writes one row; cells that came from the internet are guarded by
// the caller (statsquery.CSVSafe).
func (c *csvStream) row(cells ...string) error {
	if err := c.cw.Write(cells); err != nil {
		return err
	}
	if c.rows++; c.rows%flushRows == 0 {
		return c.flush()
	}
	return nil
}

func (c *csvStream) flush() error {
	c.cw.Flush()
	if err := c.cw.Error(); err != nil {
		return err
	}
	if err := c.buf.Flush(); err != nil {
		return err
	}
	_ = c.rc.SetWriteDeadline(time.Now().Add(writeWindow))
	if err := c.rc.Flush(); err != nil && err != http.ErrNotSupported {
		return err
	}
	return nil
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// seriesHeader are the columns of a series: its buckets' start (RFC 3339
// in the range's zone) and date there, clicks, visitors (empty where the
// bucket has none) and whether it is approximate, with the UTC interval
// it counted.
var seriesHeader = []string{"start", "date", "human_clicks", "bot_clicks", "visitors", "approximate", "counted_from", "counted_to"}

func (s *Server) writeSeriesCSV(w http.ResponseWriter, r *http.Request, name string, sr statsquery.Series) {
	c := newCSVStream(w)
	err := c.start(name, seriesHeader...)
	for _, b := range sr.Buckets {
		if err != nil {
			break
		}
		visitors := ""
		if b.HasVisitors {
			visitors = i64(b.Visitors)
		}
		err = c.row(b.Start.In(sr.Loc).Format(time.RFC3339), b.Day, i64(b.Human), i64(b.Bot), visitors,
			strconv.FormatBool(b.Approximate), b.CountedFrom.UTC().Format(time.RFC3339), b.CountedTo.UTC().Format(time.RFC3339))
	}
	s.endCSV(r, c, err)
}

// breakdownHeader are the columns of a breakdown: a dimension's values,
// then its other and none rows (kind value, other, none; value empty
// but in value rows, where "" is no referrer or no country known).
var breakdownHeader = []string{"dimension", "kind", "value", "human_clicks", "bot_clicks"}

func (s *Server) writeBreakdownCSV(w http.ResponseWriter, r *http.Request, name string, b statsquery.Breakdown) {
	c := newCSVStream(w)
	err := c.start(name, breakdownHeader...)
	for _, d := range b.Dimensions {
		for _, v := range d.Values {
			if err == nil {
				err = c.row(d.Name, "value", statsquery.CSVSafe(v.Value), i64(v.Human), i64(v.Bot))
			}
		}
		if err == nil {
			err = c.row(d.Name, "other", "", i64(d.Other.Human), i64(d.Other.Bot))
		}
		if err == nil {
			err = c.row(d.Name, "none", "", i64(d.None.Human), i64(d.None.Bot))
		}
	}
	s.endCSV(r, c, err)
}

// endCSV finishes a started CSV answer. An error once rows have gone
// cannot become a status: the connection is cut instead, so the client
// sees a broken transfer, never a short file that looks whole.
func (s *Server) endCSV(r *http.Request, c *csvStream, err error) {
	if err == nil {
		err = c.flush()
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("stats CSV cut short", "request_id", requestID(r), "route", r.Pattern, "rows", c.rows, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// exportHeader are the columns of a tenant's export: one row per link
// and UTC day with clicks.
var exportHeader = []string{"domain", "code", "date", "human_clicks", "bot_clicks", "visitors"}

// streamExport writes the tenant's links' days over rng's UTC days as
// PostgreSQL sends them (ExportTenantDays): memory stays constant however
// many rows there are. A failure before the first row is a problem
// answer; after it, the connection is cut (endCSV).
func (s *Server) streamExport(w http.ResponseWriter, r *http.Request, tenant int64, rng statsquery.Range) {
	first, last, _ := statsquery.UTCDays(rng)
	name := fileName(nil, "links", first.Format(dateOnly), last.Format(dateOnly))
	c := newCSVStream(w)
	err := s.cfg.Stats.ExportTenantDays(r.Context(), tenant, first, last, func(row statsquery.ExportRow) error {
		if !c.started {
			if err := c.start(name, exportHeader...); err != nil {
				return err
			}
		}
		// Hosts and codes have no formula characters first but '-' in a
		// code: guarded like any cell from outside.
		return c.row(row.Host, statsquery.CSVSafe(row.Code), row.Day.UTC().Format(dateOnly), i64(row.Clicks-row.BotClicks), i64(row.BotClicks), i64(row.Visitors))
	})
	if err != nil && !c.started {
		s.writeError(w, r, err)
		return
	}
	if err == nil && !c.started {
		err = c.start(name, exportHeader...)
	}
	s.endCSV(r, c, err)
}
