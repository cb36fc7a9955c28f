package api

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
)

// ledgerAuth is an Authenticator over keys a test revokes at will. Every
// lookup takes a number from the ledger's clock when it starts and answers
// with it (as the tenant's burst), so a test can tell which lookup
// answered a request and when it began. gate, if set, holds each lookup
// until a value is sent on it.
type ledgerAuth struct {
	clock   atomic.Int64
	lookups atomic.Int64
	gate    chan struct{}
	started chan struct{} // if set, receives once per lookup as it starts

	mu      sync.Mutex
	revoked map[string]int64 // key → clock reading when it was revoked
}

func (l *ledgerAuth) revoke(key string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.revoked == nil {
		l.revoked = map[string]int64{}
	}
	at := l.clock.Add(1)
	l.revoked[key] = at
	return at
}

func (l *ledgerAuth) Authenticate(ctx context.Context, key string) (int64, float64, int, error) {
	l.lookups.Add(1)
	at := l.clock.Add(1)
	l.mu.Lock()
	_, revoked := l.revoked[key]
	l.mu.Unlock()
	if l.started != nil {
		l.started <- struct{}{}
	}
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		}
	}
	if revoked {
		return 0, 0, int(at), link.ErrUnauthorized
	}
	return 1, 0, int(at), nil
}

// TestSharedAuthNeverAnswersFromBefore: while a key's lookup runs, the
// key is revoked and more requests with it arrive. The running lookup
// answers only the request that started it (valid, as it was when asked);
// the others share one later lookup, which sees the revocation. So a
// revoked key fails on its very next request, with one lookup for many.
func TestSharedAuthNeverAnswersFromBefore(t *testing.T) {
	auth := &ledgerAuth{gate: make(chan struct{}), started: make(chan struct{}, 10)}
	s := newSharedAuth(auth)
	ctx := context.Background()

	first := make(chan error, 1)
	go func() { _, _, _, err := s.Authenticate(ctx, "k"); first <- err }()
	<-auth.started // the first lookup runs, held by the gate
	auth.revoke("k")
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, _, _, errs[i] = s.Authenticate(ctx, "k") })
	}
	// Every later request waits: none may take the running lookup's answer.
	poll.Until(t, "the later requests to wait for the next lookup", 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := s.keys["k"]
		return k != nil && k.next != nil && k.next.waiting == n
	})
	auth.gate <- struct{}{} // the first lookup answers
	if err := <-first; err != nil {
		t.Fatalf("the request whose lookup began before the revocation: %v; want its answer, valid", err)
	}
	<-auth.started
	auth.gate <- struct{}{} // the shared second lookup answers
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, link.ErrUnauthorized) {
			t.Errorf("request %d, arrived after the revocation: %v; want ErrUnauthorized", i, err)
		}
	}
	if got := auth.lookups.Load(); got != 2 {
		t.Errorf("%d lookups for %d requests; want 2 (the running one and one shared)", got, n+1)
	}
	if len(s.keys) != 0 {
		t.Errorf("%d keys left behind", len(s.keys))
	}
}

// TestSharedAuthUnderLoad: requests with a few keys, some revoked while
// they run, some giving up: every answer comes from a lookup that began
// after the request arrived, and a request arriving after its key's
// revocation is always refused. Run it under -race.
func TestSharedAuthUnderLoad(t *testing.T) {
	auth := &ledgerAuth{}
	s := newSharedAuth(auth)
	keys := []string{"a", "b", "c", "d"}
	var revokedAt sync.Map // key → clock reading
	var wg sync.WaitGroup
	var answered, gaveUp atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 300 {
				key := keys[r.IntN(len(keys))]
				if g == 0 && i%100 == 99 {
					at := auth.revoke(key)
					revokedAt.LoadOrStore(key, at)
				}
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(20) == 0 {
					cancel() // a client that hung up
				}
				arrived := auth.clock.Add(1)
				_, _, asked, err := s.Authenticate(ctx, key)
				cancel()
				if errors.Is(err, context.Canceled) {
					gaveUp.Add(1)
					continue
				}
				answered.Add(1)
				if int64(asked) <= arrived {
					t.Errorf("key %s: answered by a lookup at %d, before the request arrived at %d", key, asked, arrived)
					return
				}
				if at, ok := revokedAt.Load(key); ok && arrived > at.(int64) && !errors.Is(err, link.ErrUnauthorized) {
					t.Errorf("key %s revoked at %d, request arrived at %d: %v; want ErrUnauthorized", key, at, arrived, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(s.keys) != 0 {
		t.Errorf("%d keys left behind", len(s.keys))
	}
	t.Logf("%d answered by %d lookups, %d gave up", answered.Load(), auth.lookups.Load(), gaveUp.Load())
	if answered.Load() == 0 {
		t.Fatal("no request was answered")
	}
}

// TestSharedAuthWaiterLeaves: a request waiting for the next lookup that
// gives up is answered with its context's error, and leaves nothing
// behind.
func TestSharedAuthWaiterLeaves(t *testing.T) {
	auth := &ledgerAuth{gate: make(chan struct{}), started: make(chan struct{}, 10)}
	s := newSharedAuth(auth)
	first := make(chan error, 1)
	go func() { _, _, _, err := s.Authenticate(context.Background(), "k"); first <- err }()
	<-auth.started
	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan error, 1)
	go func() { _, _, _, err := s.Authenticate(ctx, "k"); waiter <- err }()
	poll.Until(t, "the second request to wait", 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.keys["k"].next != nil
	})
	cancel()
	if err := <-waiter; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request that gave up: %v; want context.Canceled", err)
	}
	auth.gate <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := auth.lookups.Load(); got != 1 {
		t.Errorf("%d lookups; want 1: no one waited for a second", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) != 0 {
		t.Errorf("keys left behind: %v", fmt.Sprint(s.keys))
	}
}

// TestConcurrentCreatesShareAKeyLookup: creates with one key that arrive
// while that key is being looked up wait for, and share, the next lookup,
// through the handler; the one that arrives after the key is revoked is
// refused.
func TestConcurrentCreatesShareAKeyLookup(t *testing.T) {
	auth := &ledgerAuth{gate: make(chan struct{}), started: make(chan struct{}, 10)}
	h := New(auth, echoLinks{}, Config{PublicURL: "https://sho.rt", RatePerSecond: -1})
	create := func() int {
		req := httptest.NewRequest("POST", "/api/v1/links", strings.NewReader(`{"url": "https://example.com/"}`))
		req.Header.Set("Authorization", "Bearer elk_campaign")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	first := make(chan int, 1)
	go func() { first <- create() }()
	<-auth.started
	const n = 30
	codes := make(chan int, n)
	for range n {
		go func() { codes <- create() }()
	}
	poll.Until(t, "the creates to wait for the next lookup", 10*time.Second, func() bool {
		return auth.lookups.Load() == 1 && len(codes) == 0 && waitingFor(h, "elk_campaign") == n
	})
	auth.gate <- struct{}{}
	<-auth.started
	auth.gate <- struct{}{}
	if c := <-first; c != http.StatusCreated {
		t.Fatalf("first create: %d", c)
	}
	for range n {
		if c := <-codes; c != http.StatusCreated {
			t.Fatalf("a create sharing a lookup: %d", c)
		}
	}
	if got := auth.lookups.Load(); got != 2 {
		t.Errorf("%d key lookups for %d concurrent creates with one key; want 2", got, n+1)
	}
	auth.revoke("elk_campaign")
	go func() { <-auth.started; auth.gate <- struct{}{} }()
	if c := create(); c != http.StatusUnauthorized {
		t.Errorf("a create after the key was revoked: %d; want 401", c)
	}
}

// waitingFor is how many requests wait for the next lookup of key in h.
func waitingFor(h *Server, key string) int {
	sa := h.auth.(*sharedAuth)
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if k := sa.keys[key]; k != nil && k.next != nil {
		return k.next.waiting
	}
	return 0
}
