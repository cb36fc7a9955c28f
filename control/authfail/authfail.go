// Package authfail holds the budget of failed authentications per client
// that the creator API and the console share: each failure spends a
// token, and a client with none left is refused before its key is looked
// up, so guessing keys, or a client stuck on a bad one, costs the database
// nothing past the budget. Successes spend nothing: a client with a good
// key is never slowed by it, and clients elsewhere never share its bucket.
package authfail

import (
	"hash/maphash"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

const shards = 32

// Budget is a token bucket per client for failed authentications.
//
// A client is its address, an IPv6 one by its /64 (Client). The table is
// bounded: a bucket that has filled up again is forgotten (it holds
// nothing a new one would not), on a sweep at most once per refill time per
// shard; when a shard is full of clients still spending, an arbitrary one
// is forgotten to make room. Safe for concurrent use; a nil *Budget
// refuses nobody.
type Budget struct {
	rate, burst float64
	refill      int64 // nanoseconds from empty to full
	maxPerShard int
	now         func() time.Time
	seed        maphash.Seed
	shards      [shards]shard
}

type shard struct {
	mu    sync.Mutex
	m     map[netip.Addr]*bucket
	swept int64 // Unix nanoseconds of the last sweep
}

type bucket struct {
	tokens float64
	last   int64 // Unix nanoseconds
}

// New allows perSecond failures per client with bursts of burst, tracking
// at most maxClients clients (at least one per shard); a negative perSecond
// is nil (no bound). now is the clock (nil: time.Now).
func New(perSecond float64, burst, maxClients int, now func() time.Time) *Budget {
	if perSecond < 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	f := &Budget{rate: perSecond, burst: float64(burst), maxPerShard: max(maxClients/shards, 1),
		now: now, seed: maphash.MakeSeed()}
	f.refill = int64(f.burst / f.rate * 1e9)
	for i := range f.shards {
		f.shards[i].m = make(map[netip.Addr]*bucket)
	}
	return f
}

// tokensAt is b's tokens at now.
func (f *Budget) tokensAt(b *bucket, now int64) float64 {
	return min(f.burst, b.tokens+float64(now-b.last)/1e9*f.rate)
}

// Blocked reports whether client has no failure left, and how long until
// it has one again. It spends nothing.
func (f *Budget) Blocked(client netip.Addr) (time.Duration, bool) {
	if f == nil {
		return 0, false
	}
	sh := f.shard(client)
	now := f.now().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[client]
	if b == nil {
		return 0, false
	}
	if t := f.tokensAt(b, now); t < 1 {
		return time.Duration((1 - t) / f.rate * 1e9), true
	}
	return 0, false
}

// Fail spends one of client's failures. Requests that passed Blocked
// together may spend past the last token; the bucket stops at empty.
func (f *Budget) Fail(client netip.Addr) {
	if f == nil {
		return
	}
	sh := f.shard(client)
	now := f.now().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.swept >= f.refill {
		f.sweep(sh, now)
	}
	b := sh.m[client]
	if b == nil {
		if len(sh.m) >= f.maxPerShard {
			f.sweep(sh, now)
		}
		for victim := range sh.m {
			if len(sh.m) < f.maxPerShard {
				break
			}
			delete(sh.m, victim)
		}
		b = &bucket{tokens: f.burst, last: now}
		sh.m[client] = b
	}
	b.tokens = max(f.tokensAt(b, now)-1, 0)
	b.last = now
}

// sweep forgets the clients whose bucket is full again.
func (f *Budget) sweep(sh *shard, now int64) {
	sh.swept = now
	for c, b := range sh.m {
		if f.tokensAt(b, now) >= f.burst {
			delete(sh.m, c)
		}
	}
}

// Clients is how many clients are tracked.
func (f *Budget) Clients() int {
	if f == nil {
		return 0
	}
	n := 0
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (f *Budget) shard(client netip.Addr) *shard {
	return &f.shards[maphash.Comparable(f.seed, client)%shards]
}

// Client is the client a request is charged to: the socket's peer (an
// IPv4 address, or an IPv6 /64: what one subscriber is usually given, so
// rotating addresses within it buys nothing). Control believes no
// X-Forwarded-For, so behind a proxy every client is the proxy
// (docs/api.md).
func Client(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{} // not an IP socket: all such share one bucket
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}
