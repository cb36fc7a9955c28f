// Package store is the edge's in-memory view of links: the overlay of
// changes applied from the stream, versioned per code.
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
}

// Live reports whether the entry redirects at nowMillis.
func (e *Entry) Live(nowMillis int64) bool {
	return e.Status == link.Active && (e.ExpiresAt == 0 || nowMillis < e.ExpiresAt)
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
