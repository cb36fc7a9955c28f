package redirect

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

// hostKeyRoom holds any host link.AppendHostKey accepts (253 bytes).
const hostKeyRoom = 256

// domain returns the domain a request is for, from its host: the
// request's Host (or the authority of an absolute request-target), or,
// from a trusted proxy (FromProxy), the host it forwarded in
// X-Forwarded-Host. ok is false for a host no active domain has, which
// must never fall back into another domain's namespace. An edge given no
// domain table, or no authority to ask of hosts, serves every host as the
// platform's domain before it has a table, as it did before domains; one
// that can ask looks the host up in what its table has learnt and asks of
// the rest (unknownHost), table or not yet.
//
// The usual Host (ASCII, any case, maybe a port or a trailing dot) is
// looked up without allocating; one that needs IDNA mapping (a Unicode
// name) or an IPv6 literal takes link.CanonicalHost, which may.
func (h *Handler) domain(ctx *fasthttp.RequestCtx) (*store.DomainState, bool) {
	if h.Domains == nil || h.Hosts == nil && !h.Domains.Known() {
		return h.platform()
	}
	host := h.requestHost(ctx)
	var buf [hostKeyRoom]byte
	if key, ok := link.AppendHostKey(buf[:0], host); ok {
		return h.Domains.ByHost(key)
	}
	return h.slowDomain(host)
}

// requestHost is the host a request names: its Host (or the authority of
// an absolute request-target), or the one a trusted proxy forwarded.
func (h *Handler) requestHost(ctx *fasthttp.RequestCtx) []byte {
	host := ctx.Host()
	if h.FromProxy != nil && h.FromProxy(ctx) {
		if fwd := forwardedHost(ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedHost)); fwd != nil {
			host = fwd
		}
	}
	return host
}

// unknownHost handles a request whose host the domain table lacks. It
// returns the host's domain, learnt from the authority, or nil after
// writing the answer itself: the platform's plain 404 only when the
// authority said no active domain has the host (or the host is no host
// name at all), 503 when it could not tell. A domain created a moment ago
// is on the authority before its change event reaches this edge, and its
// links' 201s promise a redirect now.
//
// The ask is paid from the client's 404 budget before it is made, so a
// flood of invented hosts from one client asks at most as often as its
// budget allows, then gets 429 without asking; a real new domain costs a
// client one token, on the first request this edge sees for it (then the
// table has it). Nothing is kept of a "not found": the domain may be
// created a moment later.
//
// Before the edge has received its domain table (a fresh edge's first
// moments, before a snapshot or the stream's platform-domain event),
// every host it has not learnt comes here, the platform's too: serving
// them as the platform's would answer a tenant's host with the platform's
// link of the same code. The authority knows the platform's host as well,
// and its answer for it makes the table known, which ends the window.
// Those asks are not paid from the budget (most are no misses), and an
// authority that cannot tell (one from before domains refuses host
// questions) leaves the host served as the platform's, as before domains.
func (h *Handler) unknownHost(ctx *fasthttp.RequestCtx) *store.DomainState {
	tableless := !h.Domains.Known()
	if h.Hosts == nil {
		h.notFound(ctx, nil, &h.Counters.UnknownHost)
		return nil
	}
	canon, err := link.CanonicalHost(string(h.requestHost(ctx)))
	if err != nil {
		if tableless {
			dom, _ := h.platform()
			return dom
		}
		h.notFound(ctx, nil, &h.Counters.UnknownHost)
		return nil
	}
	if !tableless && !h.allowNotFound(ctx) {
		return nil
	}
	h.Counters.HostAsks.Add(1)
	dom, outcome := h.Hosts.Resolve(canon)
	switch outcome {
	case resolve.Found:
		return dom
	case resolve.Unavailable:
		if tableless {
			dom, _ := h.platform()
			return dom
		}
		h.unavailable(ctx)
	default:
		h.Counters.UnknownHost.Add(1)
		h.text(ctx, fasthttp.StatusNotFound, textNotFound)
	}
	return nil
}

// slowDomain looks up a host the fast path could not read. Rare: browsers
// send Unicode names as punycode already.
func (h *Handler) slowDomain(host []byte) (*store.DomainState, bool) {
	canon, err := link.CanonicalHost(string(host))
	if err != nil {
		return nil, false
	}
	return h.Domains.ByHost([]byte(canon))
}

func (h *Handler) platform() (*store.DomainState, bool) {
	if h.Domains == nil {
		return platformDomain, true
	}
	return h.Domains.Get(link.DefaultDomain)
}

// platformDomain is the platform's domain of a handler given no table:
// sequential codes, as every link had before domains. Never modified.
var platformDomain = &store.DomainState{Conf: link.Domain{
	ID: link.DefaultDomain, CodeMode: link.CodesSequential, Status: link.DomainActive,
}}

// forwardedHost is the host a trusted proxy forwarded: the last entry of
// the last X-Forwarded-Host header, the one the proxy nearest to the edge
// wrote (a client may have sent its own before it). nil when there is
// none.
func forwardedHost(values [][]byte) []byte {
	if len(values) == 0 {
		return nil
	}
	v := values[len(values)-1]
	if j := bytes.LastIndexByte(v, ','); j >= 0 {
		v = v[j+1:]
	}
	if v = bytes.TrimSpace(v); len(v) == 0 {
		return nil
	}
	return v
}
