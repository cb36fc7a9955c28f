// Package store holds what an edge knows of links, in the layers the
// lookup consults in order: the overlay of changes applied from the stream
// (Store), the precomputed snapshot (Snapshots), the bounded long-tail
// cache of authority answers (Cache), plus the bloom hint of live codes
// (Hint) and the sealed ID segments (Segments) that decide when a miss may
// be answered without the authority.
package store

import (
	"hash/maphash"
	"sync"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
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

// Store maps codes to entries, last writer wins per code by version. It is
// safe for concurrent use; lookups do not allocate.
type Store struct {
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu sync.RWMutex
	m  map[string]*Entry
}

// New returns an empty store.
func New() *Store {
	s := &Store{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*Entry)
	}
	return s
}

func (s *Store) shard(code []byte) *shard {
	return &s.shards[maphash.Bytes(s.seed, code)%shardCount]
}

// Lookup returns the entry for code, if the store has one.
func (s *Store) Lookup(code []byte) (*Entry, bool) {
	sh := s.shard(code)
	sh.mu.RLock()
	e, ok := sh.m[string(code)]
	sh.mu.RUnlock()
	return e, ok
}

// Apply stores e unless the store already holds a newer or equal version of
// its code, reporting whether it did. Replays and duplicates are harmless.
func (s *Store) Apply(e *Entry) bool {
	sh := s.shard([]byte(e.Code))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[e.Code]; ok && old.Version >= e.Version {
		return false
	}
	sh.m[e.Code] = e
	return true
}

// Prune deletes every entry drop reports true for, shard by shard, under
// the shard's lock, so an Apply of the same code is either seen by drop or
// happens after the delete. It returns how many entries it deleted.
func (s *Store) Prune(drop func(*Entry) bool) int {
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
		sh.mu.Unlock()
	}
	return n
}

// Range calls fn for every entry held until fn returns false. Entries
// applied meanwhile may or may not be seen.
func (s *Store) Range(fn func(*Entry) bool) {
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
func (s *Store) Len() int {
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

// Applied is the stream's side of the layers, updated together by the change
// feed: the overlay, the bloom hint and the sealed segments, plus the
// snapshot they extend. Safe for concurrent use.
type Applied struct {
	Overlay   *Store
	Hint      *Hint
	Segments  *Segments
	Snapshots *Snapshots
}

// Apply stores e in the overlay (last writer wins by version) and adds its
// code to the hint.
func (a *Applied) Apply(e *Entry) bool {
	ok := a.Overlay.Apply(e)
	if a.Hint != nil {
		a.Hint.Add(e.Code)
	}
	return ok
}

// Seal records a sealed segment.
func (a *Applied) Seal(start, end uint64) {
	if a.Segments != nil {
		a.Segments.Seal(start, end)
	}
}
