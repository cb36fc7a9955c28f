package resolve

import (
	"sync/atomic"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

// HostAuthority answers which active domain a host is (edge/lookup.Client).
type HostAuthority interface {
	// AskHost answers host (canonical) by its domain and true, or by
	// false when no active domain had it when the authority read, after
	// AskHost was called. An error means the authority could not tell.
	AskHost(host string) (link.Domain, bool, error)
}

// Hosts answers the hosts the edge's domain table lacks: a domain created
// a moment ago whose change event this edge has not applied yet (the relay
// publishes after commit, the feed lags or is paused), whose links must
// redirect at once all the same. Safe for concurrent use.
//
// Nothing negative is kept: a host the authority does not know now may be
// a domain a moment later, and its first link's 201 promises a redirect.
// What bounds the asks is the caller's (the client's 404 budget) and the
// authority client's (one question in flight per host, shed past its
// bounds).
type Hosts struct {
	Domains   *store.Domains
	Authority HostAuthority

	// Asked counts the hosts asked, Found those the authority knew,
	// NotFound those it did not, Failed the asks that could not be
	// answered (Refused among them: the domains the table would not
	// take).
	Asked, Found, NotFound, Failed, Refused atomic.Uint64
}

// Resolve answers host (canonical, link.CanonicalHost) when the table does
// not have it: Found with its state, once the authority's configuration of
// it is applied to the table (a newer version from the change stream still
// wins: it is the table's); NotFound when no active domain has it, as the
// authority read after this call began or as a newer version the table
// holds says (removed); Unavailable when the authority could not tell,
// which must never become a 404.
func (h *Hosts) Resolve(host string) (*store.DomainState, Outcome) {
	h.Asked.Add(1)
	d, ok, err := h.Authority.AskHost(host)
	switch {
	case err != nil:
		h.Failed.Add(1)
		return nil, Unavailable
	case !ok:
		h.NotFound.Add(1)
		return nil, NotFound
	case d.Host != host:
		// The client checks this; a domain of another host must never
		// serve this one's requests.
		h.Failed.Add(1)
		return nil, Unavailable
	}
	if err := h.Domains.Apply(d); err != nil {
		h.Refused.Add(1)
		h.Failed.Add(1)
		return nil, Unavailable
	}
	st, ok := h.Domains.ByHost([]byte(host))
	if !ok {
		// The table holds a newer version of it, which the stream says
		// is removed.
		h.NotFound.Add(1)
		return nil, NotFound
	}
	h.Found.Add(1)
	return st, Found
}
