package redirect

import (
	"bufio"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// fuzzAnswer is what the handler must answer for a code, whichever layer
// holds it.
type fuzzAnswer struct {
	status   int
	location string
}

// lookupRecorder remembers the codes the handler looked up.
type lookupRecorder struct {
	Finder
	asked [][]byte
}

func (l *lookupRecorder) Find(d link.DomainID, code []byte) (store.Hit, bool) {
	l.asked = append(l.asked, slices.Clone(code))
	return l.Finder.Find(d, code)
}

// mapResolver answers the authority's part: found, unavailable or not
// found, by code.
type mapResolver map[string]*store.Entry

func (m mapResolver) Resolve(_ *store.DomainState, code []byte) (*store.Entry, resolve.Outcome) {
	if string(code) == "unav01" {
		return nil, resolve.Unavailable
	}
	if e, ok := m[string(code)]; ok {
		return e, resolve.Found
	}
	return nil, resolve.NotFound
}

// newFuzzHandler serves links from the overlay, the snapshot (origin and
// rest assembled into the Location) and the resolver, each code in one
// layer only, and returns what each code must answer.
func newFuzzHandler(t testing.TB) (*Handler, *lookupRecorder, map[string]fuzzAnswer) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	want := map[string]fuzzAnswer{}
	overlay := store.NewOverlay()
	for _, e := range []*store.Entry{
		{Code: "00000A", URL: "https://example.com/upper", RedirectType: 302, Status: link.Active, Version: 1},
		{Code: "00000a", URL: "https://example.com/lower?next=%2F%2Fevil.com", RedirectType: 307, Status: link.Active, Version: 2},
		{Code: "spring-sale", URL: "https://xn--bcher-kva.example/%0D%0AX:%20y", RedirectType: 301, Status: link.Active, Version: 3},
		{Code: "off001", URL: "https://example.com/off", RedirectType: 302, Status: link.Disabled, Version: 4},
		{Code: "exp001", URL: "https://example.com/exp", RedirectType: 302, Status: link.Active, ExpiresAt: now.UnixMilli(), Version: 5},
	} {
		overlay.Apply(e)
	}
	want["00000A"] = fuzzAnswer{302, "https://example.com/upper"}
	want["00000a"] = fuzzAnswer{307, "https://example.com/lower?next=%2F%2Fevil.com"}
	want["spring-sale"] = fuzzAnswer{301, "https://xn--bcher-kva.example/%0D%0AX:%20y"}
	want["off001"] = fuzzAnswer{410, ""}
	want["exp001"] = fuzzAnswer{410, ""}
	long := "https://shop.example.com/" + strings.Repeat("p", 3000) + "?q=1"
	a := snapshotLayers(t, overlay, []snapshot.Link{
		{Code: "00000B", URL: "https://shop.example.com/spring?utm_source=snap", RedirectType: 308, Status: link.Active},
		{Code: "00000C", URL: long, RedirectType: 302, Status: link.Active},
		{Code: "00000D", Status: link.Disabled},
		{Code: "summer_sale", URL: "http://[2001:db8::1]:8080/", RedirectType: 302, Status: link.Active},
	}, snapshot.Header{ChangeVersion: 10, StreamSeq: 10})
	want["00000B"] = fuzzAnswer{308, "https://shop.example.com/spring?utm_source=snap"}
	want["00000C"] = fuzzAnswer{302, long}
	want["00000D"] = fuzzAnswer{410, ""}
	want["summer_sale"] = fuzzAnswer{302, "http://[2001:db8::1]:8080/"}
	miss := mapResolver{
		"zzzzzz": {Code: "zzzzzz", URL: "https://from-authority.example/", RedirectType: 302, Status: link.Active, Version: 9},
		"gone-1": {Code: "gone-1", Status: link.Deleted, Version: 9},
	}
	want["zzzzzz"] = fuzzAnswer{302, "https://from-authority.example/"}
	want["gone-1"] = fuzzAnswer{410, ""}
	want["unav01"] = fuzzAnswer{503, ""}
	rec := &lookupRecorder{Finder: a}
	h := &Handler{Store: rec, Miss: miss, Now: func() time.Time { return now },
		Clicks: clickpub.New(nil, clickpub.Config{Buffer: 1 << 10}), NotFoundLimit: overBudget{},
		ClientIP: func(ctx *fasthttp.RequestCtx) netip.Addr {
			if string(ctx.Request.Header.Peek("X-Client")) == "over" {
				return overAddr
			}
			return netip.Addr{}
		}}
	return h, rec, want
}

// overBudget is the 404 budget of a client that sends "X-Client: over":
// spent.
type overBudget struct{}

func (overBudget) Allow(ip netip.Addr) bool { return ip != overAddr }

var overAddr = netip.MustParseAddr("192.0.2.99")

// FuzzServe: whatever method, path, query and headers a client sends,
// the handler does not panic; it answers only statuses it documents,
// never a 5xx but 503 with Retry-After; a 3xx carries exactly the stored
// URL of the code the path names (never one built from the request, so
// no open redirect) and no intermediary may cache it; it looks up exactly
// the paths that are codes and none of its own routes.
func FuzzServe(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/00000A", ""},
		{"HEAD", "/00000a?utm=x", "Referer: https://t.co/x\r\nUser-Agent: Mozilla/5.0 (iPhone)"},
		{"GET", "/00000C", ""},
		{"GET", "/summer_sale", ""},
		{"GET", "/zzzzzz", ""},
		{"GET", "/nope01", "X-Client: over"},
		{"GET", "/00000A", "X-Client: over"},
		{"GET", "/not.a.code", "X-Client: over"},
		{"GET", "/unav01", ""},
		{"GET", "/%2F%2Fevil.com", ""},
		{"GET", "//evil.com", ""},
		{"GET", "///evil.com/00000A", ""},
		{"GET", "/00000A/../evil", ""},
		{"GET", "/x/../00000A", ""},
		{"GET", "/00000A?next=//evil.com", ""},
		{"GET", "/00000A#//evil.com", ""},
		{"GET", "/%30%30%30%30%30%41", ""},
		{"GET", "/00000A%00", ""},
		{"GET", "/00000A%0D%0ALocation:%20https://evil.com", ""},
		{"GET", "/\\evil.com", ""},
		{"GET", "http://evil.com/00000A", ""},
		{"GET", "https://evil.com//00000A", "Host: evil.com"},
		{"GET", "*", ""},
		{"CONNECT", "evil.com:443", ""},
		{"OPTIONS", "*", ""},
		{"POST", "/00000A", "Content-Length: 3\r\n\r\nabc"},
		{"get", "/00000A", ""},
		{"GET", "/livez", ""},
		{"GET", "/readyz", ""},
		{"GET", "/startupz", ""},
		{"GET", "/metrics", ""},
		{"GET", "/-/livez", ""},
		{"GET", "/-/readyz", ""},
		{"GET", "/-/metrics", ""},
		{"GET", "/-/", ""},
		{"GET", "/-", ""},
		{"GET", "/robots.txt", ""},
		{"GET", "/favicon.ico", ""},
		{"GET", "/LIVEZ", ""},
		{"GET", "/" + strings.Repeat("a", 33), ""},
		{"GET", "/00000A", "X-Forwarded-Host: evil.com\r\nX-Original-URL: //evil.com"},
		{"GET", "/00000A", "Host: evil.com\r\nHost: other"},
		{"GET", "/00000A", "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	h, rec, want := newFuzzHandler(f)
	var mu sync.Mutex // the fuzz function may run on several goroutines
	f.Fuzz(func(t *testing.T, method, uri, headers string) {
		mu.Lock()
		defer mu.Unlock()
		var req fasthttp.Request
		raw := method + " " + uri + " HTTP/1.1\r\nHost: edge.example\r\n" + headers + "\r\n\r\n"
		// The server's body limit (edge/server), so a forged Content-Length
		// does not make the harness allocate gigabytes.
		if err := req.ReadLimitBody(bufio.NewReader(strings.NewReader(raw)), 4<<10); err != nil {
			// fasthttp's server answers what it cannot parse itself; still
			// hand the handler the method and URI as the setters take them.
			req.Reset()
			req.Header.SetMethod(method)
			req.SetRequestURI(uri)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, nil, nil)
		rec.asked = rec.asked[:0]
		h.Serve(&ctx)

		status := ctx.Response.StatusCode()
		loc := string(ctx.Response.Header.Peek(fasthttp.HeaderLocation))
		m := string(ctx.Method())
		path := string(ctx.Path())
		code := strings.TrimPrefix(path, "/")
		getOrHead := m == fasthttp.MethodGet || m == fasthttp.MethodHead
		isCode := getOrHead && strings.HasPrefix(path, "/") && link.ValidCodeSyntax(code)
		over := string(ctx.Request.Header.Peek("X-Client")) == "over"
		desc := func() string { return m + " " + string(ctx.RequestURI()) + " (path " + path + ")" }

		switch status {
		case 200, 204, 301, 302, 307, 308, 404, 405, 410, 429, 503:
		default:
			t.Fatalf("%s: undocumented status %d", desc(), status)
		}
		switch {
		case status == 405:
			if getOrHead {
				t.Fatalf("%s: 405 for %s", desc(), m)
			}
		case !getOrHead:
			t.Fatalf("%s: %d; want 405", desc(), status)
		case status >= 500 && status != 503:
			t.Fatalf("%s: %d", desc(), status)
		case status == 503 && string(ctx.Response.Header.Peek(fasthttp.HeaderRetryAfter)) == "":
			t.Fatalf("%s: 503 without Retry-After", desc())
		}
		if isCode != (len(rec.asked) == 1) || len(rec.asked) > 1 {
			t.Fatalf("%s: looked up %q; a code path is looked up exactly once, anything else never", desc(), rec.asked)
		}
		if status == 429 && !over {
			t.Fatalf("%s: 429 for a client within its 404 budget", desc())
		}
		if !isCode {
			if loc != "" || status >= 300 && status < 400 {
				t.Fatalf("%s: %d Location %q for a path that is not a code", desc(), status, loc)
			}
			return
		}
		if string(rec.asked[0]) != code {
			t.Fatalf("%s: looked up %q; want the path's code %q", desc(), rec.asked[0], code)
		}
		w, known := want[code]
		if !known {
			w = fuzzAnswer{404, ""}
		}
		if w.status == 404 && over {
			w.status = 429 // a 404, past the client's budget; never a link that exists
		}
		if status != w.status || loc != w.location {
			t.Fatalf("%s: %d Location %q; want %d %q", desc(), status, loc, w.status, w.location)
		}
		if status >= 300 && status < 400 {
			if cc := string(ctx.Response.Header.Peek(fasthttp.HeaderCacheControl)); cc != string(cacheControl) {
				t.Fatalf("%s: redirect with Cache-Control %q", desc(), cc)
			}
		}
	})
}

// TestLocationCannotSplitTheResponse: control never stores a target with
// CR or LF, but should one reach the edge anyway (a bad event, a bad
// snapshot), the response on the wire still has exactly one Location and
// no header the target smuggled in: fasthttp writes CR and LF in header
// values as spaces.
func TestLocationCannotSplitTheResponse(t *testing.T) {
	h, _ := newHandler()
	h.Store.(*store.Overlay).Apply(&store.Entry{Code: "crlf01", URL: "https://x.example/\r\nSet-Cookie: a=b\nLocation: https://evil.example/",
		RedirectType: 302, Status: link.Active, Version: 99})
	ctx := do(h, "GET", "/crlf01")
	var wire strings.Builder
	w := bufio.NewWriter(&wire)
	if err := ctx.Response.Write(w); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	head, _, _ := strings.Cut(wire.String(), "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	var locations int
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			t.Errorf("header line %q holds a bare CR or LF", l)
		}
		name, _, _ := strings.Cut(l, ":")
		switch strings.ToLower(name) {
		case "location":
			locations++
		case "set-cookie":
			t.Errorf("the target smuggled a header: %q", l)
		}
	}
	if locations != 1 {
		t.Errorf("%d Location headers in %q; want 1", locations, head)
	}
}
