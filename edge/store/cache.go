package store

import (
	"fmt"

	"github.com/dgraph-io/ristretto/v2"
)

// Cache is the bounded long-tail cache of authority answers, positive and
// negative. It is not authoritative: ristretto may drop a Set, evict at any
// time, and keeps only hashes of keys, so every hit is checked against the
// code stored in the entry (a hash collision returns another code's entry).
// Safe for concurrent use.
type Cache struct {
	c *ristretto.Cache[[]byte, *Entry]
}

// NewCache returns a cache of at most maxEntries entries.
func NewCache(maxEntries int64) (*Cache, error) {
	if maxEntries < 1 {
		maxEntries = 1
	}
	c, err := ristretto.NewCache(&ristretto.Config[[]byte, *Entry]{
		NumCounters: 10 * maxEntries, // ristretto's advice: 10× the items
		MaxCost:     maxEntries,
		BufferItems: 64,
		// Cost counts entries; ristretto's own per-item overhead would
		// otherwise count against MaxCost and evict nearly everything.
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("long-tail cache: %w", err)
	}
	return &Cache{c: c}, nil
}

// Get returns the cached entry for code.
func (c *Cache) Get(code []byte) (*Entry, bool) {
	e, ok := c.c.Get(code)
	if !ok || e == nil || e.Code != string(code) {
		return nil, false
	}
	return e, true
}

// Set caches e unless a newer version of its code is cached. The write is
// asynchronous and may be dropped; call Wait to see it in tests.
func (c *Cache) Set(e *Entry) {
	if old, ok := c.Get([]byte(e.Code)); ok && old.Version > e.Version {
		return
	}
	c.c.Set([]byte(e.Code), e, 1)
}

// Wait blocks until earlier Sets are applied or dropped.
func (c *Cache) Wait() { c.c.Wait() }

// Close stops the cache's goroutines.
func (c *Cache) Close() { c.c.Close() }
