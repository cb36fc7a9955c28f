// Package redirect is the edge's fasthttp handler: GET or HEAD /{code}
// answered from memory.
package redirect

import (
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
	"github.com/edgelink/edgelink/shared/link"
)

// Finder finds what the edge holds of a code without allocating: the
// overlay and the snapshot together (store.Layers), or the overlay alone
// (store.Overlay). A hit's bytes stay valid while the hit is reachable.
type Finder interface {
	Find(d link.DomainID, code []byte) (store.Hit, bool)
}

// Resolver answers a code neither the overlay nor the snapshot holds: the
// long-tail cache and the authority. It may block for a bounded time.
type Resolver interface {
	Resolve(code []byte) (*store.Entry, resolve.Outcome)
}

// Limiter is the abuse policy on 404s: it takes a token for a client IP and
// reports whether one was there. It is asked only when the answer would be
// 404, so it never stands between a link that exists and its redirect.
type Limiter interface {
	Allow(ip netip.Addr) bool
}

// ClickRecorder takes a click per redirect: the code, the request's
// Referer and User-Agent (the recorder keeps what it needs; never the
// client's IP), the status answered and the time. It must not block,
// allocate or keep the slices.
type ClickRecorder interface {
	Record(code, referer, userAgent []byte, status int, atMillis int64)
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
}

// Handler answers redirects. Store holds the overlay and the snapshot
// (the newer version of a code wins); Miss (optional) resolves what both
// lack, else a miss is a 404. NotFoundLimit (optional) is the per-client
// budget of 404s, past which a 404 is answered 429; ClientIP (optional) says
// who the client is (default: the socket's peer). Started backs
// /-/startupz, Ready /-/readyz and Live /-/livez (nil: always OK), Metrics
// (optional) /-/metrics; Now is injectable for expiry tests.
type Handler struct {
	Store         Finder
	Miss          Resolver
	NotFoundLimit Limiter
	ClientIP      func(ctx *fasthttp.RequestCtx) netip.Addr
	Clicks        ClickRecorder
	Started       func() error
	Ready         func() error
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
	robotsTxt      = []byte("User-agent: *\nDisallow:\n")
	// The edge's own paths: none is one path segment of code characters,
	// so no code can shadow them (link.EdgeRoutes).
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
		h.Counters.BadMethod.Add(1)
		ctx.Response.Header.SetCanonical(headerAllow, allowGetHead)
		h.text(ctx, fasthttp.StatusMethodNotAllowed, textBadMethod)
		return
	}
	path := ctx.Path()
	if len(path) < 2 || !link.ValidCodeSyntax(path[1:]) {
		h.serveOwn(ctx, path)
		return
	}
	code := path[1:]
	hit, ok := h.Store.Find(link.DefaultDomain, code)
	switch {
	case !ok:
		e := h.resolve(ctx, code)
		if e == nil {
			return
		}
		h.Counters.Resolved.Add(1)
		h.answer(ctx, code, !e.Missing && e.Status == link.Active, e.ExpiresAt, e.RedirectType,
			unsafe.Slice(unsafe.StringData(e.URL), len(e.URL)), nil)
	case hit.Overlay:
		h.Counters.OverlayHits.Add(1)
		r := &hit.Rec
		h.answer(ctx, code, r.Status == link.Active, r.ExpiresAt, r.RedirectType, r.Origin, r.Rest)
	default:
		h.Counters.SnapshotHits.Add(1)
		s := &hit.Snap
		h.answer(ctx, code, s.Status == link.Active, s.ExpiresAt, s.RedirectType, s.Origin, s.Rest)
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
// followed by rest. It does not allocate.
func (h *Handler) answer(ctx *fasthttp.RequestCtx, code []byte, active bool, expiresAt int64, rt link.RedirectType, origin, rest []byte) {
	// Expiry is evaluated here, at read time: a link stops redirecting the
	// instant it expires, whatever the stream says.
	now := h.now(ctx).UnixMilli()
	if !active || (expiresAt != 0 && now >= expiresAt) {
		h.Counters.Gone.Add(1)
		h.text(ctx, fasthttp.StatusGone, textGone)
		return
	}
	h.Counters.Hits.Add(1)
	if h.Clicks != nil {
		h.Clicks.Record(code, ctx.Request.Header.Referer(), ctx.Request.Header.UserAgent(), int(rt), now)
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

// resolve handles an overlay miss. It returns the entry to answer from, or
// nil after writing the answer itself.
func (h *Handler) resolve(ctx *fasthttp.RequestCtx, code []byte) *store.Entry {
	if h.Miss == nil {
		h.notFound(ctx, &h.Counters.NotFound)
		return nil
	}
	e, outcome := h.Miss.Resolve(code)
	switch outcome {
	case resolve.Found:
		return e
	case resolve.Unavailable:
		h.Counters.Unavailable.Add(1)
		ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
		h.text(ctx, fasthttp.StatusServiceUnavailable, textUnavail)
	default:
		h.notFound(ctx, &h.Counters.NotFound)
	}
	return nil
}

// notFound answers 404, counted in n, or 429 once the client has spent its
// budget of 404s: the abuse policy against scans, which never touches a
// code that exists (that one was answered before it got here).
func (h *Handler) notFound(ctx *fasthttp.RequestCtx, n *atomic.Uint64) {
	if h.NotFoundLimit != nil && !h.NotFoundLimit.Allow(h.clientIP(ctx)) {
		h.Counters.Limited.Add(1)
		ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
		h.text(ctx, fasthttp.StatusTooManyRequests, textLimited)
		return
	}
	n.Add(1)
	h.text(ctx, fasthttp.StatusNotFound, textNotFound)
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

// serveOwn answers a path that is not a code: the edge's own routes, and
// 404 for anything else.
func (h *Handler) serveOwn(ctx *fasthttp.RequestCtx, path []byte) {
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
	case pathRobots:
		h.text(ctx, fasthttp.StatusOK, robotsTxt)
	case pathFavicon:
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		h.notFound(ctx, &h.Counters.BadCode)
	}
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

func equal(a, b []byte) bool { return string(a) == string(b) }
