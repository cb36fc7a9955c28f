package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

func TestLastWriterWinsByVersion(t *testing.T) {
	s := NewOverlay()
	s.Apply(&Entry{Code: "00000A", URL: "https://v2", Status: link.Active, Version: 2})
	if s.Apply(&Entry{Code: "00000A", URL: "https://v1", Status: link.Active, Version: 1}) {
		t.Fatal("an older version replaced a newer one")
	}
	if s.Apply(&Entry{Code: "00000A", URL: "https://v2-dup", Status: link.Active, Version: 2}) {
		t.Fatal("a duplicate version was applied twice")
	}
	s.Apply(&Entry{Code: "00000A", Status: link.Deleted, Version: 3})
	e, ok := s.Lookup(link.DefaultDomain, []byte("00000A"))
	if !ok || e.Version != 3 || e.Status != link.Deleted {
		t.Fatalf("Lookup = %+v, %v; want version 3 deleted", e, ok)
	}
	if _, ok := s.Lookup(link.DefaultDomain, []byte("00000a")); ok {
		t.Fatal("codes differing only in case must be distinct")
	}
}

func TestConcurrentApplyAndLookup(t *testing.T) {
	s := NewOverlay()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 500 {
				s.Apply(&Entry{Code: fmt.Sprintf("c%05d", v%50), Status: link.Active, URL: "https://x", Version: uint64(v*4 + w + 1)})
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 2000 {
				s.Lookup(link.DefaultDomain, []byte(fmt.Sprintf("c%05d", v%50)))
			}
		}()
	}
	wg.Wait()
	for i := range 50 {
		e, ok := s.Lookup(link.DefaultDomain, []byte(fmt.Sprintf("c%05d", i)))
		if !ok {
			t.Fatalf("code %d missing", i)
		}
		// The highest version written for code i: v = 450+i by writer 3.
		if want := uint64((450+i)*4 + 3 + 1); e.Version != want {
			t.Fatalf("code %d kept version %d, want %d: an older write won", i, e.Version, want)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	s := NewOverlay()
	s.Apply(&Entry{Code: "00000A", URL: "https://x", Status: link.Active, Version: 1})
	code := []byte("00000A")
	if n := testing.AllocsPerRun(100, func() { s.Lookup(link.DefaultDomain, code) }); n != 0 {
		t.Fatalf("Lookup allocated %v times", n)
	}
}

func TestSegmentsMerge(t *testing.T) {
	var s Segments
	if s.Sealed(5) {
		t.Fatal("empty set sealed 5")
	}
	s.Seal(200, 300)
	s.Seal(100, 200)
	s.Seal(500, 600)
	s.Seal(250, 260)
	if n := s.Intervals(); n != 2 {
		t.Fatalf("Intervals = %d; want 2 after merging", n)
	}
	for id, want := range map[uint64]bool{99: false, 100: true, 199: true, 200: true, 299: true, 300: false, 499: false, 500: true, 599: true, 600: false} {
		if got := s.Sealed(id); got != want {
			t.Errorf("Sealed(%d) = %v; want %v", id, got, want)
		}
	}
}

func TestCacheComparesCode(t *testing.T) {
	c, err := NewCache(100)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Set(&Entry{Code: "00000A", Missing: true, Version: 5})
	c.Wait()
	if e, ok := c.Get(link.DefaultDomain, []byte("00000A")); !ok || !e.Missing || e.Version != 5 {
		t.Fatalf("Get = %+v, %v; want the negative entry at 5", e, ok)
	}
	c.Set(&Entry{Code: "00000A", URL: "https://old", Status: link.Active, Version: 4})
	c.Wait()
	if e, _ := c.Get(link.DefaultDomain, []byte("00000A")); e.Version != 5 {
		t.Fatalf("an older answer replaced a newer one: %+v", e)
	}
	c.Set(&Entry{Code: "00000A", URL: "https://new", Status: link.Active, RedirectType: 302, Version: 6})
	c.Wait()
	if e, _ := c.Get(link.DefaultDomain, []byte("00000A")); e.Version != 6 || e.Missing {
		t.Fatalf("a newer answer did not override: %+v", e)
	}
}

func TestHint(t *testing.T) {
	h := NewHint(1000, 0.01)
	h.Add(link.DefaultDomain, "00000A")
	if !h.MayContain(link.DefaultDomain, []byte("00000A")) {
		t.Fatal("added code not contained")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // concurrent Add and MayContain must be race-free
		defer wg.Done()
		for i := range 1000 {
			h.Add(link.DefaultDomain, fmt.Sprintf("c%05d", i))
		}
	}()
	for i := range 1000 {
		h.MayContain(link.DefaultDomain, []byte(fmt.Sprintf("d%05d", i)))
	}
	wg.Wait()
	if !h.Saturated() {
		t.Fatal("1001 codes in a hint sized for 1000 is not saturated")
	}
	h.Rebuild(10000, func(add func(link.DomainID, string)) { add(link.DefaultDomain, "00000B") })
	if h.Saturated() || !h.MayContain(link.DefaultDomain, []byte("00000B")) {
		t.Fatal("rebuild did not take")
	}
}

// A bulk load pruned by a snapshot swap gives back its memory: the
// survivors are copied into an arena and a table sized for them.
func TestPruneShrinksTheOverlay(t *testing.T) {
	s := NewOverlay()
	for i := range 64 * 1000 {
		s.Apply(&Entry{Code: fmt.Sprintf("c%06d", i), URL: "https://x.example/landing?n=" + fmt.Sprint(i), Status: link.Active, Version: uint64(i + 1)})
	}
	full := s.Stats()
	if n := s.Prune(func(_ link.DomainID, _ []byte, r Record) bool { return r.Version > 640 }); n != 64*1000-640 {
		t.Fatalf("pruned %d", n)
	}
	st := s.Stats()
	if st.Entries != 640 || s.Len() != 640 {
		t.Fatalf("after the prune: %+v, Len %d; want 640 entries", st, s.Len())
	}
	if st.RecordBytes*50 > full.RecordBytes || st.IndexBytes*20 > full.IndexBytes || st.Garbage != 0 {
		t.Fatalf("after pruning 99%%: %+v; before %+v: want records and index shrunk with it", st, full)
	}
	for i := range 640 {
		r, ok := s.Lookup(link.DefaultDomain, fmt.Appendf(nil, "c%06d", i))
		if want := "https://x.example/landing?n=" + fmt.Sprint(i); !ok || r.URL() != want || r.Version != uint64(i+1) {
			t.Fatalf("c%06d after the prune: %+v, %v; want %s at %d", i, r, ok, want, i+1)
		}
	}
}
