package console_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/console/pgstore"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// seqIDs hands out IDs in order, far into the code space.
type seqIDs struct{ n *atomic.Uint64 }

func (s seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	return link.IDBase(d) + 1_000_000 + s.n.Add(1), nil
}
func (seqIDs) Done(uint64, bool) {}

// clock is a time the test moves.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// syncBuf is a log sink safe for the handlers' goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// env is the console on a fresh database with one tenant, its key, and the
// stores behind it.
type env struct {
	h       http.Handler
	store   *postgres.Store
	svc     *links.Service
	domains *domains.Service
	tenant  int64
	key     string
	clock   *clock
	log     *syncBuf
}

func newEnv(t testing.TB, cfg console.Config) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	svc := links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{Reserved: append(api.Routes, console.Routes...), Now: c.now})
	tenant, key, err := st.CreateTenantWithKey(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://sho.rt"
	}
	// What control does at start: the platform's domain is named by the
	// public URL's host.
	pub, err := url.Parse(cfg.PublicURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureDefaultDomain(context.Background(), pub.Hostname()); err != nil {
		t.Fatal(err)
	}
	ds := domains.New(st, domains.Config{})
	if cfg.Domains == nil {
		cfg.Domains = ds
	}
	cfg.Now = c.now
	cfg.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Stats == nil {
		cfg.Stats = st
	}
	cfg.QR = api.New(console.QRAuth{}, svc, api.Config{PublicURL: cfg.PublicURL, RatePerSecond: -1, AuthFailuresPerSecond: -1})
	ps := pgstore.New(pool)
	h, err := console.New(ps, ps, svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{h: h, store: st, svc: svc, domains: ds, tenant: tenant, key: key, clock: c, log: logs}
}

// addDomain gives tenant a domain of its own on host, with sequential
// codes (FF1 needs a key file, which these tests have no use for).
func (e *env) addDomain(t testing.TB, tenant int64, host string) {
	t.Helper()
	if _, err := e.domains.Create(context.Background(), tenant, domains.Input{Host: host, CodeMode: link.CodesSequential}); err != nil {
		t.Fatalf("add domain %s: %v", host, err)
	}
}

// browser is a cookie jar and the address requests come from.
type browser struct {
	e       *env
	from    string
	cookies map[string]*http.Cookie
}

func (e *env) browser(from string) *browser {
	return &browser{e: e, from: from, cookies: map[string]*http.Cookie{}}
}

func (b *browser) do(method, path string, form url.Values, headers ...string) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	r.RemoteAddr = b.from + ":4711"
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.e.h.ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return w
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page w answered.
func csrf(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no CSRF field in the page (%d):\n%.2000s", w.Code, w.Body.String())
	}
	return m[1]
}

// signIn signs b in with key and returns the session's CSRF token.
func (b *browser) signIn(t testing.TB, key string) string {
	t.Helper()
	w := b.do("GET", "/console/sign-in", nil)
	w = b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf(t, w)}, "key": {key}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/links" {
		t.Fatalf("sign-in answered %d, Location %q; want 303 to /console/links\n%.1000s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	w = b.do("GET", "/console/links", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("links after sign-in: %d", w.Code)
	}
	return csrf(t, w)
}

func wantRedirect(t *testing.T, w *httptest.ResponseRecorder, prefix string) {
	t.Helper()
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), prefix) {
		t.Fatalf("answered %d, Location %q; want 303 to %s…\n%.1500s", w.Code, w.Header().Get("Location"), prefix, w.Body.String())
	}
}

var regexpSecret = regexp.MustCompile(`elk_[A-Za-z0-9_-]{43}`)

var (
	regexpRow    = regexp.MustCompile(`<tr id="row-([^"]+)">`)
	regexpNext   = regexp.MustCompile(`href="/console/links\?([^"]+)" rel="next"`)
	regexpRevoke = regexp.MustCompile(`action="/console/keys/(\d+)/revoke"`)
)
