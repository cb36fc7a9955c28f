// Package resolve answers the codes neither the overlay nor the snapshot
// holds, walking the rest of the edge's layers: bloom hint and sealed
// segments (a certain 404) → long-tail cache → authority.
package resolve

import (
	"sync/atomic"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/base62"
)

// Outcome is how a miss was resolved.
type Outcome uint8

const (
	// Found: the entry is the answer (it may be disabled, deleted or
	// expired: the caller decides 302 or 410).
	Found Outcome = iota
	// NotFound is a certain 404.
	NotFound
	// Limited: the client asked the authority too often (429).
	Limited
	// Unavailable: the code could be recent and the authority could not be
	// asked (503 with Retry-After, never a guessed 404).
	Unavailable
)

// Authority asks control about one code.
type Authority interface {
	Lookup(code string) (authority.Reply, error)
}

// Limiter bounds authority lookups per client IP.
type Limiter interface {
	Allow(ip []byte) bool
}

// Resolver is safe for concurrent use. Cache and Limiter may be nil.
type Resolver struct {
	Cache     *store.Cache
	Hint      *store.Hint
	Segments  *store.Segments
	Authority Authority
	Limiter   Limiter
	// Complete reports that the change feed has applied every change up to
	// its version (no gap). Without it no miss is answered without the
	// authority.
	Complete func() bool

	// Counters.
	CacheHits, NegativeHits, BloomRejects, AuthorityAsked, AuthorityFailed, Limited atomic.Uint64

	learned atomic.Pointer[learned]
}

// learnedCodes is the filter of codes cached positively, made on first use
// so a Resolver literal needs no constructor.
func (r *Resolver) learnedCodes() *learned {
	if l := r.learned.Load(); l != nil {
		return l
	}
	r.learned.CompareAndSwap(nil, newLearned())
	return r.learned.Load()
}

// Resolve answers a code neither the overlay nor the snapshot holds. It
// blocks at most for the authority's timeout.
func (r *Resolver) Resolve(code []byte, clientIP []byte) (*store.Entry, Outcome) {
	old := r.cannotBeRecent(code)
	// A code that cannot be recent and that the hint rules out is a
	// certain 404, whatever the cache holds: every live code is in the
	// hint. Checked first because it is the cheapest answer to a scan.
	if old && r.Hint != nil && !r.Hint.MayContain(code) {
		r.BloomRejects.Add(1)
		return nil, NotFound
	}
	// For a code that could be recent only a cached positive may answer,
	// and the learned filter knows every code cached positively.
	if r.Cache != nil && (old || r.learnedCodes().mayContain(code)) {
		if e, ok := r.Cache.Get(code); ok {
			if !e.Missing {
				r.CacheHits.Add(1)
				return e, Found
			}
			// A cached "not found" is only trusted for a code that cannot
			// have been created since: for any other, the create may have
			// returned its 201 a moment ago, and the stream may lag.
			if old {
				r.NegativeHits.Add(1)
				return nil, NotFound
			}
		}
	}
	if r.Authority == nil {
		if old {
			return nil, NotFound
		}
		return nil, Unavailable
	}
	if r.Limiter != nil && !r.Limiter.Allow(clientIP) {
		r.Limited.Add(1)
		return nil, Limited
	}
	r.AuthorityAsked.Add(1)
	rep, err := r.Authority.Lookup(string(code))
	if err != nil {
		// Busy, timed out, NATS down, control's database down: all the
		// same to the client, who may retry.
		r.AuthorityFailed.Add(1)
		return nil, Unavailable
	}
	var e *store.Entry
	if rep.Kind == authority.Found {
		e = &store.Entry{Code: rep.Code, URL: rep.URL, RedirectType: rep.RedirectType, Status: rep.Status,
			ExpiresAt: rep.ExpiresAt, Version: rep.Version}
	} else {
		e = &store.Entry{Code: string(code), Missing: true, Version: rep.Version}
	}
	if r.Cache != nil {
		if !e.Missing {
			r.learnedCodes().add(code) // before the Set, so a cached positive is never skipped
		}
		r.Cache.Set(e)
	}
	if e.Missing {
		return nil, NotFound
	}
	return e, Found
}

// cannotBeRecent reports whether code, if it existed, would certainly be
// known already: a generated code (exactly six base62 characters; control
// never issues a custom code of that shape) whose ID lies in a segment the
// applied stream has sealed, with no gap in what was applied. The sealed
// event comes after every create of the segment committed, so those creates
// precede it on the stream.
func (r *Resolver) cannotBeRecent(code []byte) bool {
	if len(code) != base62.Length || r.Segments == nil || r.Complete == nil || !r.Complete() {
		return false
	}
	id, err := base62.Digits(code)
	if err != nil {
		return false
	}
	return id != 0 && r.Segments.Sealed(id)
}
