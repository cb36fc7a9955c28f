// Package redirect is the edge's fasthttp handler: GET or HEAD /{code}
// answered from memory, on the domain the request's Host names (host.go).
package redirect

import (
	"bytes"
	"io"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/shared/link"
)

// Finder finds what the edge holds of a code without allocating: the
// overlay and the snapshot together (store.Layers), or the overlay alone
// (store.Overlay). A hit's bytes stay valid while the hit is reachable.
type Finder interface {
	Find(d link.DomainID, code []byte) (store.Hit, bool)
}

// Resolver answers a code of domain dom neither the overlay nor the
// snapshot holds: the long-tail cache and the authority. It may block for
// a bounded time.
type Resolver interface {
	Resolve(dom *store.DomainState, code []byte) (*store.Entry, resolve.Outcome)
}

// Limiter is the abuse policy on 404s: it takes a token for a client IP and
// reports whether one was there. It is asked when the answer would be 404,
// and before asking the authority about a host the edge does not know
// (host.go): so it stands between a link that exists and its redirect only
// on the first request an edge sees for a domain it has not received yet,
// from a client that has spent its budget.
type Limiter interface {
	Allow(ip netip.Addr) bool
}

// ClickRecorder takes a click per redirect: the link (domain and code),
// the request's Referer and User-Agent, the client's address (as ClientIP
// says: the peer, or what trusted proxies forwarded; the recorder derives
// the country and visitor hash from it off the response path and
// publishes neither it nor the raw headers), the status answered, which
// target served it (rule: 0 the link's own, i its i-th rule) and the
// time. It must not block, allocate or keep the slices.
type ClickRecorder interface {
	Record(d link.DomainID, code, referer, userAgent []byte, client netip.Addr, status int, rule uint8, atMillis int64)
}

// HostResolver answers a host the domain table lacks (resolve.Hosts): its
// domain (Found), NotFound when no active domain has it, or Unavailable.
// It may block for a bounded time.
type HostResolver interface {
	Resolve(host string) (*store.DomainState, resolve.Outcome)
}

// Counters are the handler's outcome counts; fields are updated atomically.
type Counters struct {
	// Limited counts 404s answered 429 because the client spent its
	// budget of them.
	Hits, NotFound, Gone, BadMethod, BadCode, Limited, Unavailable atomic.Uint64
	// SnapshotHits counts answers taken from the snapshot, OverlayHits
	// those taken from the overlay and Resolved those the resolver found
	// (long-tail cache or authority): the layers that answered.
	SnapshotHits, OverlayHits, Resolved atomic.Uint64
	// UnknownHost counts requests for a host no active domain has,
	// answered with the platform's plain 404 (or 429 past the client's
	// budget). RootRedirects counts "/" answered by a domain's root
	// redirect and NotFoundRedirects the unknown codes answered by a
	// domain's not-found redirect (counted in NotFound or BadCode too).
	UnknownHost, RootRedirects, NotFoundRedirects atomic.Uint64
	// HostAsks counts the hosts the table lacked that were asked of the
	// authority (Hosts).
	HostAsks atomic.Uint64
	// RuleHits counts redirects of links with rules that a rule's target
	// served, RuleDefaults those the link's own target served (no rule
	// held).
	RuleHits, RuleDefaults atomic.Uint64
	// PasswordForms counts password forms answered to GET or HEAD of a
	// protected link; Unlocked the redirects of such links a valid unlock
	// cookie let through, CookiesRefused the unlock cookies refused
	// (expired, another link's, from before a password change, forged).
	PasswordForms, Unlocked, CookiesRefused atomic.Uint64
	// BadForms counts unlock posts that were no form (400, 413, 415);
	// FormsRefused those whose CSRF token or form cookie was refused, or
	// that came from another site (403). Attempts are counted by the
	// unlock.Gate.
	BadForms, FormsRefused atomic.Uint64
}

// Handler answers redirects. Domains (optional) maps the request's host to
// its domain (host.go); without it, or before it has received a table,
// every host is the platform's domain. Store holds the overlay and the
// snapshot (the newer version of a link wins); Miss (optional) resolves
// what both lack, else a miss is a 404. Hosts (optional) answers a host
// the table lacks once it has one, else such a host is the platform's 404. NotFoundLimit (optional) is the
// per-client budget of 404s, past which a 404 is answered 429; ClientIP
// (optional) says who the client is (default: the socket's peer);
// FromProxy (optional) says whether the request came from a trusted proxy,
// whose X-Forwarded-Host then names the host. Started backs /-/startupz,
// Ready /-/readyz and Live /-/livez (nil: always OK), Metrics (optional)
// /-/metrics; Now is injectable for expiry tests.
type Handler struct {
	// Domains is the concrete table, not an interface: the host key is
	// built in a stack buffer, which a call through an interface would
	// move to the heap on every request.
	Domains       *store.Domains
	Store         Finder
	Miss          Resolver
	Hosts         HostResolver
	NotFoundLimit Limiter
	ClientIP      func(ctx *fasthttp.RequestCtx) netip.Addr
	FromProxy     func(ctx *fasthttp.RequestCtx) bool
	Clicks        ClickRecorder
	// Countries (optional) gives rules' country conditions the client's
	// country; without it no country condition holds (rules.go).
	Countries CountryLookup
	// Unlock (optional) opens password-protected links (password.go);
	// without it such a link answers 503, never its target.
	Unlock *unlock.Gate
	// Limits (optional) is the edge's account of links with a click limit
	// (limit.go): a redirect of one is taken from its allowance, and the
	// link is 410 once spent or once the edges' reports add up to its
	// limit. Without it a limited link is 410 only once the change saying
	// its counted clicks reached the limit arrives.
	Limits  *ClickLimits
	Started func() error
	Ready   func() error
	// Degraded (optional) names what the edge serves without: a /readyz
	// that passes Ready answers 200 with "degraded: <reason>" instead of
	// "ok". Degraded is not unready: an outage of NATS or control is
	// shared by every edge, and taking them all out of service for it
	// would turn "recent links answer 503" into "every link fails".
	Degraded func() string
	Live     func() error
	Metrics  func(w io.Writer)
	Now      func() time.Time
	Counters Counters

	devices deviceCache // rules' device of a User-Agent (rules.go)
}

var (
	// No intermediary may cache a redirect: links change and get disabled.
	// no-store forbids every cache to store the answer (RFC 9111 5.2.2.5),
	// so a max-age would add nothing.
	cacheControl   = []byte("private, no-store")
	headerCache    = []byte(fasthttp.HeaderCacheControl)
	headerLocation = []byte(fasthttp.HeaderLocation)
	allowGetHead   = []byte("GET, HEAD")
	headerAllow    = []byte(fasthttp.HeaderAllow)
	textNotFound   = []byte("404 not found\n")
	textGone       = []byte("410 gone: this link is no longer active\n")
	textBadMethod  = []byte("405 method not allowed: use GET or HEAD\n")
	textLimited    = []byte("429 too many requests for unknown links from this address; retry later\n")
	textUnavail    = []byte("503 this link cannot be checked right now; retry shortly\n")
	headerRetry    = []byte(fasthttp.HeaderRetryAfter)
	retryAfter     = []byte("1")
	textPlain      = []byte("text/plain; charset=utf-8")
	// The edge's own paths: none is one path segment of code characters,
	// so no code can shadow them (link.EdgeRoutes). Those under /-/ are
	// the operator's and answer on any host; the rest are the domain's.
	pathOps      = "/-/"
	pathMetrics  = "/-/metrics"
	pathLivez    = "/-/livez"
	pathReadyz   = "/-/readyz"
	pathStartupz = "/-/startupz"
	pathRobots   = "/robots.txt"
	pathFavicon  = "/favicon.ico"
	methodGet    = []byte(fasthttp.MethodGet)
	methodHead   = []byte(fasthttp.MethodHead)
)

// Serve is the fasthttp request handler. The hit path does not allocate.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) {
	m := ctx.Method()
	if !equal(m, methodGet) && !equal(m, methodHead) {
		h.otherMethod(ctx, m)
		return
	}
	path := ctx.Path()
	if hasPrefix(path, pathOps) {
		h.serveOps(ctx, path) // probes and scrapes come by address, on any host
		return
	}
	dom, ok := h.domain(ctx)
	if !ok {
		// Never another domain's links, and nothing of any domain's: the
		// host's own, once the authority says which it is, else the
		// platform's own plain 404.
		if dom = h.unknownHost(ctx); dom == nil {
			return
		}
	}
	if len(path) < 2 || !link.ValidCodeSyntax(path[1:]) {
		h.serveDomain(ctx, dom, path)
		return
	}
	code := path[1:]
	hit, ok := h.Store.Find(dom.Conf.ID, code)
	switch {
	case !ok:
		e := h.resolve(ctx, dom, code)
		if e == nil {
			return
		}
		h.Counters.Resolved.Add(1)
		h.answer(ctx, e.Domain, code, !e.Missing && e.Status == link.Active, e.ExpiresAt, e.RedirectType,
			bytesOf(e.URL), nil, bytesOf(e.Extras))
	case hit.Overlay:
		h.Counters.OverlayHits.Add(1)
		r := &hit.Rec
		h.answer(ctx, dom.Conf.ID, code, r.Status == link.Active, r.ExpiresAt, r.RedirectType, r.Origin, r.Rest, r.Extras)
	default:
		h.Counters.SnapshotHits.Add(1)
		s := &hit.Snap
		h.answer(ctx, dom.Conf.ID, code, s.Status == link.Active, s.ExpiresAt, s.RedirectType, s.Origin, s.Rest, s.Extras)
	}
	// Origin and Rest point into the mapped snapshot file or an overlay
	// arena chunk, which stay mapped only while the hit is reachable: keep
	// it so until the answer has copied them.
	runtime.KeepAlive(hit)
}

// locationBufs hold a Location assembled from a snapshot entry's origin and
// rest: fasthttp copies the value, so a buffer goes back right after.
var locationBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// answer writes the redirect or 410 for a known link whose target is origin
// followed by rest, and whose extras (rules, password: link.ViewExtras)
// are extras, nil for a plain link. It does not allocate.
func (h *Handler) answer(ctx *fasthttp.RequestCtx, d link.DomainID, code []byte, active bool, expiresAt int64, rt link.RedirectType, origin, rest, extras []byte) {
	// Expiry is evaluated here, at read time: a link stops redirecting the
	// instant it expires, whatever the stream says. A link that is no
	// longer active is 410 before any of its extras: a protected one
	// never asks its password then (nor one whose click limit its counted
	// clicks have reached: extras, rules.go).
	now := h.now(ctx).UnixMilli()
	if !active || (expiresAt != 0 && now >= expiresAt) {
		h.Counters.Gone.Add(1)
		h.text(ctx, fasthttp.StatusGone, textGone)
		return
	}
	var rule int
	if len(extras) != 0 {
		var ok bool
		if rule, origin, rest, ok = h.extras(ctx, d, code, extras, now, origin, rest); !ok {
			return
		}
	}
	h.Counters.Hits.Add(1)
	if h.Clicks != nil {
		h.Clicks.Record(d, code, ctx.Request.Header.Referer(), ctx.Request.Header.UserAgent(), h.clientIP(ctx), int(rt), uint8(rule), now)
	}
	// SetCanonical: the keys are already canonical, so fasthttp need not
	// normalize them on every hit.
	ctx.Response.Header.SetCanonical(headerCache, cacheControl)
	if len(rest) == 0 {
		ctx.Response.Header.SetCanonical(headerLocation, origin)
	} else {
		bp := locationBufs.Get().(*[]byte)
		*bp = append(append((*bp)[:0], origin...), rest...)
		ctx.Response.Header.SetCanonical(headerLocation, *bp)
		if cap(*bp) <= 8<<10 { // do not pin a rare huge target in the pool
			locationBufs.Put(bp)
		}
	}
	ctx.Response.SetStatusCode(int(rt))
}

// resolve handles a miss of code on dom. It returns the entry to answer
// from, or nil after writing the answer itself.
func (h *Handler) resolve(ctx *fasthttp.RequestCtx, dom *store.DomainState, code []byte) *store.Entry {
	if h.Miss == nil {
		h.notFound(ctx, dom, &h.Counters.NotFound)
		return nil
	}
	e, outcome := h.Miss.Resolve(dom, code)
	switch outcome {
	case resolve.Found:
		return e
	case resolve.Unavailable:
		h.unavailable(ctx)
	default:
		h.notFound(ctx, dom, &h.Counters.NotFound)
	}
	return nil
}

// notFound answers a miss, counted in n: dom's not-found redirect (302)
// if it has one (dom nil: none), else 404; or 429 once the client has
// spent its budget of them: the abuse policy against scans, which never
// touches a code that exists (that one was answered before it got here).
// A not-found redirect spends the budget too: to a scanner it is a 404.
func (h *Handler) notFound(ctx *fasthttp.RequestCtx, dom *store.DomainState, n *atomic.Uint64) {
	if !h.allowNotFound(ctx) {
		return
	}
	n.Add(1)
	if dom != nil && dom.Conf.NotFoundRedirect != "" {
		h.Counters.NotFoundRedirects.Add(1)
		h.redirectTo(ctx, dom.Conf.NotFoundRedirect)
		return
	}
	h.text(ctx, fasthttp.StatusNotFound, textNotFound)
}

// allowNotFound takes a token of the client's 404 budget, or answers 429
// and reports false when it has none.
func (h *Handler) allowNotFound(ctx *fasthttp.RequestCtx) bool {
	if h.NotFoundLimit != nil && !h.NotFoundLimit.Allow(h.clientIP(ctx)) {
		h.Counters.Limited.Add(1)
		ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
		h.text(ctx, fasthttp.StatusTooManyRequests, textLimited)
		return false
	}
	return true
}

// unavailable answers 503: the edge cannot prove the answer now.
func (h *Handler) unavailable(ctx *fasthttp.RequestCtx) {
	h.Counters.Unavailable.Add(1)
	ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
	h.text(ctx, fasthttp.StatusServiceUnavailable, textUnavail)
}

// redirectTo answers 302 to a domain's own target (its root or not-found
// page), which no intermediary may cache either: the domain's settings
// change.
func (h *Handler) redirectTo(ctx *fasthttp.RequestCtx, target string) {
	ctx.Response.Header.SetCanonical(headerCache, cacheControl)
	ctx.Response.Header.SetCanonical(headerLocation, bytesOf(target))
	ctx.Response.SetStatusCode(fasthttp.StatusFound)
}

func (h *Handler) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	if h.ClientIP != nil {
		return h.ClientIP(ctx)
	}
	a, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return a.Unmap()
}

// now is the request's time: fasthttp reads the clock once per request
// already, so the hit path need not read it again.
func (h *Handler) now(ctx *fasthttp.RequestCtx) time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return ctx.Time()
}

// serveOps answers the operator's paths, under /-/, on any host.
func (h *Handler) serveOps(ctx *fasthttp.RequestCtx, path []byte) {
	switch string(path) {
	case pathLivez:
		h.probe(ctx, h.Live)
	case pathReadyz:
		if h.Degraded != nil && (h.Ready == nil || h.Ready() == nil) {
			if reason := h.Degraded(); reason != "" {
				h.text(ctx, fasthttp.StatusOK, []byte("degraded: "+reason+"\n"))
				return
			}
		}
		h.probe(ctx, h.Ready)
	case pathStartupz:
		h.probe(ctx, h.Started)
	case pathMetrics:
		if h.Metrics == nil {
			h.text(ctx, fasthttp.StatusNotFound, textNotFound)
			return
		}
		ctx.Response.Header.SetBytesKV(headerCache, cacheControl)
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		h.Metrics(ctx)
	default:
		h.notFound(ctx, nil, &h.Counters.BadCode)
	}
}

// serveDomain answers a path of dom that is not a code: "/" (the domain's
// root redirect, else 404), its robots.txt and favicon, and for anything
// else what an unknown code gets.
func (h *Handler) serveDomain(ctx *fasthttp.RequestCtx, dom *store.DomainState, path []byte) {
	switch string(path) {
	case "/":
		if dom.Conf.RootRedirect != "" && rootAsked(ctx) {
			h.Counters.RootRedirects.Add(1)
			h.redirectTo(ctx, dom.Conf.RootRedirect)
			return
		}
		h.notFound(ctx, nil, &h.Counters.BadCode)
	case pathRobots:
		robots := dom.Conf.Robots
		if robots == "" {
			robots = link.DefaultRobots
		}
		h.text(ctx, fasthttp.StatusOK, bytesOf(robots))
	case pathFavicon:
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		if isUnlockPath(path) {
			// A password form's address opened by hand (or reloaded
			// after its answer): the link asks again if it must.
			h.seeCode(ctx, path[1:len(path)-len(unlockSuffix)])
			return
		}
		h.notFound(ctx, dom, &h.Counters.BadCode)
	}
}

// otherMethod answers a method other than GET and HEAD: POST of a
// password form (password.go), else 405.
func (h *Handler) otherMethod(ctx *fasthttp.RequestCtx, m []byte) {
	path := ctx.Path()
	unlockPath := isUnlockPath(path)
	if unlockPath && equal(m, methodPost) {
		h.serveUnlock(ctx, path)
		return
	}
	h.Counters.BadMethod.Add(1)
	if unlockPath {
		ctx.Response.Header.SetCanonical(headerAllow, allowUnlock)
	} else {
		ctx.Response.Header.SetCanonical(headerAllow, allowGetHead)
	}
	h.text(ctx, fasthttp.StatusMethodNotAllowed, textBadMethod)
}

// probe answers 200 when check passes (or is nil), else 503 with its reason.
func (h *Handler) probe(ctx *fasthttp.RequestCtx, check func() error) {
	if check != nil {
		if err := check(); err != nil {
			h.text(ctx, fasthttp.StatusServiceUnavailable, []byte(err.Error()+"\n"))
			return
		}
	}
	h.text(ctx, fasthttp.StatusOK, []byte("ok\n"))
}

func (h *Handler) text(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.Header.SetCanonical(headerCache, cacheControl)
	ctx.Response.Header.SetContentTypeBytes(textPlain)
	ctx.SetStatusCode(status)
	ctx.SetBody(body)
}

// rootAsked reports whether the request's target really is the root:
// fasthttp gives "/" as the path of a request whose URI it could not parse
// (a malformed Host), which must not get the domain's root redirect.
func rootAsked(ctx *fasthttp.RequestCtx) bool {
	u := ctx.Request.Header.RequestURI()
	if i := bytes.Index(u, schemeSep); i >= 0 { // absolute form
		u = u[i+len(schemeSep):]
		j := bytes.IndexByte(u, '/')
		if j < 0 {
			return true
		}
		u = u[j:]
	}
	if j := bytes.IndexAny(u, "?#"); j >= 0 {
		u = u[:j]
	}
	return len(u) == 0 || string(u) == "/"
}

var schemeSep = []byte("://")

func equal(a, b []byte) bool { return string(a) == string(b) }

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// bytesOf is s as bytes without a copy, for fasthttp setters that copy
// what they are given; the bytes must not be modified.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
