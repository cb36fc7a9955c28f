package redirect

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

func newHandler() (*Handler, time.Time) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := store.NewOverlay()
	s.Apply(&store.Entry{Code: "00000A", URL: "https://example.com/upper", RedirectType: 302, Status: link.Active, Version: 1})
	s.Apply(&store.Entry{Code: "00000a", URL: "https://example.com/lower", RedirectType: 307, Status: link.Active, Version: 2})
	s.Apply(&store.Entry{Code: "off001", URL: "https://example.com/off", RedirectType: 302, Status: link.Disabled, Version: 3})
	s.Apply(&store.Entry{Code: "del001", Status: link.Deleted, Version: 4})
	s.Apply(&store.Entry{Code: "exp001", URL: "https://example.com/exp", RedirectType: 302, Status: link.Active, ExpiresAt: now.UnixMilli(), Version: 5})
	s.Apply(&store.Entry{Code: "exp002", URL: "https://example.com/later", RedirectType: 301, Status: link.Active, ExpiresAt: now.Add(time.Millisecond).UnixMilli(), Version: 6})
	return &Handler{Store: s, Now: func() time.Time { return now }}, now
}

// request is a context holding a request for method and uri, with
// headers (name, value, …), as fasthttp's server hands it to a handler.
func request(method, uri string, headers ...string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	req.SetRequestURI(uri)
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, nil, nil)
	return ctx
}

func do(h *Handler, method, uri string) *fasthttp.RequestCtx {
	ctx := request(method, uri)
	h.Serve(ctx)
	return ctx
}

// hitAllocs serves ctx once, which warms the response header buffers and
// the pools, and returns how many allocations each further serve of it
// makes.
func hitAllocs(h *Handler, ctx *fasthttp.RequestCtx) float64 {
	h.Serve(ctx)
	return testing.AllocsPerRun(1000, func() { ctx.Response.Reset(); h.Serve(ctx) })
}

func TestAnswers(t *testing.T) {
	h, _ := newHandler()
	tests := []struct {
		method, uri string
		status      int
		location    string
	}{
		{"GET", "/00000A", 302, "https://example.com/upper"},
		{"GET", "/00000a", 307, "https://example.com/lower"},
		{"HEAD", "/00000A", 302, "https://example.com/upper"},
		{"GET", "/00000A?utm=x", 302, "https://example.com/upper"},
		{"GET", "/00000B", 404, ""},
		{"GET", "/off001", 410, ""},
		{"GET", "/del001", 410, ""},
		{"GET", "/exp001", 410, ""}, // expires exactly now
		{"GET", "/exp002", 301, "https://example.com/later"},
		{"POST", "/00000A", 405, ""},
		{"DELETE", "/00000A", 405, ""},
		{"GET", "/", 404, ""},
		{"GET", "/a", 404, ""},
		{"GET", "/00000A/extra", 404, ""},
		{"GET", "/%00%00%00", 404, ""},
		{"GET", "/" + string(make([]byte, 300)), 404, ""},
		{"GET", "/-/livez", 200, ""},
		{"GET", "/-/readyz", 200, ""},
		{"GET", "/-/startupz", 200, ""},
		{"GET", "/-/metrics", 404, ""}, // no metrics configured
		{"GET", "/robots.txt", 200, ""},
		{"GET", "/favicon.ico", 204, ""},
		// The old probe paths are codes now, and none exists.
		{"GET", "/livez", 404, ""},
		{"GET", "/readyz", 404, ""},
		{"GET", "/-/nothing", 404, ""},
	}
	for _, tt := range tests {
		ctx := do(h, tt.method, tt.uri)
		if got := ctx.Response.StatusCode(); got != tt.status {
			t.Errorf("%s %s: status %d, want %d", tt.method, tt.uri, got, tt.status)
		}
		if got := string(ctx.Response.Header.Peek("Location")); got != tt.location {
			t.Errorf("%s %s: Location %q, want %q", tt.method, tt.uri, got, tt.location)
		}
		if tt.status >= 300 && tt.status < 400 {
			if cc := string(ctx.Response.Header.Peek("Cache-Control")); cc != string(cacheControl) {
				t.Errorf("%s %s: Cache-Control %q", tt.method, tt.uri, cc)
			}
		}
	}
}

func TestHitDoesNotAllocate(t *testing.T) {
	h, _ := newHandler()
	if n := hitAllocs(h, request("GET", "/00000A")); n != 0 {
		t.Fatalf("hit path allocated %v times per request", n)
	}
}

func BenchmarkHit(b *testing.B) {
	h, _ := newHandler()
	h.Now = nil
	benchServe(b, h, "/00000A")
}

type fixedResolver struct {
	e       *store.Entry
	outcome resolve.Outcome
}

func (f fixedResolver) Resolve(_ *store.DomainState, code []byte) (*store.Entry, resolve.Outcome) {
	return f.e, f.outcome
}

func TestMissAnswers(t *testing.T) {
	tests := []struct {
		outcome resolve.Outcome
		e       *store.Entry
		status  int
		retry   string
	}{
		{resolve.NotFound, nil, 404, ""},
		{resolve.Unavailable, nil, 503, "1"},
		{resolve.Found, &store.Entry{Code: "zzzzzz", URL: "https://from-authority", RedirectType: 307, Status: link.Active, Version: 9}, 307, ""},
		{resolve.Found, &store.Entry{Code: "zzzzzz", Status: link.Disabled, Version: 9}, 410, ""},
	}
	for _, tt := range tests {
		h, _ := newHandler()
		h.Miss = fixedResolver{tt.e, tt.outcome}
		ctx := do(h, "GET", "/zzzzzz")
		if got := ctx.Response.StatusCode(); got != tt.status {
			t.Errorf("outcome %d: status %d, want %d", tt.outcome, got, tt.status)
		}
		if got := string(ctx.Response.Header.Peek("Retry-After")); got != tt.retry {
			t.Errorf("outcome %d: Retry-After %q, want %q", tt.outcome, got, tt.retry)
		}
		if cc := string(ctx.Response.Header.Peek("Cache-Control")); cc != string(cacheControl) {
			t.Errorf("outcome %d: Cache-Control %q", tt.outcome, cc)
		}
	}
}

// BenchmarkHitWithClicks is the production hit path: overlay lookup, expiry
// check, click recorded into the ring, redirect written.
func BenchmarkHitWithClicks(b *testing.B) {
	h, _ := newHandler()
	h.Now = nil
	rec := clickpub.New(nil, clickpub.Config{Buffer: 1 << 10})
	h.Clicks = rec
	benchServe(b, h, "/00000A")
}

func TestHitWithClicksDoesNotAllocate(t *testing.T) {
	h, _ := newHandler()
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 20})
	if n := hitAllocs(h, request("GET", "/00000A")); n != 0 {
		t.Fatalf("hit path with click recording allocated %v times per request", n)
	}
}

// benchServe serves GET uri with h over and over on one reused context, as
// fasthttp's workers do, reporting allocations.
func benchServe(b *testing.B, h *Handler, uri string) {
	ctx := request("GET", uri)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.Serve(ctx)
	}
}

// TestProbes: each probe path answers 503 with its check's reason while the
// check fails and 200 once it passes; a probe path is never taken for a code.
func TestProbes(t *testing.T) {
	h, _ := newHandler()
	var startErr, readyErr, liveErr error
	h.Started = func() error { return startErr }
	h.Ready = func() error { return readyErr }
	h.Live = func() error { return liveErr }
	check := func(path string, want int, body string) {
		t.Helper()
		ctx := do(h, "GET", path)
		if got := ctx.Response.StatusCode(); got != want || !strings.Contains(string(ctx.Response.Body()), body) {
			t.Errorf("GET %s: %d %q; want %d containing %q", path, got, ctx.Response.Body(), want, body)
		}
	}
	startErr, readyErr, liveErr = errors.New("booting: loading the snapshot"), errors.New("catching up"), errors.New("stalled")
	check("/-/startupz", 503, "booting")
	check("/-/readyz", 503, "catching up")
	check("/-/livez", 503, "stalled")
	startErr, readyErr, liveErr = nil, nil, nil
	for _, p := range []string{"/-/startupz", "/-/readyz", "/-/livez"} {
		check(p, 200, "ok")
	}
	// Degraded is in service: 200 with the reason, unless also unready.
	degraded := "change stream unreachable"
	h.Degraded = func() string { return degraded }
	check("/-/readyz", 200, "degraded: change stream unreachable")
	readyErr = errors.New("booting")
	check("/-/readyz", 503, "booting")
	readyErr, degraded = nil, ""
	check("/-/readyz", 200, "ok")
}

// budget allows n 404s per client IP, counting what it was asked.
type budget struct {
	n     int
	asked map[string]int
}

func (b *budget) Allow(ip netip.Addr) bool {
	b.asked[ip.String()]++
	return b.asked[ip.String()] <= b.n
}

// TestNotFoundBudget: past its budget of 404s a client gets 429 with
// Retry-After for an unknown code, but every code that exists still answers
// (302, 410), for that client too, and the budget is never asked for them.
func TestNotFoundBudget(t *testing.T) {
	h, _ := newHandler()
	b := &budget{n: 2, asked: map[string]int{}}
	h.NotFoundLimit = b
	h.ClientIP = func(ctx *fasthttp.RequestCtx) netip.Addr {
		return netip.MustParseAddr(string(ctx.Request.Header.Peek("X-Test-Client")))
	}
	h.Miss = fixedResolver{nil, resolve.NotFound}
	get := func(path, client string) *fasthttp.RequestCtx {
		ctx := request("GET", path, "X-Test-Client", client)
		h.Serve(ctx)
		return ctx
	}
	for i, want := range []int{404, 404, 429, 429} {
		path := []string{"/nope01", "/not-a-code.php", "/nope02", "/nope03"}[i]
		ctx := get(path, "10.0.0.1")
		if got := ctx.Response.StatusCode(); got != want {
			t.Fatalf("unknown %s #%d from a: %d; want %d", path, i, got, want)
		}
		if want == 429 && string(ctx.Response.Header.Peek("Retry-After")) == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	asked := b.asked["10.0.0.1"]
	for _, tt := range []struct {
		path string
		want int
	}{{"/00000A", 302}, {"/off001", 410}, {"/-/livez", 200}} {
		if got := get(tt.path, "10.0.0.1").Response.StatusCode(); got != tt.want {
			t.Errorf("%s from a client past its budget: %d; want %d", tt.path, got, tt.want)
		}
	}
	h.Miss = fixedResolver{&store.Entry{Code: "fresh1", URL: "https://fresh", RedirectType: 302, Status: link.Active, Version: 9}, resolve.Found}
	if got := get("/fresh1", "10.0.0.1").Response.StatusCode(); got != 302 {
		t.Errorf("a fresh link found by the authority, from a client past its budget: %d; want 302", got)
	}
	if b.asked["10.0.0.1"] != asked {
		t.Errorf("the budget was asked %d times for codes that exist; want never", b.asked["10.0.0.1"]-asked)
	}
	h.Miss = fixedResolver{nil, resolve.NotFound}
	if got := get("/nope04", "10.0.0.2").Response.StatusCode(); got != 404 {
		t.Errorf("another client: %d; want 404", got)
	}
	if h.Counters.Limited.Load() != 2 || h.Counters.NotFound.Load() != 2 || h.Counters.BadCode.Load() != 1 {
		t.Errorf("counters: limited %d, not found %d, bad code %d; want 2, 2, 1",
			h.Counters.Limited.Load(), h.Counters.NotFound.Load(), h.Counters.BadCode.Load())
	}
}
