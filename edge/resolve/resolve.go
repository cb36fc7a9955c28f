// Package resolve answers the codes neither the overlay nor the snapshot
// holds, walking the rest of the edge's layers: bloom hint over sealed
// segments and the frontier's promise (certain 404s) → long-tail cache →
// authority.
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
	// Unavailable: the code could be recent and the authority could not be
	// asked in time (503 with Retry-After, never a guessed 404).
	Unavailable
)

// Authority answers what the edge's layers cannot: it asks control about
// a code, many codes to a message, and holds the allocation frontier's
// promise (edge/lookup.Client).
type Authority interface {
	// Ask answers code by a Found, or by a NotFound read after Ask was
	// called.
	Ask(code string) (authority.Reply, error)
	// Settle reports whether the allocation frontier proves that no
	// generated code with ID id was created before the call: its promised
	// ceiling, or a frontier read after the call. False means only asking
	// about the code itself can tell.
	Settle(id uint64) (bool, error)
}

// Resolver is safe for concurrent use. Cache may be nil.
type Resolver struct {
	Cache     *store.Cache
	Hint      *store.Hint
	Segments  *store.Segments
	Authority Authority
	// Complete reports that the change feed has applied every change up to
	// its version (no gap). Without it no miss is answered from sealed
	// segments.
	Complete func() bool

	// Counters: answers from the cache (positive, negative), from the
	// bloom over sealed segments, from the frontier's promise, and the
	// codes asked of the authority and the asks that failed.
	CacheHits, NegativeHits, BloomRejects, BeyondFrontier, AuthorityAsked, AuthorityFailed atomic.Uint64

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
// blocks at most for the authority's bounds (edge/lookup.Config). Each
// NotFound carries its proof (docs/visibility.md): the code's segment is
// sealed in what the edge applied and the hint rules it out; or the
// frontier's promise puts its ID above every lease; or the authority read it
// as unknown after this call began, or after its segment was sealed (a
// cached negative: only those are kept).
//
// The snapshot may be a memory-budget one (snapshot.FlagPartial): its
// entries are the hottest links only, its bloom every code. So the snapshot
// missing a code proves nothing, and nothing here assumes it does: a code
// the hint lets through goes to the cache and the authority, whatever the
// snapshot in service.
func (r *Resolver) Resolve(code []byte) (*store.Entry, Outcome) {
	id, generated := generatedID(code)
	if generated && id == 0 {
		return nil, NotFound // the sentinel: never a link's code
	}
	old := generated && r.sealed(id)
	// A code that cannot be recent and that the hint rules out is a
	// certain 404, whatever the cache holds: every live code is in the
	// hint. Checked first because it is the cheapest answer to a scan.
	if old && r.Hint != nil && !r.Hint.MayContain(code) {
		r.BloomRejects.Add(1)
		return nil, NotFound
	}
	// Above the allocation frontier no lease can have been confirmed, so
	// no create answered: the answer for almost every random code, from
	// the promise in hand without waiting. An error here (NATS down) is
	// not an answer: a cached positive may still hold, and asking fails
	// the same way below.
	if generated && !old && r.Authority != nil {
		if unknown, err := r.Authority.Settle(id); err == nil && unknown {
			r.BeyondFrontier.Add(1)
			return nil, NotFound
		}
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
		// The hint let the code through: a false positive, or a link a
		// memory-budget snapshot left out. Without the authority nothing
		// tells them apart.
		return nil, Unavailable
	}
	r.AuthorityAsked.Add(1)
	rep, err := r.Authority.Ask(string(code))
	if err != nil {
		// Busy, timed out, NATS down, control's database down: all the
		// same to the client, who may retry.
		r.AuthorityFailed.Add(1)
		return nil, Unavailable
	}
	if rep.Kind != authority.Found {
		// Only a negative that stays true is kept: one asked after the
		// code's segment was sealed in what the edge applied, so no create
		// of it can follow. A negative for a code that could be recent
		// would turn true-looking once its segment seals, yet the create
		// may have come in between; and under a memory-budget snapshot
		// (or none, withdrawn) that create need not be held anywhere
		// else at the edge once its overlay entry went into a snapshot
		// that has since dropped it as cold. The bloom, not a remembered
		// answer, rules such a code out.
		if old && r.Cache != nil {
			r.Cache.Set(&store.Entry{Code: string(code), Missing: true, Version: rep.Version})
		}
		return nil, NotFound
	}
	e := &store.Entry{Code: rep.Code, URL: rep.URL, RedirectType: rep.RedirectType, Status: rep.Status,
		ExpiresAt: rep.ExpiresAt, Version: rep.Version}
	if r.Cache != nil {
		r.learnedCodes().add(code) // before the Set, so a cached positive is never skipped
		r.Cache.Set(e)
	}
	return e, Found
}

// generatedID decodes a code of the generator's shape (exactly six base62
// characters; control never gives a custom code that shape).
func generatedID(code []byte) (uint64, bool) {
	if len(code) != base62.Length {
		return 0, false
	}
	id, err := base62.Digits(code)
	return id, err == nil
}

// sealed reports whether a generated code with ID id, if it existed, would
// certainly be known already: the ID lies in a segment the applied stream
// has sealed, with no gap in what was applied. The sealed event comes after
// every create of the segment committed, so those creates precede it on the
// stream.
func (r *Resolver) sealed(id uint64) bool {
	if r.Segments == nil || r.Complete == nil || !r.Complete() {
		return false
	}
	return r.Segments.Sealed(id)
}
