package api

import (
	"hash/maphash"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// limiter is a token bucket per tenant, in this instance's memory: with N
// control instances behind a balancer a tenant gets up to N times the rate.
// That is the trade for no shared state on the request path; a shared
// limiter (Postgres or NATS KV) would cost a round trip per request.
//
// Each call names the tenant's own limit, read with its key on every
// request, so a limit an operator changes is in force on every instance
// from the tenant's next request; the bucket is retuned in place and keeps
// its tokens. Safe for concurrent use.
type limiter struct {
	rate  rate.Limit // the default: a tenant without its own
	burst int
	now   func() time.Time

	mu      sync.Mutex
	tenants map[int64]*rate.Limiter // as many as there are tenants
}

func newLimiter(perSecond float64, burst int, now func() time.Time) *limiter {
	r := rate.Limit(perSecond)
	if perSecond < 0 {
		r = rate.Inf
	}
	return &limiter{rate: r, burst: burst, now: now, tenants: make(map[int64]*rate.Limiter)}
}

// allow takes a token for tenant, or says how long until one is available.
// perSecond and burst are the tenant's own limit; a field that is zero
// takes the default.
func (l *limiter) allow(tenant int64, perSecond float64, burst int) (time.Duration, bool) {
	r, b := l.rate, l.burst
	if perSecond > 0 {
		r = rate.Limit(perSecond)
	}
	if burst > 0 {
		b = burst
	}
	if r == rate.Inf {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	lim := l.tenants[tenant]
	if lim == nil {
		lim = rate.NewLimiter(r, b)
		l.tenants[tenant] = lim
	}
	l.mu.Unlock()
	// SetLimitAt and SetBurstAt first bring the tokens up to now at the
	// old limit, so nothing earned is lost and nothing unearned is given;
	// a lower burst caps the tokens from the next reservation on.
	if lim.Limit() != r {
		lim.SetLimitAt(now, r)
	}
	if lim.Burst() != b {
		lim.SetBurstAt(now, b)
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Duration(math.MaxInt64), false
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

const failShards = 32

// failures is a token bucket per client for failed authentications: each
// 401 spends a token, and a client with none left is refused before its key
// is looked up, so guessing keys, or a client stuck on a bad one, costs the
// database nothing past the budget. Successes spend nothing: a client with
// a good key is never slowed by it, and clients elsewhere never share its
// bucket.
//
// A client is its address, an IPv6 one by its /64 (what one subscriber is
// usually given, so rotating addresses within it buys nothing). The table
// is bounded: a bucket that has filled up again is forgotten (it holds
// nothing a new one would not), on a sweep at most once per refill time per
// shard; when a shard is full of clients still spending, an arbitrary one
// is forgotten to make room. Safe for concurrent use; a nil *failures
// refuses nobody.
type failures struct {
	rate, burst float64
	refill      int64 // nanoseconds from empty to full
	maxPerShard int
	now         func() time.Time
	seed        maphash.Seed
	shards      [failShards]failShard
}

type failShard struct {
	mu    sync.Mutex
	m     map[netip.Addr]*failBucket
	swept int64 // Unix nanoseconds of the last sweep
}

type failBucket struct {
	tokens float64
	last   int64 // Unix nanoseconds
}

// newFailures allows perSecond failures per client with bursts of burst,
// tracking at most maxClients clients; a negative perSecond is nil (no
// bound).
func newFailures(perSecond float64, burst, maxClients int, now func() time.Time) *failures {
	if perSecond < 0 {
		return nil
	}
	f := &failures{rate: perSecond, burst: float64(burst), maxPerShard: max(maxClients/failShards, 1),
		now: now, seed: maphash.MakeSeed()}
	f.refill = int64(f.burst / f.rate * 1e9)
	for i := range f.shards {
		f.shards[i].m = make(map[netip.Addr]*failBucket)
	}
	return f
}

// tokensAt is b's tokens at now.
func (f *failures) tokensAt(b *failBucket, now int64) float64 {
	return min(f.burst, b.tokens+float64(now-b.last)/1e9*f.rate)
}

// blocked reports whether client has no failure left, and how long until
// it has one again. It spends nothing.
func (f *failures) blocked(client netip.Addr) (time.Duration, bool) {
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

// fail spends one of client's failures. Requests that passed blocked
// together may spend past the last token; the bucket stops at empty.
func (f *failures) fail(client netip.Addr) {
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
		b = &failBucket{tokens: f.burst, last: now}
		sh.m[client] = b
	}
	b.tokens = max(f.tokensAt(b, now)-1, 0)
	b.last = now
}

// sweep forgets the clients whose bucket is full again.
func (f *failures) sweep(sh *failShard, now int64) {
	sh.swept = now
	for c, b := range sh.m {
		if f.tokensAt(b, now) >= f.burst {
			delete(sh.m, c)
		}
	}
}

// clients is how many clients are tracked.
func (f *failures) clients() int {
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

func (f *failures) shard(client netip.Addr) *failShard {
	return &f.shards[maphash.Comparable(f.seed, client)%failShards]
}

// clientOf is the client a request is charged to: the socket's peer (an
// IPv4 address, or an IPv6 /64). Control believes no X-Forwarded-For, so
// behind a proxy every client is the proxy (docs/api.md).
func clientOf(r *http.Request) netip.Addr {
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

// limitMetrics count the requests the limits refused, by which one, and
// the clients the failure budget tracks.
type limitMetrics struct {
	refused *prometheus.CounterVec
}

func newLimitMetrics(reg prometheus.Registerer, f *failures) *limitMetrics {
	if reg == nil {
		return nil
	}
	m := &limitMetrics{refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "control_rate_limited_total",
		Help: "Requests answered 429, by the limit that refused them (cause): tenant (its request rate) or auth_failures (a client past its budget of failed authentications).",
	}, []string{"cause"})}
	m.refused.WithLabelValues("tenant")
	m.refused.WithLabelValues("auth_failures")
	reg.MustRegister(m.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "control_auth_failure_clients",
		Help: "Clients (addresses, IPv6 /64s) with recent failed authentications that the failure budget tracks.",
	}, func() float64 { return float64(f.clients()) }))
	return m
}

func (m *limitMetrics) refuse(limit string) {
	if m != nil {
		m.refused.WithLabelValues(limit).Inc()
	}
}
