package console

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/shared/link"
)

// jobView is an import job as its page and the list show it.
type jobView struct {
	importjobs.Job
	Href string
	// Active: queued or running, so the page refreshes itself.
	Active  bool
	Label   string // the state in words
	Percent int    // of the file read
	// Rows etc. are the progress (while active) or the final counts.
	Rows, Done, Imported, Rejected                        count
	Kept, Existing, Recoded, Duplicates, Chunks, Replayed count
	FailedChunks                                          count
	Size, Took                                            string
	Format, Domain, Redirect                              string
	// Rejects are the rejects file's first rows, for the page.
	Rejects    []rejectRow
	MoreReject bool
}

type rejectRow struct{ Line, Code, Status, URL, Reason string }

func (s *Server) jobView(j importjobs.Job) jobView {
	v := jobView{Job: j, Href: jobHref(j.ID), Active: !j.State.Finished(), Size: sizeText(j.FileSize),
		Rows: count(j.Progress.Rows), Done: count(j.Progress.Done), Imported: count(j.Progress.Imported), Rejected: count(j.Progress.Rejected),
		Kept: count(j.Counts.Kept), Existing: count(j.Counts.Existing), Recoded: count(j.Counts.Recoded), Duplicates: count(j.Counts.Duplicates),
		Chunks: count(j.Counts.Chunks), Replayed: count(j.Counts.Replayed), FailedChunks: count(j.Counts.Failed),
		Domain: j.Domain, Redirect: "302 (default)"}
	switch j.State {
	case importjobs.Queued:
		v.Label = "waiting to start"
	case importjobs.Running:
		v.Label = "importing"
	case importjobs.Done:
		v.Label = "done"
	case importjobs.Failed:
		v.Label = "failed"
	}
	if j.FileSize > 0 {
		v.Percent = int(min(100, 100*j.Progress.BytesRead/j.FileSize))
	}
	if j.State == importjobs.Done {
		v.Percent = 100
	}
	v.Format = formatName(j.Format)
	if j.DetectedFormat != "" && j.Format == importer.Auto {
		v.Format = formatName(j.DetectedFormat) + " (told from the file)"
	}
	if v.Domain == "" {
		v.Domain = s.short.Host + " (platform)"
	}
	if j.RedirectType != 0 {
		v.Redirect = strconv.Itoa(j.RedirectType)
	}
	if !j.StartedAt.IsZero() && !j.FinishedAt.IsZero() {
		v.Took = durationText(j.FinishedAt.Sub(j.StartedAt))
	}
	return v
}

func formatName(f importer.Format) string {
	switch f {
	case importer.Bitly:
		return "Bitly"
	case importer.YOURLS:
		return "YOURLS"
	case importer.Shlink:
		return "Shlink"
	case importer.CSV:
		return "a CSV of your own"
	}
	return "auto"
}

func sizeText(n int64) string {
	if n < 1<<10 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	if n < 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return mib(n)
}

// getJob is the session's tenant's job of the path, or the 404 page.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request, sess Session) (importjobs.Job, bool) {
	j, err := s.cfg.Imports.Job(r.Context(), sess.TenantID, r.PathValue("id"))
	if errors.Is(err, link.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such import in this tenant.")
		return j, false
	}
	if err != nil {
		s.fail(w, r, err)
		return j, false
	}
	return j, true
}

// jobPage shows an import: its progress while it runs (the status block
// alone for htmx's poll, answered 286 once the job has finished so htmx
// stops polling), then its counts, files and first rejected rows.
func (s *Server) jobPage(w http.ResponseWriter, r *http.Request, sess Session) {
	j, ok := s.getJob(w, r, sess)
	if !ok {
		return
	}
	v := s.jobView(j)
	if j.State.Finished() && j.HasRejects {
		b, err := s.cfg.Imports.Output(r.Context(), sess.TenantID, j.ID, importjobs.Rejects)
		if err != nil && !errors.Is(err, link.ErrNotFound) {
			s.fail(w, r, err)
			return
		}
		v.Rejects, v.MoreReject = sampleRejects(b, rejectSample)
	}
	if r.Header.Get("HX-Request") == "true" {
		// 286 tells htmx to stop polling; it still swaps the block in.
		status := http.StatusOK
		if j.State.Finished() {
			status = 286
		}
		var buf bytes.Buffer
		if err := s.pages.byName["bulk_job"].ExecuteTemplate(&buf, "status", v); err != nil {
			s.log.Error("console block failed to render", "request_id", requestID(r), "page", "bulk_job", "err", err)
			s.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		w.WriteHeader(status)
		_, _ = w.Write(buf.Bytes())
		return
	}
	s.render(w, r, http.StatusOK, "bulk_job", page{Title: "Import of " + j.FileName, Session: &sess, Data: v})
}

// sampleRejects reads the first n rows of a rejects file (after its
// header), and whether there are more.
func sampleRejects(b []byte, n int) ([]rejectRow, bool) {
	cr := csv.NewReader(bytes.NewReader(b))
	cr.FieldsPerRecord = -1
	if _, err := cr.Read(); err != nil { // the header
		return nil, false
	}
	var out []rejectRow
	for {
		rec, err := cr.Read()
		if err != nil {
			return out, false
		}
		if len(out) == n {
			return out, true
		}
		get := func(i int) string {
			if i < len(rec) {
				return rec[i]
			}
			return ""
		}
		// importer.RejectsHeader: line, old_code, status, url, reason, domain.
		out = append(out, rejectRow{Line: get(0), Code: get(1), Status: get(2), URL: get(3), Reason: get(4)})
	}
}

// jobOutput downloads a finished job's mapping or rejects file: the
// importer's CSV, each cell guarded against being read as a formula by a
// spreadsheet (csvSafe), as the stats CSV is.
func (s *Server) jobOutput(which importjobs.Output) handler {
	return func(w http.ResponseWriter, r *http.Request, sess Session) {
		j, ok := s.getJob(w, r, sess)
		if !ok {
			return
		}
		b, err := s.cfg.Imports.Output(r.Context(), sess.TenantID, j.ID, which)
		if errors.Is(err, link.ErrNotFound) {
			s.errorPage(w, r, http.StatusNotFound, "This import has no such file (yet): it is written when the import has finished.")
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out, err := guardCSV(b)
		if err != nil {
			s.fail(w, r, fmt.Errorf("import %s file: %w", which, err))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/csv; charset=utf-8")
		// The name is ours: a prefix of the job's UUID, nothing to quote.
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="import-%s-%s.csv"`, j.ID[:8], which))
		h.Set("Content-Length", strconv.Itoa(len(out)))
		_, _ = w.Write(out)
	}
}

// guardCSV rewrites a CSV file with every cell but the header's guarded
// by csvSafe.
func guardCSV(b []byte) ([]byte, error) {
	cr := csv.NewReader(bytes.NewReader(b))
	cr.FieldsPerRecord = -1
	var out bytes.Buffer
	cw := csv.NewWriter(&out)
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !first {
			for i, c := range rec {
				rec[i] = csvSafe(c)
			}
		}
		if err := cw.Write(rec); err != nil {
			return nil, err
		}
	}
	cw.Flush()
	return out.Bytes(), cw.Error()
}
