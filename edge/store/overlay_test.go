package store

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

// Every field of an entry comes back from its record, for generated and
// custom codes, targets with and without an origin, and values outside the
// record's small encodings.
func TestOverlayRecordsRoundTrip(t *testing.T) {
	o := NewOverlay()
	long := "https://long.example/" + strings.Repeat("p", maxChunk+10) // larger than a chunk
	entries := []*Entry{
		{Code: "00000A", URL: "https://a.example/x?y=1#z", RedirectType: 302, Status: link.Active, Version: 1},
		{Code: "zzzzzz", URL: "https://a.example", RedirectType: 301, Status: link.Active, ExpiresAt: 1 << 50, Version: 1 << 40},
		{Code: "000000", URL: "no-origin/path", RedirectType: 307, Status: link.Active, Version: 3},
		{Code: "my-custom_code", URL: "http://c.example:8080/p", RedirectType: 308, Status: link.Active, ExpiresAt: -5, Version: 4},
		{Code: "00000a", RedirectType: 0, Status: link.Disabled, Version: 5},
		{Code: "abcd", URL: "", RedirectType: 399, Status: link.Deleted, Version: 6},
		{Code: strings.Repeat("q", 255), URL: "https://q.example/", RedirectType: 302, Status: link.Active, Version: 7},
		{Code: "big001", URL: long, RedirectType: 302, Status: link.Active, Version: 8},
	}
	for _, e := range entries {
		if !o.Apply(e) {
			t.Fatalf("Apply(%.40s) refused", e.Code)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, e := range entries {
			r, ok := o.Lookup(link.DefaultDomain, []byte(e.Code))
			if !ok || r.URL() != e.URL || r.RedirectType != e.RedirectType || r.Status != e.Status ||
				r.ExpiresAt != e.ExpiresAt || r.Version != e.Version {
				t.Errorf("%s: Lookup(%.40s) = %.80v, %v; want %.80v", when, e.Code, r, ok, *e)
			}
		}
		if o.Len() != len(entries) {
			t.Errorf("%s: Len %d; want %d", when, o.Len(), len(entries))
		}
	}
	check("applied")
	seen := map[string]bool{}
	o.Range(func(_ link.DomainID, code []byte, r Record) bool { seen[string(code)] = true; return true })
	for _, e := range entries {
		if !seen[e.Code] {
			t.Errorf("Range did not give %.40s", e.Code)
		}
	}
	for i := range o.shards {
		o.shards[i].mu.Lock()
		o.shards[i].compact(o, int(o.shards[i].n.Load()), nil)
		o.shards[i].mu.Unlock()
	}
	check("compacted")
}

func TestOverlayRefusesWhatItCannotHold(t *testing.T) {
	o := NewOverlay()
	for _, e := range []*Entry{
		{Code: "00000A", URL: "https://x", Status: "gone", Version: 1},
		{Code: "", URL: "https://x", Status: link.Active, Version: 1},
		{Code: strings.Repeat("q", 256), URL: "https://x", Status: link.Active, Version: 1},
	} {
		if o.Apply(e) {
			t.Errorf("Apply(%.40q, status %q) stored it", e.Code, e.Status)
		}
	}
	if st := o.Stats(); st.Refused != 3 || st.Entries != 0 {
		t.Fatalf("Stats = %+v; want 3 refused, nothing held", st)
	}
	if _, ok := o.Lookup(link.DefaultDomain, nil); ok {
		t.Fatal("Lookup of an empty code found something")
	}
}

// Updates leave garbage; past its share the shard is compacted, and what it
// costs stays within 4/3 of what is live. A Record read before a
// compaction still reads its bytes after it.
func TestOverlayCompactsGarbage(t *testing.T) {
	o := NewOverlay()
	o.compactMin = 4 << 10
	const codes = 2000
	code := func(i int) string { return fmt.Sprintf("c%05d", i) }
	url := func(i, v int) string { return fmt.Sprintf("https://x.example/%d/v%d", i, v) }
	for i := range codes {
		o.Apply(&Entry{Code: code(i), URL: url(i, 0), Status: link.Active, RedirectType: 302, Version: 1})
	}
	held, _ := o.Lookup(link.DefaultDomain, []byte(code(7)))
	for v := 1; v <= 20; v++ {
		for i := range codes {
			o.Apply(&Entry{Code: code(i), URL: url(i, v), Status: link.Active, RedirectType: 302, Version: uint64(v + 1)})
		}
	}
	st := o.Stats()
	if st.Compactions == 0 || st.Entries != codes {
		t.Fatalf("after 20 updates of each code: %+v; want compactions and %d entries", st, codes)
	}
	for i := range o.shards {
		sh := &o.shards[i]
		if g, b := sh.garbage.Load(), sh.bytes.Load(); g > int64(o.compactMin) && g*garbageShare > b+int64(4*garbageShare*64) {
			t.Errorf("shard %d: %d of %d record bytes are garbage; want at most 1/%d", i, g, b, garbageShare)
		}
	}
	for i := range codes {
		if r, ok := o.Lookup(link.DefaultDomain, []byte(code(i))); !ok || r.URL() != url(i, 20) || r.Version != 21 {
			t.Fatalf("%s: %+v, %v; want %s at 21", code(i), r, ok, url(i, 20))
		}
	}
	if got := held.URL(); got != url(7, 0) || held.Version != 1 {
		t.Fatalf("a Record held across compactions reads %q at %d; want %q at 1", got, held.Version, url(7, 0))
	}
}

// Readers run while writers apply, update (compacting) and prune: every
// read answers a version some writer stored, and never an older one than
// the reader saw before.
func TestOverlayConcurrentReadersDuringCompactionAndPrune(t *testing.T) {
	o := NewOverlay()
	o.compactMin = 1 << 10
	const codes = 512
	code := func(i int) []byte { return fmt.Appendf(nil, "%06d", i+1) }
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for v := 1; v <= 40; v++ {
			for i := range codes {
				o.Apply(&Entry{Code: string(code(i)), URL: fmt.Sprintf("https://x.example/%d/%d", i, v), Status: link.Active, RedirectType: 302, Version: uint64(v)})
			}
			if v%10 == 0 { // prune the odd codes, which the next round brings back
				o.Prune(func(_ link.DomainID, c []byte, _ Record) bool { return c[5]%2 == 1 })
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			var seen [codes]uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := range codes {
					r, ok := o.Lookup(link.DefaultDomain, code(i))
					if !ok {
						continue
					}
					var gi, gv int
					if _, err := fmt.Sscanf(r.URL(), "https://x.example/%d/%d", &gi, &gv); err != nil || gi != i || uint64(gv) != r.Version {
						t.Errorf("%s: read %q at %d", code(i), r.URL(), r.Version)
						return
					}
					if r.Version < seen[i] && code(i)[5]%2 == 0 {
						t.Errorf("%s: version %d after %d", code(i), r.Version, seen[i])
						return
					}
					seen[i] = r.Version
				}
			}
		})
	}
	wg.Wait()
	if st := o.Stats(); st.Compactions == 0 {
		t.Fatalf("no compaction ran: %+v", st)
	}
}

// Custom codes, of six characters too (one not in base62: "ab-cde"),
// look up without allocating, found or not.
func TestOverlayCustomLookupDoesNotAllocate(t *testing.T) {
	o := NewOverlay()
	o.Apply(&Entry{Code: "spring-sale", URL: "https://x.example/sale", Status: link.Active, RedirectType: 302, Version: 1})
	o.Apply(&Entry{Code: "ab-cde", URL: "https://x.example/ab", Status: link.Active, RedirectType: 302, Version: 2})
	for _, c := range []string{"spring-sale", "ab-cde", "ab_cde", "summer-sale"} {
		code := []byte(c)
		if n := testing.AllocsPerRun(100, func() { o.Lookup(link.DefaultDomain, code) }); n != 0 {
			t.Errorf("Lookup(%s) allocated %v times", c, n)
		}
	}
}
