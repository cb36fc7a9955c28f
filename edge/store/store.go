// Package store holds what an edge knows of links, in layers: the overlay
// of changes applied from the stream (Overlay) over the precomputed snapshot
// (Snapshots), looked up together by Layers.Find (the newer version of a
// code wins); the bounded long-tail cache of authority answers (Cache); and
// the bloom hint of live codes (Hint) and the sealed ID segments (Segments)
// that decide when a miss may be answered without the authority.
package store

import (
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// Entry is what the edge knows of one code. Entries are immutable once
// stored: an update replaces the pointer, so a reader never sees a
// half-written entry.
type Entry struct {
	Code         string
	URL          string
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	Version      uint64
	// Missing marks a negative answer: the authority had no such code at
	// Version. Only the long-tail cache holds such entries.
	Missing bool
}

// Live reports whether the entry redirects at nowMillis.
func (e *Entry) Live(nowMillis int64) bool {
	return !e.Missing && e.Status == link.Active && (e.ExpiresAt == 0 || nowMillis < e.ExpiresAt)
}

const shardCount = 64

// Overlay maps codes to entries, last writer wins per code by version. It is
// safe for concurrent use; lookups do not allocate.
type Overlay struct {
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu sync.RWMutex
	m  map[string]*Entry
	// peak is the most entries m held since it was made: a Go map never
	// gives back its table, so one that shrank far below it is rebuilt.
	peak int
}

// NewOverlay returns an empty store.
func NewOverlay() *Overlay {
	s := &Overlay{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*Entry)
	}
	return s
}

func (s *Overlay) shard(code []byte) *shard {
	return &s.shards[maphash.Bytes(s.seed, code)%shardCount]
}

// Lookup returns the entry for code, if the store has one.
func (s *Overlay) Lookup(code []byte) (*Entry, bool) {
	sh := s.shard(code)
	sh.mu.RLock()
	e, ok := sh.m[string(code)]
	sh.mu.RUnlock()
	return e, ok
}

// Apply stores e unless the store already holds a newer or equal version of
// its code, reporting whether it did. Replays and duplicates are harmless.
func (s *Overlay) Apply(e *Entry) bool {
	sh := s.shard([]byte(e.Code))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[e.Code]; ok && old.Version >= e.Version {
		return false
	}
	sh.m[e.Code] = e
	sh.peak = max(sh.peak, len(sh.m))
	return true
}

// Prune deletes every entry drop reports true for, shard by shard, under
// the shard's lock, so an Apply of the same code is either seen by drop or
// happens after the delete. It returns how many entries it deleted.
func (s *Overlay) Prune(drop func(*Entry) bool) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for code, e := range sh.m {
			if drop(e) {
				delete(sh.m, code)
				n++
			}
		}
		// After a snapshot swap prunes most of a bulk load, the table
		// sized for the load would stay: memory held for nothing, and
		// every probe of a code the overlay lacks landing in a table far
		// larger than the caches.
		if len(sh.m) < sh.peak/4 {
			m := make(map[string]*Entry, len(sh.m))
			for code, e := range sh.m {
				m[code] = e
			}
			sh.m, sh.peak = m, len(m)
		}
		sh.mu.Unlock()
	}
	return n
}

// Range calls fn for every entry held until fn returns false. Entries
// applied meanwhile may or may not be seen.
func (s *Overlay) Range(fn func(*Entry) bool) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for _, e := range sh.m {
			if !fn(e) {
				sh.mu.RUnlock()
				return
			}
		}
		sh.mu.RUnlock()
	}
}

// Len is the number of codes held.
func (s *Overlay) Len() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.RLock()
		n += len(s.shards[i].m)
		s.shards[i].mu.RUnlock()
	}
	return n
}

// EntryFromEvent converts a link event into an entry.
func EntryFromEvent(ev *linkevent.Event) *Entry {
	return &Entry{
		Code: ev.Code, URL: ev.URL, RedirectType: ev.RedirectType, Status: ev.Status,
		ExpiresAt: ev.ExpiresAt, Version: ev.Version,
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

	// mu orders Apply against Install: an entry applied while a snapshot
	// is being installed is either marked by the install or by the apply.
	mu sync.Mutex
}

// Apply stores e in the overlay (last writer wins by version), marks its
// code overridden in the snapshot in service, and adds it to the hint. The
// mark follows the store, so a lookup that sees the mark finds the entry.
func (a *Layers) Apply(e *Entry) bool {
	a.mu.Lock()
	ok := a.Overlay.Apply(e)
	if ok && a.Snapshots != nil {
		if l := a.Snapshots.Current(); l != nil {
			if i, found := l.Snap.Find(codeBytes(e)); found {
				l.override(i)
			}
		}
	}
	a.mu.Unlock()
	if a.Hint != nil {
		a.Hint.Add(e.Code)
	}
	return ok
}

// codeBytes is e's code as bytes for a lookup, without a copy; the lookup
// must not keep or modify it.
func codeBytes(e *Entry) []byte { return unsafe.Slice(unsafe.StringData(e.Code), len(e.Code)) }

// Hit is what the overlay or the snapshot knows of a code: Entry when the
// overlay answered, else Snap.
type Hit struct {
	Entry *Entry
	Snap  snapshot.Entry
}

// Find looks code up in the snapshot and the overlay: the newer version
// wins, the overlay on a tie. It does not allocate.
//
// The snapshot is read first, and the overlay only for codes the snapshot
// lacks or whose overridden bit is set, so the common hit (a link unchanged
// since the snapshot) costs one lookup in the file. If the overlay misses
// after the snapshot in service changed, an install may have pruned the
// entry in between: the lookup starts over in the new snapshot, which holds
// it at a version at least as new.
func (a *Layers) Find(code []byte) (Hit, bool) {
	for {
		var l *Loaded
		if a.Snapshots != nil {
			l = a.Snapshots.Current()
		}
		if h, ok, stale := a.findIn(l, code); !stale {
			return h, ok
		}
	}
}

// findIn is Find with l as the snapshot read (nil: none). stale reports
// that the overlay missed and l is no longer in service, so the answer
// cannot be trusted: look again.
func (a *Layers) findIn(l *Loaded, code []byte) (h Hit, ok, stale bool) {
	if l != nil {
		if i, ok := l.Snap.Find(code); ok {
			s := l.Snap.At(i)
			if !l.isOverridden(i) {
				return Hit{Snap: s}, true, false
			}
			if e, ok := a.Overlay.Lookup(code); ok {
				if s.Version > e.Version {
					return Hit{Snap: s}, true, false
				}
				return Hit{Entry: e}, true, false
			}
			if a.Snapshots.Current() != l {
				return Hit{}, false, true
			}
			return Hit{Snap: s}, true, false
		}
	}
	if e, ok := a.Overlay.Lookup(code); ok {
		return Hit{Entry: e}, true, false
	}
	return Hit{}, false, a.Snapshots != nil && a.Snapshots.Current() != l
}

// Find is the overlay alone as a lookup layer (no snapshot).
func (s *Overlay) Find(code []byte) (Hit, bool) {
	e, ok := s.Lookup(code)
	return Hit{Entry: e}, ok
}

// Seal records a sealed segment.
func (a *Layers) Seal(start, end uint64) {
	if a.Segments != nil {
		a.Segments.Seal(start, end)
	}
}
