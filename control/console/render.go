package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// pages are the parsed templates: each page is the layout with its own
// "content" block.
type pages struct {
	byName map[string]*template.Template
}

var pageNames = []string{"signin", "links", "link_new", "link", "link_delete", "keys", "stats", "error", "bulk", "bulk_job", "webhooks", "webhook", "webhook_delete"}

func parsePages() (*pages, error) {
	funcs := template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
		"minCodeLen": func() int { return link.MinCodeLen },
		"maxCodeLen": func() int { return link.MaxCodeLen },
		"rowData":    func(r row, csrf string) rowData { return rowData{Row: r, CSRF: csrf} },
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/fields.html", "templates/rules.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// page is what the layout renders around a page's content.
type page struct {
	Title   string
	Session *Session // nil before sign-in
	Notice  string
	Data    any
}

// render writes the page whole or not at all: a template failing half
// way answers the error page, not half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t := s.pages.byName[name]
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		s.log.Error("console page failed to render", "request_id", requestID(r), "page", name, "err", err)
		if name != "error" {
			s.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
		}
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// partial writes one named template of a page alone: what htmx swaps in.
func (s *Server) partial(w http.ResponseWriter, r *http.Request, name, block string, data any) {
	var buf bytes.Buffer
	if err := s.pages.byName[name].ExecuteTemplate(&buf, block, data); err != nil {
		s.log.Error("console block failed to render", "request_id", requestID(r), "page", name, "block", block, "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

type errorData struct {
	Status    int
	Message   string
	RequestID string
}

func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Data: errorData{status, msg, requestID(r)}})
}

// fail answers an error that is not the user's: unavailable is 503 (the
// authority is down or busy), anything else 500, logged with the route
// pattern only (a path holds a code).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, link.ErrUnavailable) {
		s.log.Warn("console request failed: unavailable", "request_id", requestID(r), "route", r.Pattern, "err", err)
		w.Header().Set("Retry-After", "1")
		s.errorPage(w, r, http.StatusServiceUnavailable, "The service is briefly unavailable. Try again in a moment.")
		return
	}
	s.log.Error("console request failed", "request_id", requestID(r), "method", r.Method, "route", r.Pattern, "err", err)
	s.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
}
