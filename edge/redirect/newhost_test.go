package redirect

import (
	"errors"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

// hostAuthority is the authority's domains by host, counting the asks.
type hostAuthority struct {
	mu    sync.Mutex
	known map[string]link.Domain
	err   error
	asks  map[string]int
}

func (a *hostAuthority) AskHost(host string) (link.Domain, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asks[host]++
	if a.err != nil {
		return link.Domain{}, false, a.err
	}
	d, ok := a.known[host]
	return d, ok, nil
}

func (a *hostAuthority) set(d link.Domain) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.known[d.Host] = d
}

var newDomain = link.Domain{ID: 9, Host: "new.acme.com", TenantID: 7, CodeMode: link.CodesSequential,
	NotFoundRedirect: "https://acme.example/new-404", Status: link.DomainActive, Version: 20}

// newHostHandler is newDomainHandler with the authority's hosts behind
// the table, and codes of domain 9 resolved as the authority would: new001
// is a link, the rest unknown.
func newHostHandler(t testing.TB) (*Handler, *hostAuthority, *resolve.Hosts) {
	h := newDomainHandler(t)
	auth := &hostAuthority{known: map[string]link.Domain{}, asks: map[string]int{}}
	hosts := &resolve.Hosts{Domains: h.Domains, Authority: auth}
	h.Hosts = hosts
	h.Miss = resolverFunc(func(dom *store.DomainState, code []byte) (*store.Entry, resolve.Outcome) {
		if dom.Conf.ID == 9 && string(code) == "new001" {
			return &store.Entry{Domain: 9, Code: "new001", URL: "https://acme.example/new", RedirectType: 302, Status: link.Active, Version: 21}, resolve.Found
		}
		return nil, resolve.NotFound
	})
	return h, auth, hosts
}

// TestNewHostIsAsked: a host the table lacks is asked of the authority
// before any 404. Found, the domain is taken into the table and the
// request goes on as on a known domain (its links, its not-found
// redirect); the next requests find it in the table. Not found, the
// platform's plain 404, asked again next time (nothing negative is kept),
// so a domain created after that 404 redirects at once. The authority
// unable to tell is 503, never a 404.
func TestNewHostIsAsked(t *testing.T) {
	h, auth, hosts := newHostHandler(t)
	checkHost(t, h, hostCase{"not yet created", "new.acme.com", "/new001", 404, ""}, hostRequest("new.acme.com", "/new001", nil))
	auth.set(newDomain)
	for _, tt := range []hostCase{
		{"created a moment ago", "new.acme.com", "/new001", 302, "https://acme.example/new"},
		{"in the table now", "NEW.acme.com:443", "/new001", 302, "https://acme.example/new"},
		{"its not-found redirect", "new.acme.com", "/nope01", 302, "https://acme.example/new-404"},
		{"another domain's code is not its", "new.acme.com", "/00000A", 302, "https://acme.example/new-404"},
		{"invented", "invented.example", "/new001", 404, ""},
		{"invented again", "invented.example", "/new001", 404, ""},
		{"a removed domain's host", "old.example", "/00000A", 404, ""},
	} {
		checkHost(t, h, tt, hostRequest(tt.host, tt.path, nil))
	}
	if st, ok := h.Domains.Get(9); !ok || st.Conf.Host != "new.acme.com" {
		t.Errorf("domain 9 in the table: %+v, %v", st, ok)
	}
	if auth.asks["new.acme.com"] != 2 || auth.asks["invented.example"] != 2 || auth.asks["old.example"] != 1 {
		t.Errorf("asks %v; want new.acme.com twice (before and once after it was created), invented.example twice", auth.asks)
	}
	if h.Counters.HostAsks.Load() != 5 || h.Counters.UnknownHost.Load() != 4 || hosts.Found.Load() != 1 || hosts.NotFound.Load() != 4 {
		t.Errorf("host asks %d, unknown host %d, found %d, not found %d; want 5, 4, 1, 4",
			h.Counters.HostAsks.Load(), h.Counters.UnknownHost.Load(), hosts.Found.Load(), hosts.NotFound.Load())
	}

	auth.err = errors.New("authority unavailable")
	ctx := hostRequest("later.acme.com", "/new001", nil)
	checkHost(t, h, hostCase{"authority down", "later.acme.com", "/new001", 503, ""}, ctx)
	if string(ctx.Response.Header.Peek(fasthttp.HeaderRetryAfter)) == "" {
		t.Error("503 without Retry-After")
	}
	// Known hosts do not need the authority.
	checkHost(t, h, hostCase{"known while down", "new.acme.com", "/new001", 302, "https://acme.example/new"}, hostRequest("new.acme.com", "/new001", nil))
}

// TestNewHostNewerVersionWins: the stream's newer version of a domain is
// the table's, whatever the authority answered: a removal applied after
// the domain was created is not undone by an older answer.
func TestNewHostNewerVersionWins(t *testing.T) {
	h, auth, _ := newHostHandler(t)
	removed := newDomain
	removed.Status, removed.Version = link.DomainRemoved, newDomain.Version+1
	if err := h.Domains.Apply(removed); err != nil {
		t.Fatal(err)
	}
	auth.set(newDomain) // an answer read before the removal
	checkHost(t, h, hostCase{"removed on the stream", "new.acme.com", "/new001", 404, ""}, hostRequest("new.acme.com", "/new001", nil))
	if st, _ := h.Domains.Get(9); st.Conf.Status != link.DomainRemoved {
		t.Errorf("domain 9 is %q in the table; want removed", st.Conf.Status)
	}
}

// TestNewHostSpendsTheBudget: asking about a host the table lacks takes a
// token of the client's 404 budget first, so invented hosts from one
// client are asked at most as often as its budget allows, then answered
// 429 without asking; known hosts' links never spend it.
func TestNewHostSpendsTheBudget(t *testing.T) {
	h, auth, _ := newHostHandler(t)
	b := &budget{n: 3, asked: map[string]int{}}
	h.NotFoundLimit = b
	auth.set(newDomain)
	for _, tt := range []hostCase{
		{"invented 1", "i1.example", "/new001", 404, ""},
		{"invented 2", "i2.example", "/new001", 404, ""},
		{"new domain", "new.acme.com", "/new001", 302, "https://acme.example/new"},
		{"invented 3: past the budget", "i3.example", "/new001", 429, ""},
		{"invented 4: past the budget", "i4.example", "/new001", 429, ""},
		{"a known domain's link", "go.acme.com", "/00000A", 302, "https://acme.example/a"},
		{"the new domain's link, now known", "new.acme.com", "/new001", 302, "https://acme.example/new"},
	} {
		checkHost(t, h, tt, hostRequest(tt.host, tt.path, nil))
	}
	if n := len(auth.asks); n != 3 || auth.asks["i3.example"] != 0 {
		t.Errorf("asked %v; want i1, i2 and new.acme.com only", auth.asks)
	}
	if b.total() != 5 || h.Counters.Limited.Load() != 2 {
		t.Errorf("budget asked %d times, limited %d; want 5, 2", b.total(), h.Counters.Limited.Load())
	}
}

// TestHitsWithHostsDoNotAllocate: with the authority's hosts behind the
// table, hits on known hosts still allocate nothing.
func TestHitsWithHostsDoNotAllocate(t *testing.T) {
	h, auth, _ := newHostHandler(t)
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 20})
	auth.set(newDomain)
	ctxs := []*fasthttp.RequestCtx{hostRequest("new.acme.com", "/new001", nil), hostRequest("go.acme.com", "/00000A", nil),
		hostRequest("sho.rt", "/00000A", nil)}
	for _, ctx := range ctxs {
		h.Serve(ctx) // the first learns new.acme.com
		ctx.Response.Reset()
	}
	i := 0
	n := testing.AllocsPerRun(3000, func() {
		ctx := ctxs[i%len(ctxs)]
		i++
		ctx.Response.Reset()
		h.Serve(ctx)
		if ctx.Response.StatusCode() != 302 {
			t.Fatalf("GET %s on %s: %d", ctx.Path(), ctx.Host(), ctx.Response.StatusCode())
		}
	})
	if n != 0 {
		t.Fatalf("hits allocated %v times per request; want 0", n)
	}
}

// TestNewHostConcurrent: many requests for a new host at once, with the
// stream applying the same domain meanwhile, all redirect (-race).
func TestNewHostConcurrent(t *testing.T) {
	h, auth, _ := newHostHandler(t)
	auth.set(newDomain)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if i%8 == 0 {
				_ = h.Domains.Apply(newDomain)
			}
			ctx := hostRequest("new.acme.com", "/new001", nil)
			h.Serve(ctx)
			if ctx.Response.StatusCode() != 302 {
				t.Errorf("request %d: %d; want 302", i, ctx.Response.StatusCode())
			}
		})
	}
	wg.Wait()
}

// TestNewHostBeforeAnyTable: an edge that has read no domain table yet (a
// fresh edge's first moments) asks the authority which domain a host is
// before it answers on it, so a tenant's first link on a domain it just
// added redirects, a code nobody has gets that domain's own not-found
// answer, and a host no domain has gets 404. An authority that cannot
// tell leaves the host served as the platform's, as before domains.
func TestNewHostBeforeAnyTable(t *testing.T) {
	h, auth, hosts := newHostHandler(t)
	h.Domains = store.NewDomains(nil)
	hosts.Domains = h.Domains
	auth.set(newDomain)
	checkHost(t, h, hostCase{"the domain's link", "new.acme.com", "/new001", 302, "https://acme.example/new"}, hostRequest("new.acme.com", "/new001", nil))
	if h.Domains.Known() {
		t.Fatal("learning a tenant's domain made the table Known")
	}
	checkHost(t, h, hostCase{"a code nobody has", "new.acme.com", "/nope01", 302, "https://acme.example/new-404"}, hostRequest("new.acme.com", "/nope01", nil))
	auth.mu.Lock()
	asked := auth.asks["new.acme.com"]
	auth.mu.Unlock()
	if asked != 1 {
		t.Errorf("the host was asked %d times; want once (then the table has it)", asked)
	}
	checkHost(t, h, hostCase{"a host no domain has", "invented.example", "/new001", 404, ""}, hostRequest("invented.example", "/new001", nil))
	auth.mu.Lock()
	auth.err = errors.New("an authority from before domains")
	auth.mu.Unlock()
	checkHost(t, h, hostCase{"authority cannot tell", "other.acme.com", "/new001", 404, ""}, hostRequest("other.acme.com", "/new001", nil))
}

// TestSameCodeBeforeAnyTable: before its table, an edge never answers a
// tenant's host with the platform's link of the same code (gate/domains
// caught a fresh edge that lagged the stream sending spring-sale on
// go.acme.test to the platform's spring-sale). The platform's host, once
// the authority names it, makes the table Known.
func TestSameCodeBeforeAnyTable(t *testing.T) {
	h, auth, hosts := newHostHandler(t)
	h.Domains = store.NewDomains(nil)
	hosts.Domains = h.Domains
	auth.set(newDomain)
	auth.set(link.Domain{ID: link.DefaultDomain, Host: "edge.example", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1})
	h.Miss = resolverFunc(func(dom *store.DomainState, code []byte) (*store.Entry, resolve.Outcome) {
		if string(code) != "spring" {
			return nil, resolve.NotFound
		}
		target := "https://example.com/platform"
		if dom.Conf.ID == 9 {
			target = "https://example.com/tenant"
		}
		return &store.Entry{Domain: dom.Conf.ID, Code: "spring", URL: target, RedirectType: 302, Status: link.Active, Version: 30}, resolve.Found
	})
	checkHost(t, h, hostCase{"the tenant's link", "new.acme.com", "/spring", 302, "https://example.com/tenant"}, hostRequest("new.acme.com", "/spring", nil))
	checkHost(t, h, hostCase{"a host no domain has", "invented.example", "/spring", 404, ""}, hostRequest("invented.example", "/spring", nil))
	if h.Domains.Known() {
		t.Fatal("the table is Known before the platform's domain was learnt")
	}
	checkHost(t, h, hostCase{"the platform's link", "edge.example", "/spring", 302, "https://example.com/platform"}, hostRequest("edge.example", "/spring", nil))
	if !h.Domains.Known() {
		t.Fatal("learning the platform's domain did not make the table Known")
	}
	checkHost(t, h, hostCase{"the tenant's link, the table known", "new.acme.com", "/spring", 302, "https://example.com/tenant"}, hostRequest("new.acme.com", "/spring", nil))
}
