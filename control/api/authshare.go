package api

import (
	"context"
	"sync"
	"time"
)

// authTimeout bounds one shared key lookup. It is detached from the
// requests' contexts: one client hanging up must not fail the others.
const authTimeout = 10 * time.Second

// sharedAuth asks its Authenticator for a key once for all the requests
// with that key that arrived while the previous lookup of it was running.
// A campaign tool sends thousands of creates a second with one key, and
// the lookup, a database round trip, cost about as much as the rest of a
// create.
//
// A request is never answered by a lookup that began before it arrived:
// it joins the next one. So the promise of Authenticator holds as if every
// request asked alone: a key revoked (or a limit changed) before a request
// arrived is seen by that request. A lookup runs on the goroutine of one of
// the requests waiting for it; there is nothing to start or stop. Safe for
// concurrent use.
type sharedAuth struct {
	auth Authenticator

	mu   sync.Mutex
	keys map[string]*keyLookups
}

func newSharedAuth(auth Authenticator) *sharedAuth {
	return &sharedAuth{auth: auth, keys: make(map[string]*keyLookups)}
}

// keyLookups is one key's lookups: the one running, and the one the
// requests that arrived since wait for.
type keyLookups struct {
	running chan struct{} // closed when the running lookup ends; nil if none runs
	next    *authAnswer   // the next lookup's requests; nil if none waits
}

// authAnswer is one lookup's answer, for every request it serves.
type authAnswer struct {
	done    chan struct{} // closed once the fields below are set
	started bool          // a request took it and runs the lookup
	waiting int           // requests waiting for it

	tenant    int64
	perSecond float64
	burst     int
	err       error
}

// Authenticate implements Authenticator.
func (s *sharedAuth) Authenticate(ctx context.Context, key string) (int64, float64, int, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, 0, err // no lookup for a request already given up
	}
	s.mu.Lock()
	k := s.keys[key]
	if k == nil {
		k = &keyLookups{}
		s.keys[key] = k
	}
	a := k.next
	if a == nil {
		a = &authAnswer{done: make(chan struct{})}
		k.next = a
	}
	a.waiting++
	for !a.started {
		if k.running == nil {
			// Nothing runs: this request looks the key up for everyone
			// waiting with it, all of whom arrived before it starts.
			k.next, a.started, k.running = nil, true, make(chan struct{})
			s.mu.Unlock()
			s.lookup(ctx, key, k, a)
			return a.tenant, a.perSecond, a.burst, a.err
		}
		running := k.running
		s.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			s.leave(key, k, a)
			return 0, 0, 0, ctx.Err()
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		return a.tenant, a.perSecond, a.burst, a.err
	case <-ctx.Done():
		return 0, 0, 0, ctx.Err()
	}
}

// lookup asks for key on behalf of a's requests and answers them.
func (s *sharedAuth) lookup(ctx context.Context, key string, k *keyLookups, a *authAnswer) {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), authTimeout)
	a.tenant, a.perSecond, a.burst, a.err = s.auth.Authenticate(qctx, key)
	cancel()
	close(a.done)
	s.mu.Lock()
	close(k.running)
	k.running = nil
	if k.next == nil {
		delete(s.keys, key)
	}
	s.mu.Unlock()
}

// leave withdraws a request from a, a lookup not started yet; a lookup no
// one waits for is dropped, and with it the key once nothing else is left.
func (s *sharedAuth) leave(key string, k *keyLookups, a *authAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.waiting--; a.waiting == 0 && !a.started && k.next == a {
		k.next = nil
		if k.running == nil {
			delete(s.keys, key)
		}
	}
}
