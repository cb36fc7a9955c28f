package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/shared/link"
)

// Bulk upload: an export (CSV or JSON, of Bitly, YOURLS, Shlink, or a CSV
// with YOURLS's columns) is posted as a multipart form, stored as an
// import job (control/importjobs) and imported in the background for the
// session's tenant. The job's page shows its progress (htmx polls it; a
// browser without JavaScript refreshes it), then its counts and the
// mapping and rejects files.

// Imports stores and reads the tenant's import jobs (importjobs.Queue).
type Imports interface {
	// Create queues n, unless its tenant already has maxActive jobs
	// queued or running (importjobs.ErrTooMany).
	Create(ctx context.Context, n importjobs.NewJob, maxActive int) (importjobs.Job, error)
	// Job and Output read one of tenant's jobs: link.ErrNotFound for
	// another tenant's or an unknown id.
	Job(ctx context.Context, tenant int64, id string) (importjobs.Job, error)
	Jobs(ctx context.Context, tenant int64, limit int) ([]importjobs.Job, error)
	Output(ctx context.Context, tenant int64, id string, which importjobs.Output) ([]byte, error)
}

// Upload bounds. DefaultMaxUpload is the largest file the form takes
// unless Config.MaxUploadBytes says otherwise; larger exports go through
// the CLI (control import), which streams them.
const (
	DefaultMaxUpload   = 4 << 20
	defaultMaxActive   = 3
	maxUploadParts     = 16
	maxDefaultDomains  = 10
	recentImports      = 20
	rejectSample       = 20
	maxUploadFileName  = 120
	uploadOverheadByte = 64 << 10 // multipart boundaries and the other fields
)

// upload is the file part of an upload form, read before the session's
// handler runs (it needs the fields, the CSRF token among them).
type upload struct {
	name    string
	data    []byte
	present bool // a file part with a name or content was sent
	tooBig  bool
}

type uploadKey struct{}

// authedUpload is authed for the upload form, a multipart post: it reads
// the form's fields and file (at most MaxUploadBytes) only for a browser
// with a live session, then lets authed check the session and the CSRF
// token as for any form. A file over the bound is noted, not an error
// here: the handler answers 413 with the rest of the form as typed (the
// file field is the form's last, so nothing typed is lost).
func (s *Server) authedUpload(h handler) http.HandlerFunc {
	inner := s.authed(h)
	return func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := s.session(r); !ok {
			inner(w, r) // to sign-in, nothing read
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes+uploadOverheadByte)
		fields, up, err := s.readUpload(r)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				s.errorPage(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The upload is larger than %s. Split the file, or import it with the CLI (control import), which has no such bound.", sizeText(s.cfg.MaxUploadBytes)))
				return
			}
			s.errorPage(w, r, http.StatusBadRequest, "The upload could not be read: "+err.Error()+".")
			return
		}
		r.PostForm = fields
		r.Form = nil
		inner(w, r.WithContext(context.WithValue(r.Context(), uploadKey{}, up)))
	}
}

// readUpload reads a multipart form: its fields (MaxFormBytes together)
// and its one file, of which it keeps at most MaxUploadBytes.
func (s *Server) readUpload(r *http.Request) (map[string][]string, *upload, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, errors.New("it is not a file upload form (multipart/form-data)")
	}
	fields := map[string][]string{}
	up := &upload{}
	fieldBytes := 0
	for parts := 0; ; parts++ {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return fields, up, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if parts == maxUploadParts {
			return nil, nil, errors.New("it has more fields than the form")
		}
		name := p.FormName()
		if name == "file" && !up.present {
			var buf bytes.Buffer
			n, err := buf.ReadFrom(io.LimitReader(p, s.cfg.MaxUploadBytes+1))
			if err != nil {
				return nil, nil, err
			}
			up.name, up.present = cleanFileName(p.FileName()), p.FileName() != "" || n > 0
			if n > s.cfg.MaxUploadBytes {
				// The rest of the body is not read: the file field is
				// the form's last.
				up.tooBig = true
				return fields, up, nil
			}
			up.data = buf.Bytes()
			continue
		}
		var buf bytes.Buffer
		n, err := buf.ReadFrom(io.LimitReader(p, int64(MaxFormBytes-fieldBytes+1)))
		if err != nil {
			return nil, nil, err
		}
		if fieldBytes += int(n); fieldBytes > MaxFormBytes {
			return nil, nil, &http.MaxBytesError{Limit: MaxFormBytes}
		}
		if name != "" && name != "file" {
			fields[name] = append(fields[name], buf.String())
		}
	}
}

// cleanFileName is an uploaded file's name as pages show it: its base
// name, without control characters, at most maxUploadFileName bytes.
func cleanFileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, "\uFFFD"))
	if len(name) > maxUploadFileName {
		cut := maxUploadFileName
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "…"
	}
	if strings.TrimSpace(name) == "" {
		return "upload"
	}
	return name
}

// bulkForm is the upload form as typed, so a refused post shows it back
// (all but the file, which a browser cannot be given again).
type bulkForm struct {
	Format, Domain, Redirect, DefaultDomains string
}

type bulkData struct {
	Form    bulkForm
	Domains []domainChoice
	MaxSize string
	Jobs    []jobView
	Problem string
	CSRF    string
}

func (s *Server) bulkPage(w http.ResponseWriter, r *http.Request, sess Session) {
	s.renderBulk(w, r, sess, http.StatusOK, bulkForm{Format: string(importer.Auto), Redirect: "302"}, "")
}

func (s *Server) renderBulk(w http.ResponseWriter, r *http.Request, sess Session, status int, f bulkForm, problem string) {
	choices, _, err := s.domainChoices(r, sess)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	jobs, err := s.cfg.Imports.Jobs(r.Context(), sess.TenantID, recentImports)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data := bulkData{Form: f, Domains: choices, MaxSize: sizeText(s.cfg.MaxUploadBytes), Problem: problem, CSRF: sess.CSRF}
	for _, j := range jobs {
		data.Jobs = append(data.Jobs, s.jobView(j))
	}
	s.render(w, r, status, "bulk", page{Title: "Bulk upload", Session: &sess, Data: data})
}

// createImport queues the uploaded file as a job of the session's tenant
// (never one the form names) and sends the browser to its page. A refused
// upload shows the form again as typed, with the reason.
func (s *Server) createImport(w http.ResponseWriter, r *http.Request, sess Session) {
	up, _ := r.Context().Value(uploadKey{}).(*upload)
	v := r.PostForm.Get
	f := bulkForm{Format: v("format"), Domain: strings.TrimSpace(v("domain")), Redirect: v("redirect"), DefaultDomains: v("default_domains")}
	refuse := func(status int, msg string) { s.renderBulk(w, r, sess, status, f, msg) }
	switch {
	case up == nil || !up.present:
		refuse(http.StatusBadRequest, "Choose a file to upload.")
		return
	case up.tooBig:
		refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("The file is larger than %s: nothing was imported. Split it, or import it with the CLI (control import), which has no such bound. Choose the file again.", sizeText(s.cfg.MaxUploadBytes)))
		return
	case len(bytes.TrimSpace(up.data)) == 0:
		refuse(http.StatusBadRequest, "The file is empty: there is nothing to import.")
		return
	}
	o, msg := s.importOptions(r, sess, f)
	if msg != "" {
		refuse(http.StatusBadRequest, msg+" Choose the file again.")
		return
	}
	// The header is read now, so a file that is no export is refused
	// on the form rather than failing in the background.
	if _, err := importer.NewReader(bytes.NewReader(up.data), o.Format); err != nil {
		refuse(http.StatusBadRequest, "This file cannot be imported: "+importjobs.ReaderMessage(err)+". Choose the file again.")
		return
	}
	j, err := s.cfg.Imports.Create(r.Context(), importjobs.NewJob{TenantID: sess.TenantID, KeyID: sess.KeyID, FileName: up.name, File: up.data, Options: o},
		s.cfg.MaxActiveImports)
	if errors.Is(err, importjobs.ErrTooMany) {
		w.Header().Set("Retry-After", "30")
		refuse(http.StatusTooManyRequests, fmt.Sprintf("This tenant has %d imports waiting or running: upload this one when one of them has finished. Choose the file again.", s.cfg.MaxActiveImports))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("console import queued", "request_id", requestID(r), "tenant", sess.TenantID, "key_id", sess.KeyID, "import_job", j.ID, "bytes", j.FileSize)
	http.Redirect(w, r, jobHref(j.ID), http.StatusSeeOther)
}

// importOptions reads the form's options; msg says what is wrong.
func (s *Server) importOptions(r *http.Request, sess Session, f bulkForm) (importjobs.Options, string) {
	var o importjobs.Options
	format, err := importer.ParseFormat(f.Format)
	if err != nil || format == importer.CSV {
		// A CSV of one's own is told from its header: the jobs table's
		// format check (schema 016) knows only the exports' names.
		return o, "The format must be auto, Bitly, YOURLS or Shlink (a CSV of your own is told from its header: choose Tell from the file)."
	}
	o.Format = format
	rt, err := parseRedirect(f.Redirect)
	if err != nil {
		return o, message(err)
	}
	o.RedirectType = int(rt)
	if f.Domain != "" {
		choices, _, err := s.domainChoices(r, sess)
		if err != nil {
			return o, "The tenant's domains could not be read; try again."
		}
		host, err := link.CanonicalHost(f.Domain)
		ok := false
		for _, c := range choices {
			ok = ok || (err == nil && c.Value == host)
		}
		if !ok {
			return o, "That domain is not one of this tenant's: choose one from the list."
		}
		o.Domain = host
	}
	for _, d := range strings.FieldsFunc(f.DefaultDomains, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		host, err := link.CanonicalHost(d)
		if err != nil {
			return o, fmt.Sprintf("The export's own domain %.80q is not a host name.", d)
		}
		o.DefaultDomains = append(o.DefaultDomains, host)
	}
	if len(o.DefaultDomains) > maxDefaultDomains {
		return o, fmt.Sprintf("Name at most %d of the export's own domains.", maxDefaultDomains)
	}
	return o, ""
}

func jobHref(id string) string { return Prefix + "imports/" + id }

// mib is n bytes in MiB, as the form states its bound.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

// count is a number as pages show it, with thousands separated.
type count int64

func (c count) String() string {
	s := strconv.FormatInt(int64(c), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// durationText is d as a page says it, to the second.
func durationText(d time.Duration) string {
	if d < time.Second {
		return "under a second"
	}
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}
