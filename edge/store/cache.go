package store

import (
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// Cache is the bounded long-tail cache of authority answers, positive and
// negative. It is not authoritative: ristretto may drop a Set, evict at any
// time, and keeps only hashes of keys, so every hit is checked against the
// code stored in the entry (a hash collision returns another code's entry).
// Safe for concurrent use.
//
// What the stream changes is forgotten here (Layers.Apply calls Forget):
// the overlay answers it from then on, and once a memory-budget snapshot
// has absorbed the change and a later one dropped the code as cold, the
// authority does, never an answer cached before the change.
type Cache struct {
	c *ristretto.Cache[[]byte, cached]
	// gen is bumped by Clear; entries of an older generation are misses.
	// ristretto's own Clear is not safe beside Gets.
	gen atomic.Uint64
}

type cached struct {
	e   *Entry
	gen uint64
}

// NewCache returns a cache of at most maxEntries entries.
func NewCache(maxEntries int64) (*Cache, error) {
	if maxEntries < 1 {
		maxEntries = 1
	}
	c, err := ristretto.NewCache(&ristretto.Config[[]byte, cached]{
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
	v, ok := c.c.Get(code)
	if !ok || v.e == nil || v.gen != c.gen.Load() || v.e.Code != string(code) {
		return nil, false
	}
	return v.e, true
}

// Set caches e unless a newer version of its code is cached. The write is
// asynchronous and may be dropped; call Wait to see it in tests.
func (c *Cache) Set(e *Entry) {
	if old, ok := c.Get([]byte(e.Code)); ok && old.Version > e.Version {
		return
	}
	c.c.Set([]byte(e.Code), cached{e: e, gen: c.gen.Load()}, 1)
}

// Forget drops what is cached of code. An answer the authority gave
// before the change that calls this, and that is Set after it, is not
// caught: the window is one round trip, and the overlay answers the code
// until two snapshots have passed.
func (c *Cache) Forget(code []byte) {
	if _, ok := c.c.Get(code); ok {
		c.c.Del(code)
	}
}

// Clear makes every entry cached so far a miss, at once; their memory goes
// as they are evicted or replaced.
func (c *Cache) Clear() { c.gen.Add(1) }

// Wait blocks until earlier Sets are applied or dropped.
func (c *Cache) Wait() { c.c.Wait() }

// Close stops the cache's goroutines.
func (c *Cache) Close() { c.c.Close() }
