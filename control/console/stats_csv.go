package console

import (
	"bufio"
	"encoding/csv"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/statsquery"
)

// csvSafe keeps a spreadsheet from reading v as a formula
// (statsquery.CSVSafe): every cell that came from outside goes through it.
func csvSafe(v string) string { return statsquery.CSVSafe(v) }

// statsCSVHeader are the columns of a page's CSV: its series (section
// hour or day, value the bucket's start in the zone, visitors where the
// bucket has them, approximate), then each breakdown's rows (section the
// dimension, kind value, other or none), then the tenant's top links
// (section link, value host/code).
var statsCSVHeader = []string{"section", "kind", "value", "human_clicks", "bot_clicks", "visitors", "approximate"}

// writeStatsCSV writes the page's numbers, row for row. It is small (a
// series of at most 744 buckets and a few hundred values), so it is
// written whole, with its length.
func (s *Server) writeStatsCSV(w http.ResponseWriter, r *http.Request, name string, d statsData) {
	var b strings.Builder
	cw := csv.NewWriter(&b)
	rows := [][]string{statsCSVHeader}
	for _, bk := range d.Buckets {
		rows = append(rows, []string{string(d.Range.Interval), "bucket", bk.Start, itoa(bk.Human), itoa(bk.Bot), bk.Visitors, strconv.FormatBool(bk.Approximate)})
	}
	for _, dim := range d.Dimensions {
		for _, v := range dim.Rows {
			rows = append(rows, []string{dim.Dimension, v.Kind, csvSafe(v.Value), itoa(v.Human), itoa(v.Bot), "", ""})
		}
	}
	for _, l := range d.TopLinks {
		rows = append(rows, []string{"link", "value", l.Host + "/" + csvSafe(l.Code), itoa(l.Human), itoa(l.Bot), "", ""})
	}
	if err := cw.WriteAll(rows); err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{
		"filename": name + "-stats-" + d.Range.FirstDay + "-" + d.Range.LastDay + ".csv"}))
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	_, _ = w.Write([]byte(b.String()))
}

// exportHeader are the API's export columns (GET /api/v1/stats/export).
var exportHeader = []string{"domain", "code", "date", "human_clicks", "bot_clicks", "visitors"}

// tenantExport streams every link's clicks per UTC day from the rollups
// as they are read, as the API's export does: constant memory whatever
// the tenant's size, flushed every 1,024 rows with the write deadline
// moved on, and the connection cut on a failure after the first row.
func (s *Server) tenantExport(w http.ResponseWriter, r *http.Request, sess Session) {
	if s.cfg.Stats == nil {
		s.errorPage(w, r, http.StatusNotFound, "Statistics are not configured on this server.")
		return
	}
	q := r.URL.Query()
	rng, err := statsquery.ParseRange(statsquery.Params{From: q.Get("from"), To: q.Get("to")}, s.cfg.Now(),
		statsquery.Limits{HourRetention: s.cfg.HourRetention}, false)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Cannot export that range: "+strings.TrimPrefix(err.Error(), "invalid input: ")+".")
		return
	}
	first, last, _ := statsquery.UTCDays(rng)
	rc := http.NewResponseController(w)
	buf := bufio.NewWriterSize(w, 32<<10)
	cw := csv.NewWriter(buf)
	started, n := false, 0
	start := func() error {
		h := w.Header()
		h.Set("Content-Type", "text/csv; charset=utf-8")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{
			"filename": "edgelink-links-" + first.Format(statsquery.DateOnly) + "-" + last.Format(statsquery.DateOnly) + ".csv"}))
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		w.WriteHeader(http.StatusOK)
		started = true
		return cw.Write(exportHeader)
	}
	flush := func() error {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		if err := buf.Flush(); err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := rc.Flush(); err != nil && err != http.ErrNotSupported {
			return err
		}
		return nil
	}
	err = s.cfg.Stats.ExportTenantDays(r.Context(), sess.TenantID, first, last, func(row statsquery.ExportRow) error {
		if !started {
			if err := start(); err != nil {
				return err
			}
		}
		if err := cw.Write([]string{row.Host, csvSafe(row.Code), row.Day.UTC().Format(statsquery.DateOnly), itoa(row.Clicks - row.BotClicks), itoa(row.BotClicks), itoa(row.Visitors)}); err != nil {
			return err
		}
		if n++; n%1024 == 0 {
			return flush()
		}
		return nil
	})
	if err != nil && !started {
		s.fail(w, r, err)
		return
	}
	if err == nil && !started {
		err = start()
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("console export cut short", "request_id", requestID(r), "rows", n, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}
