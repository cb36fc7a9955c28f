package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) {
	// The QR endpoint answers SVG, which the validator reads as a file.
	openapi3filter.RegisterBodyDecoder("image/svg+xml", openapi3filter.FileBodyDecoder)
	pgtest.Main(m)
}

// env is control's API on a real, fresh PostgreSQL, served over loopback
// HTTP; every response a test reads is checked against the OpenAPI document.
type env struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	svc   *links.Service
	url   string
	doc   *openapi3.T
	route routers.Router
}

// envOption changes the API's Config; st is the store the env serves.
type envOption func(c *Config, st *postgres.Store)

// newEnv is an env whose IDs come from a counter.
func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	return envWithIDs(t, seqIDs{new(atomic.Uint64)}, opts...)
}

// newEnvWithTenant is newEnv with a tenant, acme, and that tenant's key.
func newEnvWithTenant(t *testing.T) (*env, string) {
	t.Helper()
	e := newEnv(t)
	return e, e.tenant(t, "acme")
}

// platformHost is the platform domain's host in an env: its public URL's,
// as control writes it into domain 0 at start.
const platformHost = "sho.rt"

// testKeyName names the env's one FF1 code key.
const testKeyName = "k1"

// testKeys are an env's code keys: one fixed key, testKeyName (a test's
// codes are reproducible; nothing secret is at stake).
func testKeys() *ff1.Keys {
	k, err := ff1.ParseKeys(strings.NewReader(testKeyName + " " + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")) + "\n"))
	if err != nil {
		panic(err) // a constant that parses
	}
	return k
}

// withDomains serves /api/v1/domains from control/domains on the env's
// store, with the env's keys (new FF1 domains get testKeyName) and its
// target policy.
func withDomains(c *Config, st *postgres.Store) {
	c.Domains = domains.New(st, domains.Config{Keys: testKeys(), DefaultKey: testKeyName,
		Targets: links.TargetPolicy{Blocked: []string{"evil.example"}}})
}

// envWithIDs is newEnv with ids in place of the counting ID source.
func envWithIDs(t *testing.T, ids links.IDSource, opts ...envOption) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	if _, err := st.EnsureDefaultDomain(t.Context(), platformHost); err != nil {
		t.Fatal(err)
	}
	svc := links.New(st, ids, links.Config{
		BlockedDomains: []string{"evil.example"},
		Reserved:       Routes,
		Keys:           testKeys(),
	})
	cfg := Config{PublicURL: "https://" + platformHost, Ready: st.Ping, RatePerSecond: -1}
	for _, o := range opts {
		o(&cfg, st)
	}
	srv := httptest.NewServer(New(st, svc, cfg))
	t.Cleanup(srv.Close)
	doc := loadDoc(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &env{pool: pool, store: st, svc: svc, url: srv.URL, doc: doc, route: router}
}

// seqIDs hands out 1, 2, 3, … (in each domain's own range, one counter
// for all) in place of the segment allocator, which has tests of its own.
type seqIDs struct{ n *atomic.Uint64 }

func (s seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	return link.IDBase(d) + s.n.Add(1), nil
}

func (seqIDs) Done(uint64, bool) {}

func loadDoc(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

func (e *env) tenant(t *testing.T, name string) string {
	t.Helper()
	_, key, err := e.store.CreateTenantWithKey(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// resp is an answer as a test sees it.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends a request and validates the answer against the OpenAPI document:
// its status must be documented for the operation, and its body must match
// the documented schema for its content type. Problems must be
// application/problem+json.
func (e *env) do(t *testing.T, method, path, key string, body []byte, headers ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, body: b}
	if err := e.validate(req, r); err != nil {
		t.Errorf("%s %s answered %v, which the OpenAPI document does not allow: %v", method, path, r, err)
	}
	if r.status >= 400 && !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("%s %s answered %d with Content-Type %q; want application/problem+json", method, path, r.status, r.header.Get("Content-Type"))
	}
	return r
}

func (e *env) validate(req *http.Request, r resp) error {
	route, params, err := e.route.FindRoute(req)
	if err != nil {
		if r.status == http.StatusNotFound || r.status == http.StatusMethodNotAllowed {
			return nil // not an operation of the API: checked as a problem above
		}
		return fmt.Errorf("no operation for the request: %w", err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.status,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(r.body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// linkEvents is the outbox's link changes, for count: the platform's
// domain has a row of its own from the start.
const linkEvents = "outbox WHERE kind = 'link'"

func (e *env) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// parallel runs fn n times at once and waits for all.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}
