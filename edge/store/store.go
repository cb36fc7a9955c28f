// Package store holds what an edge knows of links, in layers: the overlay
// of changes applied from the stream (Overlay) over the precomputed snapshot
// (Snapshots), looked up together by Layers.Find (the newer version of a
// code wins); the bounded long-tail cache of authority answers (Cache); and
// the bloom hint of live codes (Hint) and the sealed ID segments (Segments)
// that decide when a miss may be answered without the authority. Every
// layer is keyed by (domain, code); Domains maps a request's host to its
// domain. Segments stay keyed by global IDs (each domain owns its own
// range of them, link.IDRange).
//
// The overlay and the snapshot are read in place and cost about the same
// per link: the snapshot is a mapped file of 16-byte table rows and the
// targets' bytes; the overlay an arena of records of the same fields and an
// open-addressing table of 8-byte slots (overlay.go), outside the Go heap,
// so that an edge fed its links by the stream (a bulk create) holds them in
// about the memory an edge booted from a snapshot of them does. A hit in
// either allocates nothing and returns a view (Record, snapshot.Entry)
// whose bytes stay valid while the view is reachable.
package store

import (
	"sync"
	"unsafe"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// Entry is one code's state as the stream or the authority tells it: what
// Overlay.Apply takes (and copies into its arena), and what the long-tail
// cache holds. Entries are immutable once handed over: the cache replaces
// the pointer on an update, so a reader never sees a half-written entry.
type Entry struct {
	// Domain and Code are the link's key.
	Domain       link.DomainID
	Code         string
	URL          string
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	Version      uint64
	// Extras are the link's routing rules, password hash and click limit
	// in shared/link's wire form (checked, link.CheckExtras); "" for a
	// plain link.
	Extras string
	// Missing marks a negative answer: the authority had no such code at
	// Version. Only the long-tail cache holds such entries.
	Missing bool
}

// Live reports whether the entry redirects at nowMillis.
func (e *Entry) Live(nowMillis int64) bool {
	return !e.Missing && e.Status == link.Active && (e.ExpiresAt == 0 || nowMillis < e.ExpiresAt)
}

// EntryFromEvent converts a link event into an entry.
func EntryFromEvent(ev *linkevent.Event) *Entry {
	return &Entry{
		Domain: ev.Domain, Code: ev.Code, URL: ev.URL, RedirectType: ev.RedirectType, Status: ev.Status,
		ExpiresAt: ev.ExpiresAt, Version: ev.Version, Extras: ev.Extras,
	}
}

// Layers is the stream's side of the layers, updated together by the change
// feed: the overlay, the bloom hint and the sealed segments, plus the
// snapshot they extend. Safe for concurrent use; the overlay must be
// written only through it (Apply, Install), which keeps the snapshot's
// overridden bits true.
type Layers struct {
	Overlay   *Overlay
	Hint      *Hint
	Segments  *Segments
	Snapshots *Snapshots
	// Cache, when set, forgets each code applied (Cache.Forget), and is
	// cleared by a re-sync from a memory-budget snapshot (Resynced).
	Cache *Cache
	// Domains, when set, is the edge's domain table: the stream's domain
	// events (ApplyDomain) and each installed snapshot's table (Install)
	// update it.
	Domains *Domains

	// mu orders Apply against Install: an entry applied while a snapshot
	// is being installed is either marked by the install or by the apply.
	mu sync.Mutex
}

// Apply stores e in the overlay (last writer wins by version), marks its
// code overridden in the snapshot in service, adds it to the hint and
// drops it from the long-tail cache. The mark follows the store, so a
// lookup that sees the mark finds the entry.
func (a *Layers) Apply(e *Entry) bool {
	a.mu.Lock()
	ok := a.Overlay.Apply(e)
	if ok && a.Snapshots != nil {
		if l := a.Snapshots.Current(); l != nil {
			if i, found := l.Snap.Find(e.Domain, codeBytes(e.Code)); found {
				l.override(i)
			}
		}
	}
	a.mu.Unlock()
	if a.Hint != nil {
		a.Hint.Add(e.Domain, e.Code)
	}
	if ok && a.Cache != nil {
		a.Cache.Forget(e.Domain, codeBytes(e.Code))
	}
	return ok
}

// ApplyDomain applies a domain's configuration from the stream to Domains
// (nothing without one); see Domains.Apply.
func (a *Layers) ApplyDomain(c link.Domain) error {
	if a.Domains == nil {
		return nil
	}
	return a.Domains.Apply(c)
}

// codeBytes is a code as bytes for a lookup, without a copy; the lookup
// must not keep or modify it.
func codeBytes(code string) []byte { return unsafe.Slice(unsafe.StringData(code), len(code)) }

// Hit is what the overlay or the snapshot knows of a code: Rec when the
// overlay answered (Overlay), else Snap. Its bytes stay valid while the Hit
// is reachable.
type Hit struct {
	Overlay bool
	Rec     Record
	Snap    snapshot.Entry
}

// Find looks (d, code) up in the snapshot and the overlay: the newer version
// wins, the overlay on a tie. It does not allocate.
//
// The snapshot is read first, and the overlay only for codes the snapshot
// lacks or whose overridden bit is set, so the common hit (a link unchanged
// since the snapshot) costs one lookup in the file. If the overlay misses
// after the snapshot in service changed, an install may have pruned the
// entry in between: the lookup starts over in the new snapshot, which holds
// it at a version at least as new.
func (a *Layers) Find(d link.DomainID, code []byte) (Hit, bool) {
	for {
		var l *Loaded
		if a.Snapshots != nil {
			l = a.Snapshots.Current()
		}
		if h, ok, stale := a.findIn(l, d, code); !stale {
			return h, ok
		}
	}
}

// findIn is Find with l as the snapshot read (nil: none). stale reports
// that the overlay missed and l is no longer in service, so the answer
// cannot be trusted: look again.
func (a *Layers) findIn(l *Loaded, d link.DomainID, code []byte) (h Hit, ok, stale bool) {
	if l != nil {
		if i, ok := l.Snap.Find(d, code); ok {
			s := l.Snap.At(i)
			if !l.isOverridden(i) {
				return Hit{Snap: s}, true, false
			}
			if a.Overlay.lookup(d, code, &h.Rec) {
				if s.Version > h.Rec.Version {
					return Hit{Snap: s}, true, false
				}
				h.Overlay = true
				return h, true, false
			}
			if a.Snapshots.Current() != l {
				return Hit{}, false, true
			}
			return Hit{Snap: s}, true, false
		}
	}
	if a.Overlay.lookup(d, code, &h.Rec) {
		h.Overlay = true
		return h, true, false
	}
	return Hit{}, false, a.Snapshots != nil && a.Snapshots.Current() != l
}

// Find is the overlay alone as a lookup layer (no snapshot).
func (o *Overlay) Find(d link.DomainID, code []byte) (h Hit, ok bool) {
	ok = o.lookup(d, code, &h.Rec)
	h.Overlay = ok
	return h, ok
}

// Seal records a sealed segment.
func (a *Layers) Seal(start, end uint64) {
	if a.Segments != nil {
		a.Segments.Seal(start, end)
	}
}
