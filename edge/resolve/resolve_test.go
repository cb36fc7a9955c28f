package resolve

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// platform is the platform's domain as an edge without a domain table
// serves it.
var platform = &store.DomainState{Conf: link.Domain{ID: link.DefaultDomain, CodeMode: link.CodesSequential, Status: link.DomainActive}}

// key is a link's key at the fake authority.
type key struct {
	d    link.DomainID
	code string
}

type fakeAuthority struct {
	calls   atomic.Int64
	links   map[key]authority.Reply
	asked   []key // guarded by mu
	settled []uint64
	mu      sync.Mutex
	err     error
	ceiling uint64 // IDs at or above it are beyond the frontier; 0: no promise
	// ceilings are other domains' ceilings, as local IDs (absent: no
	// promise for that domain).
	ceilings map[link.DomainID]uint64
}

func (f *fakeAuthority) Settle(id uint64) (bool, error) {
	f.mu.Lock()
	f.settled = append(f.settled, id)
	f.mu.Unlock()
	if d, local := link.SplitID(id); d != link.DefaultDomain {
		c, ok := f.ceilings[d]
		if !ok {
			return false, f.err
		}
		return local >= c, nil
	}
	if f.ceiling == 0 {
		return false, f.err
	}
	return id >= f.ceiling, nil
}

func (f *fakeAuthority) Ask(d link.DomainID, code string) (authority.Reply, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.asked = append(f.asked, key{d, code})
	f.mu.Unlock()
	if f.err != nil {
		return authority.Reply{}, f.err
	}
	if r, ok := f.links[key{d, code}]; ok {
		return r, nil
	}
	return authority.Reply{Kind: authority.NotFound, Version: 100}, nil
}

func code(id uint64) []byte {
	c, err := base62.Encode(id)
	if err != nil {
		panic(err)
	}
	return []byte(c)
}

// newResolver has segment [1000, 2000) sealed and [2000, 3000) open, and
// the frontier's promise at 5000; the authority knows ID 1500 (sealed, also
// in the hint), ID 2500 (open) and a custom code.
func newResolver(t *testing.T) (*Resolver, *fakeAuthority) {
	t.Helper()
	cache, err := store.NewCache(1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	hint := store.NewHint(1000, 0.001)
	segs := new(store.Segments)
	segs.Seal(1000, 2000)
	hint.Add(link.DefaultDomain, string(code(1500)))
	auth := &fakeAuthority{links: map[key]authority.Reply{}, ceiling: 5000}
	for _, c := range []string{string(code(1500)), string(code(2500)), "my-campaign"} {
		auth.links[key{0, c}] = authority.Reply{Kind: authority.Found, Version: 7, Code: c, URL: "https://example.com/" + c, RedirectType: 302, Status: link.Active}
	}
	return &Resolver{Cache: cache, Hint: hint, Segments: segs, Authority: auth, Complete: func() bool { return true }}, auth
}

func TestLayers(t *testing.T) {
	tests := []struct {
		name      string
		code      []byte
		want      Outcome
		authority bool // whether the authority is asked
	}{
		{"sealed, bloom-negative: certain 404", code(1234), NotFound, false},
		{"sealed, in bloom: asked", code(1500), Found, true},
		{"open segment, unknown: asked", code(2999), NotFound, true},
		{"open segment, created: asked", code(2500), Found, true},
		{"never leased, below the ceiling: asked", code(900), NotFound, true},
		{"beyond the frontier's promise: certain 404", code(5000), NotFound, false},
		{"far beyond it: certain 404", code(base62.MaxID), NotFound, false},
		{"the sentinel 000000", []byte("000000"), NotFound, false},
		{"below the ceiling, open: asked", code(4999), NotFound, true},
		{"custom code: asked", []byte("my-campaign"), Found, true},
		{"custom unknown: asked", []byte("no-such"), NotFound, true},
		{"case matters: 0000g4 is ID 2608, open", []byte("0000g4"), NotFound, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, auth := newResolver(t)
			_, got := r.Resolve(platform, tt.code)
			if got != tt.want {
				t.Errorf("Resolve(%s) = %d; want %d", tt.code, got, tt.want)
			}
			if asked := auth.calls.Load() > 0; asked != tt.authority {
				t.Errorf("Resolve(%s) asked the authority: %v; want %v", tt.code, asked, tt.authority)
			}
		})
	}
}

func TestNegativeCache(t *testing.T) {
	r, auth := newResolver(t)
	// A sealed code the bloom lets through (a false positive) and the
	// authority does not know: the negative answer is cached and trusted.
	fp := code(1777)
	r.Hint.Add(link.DefaultDomain, string(fp))
	for range 3 {
		if _, got := r.Resolve(platform, fp); got != NotFound {
			t.Fatalf("Resolve(false positive) = %d; want NotFound", got)
		}
		r.Cache.Wait()
	}
	if n := auth.calls.Load(); n != 1 {
		t.Fatalf("authority asked %d times for a cached sealed negative; want 1", n)
	}

	// A code that could be recent: its negative answer is never trusted,
	// since the link may be created (201) right after.
	recent := code(2600)
	if _, got := r.Resolve(platform, recent); got != NotFound {
		t.Fatalf("first probe = %d; want NotFound", got)
	}
	r.Cache.Wait()
	auth.links[key{0, string(recent)}] = authority.Reply{Kind: authority.Found, Version: 200, Code: string(recent), URL: "https://new", RedirectType: 302, Status: link.Active}
	e, got := r.Resolve(platform, recent)
	if got != Found || e.URL != "https://new" {
		t.Fatalf("after create: %v %+v; want Found https://new", got, e)
	}
	r.Cache.Wait()
	// Now cached positively: no further round trip.
	before := auth.calls.Load()
	if _, got := r.Resolve(platform, recent); got != Found || auth.calls.Load() != before {
		t.Fatalf("cached positive not used: %d, calls %d→%d", got, before, auth.calls.Load())
	}
}

func TestGapsDisableShortcut(t *testing.T) {
	r, auth := newResolver(t)
	r.Complete = func() bool { return false }
	if _, got := r.Resolve(platform, code(1234)); got != NotFound || auth.calls.Load() != 1 {
		t.Fatalf("with a gap, a sealed bloom-negative must go to the authority: %d, %d calls", got, auth.calls.Load())
	}
}

func TestUnavailableIsNever404(t *testing.T) {
	r, auth := newResolver(t)
	auth.err = errors.New("nats down")
	for _, c := range [][]byte{code(2999), []byte("my-campaign"), code(1500)} {
		if _, got := r.Resolve(platform, c); got != Unavailable {
			t.Errorf("Resolve(%s) with the authority down = %d; want Unavailable", c, got)
		}
	}
	// A certain miss needs no authority: sealed and ruled out by the hint,
	// or beyond the promise (which outlives the connection to control).
	for _, c := range [][]byte{code(1234), code(7000)} {
		if _, got := r.Resolve(platform, c); got != NotFound {
			t.Errorf("Resolve(%s), a certain miss, with the authority down = %d; want NotFound", c, got)
		}
	}
	// Without a promise, a code above every segment is no longer certain.
	auth.ceiling = 0
	if _, got := r.Resolve(platform, code(7000)); got != Unavailable {
		t.Errorf("Resolve(beyond, no promise) with the authority down = %d; want Unavailable", got)
	}
}

// TestNegativeBeforeCreateNotKept: a code probed while its segment was open
// (404), then created and its segment sealed, is asked again, not answered
// from the remembered 404: by then the edge need not hold the link anywhere
// else (a memory-budget snapshot dropped it as cold after its overlay entry
// went into an earlier one), and the 404 was true only before the create.
func TestNegativeBeforeCreateNotKept(t *testing.T) {
	r, auth := newResolver(t)
	c := code(2700) // in the open segment [2000, 3000)
	if _, got := r.Resolve(platform, c); got != NotFound {
		t.Fatalf("probe before the create = %d; want NotFound", got)
	}
	r.Cache.Wait()
	auth.links[key{0, string(c)}] = authority.Reply{Kind: authority.Found, Version: 300, Code: string(c), URL: "https://made", RedirectType: 302, Status: link.Active}
	r.Segments.Seal(2000, 3000)
	r.Hint.Add(link.DefaultDomain, string(c))
	e, got := r.Resolve(platform, c)
	if got != Found || e.URL != "https://made" {
		t.Fatalf("after the create and the seal: %d %+v; want Found https://made", got, e)
	}
}

// TestNoAuthorityIsNoProof: without an authority, a sealed code the hint
// lets through is not a certain 404 (a memory-budget snapshot leaves links
// out of its entries, never out of its bloom), while one it rules out is.
func TestNoAuthorityIsNoProof(t *testing.T) {
	r, _ := newResolver(t)
	r.Authority = nil
	if _, got := r.Resolve(platform, code(1500)); got != Unavailable {
		t.Errorf("Resolve(sealed, in the bloom) without an authority = %d; want Unavailable", got)
	}
	if _, got := r.Resolve(platform, code(1234)); got != NotFound {
		t.Errorf("Resolve(sealed, ruled out by the bloom) without an authority = %d; want NotFound", got)
	}
}
