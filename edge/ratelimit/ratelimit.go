// Package ratelimit holds the edge's token buckets per key, in bounded
// tables: each client IP's budget of 404s (PerIP), the abuse policy against
// scans, and the attempts at a password-protected link's password per
// client and per link (edge/unlock).
//
// The edge spends a 404 token only when its answer would be 404, so a link
// that exists, a fresh one included, is never refused, and a client past
// its budget gets 429 instead of learning what does not exist. The
// authority's own load is bounded elsewhere (edge/lookup), by combining
// questions, never by refusing clients.
package ratelimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

const shards = 32

// Keyed is a token bucket per key, in a bounded table. Safe for concurrent
// use; Allow does not allocate for a key already in the table.
type Keyed[K comparable] struct {
	rate       float64 // tokens per second
	burst      float64
	maxPerShrd int
	failClosed bool
	now        func() time.Time
	seed       maphash.Seed
	shards     [shards]shard[K]
}

// PerIP is a token bucket per client IP.
type PerIP = Keyed[netip.Addr]

type shard[K comparable] struct {
	mu sync.Mutex
	m  map[K]*bucket
}

type bucket struct {
	tokens float64
	last   int64 // Unix nanoseconds
}

// New allows rate lookups per second per IP with bursts of burst, tracking at
// most maxIPs addresses (idle ones are forgotten first; a forgotten IP
// starts again with a full bucket). now may be nil.
func New(rate float64, burst int, maxIPs int, now func() time.Time) *PerIP {
	return NewKeyed[netip.Addr](rate, burst, maxIPs, false, now)
}

// NewKeyed allows rate takes per second per key with bursts of burst,
// tracking about maxKeys keys. When the table is full, keys whose bucket
// has refilled are forgotten first (they lose nothing); if that is not
// enough, failClosed decides: false forgets every key of the shard (the
// table stays bounded and nobody is refused for the table's sake: right
// for a budget of 404s), true refuses keys the table cannot take until
// buckets refill (a flood of keys cannot reset the budgets of those
// already held: right for password attempts). now may be nil.
func NewKeyed[K comparable](rate float64, burst int, maxKeys int, failClosed bool, now func() time.Time) *Keyed[K] {
	if now == nil {
		now = time.Now
	}
	l := &Keyed[K]{rate: rate, burst: float64(max(burst, 1)), maxPerShrd: max(maxKeys/shards, 16), failClosed: failClosed,
		now: now, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[K]*bucket)
	}
	return l
}

// Allow takes a token for k, reporting whether one was there. A nil table,
// or one whose rate is not positive, allows everything.
func (l *Keyed[K]) Allow(k K) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	sh := &l.shards[maphash.Comparable(l.seed, k)%shards]
	now := l.now().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.m[k]
	if !ok {
		if len(sh.m) >= l.maxPerShrd && !l.evict(sh, now) {
			return false
		}
		b = &bucket{tokens: l.burst, last: now}
		sh.m[k] = b
	}
	b.tokens = min(l.burst, b.tokens+float64(now-b.last)/1e9*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// RetryAfter is how long a key with no token left waits for one: 1/rate,
// rounded up to a whole second, at least one.
func (l *Keyed[K]) RetryAfter() time.Duration {
	if l == nil || l.rate <= 0 {
		return time.Second
	}
	return max(time.Second, time.Duration(float64(time.Second)/l.rate+float64(time.Second)-1).Truncate(time.Second))
}

// Len is the number of keys the table holds.
func (l *Keyed[K]) Len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// evict forgets keys whose bucket has refilled (they lose nothing), and,
// unless the table fails closed, everything if that is not enough, so the
// table stays bounded under a scan from many addresses. It reports whether
// there is room for a new key.
func (l *Keyed[K]) evict(sh *shard[K], now int64) bool {
	for k, b := range sh.m {
		if b.tokens+float64(now-b.last)/1e9*l.rate >= l.burst {
			delete(sh.m, k)
		}
	}
	if len(sh.m) < l.maxPerShrd {
		return true
	}
	if l.failClosed {
		return false
	}
	clear(sh.m)
	return true
}
