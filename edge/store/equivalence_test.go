package store

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// linkKey is a link's key: the same code on two domains is two links.
type linkKey struct {
	d    link.DomainID
	code string
}

func (k linkKey) String() string { return fmt.Sprintf("%d/%s", k.d, k.code) }

// authority is what the authority held of each link, version by version:
// the stream the edge applies, in order.
type authority struct {
	events []Entry
	// history[k] is that link's events, by ascending version.
	history map[linkKey][]*Entry
}

// asOf is k's state at version v: its newest event at or below v.
func (a *authority) asOf(k linkKey, v uint64) *Entry {
	h := a.history[k]
	i := sort.Search(len(h), func(i int) bool { return h[i].Version > v })
	if i == 0 {
		return nil
	}
	return h[i-1]
}

// snapshotAt is the snapshot control would build after the first n events.
func (a *authority) snapshotAt(t testing.TB, n int) *Loaded {
	last := map[linkKey]*Entry{}
	for i := range a.events[:n] {
		last[linkKey{a.events[i].Domain, a.events[i].Code}] = &a.events[i]
	}
	links := make([]snapshot.Link, 0, len(last))
	for _, e := range last {
		links = append(links, snapshot.Link{Domain: e.Domain, Code: e.Code, URL: e.URL, RedirectType: e.RedirectType, Status: e.Status, ExpiresAt: e.ExpiresAt})
	}
	cv := a.events[n-1].Version
	return loadTB(t, links, snapshot.Header{ChangeVersion: cv, StreamSeq: cv}, nil)
}

// equivalenceDomains are the domains the links are spread over: the same
// codes on each.
var equivalenceDomains = []link.DomainID{link.DefaultDomain, 1, 300}

// newAuthority makes a bulk load of generated and custom codes, the same
// ones on each of equivalenceDomains, then updates of random links: new
// targets, other redirect types, expiries, disables and deletes.
func newAuthority(t testing.TB, generated, custom, updates int) (*authority, []linkKey) {
	rng := rand.New(rand.NewPCG(19, 1))
	var codes []linkKey
	for _, d := range equivalenceDomains {
		for i := range generated / len(equivalenceDomains) {
			c, err := base62.Encode(uint64(i + 1))
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, linkKey{d, c})
		}
		for i := range custom / len(equivalenceDomains) {
			codes = append(codes, linkKey{d, fmt.Sprintf("promo-%d_x", i)})
		}
	}
	a := &authority{history: map[linkKey][]*Entry{}}
	v := uint64(0)
	add := func(e Entry) {
		v++
		e.Version = v
		a.events = append(a.events, e)
	}
	for i, k := range codes {
		add(Entry{Domain: k.d, Code: k.code, URL: fmt.Sprintf("https://h%d.example/landing?n=%d&d=%d", i%7, i, k.d), RedirectType: 302, Status: link.Active})
	}
	types := []link.RedirectType{301, 302, 307, 308}
	for range updates {
		k := codes[rng.IntN(len(codes))]
		e := Entry{Domain: k.d, Code: k.code, URL: fmt.Sprintf("https://u%d.example/%s/%d", rng.IntN(5), k, v), RedirectType: types[rng.IntN(4)], Status: link.Active}
		switch rng.IntN(10) {
		case 0:
			e.Status = link.Disabled
		case 1:
			e.Status, e.URL, e.RedirectType = link.Deleted, "", 0
		case 2:
			e.ExpiresAt = 1_700_000_000_000 + int64(rng.IntN(1e9))
		}
		add(e)
	}
	for i := range a.events {
		e := &a.events[i]
		k := linkKey{e.Domain, e.Code}
		a.history[k] = append(a.history[k], e)
	}
	return a, codes
}

// answer is what an edge answers from a hit: the status, and for an active
// link its target, redirect type and expiry.
type answer struct {
	status       link.Status
	url          string
	redirect     link.RedirectType
	expiresAt    int64
	version      uint64
	fromSnapshot bool
}

func answerOf(h Hit) answer {
	if h.Overlay {
		r := &h.Rec
		a := answer{status: r.Status, version: r.Version}
		if r.Status == link.Active {
			a.url, a.redirect, a.expiresAt = r.URL(), r.RedirectType, r.ExpiresAt
		}
		return a
	}
	s := &h.Snap
	a := answer{status: s.Status, version: s.Version, fromSnapshot: true}
	if s.Status == link.Active {
		a.url, a.redirect, a.expiresAt = string(s.AppendURL(nil)), s.RedirectType, s.ExpiresAt
	}
	return a
}

func (a answer) matches(e *Entry) bool {
	if a.status != e.Status {
		return false
	}
	return a.status != link.Active || (a.url == e.URL && a.redirect == e.RedirectType && a.expiresAt == e.ExpiresAt)
}

// The edge answers exactly like the authority on 10,000 sampled links (the
// same codes on three domains) while
// a bulk load and its updates arrive, across overlay compactions and
// snapshot swaps: every answer is the authority's state at a version at
// least as new as the last one applied before the lookup, and once the
// stream is applied, its newest. Run it under -race.
func TestLayersAnswerLikeTheAuthority(t *testing.T) {
	const sampled = 10_000
	auth, codes := newAuthority(t, 24_000, 6_000, 30_000)
	rng := rand.New(rand.NewPCG(19, 2))
	sample := make([]linkKey, sampled)
	for i, j := range rng.Perm(len(codes))[:sampled] {
		sample[i] = codes[j]
	}
	layers := &Layers{Overlay: NewOverlay(), Hint: NewHint(1<<16, 0.01), Segments: new(Segments), Snapshots: new(Snapshots)}
	layers.Overlay.compactMin = 2 << 10 // compact often at this scale

	// floor[code] is the newest version of code whose Apply returned.
	floor := make(map[linkKey]*atomic.Uint64, len(codes))
	for _, c := range codes {
		floor[c] = new(atomic.Uint64)
	}
	var applied atomic.Int64 // events applied, a prefix of auth.events
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the change feed
		defer close(done)
		for i := range auth.events {
			e := auth.events[i]
			layers.Apply(&e)
			floor[linkKey{e.Domain, e.Code}].Store(e.Version)
			applied.Store(int64(i + 1))
		}
	})
	var swaps atomic.Int64
	wg.Go(func() { // control's snapshots, installed as snapsync does
		for n := len(auth.events) / 6; ; n += len(auth.events) / 6 {
			for applied.Load() < int64(n) {
				select {
				case <-done:
					return
				default:
				}
			}
			layers.Install(auth.snapshotAt(t, n))
			swaps.Add(1)
		}
	})
	check := func(code linkKey, h Hit, ok bool, floor uint64) error {
		if !ok {
			if floor != 0 {
				return fmt.Errorf("%s: not found after version %d was applied", code, floor)
			}
			return nil
		}
		got := answerOf(h)
		want := auth.asOf(code, got.version)
		if want == nil || want.Version < floor || !got.matches(want) {
			return fmt.Errorf("%s: answered %+v; the authority had %+v at that version, and %d was applied before the lookup", code, got, want, floor)
		}
		return nil
	}
	var lookups atomic.Int64
	for r := range 2 {
		wg.Go(func() { // edge requests
			for i := r; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				code := sample[i%sampled]
				f := floor[code].Load()
				h, ok := layers.Find(code.d, []byte(code.code))
				lookups.Add(1)
				if err := check(code, h, ok, f); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := layers.Overlay.Stats()
	t.Logf("%d lookups during the load, %d snapshot swaps, overlay %+v", lookups.Load(), swaps.Load(), st)
	if st.Compactions == 0 || swaps.Load() == 0 {
		t.Fatalf("the load ran without compactions (%d) or swaps (%d): it tested neither", st.Compactions, swaps.Load())
	}
	last := auth.events[len(auth.events)-1].Version
	verify := func(when string) {
		t.Helper()
		for _, code := range sample {
			h, ok := layers.Find(code.d, []byte(code.code))
			want := auth.asOf(code, last)
			if got := answerOf(h); !ok || !got.matches(want) {
				t.Fatalf("%s: %s answered %+v, %v; the authority holds %+v", when, code, got, ok, want)
			}
		}
		for _, code := range []linkKey{{0, "zzzzzz"}, {0, "promo-none"}, {0, "00000a0"}, {2, "00000A"}, {2, "promo-1_x"}} {
			if _, ok := layers.Find(code.d, []byte(code.code)); ok {
				t.Fatalf("%s: %s, which the authority never held, was found", when, code)
			}
		}
	}
	verify("after the load")
	layers.Install(auth.snapshotAt(t, len(auth.events)))
	verify("after the last snapshot swap")
	if n := layers.Overlay.Len(); n != 0 {
		t.Fatalf("the overlay holds %d entries after a snapshot of everything", n)
	}
}
