// Package api is control's HTTP interface for creators.
package api

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelink/edgelink/control/authfail"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Body limits. A target URL is at most 4 KB, so a create fits in 64 KiB and
// a full batch in 5 MiB.
const (
	MaxBodyBytes      = 64 << 10
	MaxBatchBodyBytes = 5 << 20
)

// Authenticator resolves an API key to its tenant and the tenant's own
// request limit (perSecond and burst, each zero where the tenant has none:
// Config's default applies). It is asked for every request, after the
// request arrived, so a revoked key fails on its next one and a changed
// limit is in force from then on; requests with the same key that arrive
// while it is being asked about that key share its next answer (see
// sharedAuth). Unknown and revoked keys are link.ErrUnauthorized.
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (tenant int64, perSecond float64, burst int, err error)
}

// Links is the write path the API drives.
type Links interface {
	Create(ctx context.Context, tenantID int64, req links.CreateRequest) (links.Created, error)
	CreateBatch(ctx context.Context, tenantID int64, key string, reqs []links.CreateRequest) (links.BatchResult, error)
	Get(ctx context.Context, tenantID int64, domain, code string) (*links.Link, error)
	List(ctx context.Context, tenantID int64, q links.ListRequest) ([]*links.Link, uint64, error)
	Update(ctx context.Context, tenantID int64, domain, code string, u links.Update) (*links.Link, error)
	Delete(ctx context.Context, tenantID int64, domain, code string) (*links.Link, error)
	TagLinks(ctx context.Context, tenantID int64, c links.TagChange) ([]*links.Link, error)
}

// Config tunes the server; zero values take the defaults.
type Config struct {
	// PublicURL is the edge's base URL that short links start with.
	PublicURL string
	// Startup backs /startupz: whether control has started (its first
	// segment loaded, the authority database reachable); nil means started.
	Startup func(ctx context.Context) error
	// Ready backs /readyz: whether control can take creates (enough
	// allocation runway); nil means always. Draining is checked first.
	Ready func(ctx context.Context) error
	// Live backs /livez: whether the process makes progress. It must not
	// depend on the database; nil means live.
	Live func() error
	// Metrics serves /metrics (nil answers 404); Registerer, if set,
	// receives the API's request metrics.
	Metrics    http.Handler
	Registerer prometheus.Registerer
	// RatePerSecond and Burst bound each tenant's requests (a token bucket
	// per tenant in this instance's memory; default 100/s, burst 200)
	// unless the tenant has a limit of its own (Authenticator), which
	// replaces either. A negative rate leaves tenants without a rate of
	// their own unlimited.
	RatePerSecond float64
	Burst         int
	// AuthFailuresPerSecond and AuthFailureBurst bound each client's
	// failed authentications (a token bucket per socket peer address, an
	// IPv6 one by its /64; default 1/s, burst 20): past them the client
	// gets 429 before its key is looked up, a good key included, until a
	// failure is allowed again. A negative rate turns the bound off.
	// AuthFailureClients caps the clients tracked (default 100,000).
	AuthFailuresPerSecond float64
	AuthFailureBurst      int
	AuthFailureClients    int
	Now                   func() time.Time
	Log                   *slog.Logger
	// Stats backs the click statistics endpoints (stats.go).
	Stats StatsReader
	// HourRetention is how long the click roller keeps hourly rollups
	// (its --click-hours-retention; zero: statsquery.DefaultHourRetention):
	// hourly series are offered within it.
	HourRetention time.Duration
	// Domains backs /api/v1/domains (domains.go); nil answers those
	// routes 404.
	Domains Domains
	// Webhooks backs /api/v1/webhooks (webhooks.go); nil answers those
	// routes 404.
	Webhooks Webhooks
}

// Server serves the control API. Build it with New; it is an http.Handler
// and safe for concurrent use.
type Server struct {
	auth   Authenticator
	links  Links
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	public string
	short  shortURLs
	limit  *limiter
	fails  *authfail.Budget
	limMet *limitMetrics
	drain  drain
	met    *requestMetrics
	bufs   buffers
}

// route is one entry of the route table: the mux, the 405 answers, the
// reserved codes (Routes) and the OpenAPI check all derive from it.
type route struct {
	method, path string
	handler      func(s *Server) http.HandlerFunc
}

var routeTable = []route{
	{"POST", "/api/v1/links", func(s *Server) http.HandlerFunc { return s.authed(s.createLink) }},
	{"GET", "/api/v1/links", func(s *Server) http.HandlerFunc { return s.authed(s.listLinks) }},
	{"POST", "/api/v1/links/batch", func(s *Server) http.HandlerFunc { return s.authed(s.createBatch) }},
	{"POST", "/api/v1/links/tags", func(s *Server) http.HandlerFunc { return s.authed(s.tagLinks) }},
	{"GET", "/api/v1/links/{code}", func(s *Server) http.HandlerFunc { return s.authed(s.getLink) }},
	{"PATCH", "/api/v1/links/{code}", func(s *Server) http.HandlerFunc { return s.authed(s.patchLink) }},
	{"DELETE", "/api/v1/links/{code}", func(s *Server) http.HandlerFunc { return s.authed(s.deleteLink) }},
	{"GET", "/api/v1/links/{code}/stats", func(s *Server) http.HandlerFunc { return s.authed(s.linkStats) }},
	{"GET", "/api/v1/links/{code}/stats/series", func(s *Server) http.HandlerFunc { return s.authed(s.linkSeries) }},
	{"GET", "/api/v1/links/{code}/stats/breakdown", func(s *Server) http.HandlerFunc { return s.authed(s.linkBreakdown) }},
	{"GET", "/api/v1/links/{code}/qr", func(s *Server) http.HandlerFunc { return s.authed(s.linkQR) }},
	{"GET", "/api/v1/stats", func(s *Server) http.HandlerFunc { return s.authed(s.tenantStats) }},
	{"GET", "/api/v1/stats/series", func(s *Server) http.HandlerFunc { return s.authed(s.tenantSeries) }},
	{"GET", "/api/v1/stats/breakdown", func(s *Server) http.HandlerFunc { return s.authed(s.tenantBreakdown) }},
	{"GET", "/api/v1/stats/overview", func(s *Server) http.HandlerFunc { return s.authed(s.tenantOverview) }},
	{"GET", "/api/v1/stats/export", func(s *Server) http.HandlerFunc { return s.authed(s.tenantExport) }},
	{"GET", "/api/v1/domains", func(s *Server) http.HandlerFunc { return s.authed(s.listDomains) }},
	{"POST", "/api/v1/domains", func(s *Server) http.HandlerFunc { return s.authed(s.createDomain) }},
	{"GET", "/api/v1/domains/{host}", func(s *Server) http.HandlerFunc { return s.authed(s.getDomain) }},
	{"PATCH", "/api/v1/domains/{host}", func(s *Server) http.HandlerFunc { return s.authed(s.patchDomain) }},
	{"DELETE", "/api/v1/domains/{host}", func(s *Server) http.HandlerFunc { return s.authed(s.removeDomain) }},
	{"GET", "/api/v1/webhooks", func(s *Server) http.HandlerFunc { return s.authed(s.listWebhooks) }},
	{"POST", "/api/v1/webhooks", func(s *Server) http.HandlerFunc { return s.authed(s.createWebhook) }},
	{"GET", "/api/v1/webhooks/{id}", func(s *Server) http.HandlerFunc { return s.authed(s.getWebhook) }},
	{"PATCH", "/api/v1/webhooks/{id}", func(s *Server) http.HandlerFunc { return s.authed(s.patchWebhook) }},
	{"DELETE", "/api/v1/webhooks/{id}", func(s *Server) http.HandlerFunc { return s.authed(s.deleteWebhook) }},
	{"POST", "/api/v1/webhooks/{id}/rotate-secret", func(s *Server) http.HandlerFunc { return s.authed(s.rotateWebhookSecret) }},
	{"POST", "/api/v1/webhooks/{id}/enable", func(s *Server) http.HandlerFunc { return s.authed(s.enableWebhook) }},
	{"POST", "/api/v1/webhooks/{id}/disable", func(s *Server) http.HandlerFunc { return s.authed(s.disableWebhook) }},
	{"POST", "/api/v1/webhooks/{id}/test", func(s *Server) http.HandlerFunc { return s.authed(s.testWebhook) }},
	{"GET", "/api/v1/webhooks/{id}/deliveries", func(s *Server) http.HandlerFunc { return s.authed(s.listWebhookDeliveries) }},
	{"GET", "/api/v1/openapi.json", func(s *Server) http.HandlerFunc { return s.openAPI }},
	// Probes and metrics sit at the top level, where orchestrators look
	// for them; the edge serves the same paths (link.EdgeRoutes).
	{"GET", "/livez", func(s *Server) http.HandlerFunc { return s.livez }},
	{"GET", "/readyz", func(s *Server) http.HandlerFunc { return s.readyz }},
	{"GET", "/startupz", func(s *Server) http.HandlerFunc { return s.startupz }},
	{"GET", "/metrics", func(s *Server) http.HandlerFunc { return s.metrics }},
}

// creates are the routes that allocate IDs: refused while draining, and
// waited for by Drain.
var creates = []string{"POST /api/v1/links", "POST /api/v1/links/batch"}

// Routes lists the first path segments control serves, taken from the route
// table itself, so custom codes can never shadow them.
var Routes = firstSegments(routeTable)

func firstSegments(rt []route) []string {
	var out []string
	for _, r := range rt {
		seg, _, _ := strings.Cut(strings.TrimPrefix(r.path, "/"), "/")
		if !slices.Contains(out, seg) {
			out = append(out, seg)
		}
	}
	return out
}

// New returns the API handler.
func New(auth Authenticator, l Links, cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = 100
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 200
	}
	if cfg.AuthFailuresPerSecond == 0 {
		cfg.AuthFailuresPerSecond = 1
	}
	if cfg.AuthFailureBurst <= 0 {
		cfg.AuthFailureBurst = 20
	}
	if cfg.AuthFailureClients <= 0 {
		cfg.AuthFailureClients = 100_000
	}
	s := &Server{auth: newSharedAuth(auth), links: l, cfg: cfg, log: cfg.Log, mux: http.NewServeMux(),
		public: strings.TrimRight(cfg.PublicURL, "/"), limit: newLimiter(cfg.RatePerSecond, cfg.Burst, cfg.Now),
		met: newRequestMetrics(cfg.Registerer)}
	// A public URL that does not parse still serves: its short URLs are
	// then paths, as with none.
	short, _ := links.NewShortURLs(s.public)
	s.short = shortURLs{short}
	s.fails = authfail.New(cfg.AuthFailuresPerSecond, cfg.AuthFailureBurst, cfg.AuthFailureClients, cfg.Now)
	s.limMet = newLimitMetrics(cfg.Registerer, s.fails)
	allowed := make(map[string][]string)
	var paths []string
	for _, r := range routeTable {
		op := r.method + " " + r.path
		h := r.handler(s)
		if slices.Contains(creates, op) {
			h = s.creating(h)
		}
		s.mux.HandleFunc(op, s.met.instrument(op, h))
		if allowed[r.path] == nil {
			paths = append(paths, r.path)
		}
		allowed[r.path] = append(allowed[r.path], r.method)
	}
	// Every known path answers other methods with a problem, not the mux's
	// plain-text 405. A literal path that a wildcard path of the table
	// also matches is left out: the mux would find the two ambiguous.
	for _, p := range paths {
		if shadowed(p, paths) {
			continue
		}
		allow := strings.Join(allowed[p], ", ")
		if slices.Contains(allowed[p], "GET") {
			allow += ", HEAD"
		}
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed here; allowed: %s", r.Method, allow))
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "no such endpoint")
	})
	return s
}

// shadowed reports whether another path in paths, with a wildcard, matches p.
func shadowed(p string, paths []string) bool {
	ps := strings.Split(p, "/")
	for _, q := range paths {
		qs := strings.Split(q, "/")
		if q == p || !strings.Contains(q, "{") || len(qs) != len(ps) {
			continue
		}
		match := true
		for i := range qs {
			if qs[i] != ps[i] && !strings.HasPrefix(qs[i], "{") {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

type ctxKey int

const keyRequestID ctxKey = iota

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(keyRequestID).(string)
	return id
}

// ServeHTTP tags every request with an id that problem bodies and logs
// share, and turns a handler's panic into a 500 problem.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	w.Header().Set("X-Request-Id", id)
	r = r.WithContext(context.WithValue(r.Context(), keyRequestID, id))
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			// The route pattern, not the path: a path holds a link's code.
			s.log.Error("handler panicked", "request_id", id, "method", r.Method, "route", r.Pattern, "panic", v)
			writeProblem(w, r, http.StatusInternalServerError, "internal error")
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// authed authenticates the request on every call (a revoked key fails at
// once), then charges the tenant's rate limit. A client past its budget of
// failed authentications is refused first, before the database is asked.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, int64)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		client := authfail.Client(r)
		if wait, blocked := s.fails.Blocked(client); blocked {
			s.limMet.refuse("auth_failures")
			tooMany(w, r, wait, "too many failed authentications from this address; retry after the Retry-After seconds")
			return
		}
		key, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			s.fails.Fail(client)
			s.writeError(w, r, link.ErrUnauthorized)
			return
		}
		tenant, perSecond, burst, err := s.auth.Authenticate(r.Context(), key)
		if err != nil {
			if errors.Is(err, link.ErrUnauthorized) {
				s.fails.Fail(client)
			}
			s.writeError(w, r, err)
			return
		}
		if wait, ok := s.limit.allow(tenant, perSecond, burst); !ok {
			s.limMet.refuse("tenant")
			tooMany(w, r, wait, "rate limit exceeded for this tenant; retry after the Retry-After seconds")
			return
		}
		h(w, r, tenant)
	}
}

// tooMany answers 429 with Retry-After: wait in whole seconds, rounded up.
func tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, detail string) {
	w.Header().Set("Retry-After", fmt.Sprint(max(1, int64(math.Ceil(wait.Seconds())))))
	writeProblem(w, r, http.StatusTooManyRequests, detail)
}

// bearerToken is the token of an Authorization header with the Bearer
// scheme. The scheme is case-insensitive and may be followed by several
// spaces (RFC 9110 §11.1, RFC 6750 §2.1); the token is one word.
func bearerToken(h string) (string, bool) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token := strings.Trim(rest, " \t")
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI is the API's OpenAPI 3 document, as served.
func OpenAPI() []byte { return slices.Clone(openAPIDoc) }

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
