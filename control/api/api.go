// Package api is control's HTTP interface for creators.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// MaxBodyBytes bounds a create request body; a URL is at most 4 KB.
const MaxBodyBytes = 64 << 10

// Routes lists the first path segments control serves, so custom codes can
// never shadow them.
var Routes = []string{"api", "healthz", "livez", "readyz", "metrics"}

// Authenticator resolves an API key to its tenant.
type Authenticator interface {
	TenantByKey(ctx context.Context, key string) (int64, error)
}

// Links is the write path the API drives.
type Links interface {
	Create(ctx context.Context, tenantID int64, req links.CreateRequest) (*link.Link, error)
	Get(ctx context.Context, tenantID int64, code string) (*link.Link, error)
}

// Config tunes the server.
type Config struct {
	// PublicURL is the edge's base URL that short links start with.
	PublicURL string
	// Ready reports whether control can take creates; nil means always.
	Ready func(ctx context.Context) error
	Log   *slog.Logger
}

// Server serves the control API. Build it with New; it is an http.Handler.
type Server struct {
	auth   Authenticator
	links  Links
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	public string
}

// New returns the API handler.
func New(auth Authenticator, l Links, cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{auth: auth, links: l, cfg: cfg, log: cfg.Log, mux: http.NewServeMux(), public: strings.TrimRight(cfg.PublicURL, "/")}
	s.mux.HandleFunc("POST /api/v1/links", s.authed(s.createLink))
	s.mux.HandleFunc("GET /api/v1/links/{code}", s.authed(s.getLink))
	s.mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "no such endpoint")
	})
	return s
}

type ctxKey int

const (
	keyTenant ctxKey = iota
	keyRequestID
)

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(keyRequestID).(string)
	return id
}

// ServeHTTP tags every request with an id that problem bodies and logs share.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	w.Header().Set("X-Request-Id", id)
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyRequestID, id)))
}

func (s *Server) authed(h func(http.ResponseWriter, *http.Request, int64)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || key == "" {
			s.writeError(w, r, link.ErrUnauthorized)
			return
		}
		tenant, err := s.auth.TenantByKey(r.Context(), strings.TrimSpace(key))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r, tenant)
	}
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			writeProblem(w, r, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	_, _ = io.WriteString(w, "ok\n")
}

// createBody is the JSON a creator posts.
type createBody struct {
	URL          *string `json:"url"`
	Code         string  `json:"code"`
	ExpiresAt    *string `json:"expires_at"`
	RedirectType int     `json:"redirect_type"`
	Namespace    string  `json:"namespace"`
}

// linkBody is the JSON a link is answered with.
type linkBody struct {
	Code         string  `json:"code"`
	ShortURL     string  `json:"short_url"`
	URL          string  `json:"url"`
	URLOriginal  string  `json:"url_original"`
	RedirectType int     `json:"redirect_type"`
	Status       string  `json:"status"`
	Namespace    string  `json:"namespace"`
	ExpiresAt    *string `json:"expires_at"`
	Version      uint64  `json:"version"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    string  `json:"updated_at"`
}

func (s *Server) body(l *link.Link) linkBody {
	b := linkBody{
		Code: l.Code, ShortURL: s.public + "/" + l.Code, URL: l.URL, URLOriginal: l.URLOriginal,
		RedirectType: int(l.RedirectType), Status: string(l.Status), Namespace: l.Namespace,
		Version: l.Version, CreatedAt: l.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: l.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if !l.ExpiresAt.IsZero() {
		e := l.ExpiresAt.UTC().Format(time.RFC3339Nano)
		b.ExpiresAt = &e
	}
	return b
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in createBody
	if err := decodeJSON(w, r, &in); err != nil {
		writeProblem(w, r, statusOf(err), err.Error())
		return
	}
	if in.URL == nil {
		writeProblem(w, r, http.StatusBadRequest, "url is required")
		return
	}
	req := links.CreateRequest{URL: *in.URL, Code: in.Code, RedirectType: link.RedirectType(in.RedirectType), Namespace: in.Namespace}
	if in.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *in.ExpiresAt)
		if err != nil {
			writeProblem(w, r, http.StatusBadRequest, "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
			return
		}
		req.ExpiresAt = t
	}
	l, err := s.links.Create(r.Context(), tenant, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/links/"+l.Code)
	writeJSON(w, http.StatusCreated, s.body(l))
}

func (s *Server) getLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	l, err := s.links.Get(r.Context(), tenant, r.PathValue("code"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.body(l))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func statusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return http.StatusBadRequest
}

// decodeJSON reads exactly one JSON object with only known fields from a
// body of at most MaxBodyBytes.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	if ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &statusError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", MaxBodyBytes)}
		}
		if errors.Is(err, io.EOF) {
			return &statusError{http.StatusBadRequest, "body is empty; send a JSON object"}
		}
		return &statusError{http.StatusBadRequest, "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &statusError{http.StatusBadRequest, "malformed JSON: data after the object"}
	}
	return nil
}
