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
	"github.com/edgelink/edgelink/shared/link"
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
	// Ask answers code on domain d by a Found, or by a NotFound read after
	// Ask was called.
	Ask(d link.DomainID, code string) (authority.Reply, error)
	// Settle reports whether the allocation frontier proves that no
	// generated code with (global) ID id was created before the call: its
	// promised ceiling, or a frontier read after the call. False means
	// only asking about the code itself can tell.
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
	// codes asked of the authority and the asks that failed. Undecodable
	// counts misses of a generated code's shape on an FF1 domain whose
	// keys the edge's key file lacks: no local ruling, so each is asked.
	CacheHits, NegativeHits, BloomRejects, BeyondFrontier, AuthorityAsked, AuthorityFailed, Undecodable atomic.Uint64

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

// Resolve answers code on domain dom when neither the overlay nor the
// snapshot holds it. It blocks at most for the authority's bounds
// (edge/lookup.Config). Each NotFound carries its proof
// (docs/visibility.md), for every ID the code can name (see generatedIDs):
// the ID's segment is sealed in what the edge applied and the domain's hint
// rules the code out; or the frontier's promise puts the ID above every
// lease. Else the authority read (dom, code) as unknown after this call
// began, or after every such segment was sealed (a cached negative: only
// those are kept).
//
// The snapshot may be a memory-budget one (snapshot.FlagPartial): its
// entries are the hottest links only, its bloom every code. So the snapshot
// missing a code proves nothing, and nothing here assumes it does: a code
// the hint lets through goes to the cache and the authority, whatever the
// snapshot in service.
func (r *Resolver) Resolve(dom *store.DomainState, code []byte) (*store.Entry, Outcome) {
	d := dom.Conf.ID
	var buf [link.MaxKeyIDs]uint64
	ids, generated := r.generatedIDs(dom, code, &buf)
	var sealed uint16 // bit i: ids[i]'s segment is sealed in what was applied
	for i, id := range ids {
		if r.sealed(id) {
			sealed |= 1 << i
		}
	}
	if generated {
		if ok, byFrontier := r.ruledOut(d, code, ids, sealed); ok {
			switch {
			case byFrontier:
				r.BeyondFrontier.Add(1)
			case len(ids) > 0:
				r.BloomRejects.Add(1)
			}
			return nil, NotFound
		}
	}
	// old: the code cannot be recent, whichever ID it names.
	old := generated && sealed == 1<<len(ids)-1
	// For a code that could be recent only a cached positive may answer,
	// and the learned filter knows every code cached positively.
	if r.Cache != nil && (old || r.learnedCodes().mayContain(d, code)) {
		if e, ok := r.Cache.Get(d, code); ok {
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
	rep, err := r.Authority.Ask(d, string(code))
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
			r.Cache.Set(&store.Entry{Domain: d, Code: string(code), Missing: true, Version: rep.Version})
		}
		return nil, NotFound
	}
	e := &store.Entry{Domain: d, Code: rep.Code, URL: rep.URL, RedirectType: rep.RedirectType, Status: rep.Status,
		ExpiresAt: rep.ExpiresAt, Version: rep.Version, Extras: rep.Extras}
	if r.Cache != nil {
		r.learnedCodes().add(d, code) // before the Set, so a cached positive is never skipped
		r.Cache.Set(e)
	}
	return e, Found
}

// ruledOut reports whether no link can have code on domain d, whichever
// of ids it names (a code the domain's generator made names one of them):
// for each ID, its segment is sealed (bit i of sealed) and the hint rules
// the code out, or the frontier puts it beyond every lease. byFrontier
// reports that the frontier was needed.
func (r *Resolver) ruledOut(d link.DomainID, code []byte, ids []uint64, sealed uint16) (ok, byFrontier bool) {
	// A code that cannot be recent and that the hint rules out is a
	// certain 404, whatever the cache holds: every live code is in the
	// hint. Checked first because it is the cheapest answer to a scan.
	if sealed != 0 && (r.Hint == nil || r.Hint.MayContain(d, code)) {
		return false, false
	}
	// Above the allocation frontier no lease can have been confirmed, so
	// no create answered: the answer for almost every random code, from
	// the promise in hand without waiting. An error here (NATS down) is
	// not an answer: a cached positive may still hold, and asking fails
	// the same way.
	for i, id := range ids {
		if sealed&(1<<i) != 0 {
			continue
		}
		if r.Authority == nil {
			return false, false
		}
		if unknown, err := r.Authority.Settle(id); err != nil || !unknown {
			return false, false
		}
		byFrontier = true
	}
	return true, byFrontier
}

// generatedIDs returns into buf the global IDs code names if it is a
// generated code of dom (control never gives a custom code the generator's
// shape, six base62 characters): IDBase(d) + the local ID, which is the
// code's base62 digits on a sequential domain and its decoding under each
// of the domain's keys on an FF1 domain (a key under which it names the
// sentinel, ID 0, contributes none: no link has it). generated is false for
// a code of another shape, and on an FF1 domain the edge cannot decode (a
// key its file lacks): those are asked about.
func (r *Resolver) generatedIDs(dom *store.DomainState, code []byte, buf *[link.MaxKeyIDs]uint64) ([]uint64, bool) {
	if len(code) != base62.Length {
		return nil, false
	}
	base := link.IDBase(dom.Conf.ID)
	if dom.Conf.CodeMode != link.CodesFF1 {
		local, err := base62.Digits(code)
		if err != nil {
			return nil, false
		}
		if local == 0 {
			return buf[:0], true // the sentinel: never a link's code
		}
		buf[0] = base + local
		return buf[:1], true
	}
	if _, err := base62.Digits(code); err != nil {
		return nil, false
	}
	if dom.Undecodable || len(dom.Codes) == 0 || len(dom.Codes) > len(buf) {
		r.Undecodable.Add(1)
		return nil, false
	}
	ids := buf[:0]
	for _, c := range dom.Codes {
		if local, ok := c.Decode(code); ok {
			ids = append(ids, base+local)
		}
	}
	return ids, true
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
