package api

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is a token bucket per tenant, in this instance's memory: with N
// control instances behind a balancer a tenant gets up to N times the rate.
// That is the trade for no shared state on the request path; a shared
// limiter (Postgres or NATS KV) would cost a round trip per request.
type limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	tenants map[int64]*rate.Limiter
}

func newLimiter(perSecond float64, burst int, now func() time.Time) *limiter {
	r := rate.Limit(perSecond)
	if perSecond < 0 {
		r = rate.Inf
	}
	return &limiter{rate: r, burst: burst, now: now, tenants: make(map[int64]*rate.Limiter)}
}

// allow takes a token for tenant, or says how long until one is available.
func (l *limiter) allow(tenant int64) (time.Duration, bool) {
	if l.rate == rate.Inf {
		return 0, true
	}
	l.mu.Lock()
	lim := l.tenants[tenant]
	if lim == nil {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.tenants[tenant] = lim
	}
	l.mu.Unlock()
	now := l.now()
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
