// Package redirect is the edge's fasthttp handler: GET or HEAD /{code}
// answered from memory.
package redirect

import (
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

// Lookuper finds what the edge knows of a code.
type Lookuper interface {
	Lookup(code []byte) (*store.Entry, bool)
}

// Counters are the handler's outcome counts; fields are updated atomically.
type Counters struct {
	Hits, NotFound, Gone, BadMethod, BadCode atomic.Uint64
}

// Handler answers redirects. Ready backs /readyz; Now is injectable for
// expiry tests.
type Handler struct {
	Store    Lookuper
	Ready    func() error
	Now      func() time.Time
	Counters Counters
}

var (
	// No intermediary may cache a redirect: links change and get disabled.
	cacheControl  = []byte("private, no-store, max-age=0")
	headerCache   = []byte(fasthttp.HeaderCacheControl)
	allowGetHead  = []byte("GET, HEAD")
	headerAllow   = []byte(fasthttp.HeaderAllow)
	textNotFound  = []byte("404 not found\n")
	textGone      = []byte("410 gone: this link is no longer active\n")
	textBadMethod = []byte("405 method not allowed: use GET or HEAD\n")
	textPlain     = []byte("text/plain; charset=utf-8")
	robotsTxt     = []byte("User-agent: *\nDisallow:\n")
	pathLivez     = "/livez"
	pathReadyz    = "/readyz"
	pathRobots    = "/robots.txt"
	pathFavicon   = "/favicon.ico"
	methodGet     = []byte(fasthttp.MethodGet)
	methodHead    = []byte(fasthttp.MethodHead)
)

// Serve is the fasthttp request handler. The hit path does not allocate.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) {
	m := ctx.Method()
	if !equal(m, methodGet) && !equal(m, methodHead) {
		h.Counters.BadMethod.Add(1)
		ctx.Response.Header.SetBytesKV(headerAllow, allowGetHead)
		h.text(ctx, fasthttp.StatusMethodNotAllowed, textBadMethod)
		return
	}
	path := ctx.Path()
	if len(path) < 2 {
		h.Counters.NotFound.Add(1)
		h.text(ctx, fasthttp.StatusNotFound, textNotFound)
		return
	}
	code := path[1:]
	if h.serveOwn(ctx, path) {
		return
	}
	e, ok := h.Store.Lookup(code)
	if !ok {
		h.Counters.NotFound.Add(1)
		h.text(ctx, fasthttp.StatusNotFound, textNotFound)
		return
	}
	if !e.Live(h.now().UnixMilli()) {
		h.Counters.Gone.Add(1)
		h.text(ctx, fasthttp.StatusGone, textGone)
		return
	}
	h.Counters.Hits.Add(1)
	ctx.Response.Header.SetBytesKV(headerCache, cacheControl)
	ctx.Response.Header.Set(fasthttp.HeaderLocation, e.URL)
	ctx.Response.SetStatusCode(int(e.RedirectType))
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// serveOwn answers the edge's own routes, which control reserves so they can
// never be codes, and 404 for any other path that is not a code. It reports
// whether it answered.
func (h *Handler) serveOwn(ctx *fasthttp.RequestCtx, path []byte) bool {
	switch string(path) {
	case pathLivez:
		h.text(ctx, fasthttp.StatusOK, []byte("ok\n"))
		return true
	case pathReadyz:
		if h.Ready != nil {
			if err := h.Ready(); err != nil {
				h.text(ctx, fasthttp.StatusServiceUnavailable, []byte(err.Error()+"\n"))
				return true
			}
		}
		h.text(ctx, fasthttp.StatusOK, []byte("ok\n"))
		return true
	case pathRobots:
		h.text(ctx, fasthttp.StatusOK, robotsTxt)
		return true
	case pathFavicon:
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return true
	}
	if link.ValidCodeSyntax(path[1:]) {
		return false
	}
	h.Counters.BadCode.Add(1)
	h.text(ctx, fasthttp.StatusNotFound, textNotFound)
	return true
}

func (h *Handler) text(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.Header.SetBytesKV(headerCache, cacheControl)
	ctx.Response.Header.SetContentTypeBytes(textPlain)
	ctx.SetStatusCode(status)
	ctx.SetBody(body)
}

func equal(a, b []byte) bool { return string(a) == string(b) }
