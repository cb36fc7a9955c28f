// Package console is the creator console: server-rendered pages
// (html/template, embedded with their static files) that control serves
// under /console/, never an edge. Every page works without JavaScript;
// the vendored htmx only spares a reload where a form would post.
//
// A creator signs in with an API key, exchanged for a session cookie; the
// session is server side (Sessions), bound to the key, so revoking the key
// ends it on its next request. Every form carries the session's CSRF token.
// Pages run no inline script and every stored value is escaped by
// html/template; see docs/console.md for the security model.
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/authfail"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Prefix is the path the console is served under; Routes are the first path
// segments it takes, for the reserved-code list.
const Prefix = "/console/"

// Routes are the first path segments the console serves.
var Routes = []string{"console"}

// Session lifetimes: a session ends after IdleTimeout without a request or
// MaxLifetime after sign-in, whichever comes first.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxLifetime = 8 * time.Hour
)

// ErrNoSession is a session token that names no live session: unknown,
// expired, signed out, or its key revoked.
var ErrNoSession = errors.New("no such session")

// Role is what a session may do. Every session today is opened with an
// API key and is its tenant's owner; user accounts would bring others.
type Role string

// RoleOwner may do everything the tenant's API key may.
const RoleOwner Role = "owner"

// Session is a signed-in browser.
type Session struct {
	TenantID  int64
	KeyID     int64 // the API key it was opened with
	Role      Role
	CSRF      string // the token every form of the session posts back
	ExpiresAt time.Time
	LastSeen  time.Time
}

// Sessions is the console's server-side session store. Tokens are random
// secrets the store makes; only a digest of each is kept.
type Sessions interface {
	// OpenSession resolves key, an API key that is not revoked, and
	// opens a session of its tenant that ends at expires at the latest.
	// It returns the session and its token. A key that is unknown or
	// revoked is link.ErrUnauthorized.
	OpenSession(ctx context.Context, key string, now, expires time.Time) (Session, string, error)
	// Session is token's session at now, read with its key: ErrNoSession
	// when there is none, it expired (at its expiry, or idle longer than
	// idle) or its key was revoked.
	Session(ctx context.Context, token string, now time.Time, idle time.Duration) (Session, error)
	// TouchSession records a request of the session at now.
	TouchSession(ctx context.Context, token string, now time.Time) error
	// CloseSession ends the session of token; an unknown token is not an
	// error.
	CloseSession(ctx context.Context, token string) error
	// PurgeSessions deletes sessions that have ended and says how many.
	PurgeSessions(ctx context.Context, now time.Time, idle time.Duration) (int64, error)
}

// Key is one of a tenant's API keys as the console lists it: never its
// secret, which is shown once when it is made.
type Key struct {
	ID        int64
	Prefix    string
	CreatedAt time.Time
	RevokedAt time.Time // zero while it is live
}

// Keys manages a tenant's API keys.
type Keys interface {
	Keys(ctx context.Context, tenant int64) ([]Key, error)
	// CreateKey issues a key and returns its secret.
	CreateKey(ctx context.Context, tenant int64) (string, error)
	// RevokeKey revokes one of the tenant's keys, with its sessions;
	// another tenant's or an unknown id is link.ErrNotFound.
	RevokeKey(ctx context.Context, tenant, id int64, now time.Time) error
}

// Links is the write and read path the console drives (links.Service).
type Links interface {
	Create(ctx context.Context, tenantID int64, req links.CreateRequest) (links.Created, error)
	Get(ctx context.Context, tenantID int64, domain, code string) (*links.Link, error)
	List(ctx context.Context, tenantID int64, q links.ListRequest) ([]*links.Link, uint64, error)
	ListPage(ctx context.Context, tenantID int64, q links.ListRequest) (links.Page, error)
	Update(ctx context.Context, tenantID int64, domain, code string, u links.Update) (*links.Link, error)
	Delete(ctx context.Context, tenantID int64, domain, code string) (*links.Link, error)
	TagLinks(ctx context.Context, tenantID int64, c links.TagChange) ([]*links.Link, error)
}

// Domains lists the domains a tenant's links may be on
// (control/domains.Service): the tenant's own, then the platform's.
type Domains interface {
	List(ctx context.Context, tenantID int64) ([]link.Domain, error)
}

// Config tunes the console; zero values take the defaults.
type Config struct {
	// PublicURL is the edge's base URL that short links start with: a
	// link on the platform's domain is PublicURL/code, one on another
	// domain is that host with PublicURL's scheme and port.
	PublicURL string
	// Domains, if set, offers the tenant's domains on the create form
	// and the list's filter. Nil offers the platform's domain alone.
	Domains Domains
	// Secure marks the session cookie Secure (and names it with the
	// __Host- prefix): set it when the console is reached over TLS. Its
	// default is whether PublicURL is https.
	Secure *bool
	// IdleTimeout and MaxLifetime bound a session (defaults above).
	IdleTimeout, MaxLifetime time.Duration
	// SignInFailuresPerSecond and SignInFailureBurst bound each client
	// address's failed sign-ins (default 1/s, burst 10): past them the
	// sign-in form answers 429 before the key is looked up. A negative
	// rate turns the bound off.
	SignInFailuresPerSecond float64
	SignInFailureBurst      int
	// QR, if set, draws QR codes: the API's own renderer, reached in
	// process (see QRAuth). Nil hides the downloads.
	QR http.Handler
	// Stats, if set, reads the click rollups for the stats pages: the
	// store the API's stats endpoints read. Nil answers them 404.
	Stats StatsReader
	// HourRetention is how long the click roller keeps hourly rollups
	// (zero: statsquery.DefaultHourRetention), as the API's Config.
	HourRetention time.Duration
	// Imports, if set, runs bulk uploads (importjobs.Queue). Nil answers
	// the bulk pages 404.
	Imports Imports
	// Webhooks, if set, serves the webhook pages (webhooks.go). Nil answers
	// them 404.
	Webhooks Webhooks
	// MaxUploadBytes bounds an uploaded file (default DefaultMaxUpload);
	// MaxActiveImports the imports a tenant may have waiting or running
	// (default 3).
	MaxUploadBytes   int64
	MaxActiveImports int
	Now              func() time.Time
	Log              *slog.Logger
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Server serves the console. Build it with New; it is an http.Handler and
// safe for concurrent use.
type Server struct {
	sessions Sessions
	keys     Keys
	links    Links
	cfg      Config
	secure   bool
	short    links.ShortURLs
	log      *slog.Logger
	pages    *pages
	fails    *authfail.Budget
	mux      *http.ServeMux
}

// New returns the console handler. It serves paths under Prefix.
func New(sessions Sessions, keys Keys, l Links, cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.SignInFailuresPerSecond == 0 {
		cfg.SignInFailuresPerSecond = 1
	}
	if cfg.SignInFailureBurst <= 0 {
		cfg.SignInFailureBurst = 10
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUpload
	}
	if cfg.MaxActiveImports <= 0 {
		cfg.MaxActiveImports = defaultMaxActive
	}
	secure := strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://")
	if cfg.Secure != nil {
		secure = *cfg.Secure
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	short, err := links.NewShortURLs(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	s := &Server{sessions: sessions, keys: keys, links: l, cfg: cfg, secure: secure,
		short: short, log: cfg.Log, pages: p,
		fails: authfail.New(cfg.SignInFailuresPerSecond, cfg.SignInFailureBurst, 100_000, cfg.Now),
		mux:   http.NewServeMux()}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	static, _ := fs.Sub(staticFiles, "static")
	files := http.StripPrefix(Prefix+"static/", http.FileServerFS(static))
	s.mux.Handle("GET "+Prefix+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Names carry their version (htmx-2.0.11.min.js); ours change
		// with a release, so an hour is as long as a stale one lives.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	}))
	s.mux.HandleFunc("GET "+Prefix+"{$}", s.home)
	s.mux.HandleFunc("GET "+Prefix+"sign-in", s.signInPage)
	s.mux.HandleFunc("POST "+Prefix+"sign-in", s.signIn)
	s.mux.HandleFunc("POST "+Prefix+"sign-out", s.authed(s.signOut))
	s.mux.HandleFunc("GET "+Prefix+"links", s.authed(s.listLinks))
	s.mux.HandleFunc("POST "+Prefix+"links", s.authed(s.createLink))
	s.mux.HandleFunc("GET "+Prefix+"links/new", s.authed(s.newLink))
	s.mux.HandleFunc("GET "+Prefix+"links/{code}", s.authed(s.linkPage))
	s.mux.HandleFunc("POST "+Prefix+"links/{code}", s.authed(s.editLink))
	s.mux.HandleFunc("POST "+Prefix+"links/{code}/status", s.authed(s.setStatus))
	s.mux.HandleFunc("GET "+Prefix+"links/{code}/delete", s.authed(s.confirmDelete))
	s.mux.HandleFunc("POST "+Prefix+"links/{code}/delete", s.authed(s.deleteLink))
	s.mux.HandleFunc("GET "+Prefix+"links/{code}/qr", s.authed(s.linkQR))
	s.mux.HandleFunc("GET "+Prefix+"links/{code}/stats", s.authed(s.linkStats))
	s.mux.HandleFunc("GET "+Prefix+"links/{code}/stats.csv", s.authed(s.linkStatsCSV))
	s.mux.HandleFunc("GET "+Prefix+"stats", s.authed(s.tenantStats))
	s.mux.HandleFunc("GET "+Prefix+"stats.csv", s.authed(s.tenantStatsCSV))
	s.mux.HandleFunc("GET "+Prefix+"stats/links.csv", s.authed(s.tenantExport))
	s.mux.HandleFunc("GET "+Prefix+"keys", s.authed(s.listKeys))
	s.mux.HandleFunc("POST "+Prefix+"keys", s.authed(s.createKey))
	s.mux.HandleFunc("POST "+Prefix+"keys/{id}/revoke", s.authed(s.revokeKey))
	if s.cfg.Imports != nil {
		s.mux.HandleFunc("GET "+Prefix+"imports", s.authed(s.bulkPage))
		s.mux.HandleFunc("POST "+Prefix+"imports", s.authedUpload(s.createImport))
		s.mux.HandleFunc("GET "+Prefix+"imports/{id}", s.authed(s.jobPage))
		s.mux.HandleFunc("GET "+Prefix+"imports/{id}/mapping.csv", s.authed(s.jobOutput(importjobs.Mapping)))
		s.mux.HandleFunc("GET "+Prefix+"imports/{id}/rejects.csv", s.authed(s.jobOutput(importjobs.Rejects)))
	}
	s.webhookRoutes()
	s.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such page in the console.")
	})
}

type ctxKey int

const keyRequestID ctxKey = iota

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(keyRequestID).(string)
	return id
}

// contentSecurityPolicy allows scripts, styles and images from the console
// itself and nothing else: no inline script or style, no framing, forms
// posted only back here.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// ServeHTTP sets the security headers of every answer, tags the request
// with an id that error pages and logs share, and turns a panic into a 500
// page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w = &timedWriter{ResponseWriter: w, start: time.Now()}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	h := w.Header()
	h.Set("X-Request-Id", id)
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	h.Set("Cache-Control", "no-store")
	r = r.WithContext(context.WithValue(r.Context(), keyRequestID, id))
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			// The route pattern, never the path or query: they hold codes
			// and search terms.
			s.log.Error("console handler panicked", "request_id", id, "method", r.Method, "route", r.Pattern, "panic", v)
			s.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// home sends a signed-in browser to its links and any other to sign-in.
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.session(r); ok {
		http.Redirect(w, r, Prefix+"links", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"sign-in", http.StatusSeeOther)
}
