package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// countedAuth counts the keys looked up in the database.
type countedAuth struct {
	Authenticator
	lookups atomic.Int64
}

func (c *countedAuth) Authenticate(ctx context.Context, key string) (int64, float64, int, error) {
	c.lookups.Add(1)
	return c.Authenticator.Authenticate(ctx, key)
}

// clock is a time a test moves by hand.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// authServer is the API on a fresh database with cfg, its store and the
// count of key lookups. Requests go straight to the handler, so a test
// says which address each comes from.
func authServer(t *testing.T, cfg Config) (http.Handler, *postgres.Store, *countedAuth) {
	t.Helper()
	st := postgres.New(pgtest.Pool(t))
	auth := &countedAuth{Authenticator: st}
	svc := links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{Reserved: Routes})
	cfg.PublicURL = "https://sho.rt"
	return New(auth, svc, cfg), st, auth
}

// list is GET /api/v1/links from the address from with the Authorization
// header authz (none when empty).
func list(h http.Handler, from, authz string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/api/v1/links", nil)
	r.RemoteAddr = peer(from)
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// peer is addr as a socket peer, with a port.
func peer(addr string) string {
	a := netip.MustParseAddr(addr)
	return netip.AddrPortFrom(a, 4711).String()
}

func TestAuthorizationSchemeIsCaseInsensitive(t *testing.T) {
	h, st, _ := authServer(t, Config{RatePerSecond: -1, AuthFailuresPerSecond: -1})
	_, key, err := st.CreateTenantWithKey(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, authz := range []string{"Bearer " + key, "bearer " + key, "BEARER " + key, "bEaReR " + key, "Bearer    " + key, "bearer " + key + "  "} {
		if w := list(h, "192.0.2.1", authz); w.Code != http.StatusOK {
			t.Errorf("Authorization %q: %d %s; want 200", authz, w.Code, w.Body)
		}
	}
	for _, authz := range []string{"", "Bearer", "Bearer ", "Bearer" + key, "Basic " + key, "Bearer " + key + " extra", key, "Token " + key} {
		if w := list(h, "192.0.2.1", authz); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %s; want 401 with WWW-Authenticate", authz, w.Code, w.Body)
		}
	}
}

func TestFailedAuthenticationsAreLimitedPerClient(t *testing.T) {
	clk := newClock()
	h, st, auth := authServer(t, Config{RatePerSecond: -1, AuthFailuresPerSecond: 0.5, AuthFailureBurst: 5, Now: clk.now})
	_, key, err := st.CreateTenantWithKey(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	const attacker, neighbour = "198.51.100.7", "198.51.100.8"
	for i := range 5 {
		if w := list(h, attacker, "Bearer elk_guess"+strconv.Itoa(i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s; want 401", i+1, w.Code, w.Body)
		}
	}
	lookups := auth.lookups.Load()
	for _, authz := range []string{"Bearer elk_guess", "", "Bearer " + key} {
		w := list(h, attacker, authz)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
			t.Errorf("past the budget, %q: %d Retry-After %q %s; want 429 with Retry-After 2", authz, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if n := auth.lookups.Load() - lookups; n != 0 {
		t.Errorf("%d keys looked up for a client past its budget; want none", n)
	}
	// Other clients are not affected, good keys or bad.
	if w := list(h, neighbour, "Bearer "+key); w.Code != http.StatusOK {
		t.Errorf("a good key from elsewhere: %d %s", w.Code, w.Body)
	}
	if w := list(h, neighbour, "Bearer elk_typo"); w.Code != http.StatusUnauthorized {
		t.Errorf("another client's first failure: %d %s; want 401", w.Code, w.Body)
	}
	// An IPv6 client is its /64: another address in it shares the budget,
	// the next /64 does not.
	for i := range 5 {
		list(h, fmt.Sprintf("2001:db8:1:2::%x", i+1), "Bearer elk_guess")
	}
	if w := list(h, "2001:db8:1:2:ffff::1", "Bearer "+key); w.Code != http.StatusTooManyRequests {
		t.Errorf("the same /64: %d; want 429", w.Code)
	}
	if w := list(h, "2001:db8:1:3::1", "Bearer "+key); w.Code != http.StatusOK {
		t.Errorf("the next /64: %d; want 200", w.Code)
	}
	// Successes spend nothing: a good key keeps working from one address.
	for range 50 {
		if w := list(h, "203.0.113.1", "Bearer "+key); w.Code != http.StatusOK {
			t.Fatalf("a good key, again and again: %d %s", w.Code, w.Body)
		}
	}
	// The budget refills: one failure every 2 s.
	clk.advance(2 * time.Second)
	if w := list(h, attacker, "Bearer "+key); w.Code != http.StatusOK {
		t.Errorf("after Retry-After, a good key: %d %s; want 200", w.Code, w.Body)
	}
	list(h, attacker, "Bearer elk_again")
	if w := list(h, attacker, "Bearer "+key); w.Code != http.StatusTooManyRequests {
		t.Errorf("the refilled failure spent: %d; want 429", w.Code)
	}
}

// TestFailureBudgetUnderLoad has many clients fail and succeed at once,
// for the race detector, and checks the budget held for each.
func TestFailureBudgetUnderLoad(t *testing.T) {
	clk := newClock()
	h, st, auth := authServer(t, Config{RatePerSecond: -1, AuthFailuresPerSecond: 0.001, AuthFailureBurst: 3, Now: clk.now})
	_, key, err := st.CreateTenantWithKey(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	const clients, tries = 8, 20
	var unauthorized, refused, ok atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		from := fmt.Sprintf("192.0.2.%d", c+1)
		wg.Go(func() {
			for range tries {
				switch list(h, from, "Bearer elk_wrong").Code {
				case http.StatusUnauthorized:
					unauthorized.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				}
			}
		})
		wg.Go(func() {
			for range tries {
				if list(h, fmt.Sprintf("203.0.113.%d", c+1), "Bearer "+key).Code == http.StatusOK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// Sequential failures from one client stop at the burst; requests of
	// one client are sequential here, so exactly 3 each.
	if unauthorized.Load() != clients*3 || refused.Load() != clients*(tries-3) || ok.Load() != clients*tries {
		t.Errorf("401 %d, 429 %d, 200 %d; want %d, %d, %d", unauthorized.Load(), refused.Load(), ok.Load(),
			clients*3, clients*(tries-3), clients*tries)
	}
	// No lookup for a request refused for its client's budget; requests
	// with one key at once may share a lookup (sharedAuth).
	if n := auth.lookups.Load(); n < 1 || n > clients*3+clients*tries {
		t.Errorf("%d key lookups; want 1 to %d", n, clients*3+clients*tries)
	}
}

func TestTenantLimitChangesKeepTheBucket(t *testing.T) {
	clk := newClock()
	l := newLimiter(100, 200, clk.now)
	take := func(perSecond float64, burst int) int {
		n := 0
		for {
			if _, ok := l.allow(1, perSecond, burst); !ok {
				return n
			}
			n++
		}
	}
	if n := take(0, 0); n != 200 {
		t.Fatalf("the default burst gave %d; want 200", n)
	}
	// The tenant gets a limit of its own: the bucket is empty and stays
	// so (a change grants nothing), then fills at the new rate.
	if n := take(2, 10); n != 0 {
		t.Errorf("a new limit refilled the bucket: %d taken; want 0", n)
	}
	clk.advance(time.Second)
	if n := take(2, 10); n != 2 {
		t.Errorf("one second at 2/s gave %d; want 2", n)
	}
	clk.advance(time.Minute)
	if n := take(2, 10); n != 10 {
		t.Errorf("a full bucket gave %d; want the burst, 10", n)
	}
	// A lower burst caps what a full bucket holds.
	clk.advance(time.Minute)
	if n := take(2, 3); n != 3 {
		t.Errorf("burst lowered to 3 gave %d", n)
	}
	if wait, ok := l.allow(1, 2, 3); ok || wait != 500*time.Millisecond {
		t.Errorf("empty at 2/s: wait %v, %v; want 500ms", wait, ok)
	}
	// Tenants have buckets of their own.
	if _, ok := l.allow(2, 0, 0); !ok {
		t.Error("another tenant refused")
	}
	// With the default unlimited, a tenant's own rate still binds.
	off := newLimiter(-1, 200, clk.now)
	if _, ok := off.allow(1, 0, 0); !ok {
		t.Error("no default: refused")
	}
	for range 5 {
		off.allow(2, 1, 5)
	}
	if _, ok := off.allow(2, 1, 5); ok {
		t.Error("a tenant's own limit ignored when the default is off")
	}
}

func TestTenantLimitFromTheDatabase(t *testing.T) {
	clk := newClock()
	h, st, _ := authServer(t, Config{RatePerSecond: 1000, Burst: 50, AuthFailuresPerSecond: -1, Now: clk.now})
	ctx := context.Background()
	_, key, err := st.CreateTenantWithLimits(ctx, "acme", postgres.TenantLimits{PerSecond: 1, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	codes := func(n int) []int {
		var out []int
		for range n {
			out = append(out, list(h, "192.0.2.1", "Bearer "+key).Code)
		}
		return out
	}
	if got := fmt.Sprint(codes(3)); got != "[200 200 429]" {
		t.Errorf("burst 2: %s", got)
	}
	burst := 4
	if _, err := st.SetTenantLimits(ctx, "acme", postgres.LimitChange{Burst: &burst}); err != nil {
		t.Fatal(err)
	}
	// The next request applies it. The bucket keeps its tokens: it was
	// full at 2, and fills to 4 at the rate from then on.
	clk.advance(time.Hour)
	if got := fmt.Sprint(codes(3)); got != "[200 200 429]" {
		t.Errorf("burst raised to 4, a full bucket of 2: %s", got)
	}
	clk.advance(4 * time.Second)
	if got := fmt.Sprint(codes(5)); got != "[200 200 200 200 429]" {
		t.Errorf("burst raised to 4, 4 s later: %s", got)
	}
	zero := 0.0
	if _, err := st.SetTenantLimits(ctx, "acme", postgres.LimitChange{PerSecond: &zero, Burst: new(int)}); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	codes(1) // applies the default
	clk.advance(time.Second)
	if got := codes(51); got[49] != 200 || got[50] != 429 {
		t.Errorf("back to the default burst (50): requests 50 and 51 answered %d, %d", got[49], got[50])
	}
}
