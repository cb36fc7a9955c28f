// Package ratelimit is the edge's abuse policy against scans: a budget of
// 404s per client IP. The edge spends a token only when its answer would be
// 404, so a link that exists, a fresh one included, is never refused, and a
// client past its budget gets 429 instead of learning what does not exist.
// The authority's own load is bounded elsewhere (edge/lookup), by combining
// questions, never by refusing clients.
package ratelimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

const shards = 32

// PerIP is a token bucket per client IP, in a bounded table. Safe for
// concurrent use; Allow does not allocate for an IP already in the table.
type PerIP struct {
	rate       float64 // tokens per second
	burst      float64
	maxPerShrd int
	now        func() time.Time
	seed       maphash.Seed
	shards     [shards]shard
}

type shard struct {
	mu sync.Mutex
	m  map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	last   int64 // Unix nanoseconds
}

// New allows rate lookups per second per IP with bursts of burst, tracking at
// most maxIPs addresses (idle ones are forgotten first; a forgotten IP
// starts again with a full bucket). now may be nil.
func New(rate float64, burst int, maxIPs int, now func() time.Time) *PerIP {
	if now == nil {
		now = time.Now
	}
	l := &PerIP{rate: rate, burst: float64(max(burst, 1)), maxPerShrd: max(maxIPs/shards, 16), now: now, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[netip.Addr]*bucket)
	}
	return l
}

// Allow takes a token for ip, reporting whether one was there.
func (l *PerIP) Allow(ip netip.Addr) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	sh := &l.shards[maphash.Comparable(l.seed, ip)%shards]
	now := l.now().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.m[ip]
	if !ok {
		if len(sh.m) >= l.maxPerShrd {
			l.evict(sh, now)
		}
		b = &bucket{tokens: l.burst, last: now}
		sh.m[ip] = b
	}
	b.tokens = min(l.burst, b.tokens+float64(now-b.last)/1e9*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// evict forgets IPs whose bucket has refilled (they lose nothing), and
// everything if that is not enough, so the table stays bounded under a scan
// from many addresses.
func (l *PerIP) evict(sh *shard, now int64) {
	for ip, b := range sh.m {
		if b.tokens+float64(now-b.last)/1e9*l.rate >= l.burst {
			delete(sh.m, ip)
		}
	}
	if len(sh.m) >= l.maxPerShrd {
		clear(sh.m)
	}
}
