package store

import (
	"fmt"
	"hash/maphash"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/edgelink/edgelink/shared/link"
)

// Cache is the bounded long-tail cache of authority answers, positive and
// negative, keyed by (domain, code). It is not authoritative: ristretto may
// drop a Set, evict at any time, and keeps only hashes of keys, so every
// hit is checked against the domain and code stored in the entry (a hash
// collision returns another link's entry). Safe for concurrent use.
//
// What the stream changes is forgotten here (Layers.Apply calls Forget):
// the overlay answers it from then on, and once a memory-budget snapshot
// has absorbed the change and a later one dropped the code as cold, the
// authority does, never an answer cached before the change.
type Cache struct {
	c *ristretto.Cache[uint64, cached]
	// gen is bumped by Clear; entries of an older generation are misses.
	// ristretto's own Clear is not safe beside Gets.
	gen  atomic.Uint64
	seed maphash.Seed
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
	seed := maphash.MakeSeed()
	c, err := ristretto.NewCache(&ristretto.Config[uint64, cached]{
		NumCounters: 10 * maxEntries, // ristretto's advice: 10× the items
		MaxCost:     maxEntries,
		BufferItems: 64,
		// Cost counts entries; ristretto's own per-item overhead would
		// otherwise count against MaxCost and evict nearly everything.
		IgnoreInternalCost: true,
		// The key is already a hash of (domain, code): cacheKey.
		KeyToHash: func(k uint64) (uint64, uint64) { return k, mixID(k ^ 0x9e3779b97f4a7c15) },
	})
	if err != nil {
		return nil, fmt.Errorf("long-tail cache: %w", err)
	}
	return &Cache{c: c, seed: seed}, nil
}

// key hashes (d, code) into ristretto's key: it hashes keys anyway, and a
// []byte key could not carry the domain without a copy.
func (c *Cache) key(d link.DomainID, code []byte) uint64 {
	return maphash.Bytes(c.seed, code) ^ mixID(uint64(d)+1)
}

// Get returns the cached entry for (d, code). It does not allocate.
func (c *Cache) Get(d link.DomainID, code []byte) (*Entry, bool) {
	v, ok := c.c.Get(c.key(d, code))
	if !ok || v.e == nil || v.gen != c.gen.Load() || v.e.Domain != d || v.e.Code != string(code) {
		return nil, false
	}
	return v.e, true
}

// Set caches e under (e.Domain, e.Code) unless a newer version of it is
// cached. The write is asynchronous and may be dropped; call Wait to see
// it in tests.
func (c *Cache) Set(e *Entry) {
	code := codeBytes(e.Code)
	if old, ok := c.Get(e.Domain, code); ok && old.Version > e.Version {
		return
	}
	c.c.Set(c.key(e.Domain, code), cached{e: e, gen: c.gen.Load()}, 1)
}

// Forget drops what is cached of code. An answer the authority gave
// before the change that calls this, and that is Set after it, is not
// caught: the window is one round trip, and the overlay answers the code
// until two snapshots have passed.
func (c *Cache) Forget(d link.DomainID, code []byte) {
	k := c.key(d, code)
	if _, ok := c.c.Get(k); ok {
		c.c.Del(k)
	}
}

// Clear makes every entry cached so far a miss, at once; their memory goes
// as they are evicted or replaced.
func (c *Cache) Clear() { c.gen.Add(1) }

// Wait blocks until earlier Sets are applied or dropped.
func (c *Cache) Wait() { c.c.Wait() }

// Close stops the cache's goroutines.
func (c *Cache) Close() { c.c.Close() }
