package resolve

import (
	"fmt"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

func TestLearnedNoFalseNegatives(t *testing.T) {
	l := newLearned()
	for i := range 50_000 {
		l.add(link.DefaultDomain, fmt.Appendf(nil, "c%06d", i))
	}
	for i := range 50_000 {
		if !l.mayContain(link.DefaultDomain, fmt.Appendf(nil, "c%06d", i)) {
			t.Fatalf("c%06d added but not found", i)
		}
	}
	fp := 0
	for i := range 100_000 {
		if l.mayContain(link.DefaultDomain, fmt.Appendf(nil, "x%06d", i)) {
			fp++
		}
	}
	// 50,000 codes in 2^20 bits with 4 probes: about 0.2% expected.
	if fp > 1000 {
		t.Fatalf("%d false positives in 100000; want well under 1%%", fp)
	}
}

func TestLearnedStartsOverWhenFull(t *testing.T) {
	l := newLearned()
	first := []byte("first")
	l.add(link.DefaultDomain, first)
	for i := range learnedCap - 1 {
		l.add(link.DefaultDomain, fmt.Appendf(nil, "c%06d", i))
	}
	// The filter was cleared by the add that filled it; the code added
	// right after is kept.
	if l.mayContain(link.DefaultDomain, first) {
		t.Fatal("a full filter was not cleared")
	}
	last := []byte("last")
	l.add(link.DefaultDomain, last)
	if !l.mayContain(link.DefaultDomain, last) {
		t.Fatal("the code added after a clear is lost")
	}
}

func TestLearnedConcurrent(t *testing.T) {
	l := newLearned()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5_000 {
				c := fmt.Appendf(nil, "g%d-%d", g, i)
				l.add(link.DefaultDomain, c)
				if !l.mayContain(link.DefaultDomain, c) {
					t.Errorf("%s lost right after its add", c)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A code that could be recent is looked up in the cache only when the
// authority answered "found" for it here: an entry put in the cache any
// other way is not seen, and a scan of random codes never touches the
// cache's admission sketch.
func TestRecentMissSkipsCacheUnlessLearned(t *testing.T) {
	r, auth := newResolver(t)
	foreign := code(2700)
	r.Cache.Set(&store.Entry{Code: string(foreign), URL: "https://planted", RedirectType: 302, Status: link.Active, Version: 9})
	r.Cache.Wait()
	if _, ok := r.Cache.Get(link.DefaultDomain, foreign); !ok {
		t.Fatal("setup: planted entry not cached")
	}
	if _, got := r.Resolve(platform, foreign); got != NotFound || auth.calls.Load() != 1 {
		t.Fatalf("unlearned recent code: %d after %d calls; want NotFound from the authority", got, auth.calls.Load())
	}
	// Learned through the authority: the next miss is a cache hit.
	known := code(2500)
	if _, got := r.Resolve(platform, known); got != Found {
		t.Fatalf("Resolve(known) = %d", got)
	}
	r.Cache.Wait()
	before := auth.calls.Load()
	if e, got := r.Resolve(platform, known); got != Found || e.Code != string(known) || auth.calls.Load() != before {
		t.Fatalf("learned positive not served from the cache: %d, calls %d→%d", got, before, auth.calls.Load())
	}
}
