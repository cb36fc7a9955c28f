package store

import (
	"testing"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// cacheHolds waits for the cache's writes and reports whether code's entry
// at version is cached.
func cacheHolds(c *Cache, code string, version uint64) bool {
	c.Wait()
	e, ok := c.Get(link.DefaultDomain, []byte(code))
	return ok && e.Version == version
}

// TestAppliedCodesLeaveTheCache: a cold link answered by the authority and
// cached, then changed by the stream, is not answered from the cache once
// a memory-budget snapshot has absorbed the change (pruning the overlay)
// and the next one dropped the code as cold: the cache forgot it when the
// change was applied.
func TestAppliedCodesLeaveTheCache(t *testing.T) {
	cache, err := NewCache(1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots), Cache: cache}
	for !cacheHolds(cache, "0000cA", 3) { // ristretto may drop a Set: set until it holds
		cache.Set(&Entry{Code: "0000cA", URL: "https://cold.example/", Status: link.Active, RedirectType: 302, Version: 3})
	}
	a.Apply(&Entry{Code: "0000cA", URL: "https://cold.example/", Status: link.Disabled, RedirectType: 302, Version: 5})
	cache.Wait()
	if _, ok := cache.Get(link.DefaultDomain, []byte("0000cA")); ok {
		t.Fatal("the cache still answers a code the stream changed")
	}
	hot := loadTB(t, []snapshot.Link{{Code: "0000cA", Status: link.Disabled, RedirectType: 302, Version: 5}},
		snapshot.Header{ChangeVersion: 6, StreamSeq: 6, Flags: snapshot.FlagPartial}, nil)
	a.Install(hot)
	cold := loadTB(t, []snapshot.Link{{Code: "0000hh", URL: "https://hot.example/", Status: link.Active, RedirectType: 302, Version: 6}},
		snapshot.Header{ChangeVersion: 7, StreamSeq: 7, Flags: snapshot.FlagPartial}, nil)
	a.Install(cold)
	if _, ok := a.Find(link.DefaultDomain, []byte("0000cA")); ok {
		t.Fatal("a code the last budgeted snapshot dropped is still in the layers")
	}
	if _, ok := cache.Get(link.DefaultDomain, []byte("0000cA")); ok {
		t.Fatal("the disabled link would be answered from its cached 302")
	}
}

// TestResyncFromABudgetSnapshot: after lost events, a re-sync from a
// memory-budget snapshot drops the overlay's entries at or below its
// version that it lacks (a lost change may have superseded them) and
// clears the cache; a full snapshot's re-sync changes nothing, since it
// holds every code.
func TestResyncFromABudgetSnapshot(t *testing.T) {
	for _, partial := range []bool{true, false} {
		cache, err := NewCache(1000)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cache.Close)
		a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots), Cache: cache}
		a.Apply(&Entry{Code: "stale-cold", URL: "https://c/", Status: link.Active, RedirectType: 302, Version: 4})
		a.Apply(&Entry{Code: "after-snap", URL: "https://n/", Status: link.Active, RedirectType: 302, Version: 12})
		for !cacheHolds(cache, "cached-cold", 2) {
			cache.Set(&Entry{Code: "cached-cold", URL: "https://k/", Status: link.Active, RedirectType: 302, Version: 2})
		}
		h := snapshot.Header{ChangeVersion: 10, StreamSeq: 10}
		if partial {
			h.Flags = snapshot.FlagPartial
		}
		l := loadTB(t, []snapshot.Link{{Code: "0000hh", URL: "https://hot/", Status: link.Active, RedirectType: 302, Version: 9}}, h, nil)
		a.Install(l)
		dropped := a.Resynced(l)
		_, staleKept := a.Overlay.Lookup(link.DefaultDomain, []byte("stale-cold"))
		_, cachedKept := cache.Get(link.DefaultDomain, []byte("cached-cold"))
		if _, ok := a.Overlay.Lookup(link.DefaultDomain, []byte("after-snap")); !ok {
			t.Errorf("partial %v: an entry newer than the snapshot was dropped", partial)
		}
		switch {
		case partial && (dropped != 1 || staleKept || cachedKept):
			t.Errorf("budget snapshot: dropped %d (want 1), stale entry kept %v, cached answer kept %v", dropped, staleKept, cachedKept)
		case !partial && (dropped != 0 || !staleKept || !cachedKept):
			t.Errorf("full snapshot: dropped %d (want 0), stale entry kept %v, cached answer kept %v", dropped, staleKept, cachedKept)
		}
		// A new answer after the clear is cached again.
		for !cacheHolds(cache, "cached-cold", 11) {
			cache.Set(&Entry{Code: "cached-cold", URL: "https://k2/", Status: link.Active, RedirectType: 302, Version: 11})
		}
	}
}
