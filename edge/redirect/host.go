package redirect

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

// hostKeyRoom holds any host link.AppendHostKey accepts (253 bytes).
const hostKeyRoom = 256

// domain returns the domain a request is for, from its host: the
// request's Host (or the authority of an absolute request-target), or,
// from a trusted proxy (FromProxy), the host it forwarded in
// X-Forwarded-Host. ok is false for a host no active domain has, which
// must never fall back into another domain's namespace. An edge without a
// domain table (none given, or none received yet: a control from before
// domains) serves every host as the platform's domain, as it did before.
//
// The usual Host (ASCII, any case, maybe a port or a trailing dot) is
// looked up without allocating; one that needs IDNA mapping (a Unicode
// name) or an IPv6 literal takes link.CanonicalHost, which may.
func (h *Handler) domain(ctx *fasthttp.RequestCtx) (*store.DomainState, bool) {
	if h.Domains == nil || !h.Domains.Known() {
		return h.platform()
	}
	host := ctx.Host()
	if h.FromProxy != nil && h.FromProxy(ctx) {
		if fwd := forwardedHost(ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedHost)); fwd != nil {
			host = fwd
		}
	}
	var buf [hostKeyRoom]byte
	if key, ok := link.AppendHostKey(buf[:0], host); ok {
		return h.Domains.ByHost(key)
	}
	return h.slowDomain(host)
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
