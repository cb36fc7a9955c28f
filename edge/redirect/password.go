package redirect

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/shared/link"
)

// Password-protected links (docs/edge.md). GET /{code} of such a link
// answers 200 with a small form unless the request carries the link's
// unlock cookie; the form posts to /{code}/unlock, a path no code can take
// (a code is one segment), on the same host, so it works on every domain
// the edge serves. A right password gets the unlock cookie (Path=/{code})
// and 303 to /{code}, which then redirects. Nothing the edge answers
// before that names the link's target: not the page, not a header.

const unlockSuffix = "/unlock"

var (
	// The cookies: the unlock cookie says a password was given for the
	// link at its path; the form cookie holds the nonce a form's CSRF
	// token is bound to.
	cookieUnlock = []byte("elk_unlock")
	cookieForm   = []byte("elk_form")

	methodPost       = []byte(fasthttp.MethodPost)
	allowUnlock      = []byte("GET, HEAD, POST")
	formContentType  = []byte("application/x-www-form-urlencoded")
	textHTML         = []byte("text/html; charset=utf-8")
	headerCSP        = []byte(fasthttp.HeaderContentSecurityPolicy)
	headerReferrer   = []byte(fasthttp.HeaderReferrerPolicy)
	headerNoSniff    = []byte(fasthttp.HeaderXContentTypeOptions)
	headerFrame      = []byte(fasthttp.HeaderXFrameOptions)
	headerRobots     = []byte(fasthttp.HeaderXRobotsTag)
	headerOrigin     = []byte(fasthttp.HeaderOrigin)
	headerFetchSite  = []byte("Sec-Fetch-Site")
	headerProto      = []byte(fasthttp.HeaderXForwardedProto)
	valueCSP         = []byte(unlock.ContentSecurityPolicy)
	valueNoReferrer  = []byte("no-referrer")
	valueNoSniff     = []byte("nosniff")
	valueDeny        = []byte("DENY")
	valueNoIndex     = []byte("noindex, nofollow, noarchive")
	textTooLarge     = []byte("413 a password form is at most 1 KiB\n")
	textNotForm      = []byte("415 post the password form (application/x-www-form-urlencoded)\n")
	textCannotUnlock = []byte("503 this link cannot be unlocked right now; retry shortly\n")
)

// isUnlockPath reports whether path is /{code}/unlock for a code's syntax.
func isUnlockPath(path []byte) bool {
	return len(path) > len(unlockSuffix)+1 && string(path[len(path)-len(unlockSuffix):]) == unlockSuffix &&
		link.ValidCodeSyntax(path[1:len(path)-len(unlockSuffix)])
}

// unlocked reports whether the request carries an unlock cookie for code
// on domain d with password hash hash. It does not allocate.
func (h *Handler) unlocked(ctx *fasthttp.RequestCtx, d link.DomainID, code, hash []byte, nowMillis int64) bool {
	if h.Unlock == nil {
		return false
	}
	c := ctx.Request.Header.CookieBytes(cookieUnlock)
	if len(c) == 0 {
		return false
	}
	if h.Unlock.Unlocked(c, d, code, hash, nowMillis/1000) {
		h.Counters.Unlocked.Add(1)
		return true
	}
	// Expired, another link's (a link on another domain at the same
	// path), signed before a password change or with a key this edge
	// lacks, or forged: the form again.
	h.Counters.CookiesRefused.Add(1)
	return false
}

// pageBufs hold form pages while fasthttp copies them.
var pageBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// passwordForm answers GET or HEAD of a protected link without its
// cookie: the form, 200.
func (h *Handler) passwordForm(ctx *fasthttp.RequestCtx, d link.DomainID, code []byte, nowMillis int64) {
	h.Counters.PasswordForms.Add(1)
	h.form(ctx, d, code, nowMillis, fasthttp.StatusOK, unlock.MessageNone)
}

// form writes the password form for code with a message and status: a
// fresh form cookie and the token bound to it, and the headers that keep
// the page private (no cache stores it, no page frames it, no referrer
// leaves it, no search engine indexes it, nothing but its own style
// loads). Without a Gate the link cannot be opened here: 503.
func (h *Handler) form(ctx *fasthttp.RequestCtx, d link.DomainID, code []byte, nowMillis int64, status int, msg unlock.Message) {
	if h.Unlock == nil {
		h.Counters.Unavailable.Add(1)
		ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
		h.text(ctx, fasthttp.StatusServiceUnavailable, textCannotUnlock)
		return
	}
	now := nowMillis / 1000
	nonce, token := h.Unlock.NewForm(d, code, now)
	h.setCookie(ctx, cookieForm, nonce, code, h.Unlock.FormTTL(), fasthttp.CookieSameSiteStrictMode)

	bp := pageBufs.Get().(*[]byte)
	action := append(append(append((*bp)[:0], '/'), code...), unlockSuffix...)
	if q := ctx.URI().QueryString(); len(q) > 0 {
		action = append(append(action, '?'), q...)
	}
	full := unlock.AppendPage(action, &unlock.Page{Action: action, Token: token, Message: msg})
	hdr := &ctx.Response.Header
	hdr.SetCanonical(headerCache, cacheControl)
	hdr.SetCanonical(headerCSP, valueCSP)
	hdr.SetCanonical(headerReferrer, valueNoReferrer)
	hdr.SetCanonical(headerNoSniff, valueNoSniff)
	hdr.SetCanonical(headerFrame, valueDeny)
	hdr.SetCanonical(headerRobots, valueNoIndex)
	hdr.SetCanonical(headerVary, varyValues[varyCookie])
	hdr.SetContentTypeBytes(textHTML)
	ctx.SetStatusCode(status)
	ctx.SetBody(full[len(action):])
	*bp = full[:0]
	if cap(*bp) <= 16<<10 {
		pageBufs.Put(bp)
	}
}

// setCookie sets one of the edge's cookies for code's path: HttpOnly,
// Secure when the request came over TLS (to the edge, or to a trusted
// proxy that says so), valid for ttl.
func (h *Handler) setCookie(ctx *fasthttp.RequestCtx, name, value, code []byte, ttl time.Duration, sameSite fasthttp.CookieSameSite) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKeyBytes(name)
	c.SetValueBytes(value)
	var path [1 + link.MaxCodeLen]byte
	c.SetPathBytes(append(append(path[:0], '/'), code...))
	c.SetMaxAge(int(ttl / time.Second))
	c.SetHTTPOnly(true)
	c.SetSameSite(sameSite)
	c.SetSecure(h.overTLS(ctx))
	ctx.Response.Header.SetCookie(c)
}

// overTLS reports whether the client reached the edge over TLS: its own,
// or a trusted proxy's (X-Forwarded-Proto: https).
func (h *Handler) overTLS(ctx *fasthttp.RequestCtx) bool {
	if ctx.IsTLS() {
		return true
	}
	return h.FromProxy != nil && h.FromProxy(ctx) && bytes.EqualFold(ctx.Request.Header.PeekBytes(headerProto), []byte("https"))
}

// serveUnlock answers POST /{code}/unlock, the password form's post. In
// order: the host's domain and the link, as GET finds them (an unknown
// code is the 404 GET gives, from the same budget; a link no longer
// active its 410; a link without a password 303 to itself); then the
// request: a form (415, 413, 400), posted from the edge's own page (its
// CSRF token, bound to the form cookie: else 403 and a fresh form); then
// the attempt, limited per client and per link (429) and by the
// verifications at once (503): a wrong password is 403 and the form
// again, a right one the unlock cookie and 303 to /{code}. Every form it
// answers says nothing about the link beyond what GET said.
func (h *Handler) serveUnlock(ctx *fasthttp.RequestCtx, path []byte) {
	code := path[1 : len(path)-len(unlockSuffix)]
	dom, ok := h.domain(ctx)
	if !ok {
		if dom = h.unknownHost(ctx); dom == nil {
			return
		}
	}
	l, hit, found := h.lookup(ctx, dom, code)
	defer runtime.KeepAlive(hit) // l's bytes point into it
	if !found {
		return
	}
	nowT := h.now(ctx)
	if !l.active || (l.expiresAt != 0 && nowT.UnixMilli() >= l.expiresAt) || h.limitReached(l.extras) {
		h.Counters.Gone.Add(1)
		h.text(ctx, fasthttp.StatusGone, textGone)
		return
	}
	v := link.ViewExtras(l.extras)
	hash := v.PasswordHash()
	if hash == nil {
		h.seeCode(ctx, code) // nothing to unlock: the link answers for itself
		return
	}
	if h.Unlock == nil {
		h.form(ctx, l.domain, code, nowT.UnixMilli(), fasthttp.StatusServiceUnavailable, unlock.MessageBusy)
		return
	}
	if !isFormType(ctx.Request.Header.ContentType()) {
		h.Counters.BadForms.Add(1)
		h.text(ctx, fasthttp.StatusUnsupportedMediaType, textNotForm)
		return
	}
	body := ctx.Request.Body()
	if len(body) > unlock.MaxBodyLen {
		h.Counters.BadForms.Add(1)
		h.text(ctx, fasthttp.StatusRequestEntityTooLarge, textTooLarge)
		return
	}
	nowMillis := nowT.UnixMilli()
	var f unlock.Form
	if err := unlock.ParseForm(body, &f); err != nil {
		h.Counters.BadForms.Add(1)
		h.form(ctx, l.domain, code, nowMillis, fasthttp.StatusBadRequest, unlock.MessageBadForm)
		return
	}
	if crossSite(ctx, h.requestHost(ctx)) ||
		!h.Unlock.CheckForm(ctx.Request.Header.CookieBytes(cookieForm), f.Token, l.domain, code, nowT.Unix()) {
		h.Counters.FormsRefused.Add(1)
		h.form(ctx, l.domain, code, nowMillis, fasthttp.StatusForbidden, unlock.MessageExpired)
		return
	}
	outcome, retry := h.Unlock.Attempt(h.clientIP(ctx), l.domain, code, hash, f.Password, f.TooLong)
	switch outcome {
	case unlock.Right:
		var buf [unlock.TokenLen]byte
		h.setCookie(ctx, cookieUnlock, h.Unlock.AppendCookie(buf[:0], l.domain, code, hash, nowT.Unix()), code,
			h.Unlock.CookieTTL(), fasthttp.CookieSameSiteLaxMode)
		h.seeCode(ctx, code)
	case unlock.Wrong:
		h.form(ctx, l.domain, code, nowMillis, fasthttp.StatusForbidden, unlock.MessageWrong)
	case unlock.LimitedClient, unlock.LimitedLink:
		ctx.Response.Header.SetCanonical(headerRetry, strconv.AppendInt(nil, int64(retry/time.Second), 10))
		h.form(ctx, l.domain, code, nowMillis, fasthttp.StatusTooManyRequests, unlock.MessageLimited)
	case unlock.Busy:
		ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
		h.form(ctx, l.domain, code, nowMillis, fasthttp.StatusServiceUnavailable, unlock.MessageBusy)
	default: // Broken: this link cannot be opened
		h.Counters.Unavailable.Add(1)
		ctx.Response.Header.SetCanonical(headerRetry, retryAfter)
		h.text(ctx, fasthttp.StatusServiceUnavailable, textCannotUnlock)
	}
}

// seeCode answers 303 to /{code} with the request's query string, which
// the form carried through (a rule may read it).
func (h *Handler) seeCode(ctx *fasthttp.RequestCtx, code []byte) {
	var buf [1 + link.MaxCodeLen]byte
	loc := append(append(buf[:0], '/'), code...)
	if q := ctx.URI().QueryString(); len(q) > 0 {
		loc = append(append(loc, '?'), q...)
	}
	ctx.Response.Header.SetCanonical(headerCache, cacheControl)
	ctx.Response.Header.SetCanonical(headerLocation, loc)
	ctx.Response.SetStatusCode(fasthttp.StatusSeeOther)
}

// found is a link as Store or Miss know it, for the unlock post.
type found struct {
	domain    link.DomainID
	active    bool
	expiresAt int64
	extras    []byte
}

// lookup finds code on dom as Serve does; found false after writing the
// answer itself (404, 429 or 503). The bytes of the result point into hit,
// which the caller keeps reachable while it uses them.
func (h *Handler) lookup(ctx *fasthttp.RequestCtx, dom *store.DomainState, code []byte) (l found, hit store.Hit, ok bool) {
	hit, ok = h.Store.Find(dom.Conf.ID, code)
	switch {
	case !ok:
		e := h.resolve(ctx, dom, code)
		if e == nil {
			return l, hit, false
		}
		return found{domain: e.Domain, active: !e.Missing && e.Status == link.Active, expiresAt: e.ExpiresAt,
			extras: bytesOf(e.Extras)}, hit, true
	case hit.Overlay:
		r := &hit.Rec
		return found{domain: dom.Conf.ID, active: r.Status == link.Active, expiresAt: r.ExpiresAt, extras: r.Extras}, hit, true
	default:
		s := &hit.Snap
		return found{domain: dom.Conf.ID, active: s.Status == link.Active, expiresAt: s.ExpiresAt, extras: s.Extras}, hit, true
	}
}

// isFormType reports whether a Content-Type is a urlencoded form (any
// parameters, such as a charset, allowed).
func isFormType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), formContentType)
}

// crossSite reports whether a post says it comes from another site: a
// Sec-Fetch-Site other than same-origin, or an Origin naming another host
// ("null", which a page with Referrer-Policy: no-referrer sends, says
// nothing). The form token is the check; this refuses early what a
// browser already says is foreign.
func crossSite(ctx *fasthttp.RequestCtx, host []byte) bool {
	if s := ctx.Request.Header.PeekBytes(headerFetchSite); len(s) > 0 && string(s) != "same-origin" {
		return true
	}
	o := ctx.Request.Header.PeekBytes(headerOrigin)
	if len(o) == 0 || string(o) == "null" {
		return false
	}
	i := bytes.Index(o, schemeSep)
	if i < 0 {
		return true
	}
	return !bytes.EqualFold(o[i+len(schemeSep):], host)
}
