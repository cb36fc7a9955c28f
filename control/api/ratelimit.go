package api

import (
	"math"
	"sync"
	"time"

	"github.com/edgelink/edgelink/control/authfail"
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

// limitMetrics count the requests the limits refused, by which one, and
// the clients the failure budget tracks.
type limitMetrics struct {
	refused *prometheus.CounterVec
}

func newLimitMetrics(reg prometheus.Registerer, f *authfail.Budget) *limitMetrics {
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
	}, func() float64 { return float64(f.Clients()) }))
	return m
}

func (m *limitMetrics) refuse(limit string) {
	if m != nil {
		m.refused.WithLabelValues(limit).Inc()
	}
}
