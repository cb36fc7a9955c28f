package console

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// failures is a token bucket per client address for failed sign-ins, the
// same policy as the API's failed authentications: each failure spends a
// token, a client with none left is refused before its key is looked up,
// and a success spends nothing. An IPv6 client is its /64. The table is
// bounded: buckets that filled up again are forgotten on a sweep, and when
// it is full of clients still spending an arbitrary one is dropped. Safe
// for concurrent use; a nil *failures refuses nobody.
type failures struct {
	rate, burst float64
	max         int
	now         func() time.Time

	mu      sync.Mutex
	clients map[netip.Addr]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newFailures(perSecond float64, burst, maxClients int, now func() time.Time) *failures {
	if perSecond < 0 {
		return nil
	}
	return &failures{rate: perSecond, burst: float64(burst), max: maxClients, now: now, clients: map[netip.Addr]*bucket{}}
}

func (f *failures) tokens(b *bucket, now time.Time) float64 {
	return min(f.burst, b.tokens+now.Sub(b.last).Seconds()*f.rate)
}

// blocked reports whether client has no failure left, and for how long.
func (f *failures) blocked(client netip.Addr) (time.Duration, bool) {
	if f == nil {
		return 0, false
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.clients[client]
	if b == nil {
		return 0, false
	}
	if t := f.tokens(b, now); t < 1 {
		return time.Duration((1 - t) / f.rate * float64(time.Second)), true
	}
	return 0, false
}

// fail spends one of client's failures.
func (f *failures) fail(client netip.Addr) {
	if f == nil {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	refill := time.Duration(f.burst / f.rate * float64(time.Second))
	if now.Sub(f.swept) >= refill || len(f.clients) >= f.max {
		f.swept = now
		for c, b := range f.clients {
			if f.tokens(b, now) >= f.burst {
				delete(f.clients, c)
			}
		}
	}
	b := f.clients[client]
	if b == nil {
		for c := range f.clients {
			if len(f.clients) < f.max {
				break
			}
			delete(f.clients, c)
		}
		b = &bucket{tokens: f.burst, last: now}
		f.clients[client] = b
	}
	b.tokens = max(f.tokens(b, now)-1, 0)
	b.last = now
}

// clientOf is the client a sign-in is charged to: the socket's peer, an
// IPv6 one by its /64. Control believes no X-Forwarded-For (docs/api.md).
func clientOf(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}
