package redirect

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/clientip"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// The domains of the host tests: the platform's, a tenant's with its own
// root, not-found and robots settings, an internationalized one, and a
// removed one.
var testDomains = []link.Domain{
	{ID: 0, Host: "sho.rt", CodeMode: link.CodesSequential},
	{ID: 1, Host: "go.acme.com", TenantID: 7, CodeMode: link.CodesSequential, RootRedirect: "https://acme.example/",
		NotFoundRedirect: "https://acme.example/404?from=short", Robots: "User-agent: *\nAllow: /\n"},
	{ID: 2, Host: "xn--bcher-kva.example", TenantID: 8, CodeMode: link.CodesSequential},
	{ID: 3, Host: "old.example", TenantID: 7, CodeMode: link.CodesSequential, Status: link.DomainRemoved},
}

// newDomainHandler serves testDomains: code 00000A on the platform's
// domain and on go.acme.com, each its own target, from the snapshot and
// the overlay; 00000B on the platform's domain only; a link on the
// internationalized domain and one on the removed domain.
func newDomainHandler(t testing.TB) *Handler {
	t.Helper()
	ds := store.NewDomains(nil)
	confs := make([]link.Domain, len(testDomains))
	for i, c := range testDomains {
		if c.Status == "" {
			c.Status = link.DomainActive
		}
		c.Version = 1
		confs[i] = c
	}
	if err := ds.Replace(confs); err != nil {
		t.Fatal(err)
	}
	overlay := store.NewOverlay()
	a := snapshotLayers(t, overlay, []snapshot.Link{
		{Domain: 0, Code: "00000A", URL: "https://platform.example/a", RedirectType: 302, Status: link.Active},
		{Domain: 1, Code: "00000A", URL: "https://acme.example/a", RedirectType: 302, Status: link.Active},
	}, snapshot.Header{ChangeVersion: 10, StreamSeq: 10})
	a.Apply(&store.Entry{Domain: 0, Code: "00000B", URL: "https://platform.example/b", RedirectType: 302, Status: link.Active, Version: 11})
	a.Apply(&store.Entry{Domain: 2, Code: "buch01", URL: "https://bücher.example/buch", RedirectType: 302, Status: link.Active, Version: 12})
	a.Apply(&store.Entry{Domain: 3, Code: "00000A", URL: "https://old.example/a", RedirectType: 302, Status: link.Active, Version: 13})
	a.Apply(&store.Entry{Domain: 1, Code: "acme-sale", URL: "https://acme.example/sale", RedirectType: 307, Status: link.Active, Version: 14})
	return &Handler{Domains: ds, Store: a, Now: func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }}
}

// hostRequest is a request for path on host from peer (nil: none), with
// an X-Forwarded-Host header per entry of fwd.
func hostRequest(host, path string, peer net.Addr, fwd ...string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI(path)
	req.Header.SetHost(host)
	for _, f := range fwd {
		req.Header.Add(fasthttp.HeaderXForwardedHost, f)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, peer, nil)
	return ctx
}

type hostCase struct {
	name, host, path string
	status           int
	location         string
}

func checkHost(t *testing.T, h *Handler, tt hostCase, ctx *fasthttp.RequestCtx) {
	t.Helper()
	h.Serve(ctx)
	if got := ctx.Response.StatusCode(); got != tt.status {
		t.Errorf("%s: GET %s on %q: status %d, want %d", tt.name, tt.path, tt.host, got, tt.status)
	}
	if got := string(ctx.Response.Header.Peek(fasthttp.HeaderLocation)); got != tt.location {
		t.Errorf("%s: GET %s on %q: Location %q, want %q", tt.name, tt.path, tt.host, got, tt.location)
	}
	if tt.status == fasthttp.StatusFound {
		if cc := string(ctx.Response.Header.Peek(fasthttp.HeaderCacheControl)); cc != "private, no-store" {
			t.Errorf("%s: a redirect with Cache-Control %q", tt.name, cc)
		}
	}
}

// TestHostPicksTheDomain: the request's host names the domain, in any of
// the spellings browsers and clients send; the same code on two domains
// is two links; an unknown or removed domain's host gets the platform's
// plain 404, never a link of another domain.
func TestHostPicksTheDomain(t *testing.T) {
	h := newDomainHandler(t)
	for _, tt := range []hostCase{
		{"the platform's domain", "sho.rt", "/00000A", 302, "https://platform.example/a"},
		{"a tenant's domain, same code", "go.acme.com", "/00000A", 302, "https://acme.example/a"},
		{"upper case", "GO.Acme.COM", "/00000A", 302, "https://acme.example/a"},
		{"with a port", "go.acme.com:8443", "/00000A", 302, "https://acme.example/a"},
		{"trailing dot", "go.acme.com.", "/00000A", 302, "https://acme.example/a"},
		{"trailing dot and port", "Go.Acme.Com.:80", "/00000A", 302, "https://acme.example/a"},
		{"from the overlay", "go.acme.com", "/acme-sale", 307, "https://acme.example/sale"},
		{"punycode", "xn--bcher-kva.example", "/buch01", 302, "https://bücher.example/buch"},
		{"unicode", "bücher.example", "/buch01", 302, "https://bücher.example/buch"},
		{"unicode, upper case and port", "BÜCHER.example:443", "/buch01", 302, "https://bücher.example/buch"},
		{"the platform's link is not on the tenant's domain", "go.acme.com", "/00000B", 302, "https://acme.example/404?from=short"},
		{"nor the tenant's on the platform's", "sho.rt", "/acme-sale", 404, ""},
		{"an unknown host", "unknown.example", "/00000A", 404, ""},
		{"a host that differs by a letter", "go.acme.co", "/00000A", 404, ""},
		{"a subdomain of a domain", "x.go.acme.com", "/00000A", 404, ""},
		{"a removed domain", "old.example", "/00000A", 404, ""},
		{"no host", "", "/00000A", 404, ""},
		{"an IP literal no domain has", "[::1]:8081", "/00000A", 404, ""},
		{"not a host", "a b", "/00000A", 404, ""},
		{"probes on any host", "10.0.0.9:8081", "/-/livez", 200, ""},
	} {
		checkHost(t, h, tt, hostRequest(tt.host, tt.path, nil))
	}
	if got := h.Counters.UnknownHost.Load(); got != 7 {
		t.Errorf("UnknownHost = %d; want 7", got)
	}
	// The unknown host's 404 is the platform's plain one, not a domain's
	// not-found page.
	ctx := hostRequest("unknown.example", "/nope01", nil)
	h.Serve(ctx)
	if string(ctx.Response.Body()) != string(textNotFound) {
		t.Errorf("an unknown host's 404 body %q; want %q", ctx.Response.Body(), textNotFound)
	}
}

// TestDomainPages: each domain's "/", unknown codes and robots.txt follow
// its own settings, and the platform's defaults where it has none.
func TestDomainPages(t *testing.T) {
	h := newDomainHandler(t)
	for _, tt := range []hostCase{
		{"root redirect", "go.acme.com", "/", 302, "https://acme.example/"},
		{"no root redirect", "sho.rt", "/", 404, ""},
		{"not-found redirect", "go.acme.com", "/nope01", 302, "https://acme.example/404?from=short"},
		{"not-found redirect for a path that is no code", "go.acme.com", "/wp-login.php", 302, "https://acme.example/404?from=short"},
		{"no not-found redirect", "sho.rt", "/nope01", 404, ""},
		{"robots", "go.acme.com", "/robots.txt", 200, ""},
		{"default robots", "sho.rt", "/robots.txt", 200, ""},
		{"no robots for an unknown host", "unknown.example", "/robots.txt", 404, ""},
		{"no root for an unknown host", "unknown.example", "/", 404, ""},
		{"favicon", "go.acme.com", "/favicon.ico", 204, ""},
		{"operator paths are not the domain's", "go.acme.com", "/-/nothing", 404, ""},
	} {
		checkHost(t, h, tt, hostRequest(tt.host, tt.path, nil))
	}
	for host, want := range map[string]string{"go.acme.com": "User-agent: *\nAllow: /\n", "sho.rt": link.DefaultRobots} {
		ctx := hostRequest(host, "/robots.txt", nil)
		h.Serve(ctx)
		if got := string(ctx.Response.Body()); got != want || string(ctx.Response.Header.ContentType()) != "text/plain; charset=utf-8" {
			t.Errorf("robots.txt on %s: %q (%s); want %q as text/plain", host, got, ctx.Response.Header.ContentType(), want)
		}
	}
	if h.Counters.RootRedirects.Load() != 1 || h.Counters.NotFoundRedirects.Load() != 2 {
		t.Errorf("root redirects %d, not-found redirects %d; want 1 and 2", h.Counters.RootRedirects.Load(), h.Counters.NotFoundRedirects.Load())
	}
}

// TestUnknownHostSpendsTheBudget: a scan of unknown hosts spends the
// client's budget of 404s, and so do a domain's not-found redirects.
func TestUnknownHostSpendsTheBudget(t *testing.T) {
	h := newDomainHandler(t)
	b := &budget{n: 2, asked: map[string]int{}}
	h.NotFoundLimit = b
	for i, tt := range []hostCase{
		{"unknown host", "a.example", "/00000A", 404, ""},
		{"not-found redirect", "go.acme.com", "/nope01", 302, "https://acme.example/404?from=short"},
		{"past the budget: unknown host", "b.example", "/00000A", 429, ""},
		{"past the budget: not-found redirect", "go.acme.com", "/nope02", 429, ""},
		{"past the budget: a link", "go.acme.com", "/00000A", 302, "https://acme.example/a"},
		{"past the budget: the root", "go.acme.com", "/", 302, "https://acme.example/"},
	} {
		checkHost(t, h, tt, hostRequest(tt.host, tt.path, nil))
		if asked := b.total(); i < 4 && asked != i+1 {
			t.Fatalf("the budget was asked %d times for %d misses", asked, i+1)
		}
	}
	if asked := b.total(); asked != 4 {
		t.Errorf("the budget was asked %d times; want 4 (never for a link or the root)", asked)
	}
}

// TestForwardedHost: X-Forwarded-Host names the host only when the
// request comes from a trusted proxy; from anyone else it is ignored, so a
// client cannot reach another domain's links through it.
func TestForwardedHost(t *testing.T) {
	h := newDomainHandler(t)
	proxies, err := clientip.New([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	h.FromProxy = func(ctx *fasthttp.RequestCtx) bool { return proxies.Proxied(ctx.Conn()) }
	proxy := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5000}
	client := &net.TCPAddr{IP: net.ParseIP("203.0.113.5"), Port: 5000}
	for _, tt := range []struct {
		hostCase
		peer net.Addr
		fwd  []string
	}{
		{hostCase{"untrusted peer: ignored", "sho.rt", "/00000A", 302, "https://platform.example/a"}, client, []string{"go.acme.com"}},
		{hostCase{"untrusted peer, unknown Host: still unknown", "internal-lb", "/00000A", 404, ""}, client, []string{"go.acme.com"}},
		{hostCase{"trusted proxy: used", "internal-lb", "/00000A", 302, "https://acme.example/a"}, proxy, []string{"go.acme.com"}},
		{hostCase{"trusted proxy, spelled with a port", "internal-lb", "/00000A", 302, "https://acme.example/a"}, proxy, []string{"GO.acme.com:443"}},
		{hostCase{"trusted proxy, unicode", "internal-lb", "/buch01", 302, "https://bücher.example/buch"}, proxy, []string{"bücher.example"}},
		{hostCase{"trusted proxy: the entry it appended", "sho.rt", "/00000A", 302, "https://acme.example/a"}, proxy, []string{"sho.rt, go.acme.com"}},
		{hostCase{"trusted proxy: its header after the client's", "sho.rt", "/00000A", 302, "https://acme.example/a"}, proxy, []string{"sho.rt", "go.acme.com"}},
		{hostCase{"trusted proxy, unknown forwarded host: no fallback to Host", "sho.rt", "/00000A", 404, ""}, proxy, []string{"unknown.example"}},
		{hostCase{"trusted proxy without the header: Host", "go.acme.com", "/00000A", 302, "https://acme.example/a"}, proxy, nil},
		{hostCase{"trusted proxy, empty header: Host", "go.acme.com", "/00000A", 302, "https://acme.example/a"}, proxy, []string{" "}},
		// fasthttp gives "/" as the path of a URI it cannot parse (here
		// for its Host): that is no request for the domain's root.
		{hostCase{"trusted proxy, a Host fasthttp cannot parse", "a b", "/00000A", 404, ""}, proxy, []string{"go.acme.com"}},
	} {
		checkHost(t, h, tt.hostCase, hostRequest(tt.host, tt.path, tt.peer, tt.fwd...))
	}
}

// TestNoDomainTable: an edge that has received no domain table (a
// control from before domains) serves every host as the platform's
// domain, as it did before; one given no table at all does too.
func TestNoDomainTable(t *testing.T) {
	h := newDomainHandler(t)
	h.Domains = store.NewDomains(nil)
	for _, tt := range []hostCase{
		{"any host", "anything.example", "/00000A", 302, "https://platform.example/a"},
		{"a tenant's host", "go.acme.com", "/00000A", 302, "https://platform.example/a"},
		{"no host", "", "/00000B", 302, "https://platform.example/b"},
		{"root", "go.acme.com", "/", 404, ""},
	} {
		checkHost(t, h, tt, hostRequest(tt.host, tt.path, nil))
	}
	h.Domains = nil
	checkHost(t, h, hostCase{"no table given", "anything.example", "/00000A", 302, "https://platform.example/a"},
		hostRequest("anything.example", "/00000A", nil))
	if h.Counters.UnknownHost.Load() != 0 {
		t.Errorf("UnknownHost = %d without a table; want 0", h.Counters.UnknownHost.Load())
	}
}

// TestMissAsksWithTheDomain: a miss is resolved on the request's domain.
func TestMissAsksWithTheDomain(t *testing.T) {
	h := newDomainHandler(t)
	var got []link.DomainID
	h.Miss = resolverFunc(func(dom *store.DomainState, code []byte) (*store.Entry, resolve.Outcome) {
		got = append(got, dom.Conf.ID)
		return nil, resolve.NotFound
	})
	for _, host := range []string{"sho.rt", "go.acme.com", "bücher.example"} {
		h.Serve(hostRequest(host, "/zzzzzz", nil))
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Errorf("misses resolved on domains %v; want [0 1 2]", got)
	}
}

func (b *budget) total() int {
	n := 0
	for _, v := range b.asked {
		n += v
	}
	return n
}

type resolverFunc func(dom *store.DomainState, code []byte) (*store.Entry, resolve.Outcome)

func (f resolverFunc) Resolve(dom *store.DomainState, code []byte) (*store.Entry, resolve.Outcome) {
	return f(dom, code)
}

// mixedHostRequests are hits on three domains in the spellings clients
// send, through a trusted proxy for one.
func mixedHostRequests() []*fasthttp.RequestCtx {
	proxy := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5000}
	return []*fasthttp.RequestCtx{
		hostRequest("sho.rt", "/00000A", nil),
		hostRequest("GO.ACME.COM:8443", "/00000A", nil),
		hostRequest("go.acme.com.", "/acme-sale", nil),
		hostRequest("xn--bcher-kva.example", "/buch01", nil),
		hostRequest("sho.rt:80", "/00000B", nil),
		hostRequest("internal-lb", "/00000A", proxy, "go.acme.com"),
	}
}

// TestMixedHostHitsDoNotAllocate: picking the domain costs a hit nothing,
// whatever the host's spelling, with click recording and a trusted proxy.
func TestMixedHostHitsDoNotAllocate(t *testing.T) {
	h := newDomainHandler(t)
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 20})
	proxies, err := clientip.New([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	h.FromProxy = func(ctx *fasthttp.RequestCtx) bool { return proxies.Proxied(ctx.Conn()) }
	ctxs := mixedHostRequests()
	for _, ctx := range ctxs {
		h.Serve(ctx)
		if ctx.Response.StatusCode()/100 != 3 {
			t.Fatalf("setup: GET %s on %s: %d; want a redirect", ctx.Path(), ctx.Host(), ctx.Response.StatusCode())
		}
	}
	i := 0
	n := testing.AllocsPerRun(3000, func() {
		ctx := ctxs[i%len(ctxs)]
		i++
		ctx.Response.Reset()
		h.Serve(ctx)
	})
	if n != 0 {
		t.Fatalf("hits on mixed hosts allocated %v times per request; want 0", n)
	}
}

// BenchmarkHitMixedHosts is snapshot hits on two domains, in four
// spellings of their hosts; BenchmarkHitOneHost is its baseline, the same
// hits on one host.
func BenchmarkHitMixedHosts(b *testing.B) {
	h := newDomainHandler(b)
	h.Now = nil
	ctxs := []*fasthttp.RequestCtx{
		hostRequest("sho.rt", "/00000A", nil),
		hostRequest("GO.ACME.COM:8443", "/00000A", nil),
		hostRequest("go.acme.com.", "/00000A", nil),
		hostRequest("sho.rt:80", "/00000A", nil),
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ctx := ctxs[i%len(ctxs)]
		i++
		ctx.Response.Reset()
		h.Serve(ctx)
	}
}

func BenchmarkHitOneHost(b *testing.B) {
	h := newDomainHandler(b)
	h.Now = nil
	ctxs := []*fasthttp.RequestCtx{
		hostRequest("sho.rt", "/00000A", nil),
		hostRequest("sho.rt", "/00000A", nil),
		hostRequest("sho.rt", "/00000A", nil),
		hostRequest("sho.rt", "/00000A", nil),
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ctx := ctxs[i%len(ctxs)]
		i++
		ctx.Response.Reset()
		h.Serve(ctx)
	}
}

// TestDomainChangesWhileServing: requests on several hosts are served
// while their domains change (settings, a removal and its return); every
// answer is one the domain had at some moment, never another domain's
// link. Run under the race detector.
func TestDomainChangesWhileServing(t *testing.T) {
	h := newDomainHandler(t)
	stop := make(chan struct{})
	errs := make(chan string, 64)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ctxs := []*fasthttp.RequestCtx{
				hostRequest("go.acme.com", "/00000A", nil),
				hostRequest("bücher.example", "/buch01", nil),
				hostRequest("xn--bcher-kva.example", "/00000A", nil),
				hostRequest("sho.rt", "/00000A", nil),
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (i + w) % len(ctxs)
				ctx := ctxs[k]
				ctx.Response.Reset()
				h.Serve(ctx)
				s, loc := ctx.Response.StatusCode(), string(ctx.Response.Header.Peek(fasthttp.HeaderLocation))
				ok := false
				switch k {
				case 0:
					ok = s == 302 && loc == "https://acme.example/a"
				case 1:
					ok = (s == 302 && loc == "https://bücher.example/buch") || (s == 404 && loc == "")
				case 2: // no such link there: 404, or the not-found redirect it sometimes has
					ok = (s == 404 && loc == "") || (s == 302 && loc == "https://xn--bcher-kva.example/missing")
				case 3:
					ok = s == 302 && loc == "https://platform.example/a"
				}
				if !ok {
					select {
					case errs <- fmt.Sprintf("request %d: %d %q", k, s, loc):
					default:
					}
				}
			}
		})
	}
	conf := testDomains[2]
	conf.Status = link.DomainActive
	for v := uint64(2); v < 500; v++ {
		conf.Version = v
		switch v % 3 {
		case 0:
			conf.Status, conf.NotFoundRedirect = link.DomainActive, ""
		case 1:
			conf.NotFoundRedirect = "https://xn--bcher-kva.example/missing"
		case 2:
			conf.Status = link.DomainRemoved
		}
		if err := h.Domains.Apply(conf); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// FuzzHost: whatever Host and X-Forwarded-Host a client sends, with or
// without a trusted proxy in between, the handler picks exactly the
// domain the exact canonical form of the effective host names (the fast
// path never disagrees with link.CanonicalHost), or none; a redirect is
// that domain's link, never another's.
func FuzzHost(f *testing.F) {
	for _, s := range [][2]string{
		{"go.acme.com", ""}, {"GO.ACME.COM:8443", ""}, {"go.acme.com.", ""}, {"bücher.example", ""},
		{"xn--bcher-kva.example", ""}, {"b%C3%BCcher.example", ""}, {"[::1]:80", ""}, {"sho.rt", "go.acme.com"},
		{"sho.rt", "a, go.acme.com"}, {"go.acme.com:", ""}, {"go.acme.com..", ""}, {"ＧＯ.acme.com", ""}, {"", ""},
	} {
		f.Add(s[0], s[1], false)
		f.Add(s[0], s[1], true)
	}
	h := newDomainHandler(f)
	h.FromProxy = func(ctx *fasthttp.RequestCtx) bool { return ctx.RemoteIP().Equal(net.ParseIP("10.1.2.3")) }
	targets := map[link.DomainID]string{0: "https://platform.example/a", 1: "https://acme.example/a"}
	f.Fuzz(func(t *testing.T, host, fwd string, proxied bool) {
		var peer net.Addr
		if proxied {
			peer = &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 1}
		}
		var fwds []string
		if fwd != "" {
			fwds = []string{fwd}
		}
		ctx := hostRequest(host, "/00000A", peer, fwds...)
		// The host the handler should read, as fasthttp parsed it.
		eff := string(ctx.Host())
		if proxied {
			if v := forwardedHost(ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedHost)); v != nil {
				eff = string(v)
			}
		}
		want, known := "", false
		if canon, err := link.CanonicalHost(eff); err == nil {
			if d, ok := h.Domains.ByHost([]byte(canon)); ok {
				want, known = targets[d.Conf.ID], true
			}
		}
		parsed := string(ctx.Path()) == "/00000A" // fasthttp says "/" for a URI it cannot parse
		h.Serve(ctx)
		s, loc := ctx.Response.StatusCode(), string(ctx.Response.Header.Peek(fasthttp.HeaderLocation))
		switch {
		case !parsed && (s == 302 && loc != "https://acme.example/404?from=short" || s != 302 && s != 404):
			// Never a link nor a root: at most the domain's not-found page.
			t.Fatalf("Host %q, forwarded %q (proxied %v), a request fasthttp cannot parse: %d %q; want 404", host, fwd, proxied, s, loc)
		case !parsed:
		case known && want == "" && s != 404: // a domain without the code
			t.Fatalf("Host %q, forwarded %q (proxied %v): %d %q; want 404", host, fwd, proxied, s, loc)
		case known && want != "" && (s != 302 || loc != want):
			t.Fatalf("Host %q, forwarded %q (proxied %v): %d %q; want 302 %q", host, fwd, proxied, s, loc, want)
		case !known && s != 404:
			t.Fatalf("Host %q, forwarded %q (proxied %v), no domain: %d %q; want 404", host, fwd, proxied, s, loc)
		}
	})
}
