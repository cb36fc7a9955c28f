package store

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// The same codes, generated-looking and custom, on three domains are three
// links: each domain answers its own target, and a domain that holds none
// of them misses. Range and Prune give each entry with its domain.
func TestOverlayKeysByDomain(t *testing.T) {
	o := NewOverlay()
	domains := []link.DomainID{link.DefaultDomain, 1, 300, link.MaxDomainID}
	codes := []string{"00000A", "zzzzzz", "summer-sale", "x"}
	target := func(d link.DomainID, code string) string { return fmt.Sprintf("https://d%d.example/%s", d, code) }
	for i, d := range domains {
		for _, c := range codes {
			if !o.Apply(&Entry{Domain: d, Code: c, URL: target(d, c), RedirectType: 302, Status: link.Active, Version: uint64(i + 1)}) {
				t.Fatalf("Apply(%d, %s) refused", d, c)
			}
		}
	}
	if o.Len() != len(domains)*len(codes) {
		t.Fatalf("Len %d; want %d", o.Len(), len(domains)*len(codes))
	}
	if o.Apply(&Entry{Domain: link.MaxDomainID + 1, Code: "00000A", URL: "https://x/", RedirectType: 302, Status: link.Active, Version: 9}) ||
		o.Stats().Refused != 1 {
		t.Errorf("a domain above link.MaxDomainID was taken (refused %d)", o.Stats().Refused)
	}
	for i, d := range domains {
		for _, c := range codes {
			r, ok := o.Lookup(d, []byte(c))
			if !ok || r.URL() != target(d, c) || r.Version != uint64(i+1) {
				t.Errorf("Lookup(%d, %s) = %q v%d, %v; want %q", d, c, r.URL(), r.Version, ok, target(d, c))
			}
			if h, ok := o.Find(d, []byte(c)); !ok || !h.Overlay || h.Rec.URL() != target(d, c) {
				t.Errorf("Find(%d, %s) = %+v, %v", d, c, h, ok)
			}
		}
	}
	for _, c := range codes {
		if _, ok := o.Lookup(2, []byte(c)); ok {
			t.Errorf("domain 2 holds no link, yet %s was found on it", c)
		}
	}
	seen := map[string]bool{}
	o.Range(func(d link.DomainID, code []byte, r Record) bool {
		if r.URL() != target(d, string(code)) {
			t.Errorf("Range gave (%d, %s) with %q", d, code, r.URL())
		}
		seen[fmt.Sprint(d, string(code))] = true
		return true
	})
	if len(seen) != len(domains)*len(codes) {
		t.Errorf("Range gave %d entries; want %d", len(seen), len(domains)*len(codes))
	}
	// An update on one domain leaves the others alone.
	o.Apply(&Entry{Domain: 300, Code: "00000A", URL: "https://moved/", RedirectType: 301, Status: link.Active, Version: 99})
	if r, _ := o.Lookup(link.DefaultDomain, []byte("00000A")); r.URL() != target(0, "00000A") {
		t.Errorf("an update on domain 300 changed domain 0's link: %q", r.URL())
	}
	if n := o.Prune(func(d link.DomainID, _ []byte, _ Record) bool { return d == 300 }); n != len(codes) {
		t.Errorf("Prune of domain 300 dropped %d; want %d", n, len(codes))
	}
	for _, d := range domains {
		_, ok := o.Lookup(d, []byte("summer-sale"))
		if ok == (d == 300) {
			t.Errorf("after the prune of domain 300: Lookup(%d, summer-sale) found %v", d, ok)
		}
	}
}

// A link on the platform's domain costs what it did before domains; on
// another domain, the domain's uvarint more.
func TestOverlayDomainCost(t *testing.T) {
	const n = 5000
	url := func(i int) string { return "https://example.com/landing?n=" + strconv.Itoa(i) }
	cost := func(d link.DomainID, custom bool) int64 {
		o := NewOverlay()
		for i := range n {
			c := "promo-" + strconv.Itoa(i)
			if !custom {
				c, _ = base62.Encode(uint64(i + 1))
			}
			o.Apply(&Entry{Domain: d, Code: c, URL: url(i), RedirectType: 302, Status: link.Active, Version: uint64(i + 1)})
		}
		return o.Stats().RecordBytes
	}
	for _, custom := range []bool{false, true} {
		base := cost(link.DefaultDomain, custom)
		for _, d := range []link.DomainID{1, 127, 128, 20_000, link.MaxDomainID} {
			if got, want := cost(d, custom)-base, int64(n*uvarintLen(uint64(d))); got != want {
				t.Errorf("custom %v, domain %d: records cost %d bytes more than on the platform's; want %d", custom, d, got, want)
			}
		}
		t.Logf("custom %v: %.2f record bytes a link on the platform's domain", custom, float64(base)/n)
	}
	// The record of a platform link is byte for byte the layout before
	// domains: meta, the code's value, the version, origin, rest.
	e := &Entry{Code: "00000A", URL: "https://a.example/x", RedirectType: 302, Status: link.Active, Version: 1}
	k := keyOf(link.DefaultDomain, []byte(e.Code))
	if got := recordLen(e, k, 1|2<<2, 0, e.URL); got != 1+1+1+1+1+len(e.URL) {
		t.Errorf("a platform record is %d bytes; want %d", got, 5+len(e.URL))
	}
}

func TestOverlayFindOnADomainDoesNotAllocate(t *testing.T) {
	o := NewOverlay()
	a := &Layers{Overlay: o, Snapshots: new(Snapshots)}
	for _, c := range []string{"00000A", "my-custom-code"} {
		a.Apply(&Entry{Domain: 77, Code: c, URL: "https://x.example/" + c, RedirectType: 302, Status: link.Active, Version: 1})
		code := []byte(c)
		if n := testing.AllocsPerRun(100, func() {
			if _, ok := a.Find(77, code); !ok {
				t.Fatal("not found")
			}
			if _, ok := a.Find(78, code); ok {
				t.Fatal("found on another domain")
			}
		}); n != 0 {
			t.Errorf("Find(77, %s) allocated %v times", c, n)
		}
	}
}

func TestCacheKeysByDomain(t *testing.T) {
	c, err := NewCache(100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	set := func(e *Entry) {
		for { // ristretto may drop a Set: set until it holds
			c.Set(e)
			c.Wait()
			if got, ok := c.Get(e.Domain, []byte(e.Code)); ok && got == e {
				return
			}
		}
	}
	on0 := &Entry{Code: "promo", URL: "https://zero/", Status: link.Active, RedirectType: 302, Version: 3}
	on5 := &Entry{Domain: 5, Code: "promo", URL: "https://five/", Status: link.Active, RedirectType: 302, Version: 2}
	set(on0)
	set(on5)
	if e, ok := c.Get(link.DefaultDomain, []byte("promo")); !ok || e != on0 {
		t.Errorf("Get(0, promo) = %+v, %v; want domain 0's", e, ok)
	}
	if e, ok := c.Get(6, []byte("promo")); ok {
		t.Errorf("Get(6, promo) = %+v; domain 6 has nothing cached", e)
	}
	c.Forget(link.DefaultDomain, []byte("promo"))
	c.Wait()
	if _, ok := c.Get(link.DefaultDomain, []byte("promo")); ok {
		t.Error("Forget(0, promo) did not forget it")
	}
	if e, ok := c.Get(5, []byte("promo")); !ok || e != on5 {
		t.Errorf("Forget(0, promo) also forgot domain 5's: %+v, %v", e, ok)
	}
	code := []byte("promo")
	if n := testing.AllocsPerRun(100, func() { c.Get(5, code) }); n != 0 {
		t.Errorf("Get allocated %v times", n)
	}
}

func TestHintKeysByDomain(t *testing.T) {
	h := NewHint(10_000, 0.01)
	const n = 1000
	for i := range n {
		h.Add(9, "code-"+strconv.Itoa(i))
	}
	elsewhere := 0
	for i := range n {
		c := []byte("code-" + strconv.Itoa(i))
		if !h.MayContain(9, c) {
			t.Fatalf("(9, %s) was added, yet the hint rules it out", c)
		}
		if h.MayContain(link.DefaultDomain, c) {
			elsewhere++
		}
		if h.MayContain(10, c) {
			elsewhere++
		}
	}
	// At 1% false positives, 2,000 probes of codes the two domains lack
	// give about 20: far from all of them, as one filter for all domains
	// without the domain would.
	if elsewhere > 100 {
		t.Errorf("%d of %d probes on other domains said maybe", elsewhere, 2*n)
	}
	h.Rebuild(20_000, func(add func(link.DomainID, string)) { add(4, "rebuilt") })
	if !h.MayContain(4, []byte("rebuilt")) {
		t.Error("Rebuild lost (4, rebuilt)")
	}
	code := []byte("code-7")
	if allocs := testing.AllocsPerRun(100, func() { h.MayContain(9, code) }); allocs != 0 {
		t.Errorf("MayContain allocated %v times", allocs)
	}
}

// The overlay's key compares domains, and its hash spreads them: a probe
// that meets another domain's record of the same code (a tag collision)
// must not take it, and one code on many domains must not pile up in one
// home slot.
func TestOverlayKeyHasTheDomain(t *testing.T) {
	o := NewOverlay()
	for _, c := range []string{"00000A", "summer-sale"} {
		k0, k1 := keyOf(link.DefaultDomain, []byte(c)), keyOf(1, []byte(c))
		if k0.equal(k1) || k1.equal(k0) {
			t.Errorf("%s: the keys of domains 0 and 1 are equal", c)
		}
		if !k1.equal(keyOf(1, []byte(c))) {
			t.Errorf("%s: domain 1's key does not equal itself", c)
		}
		homes := map[uint64]bool{}
		for d := range link.DomainID(1000) {
			homes[o.hash(keyOf(d, []byte(c)))] = true
		}
		if len(homes) != 1000 {
			t.Errorf("%s on 1000 domains hashes to %d values", c, len(homes))
		}
	}
}

// An entry ristretto returns for another key's hash (a collision) is not
// an answer: the cache compares the domain and the code it holds.
func TestCacheCollisionIsAMiss(t *testing.T) {
	c, err := NewCache(100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	other := &Entry{Domain: 1, Code: "promo", URL: "https://one/", Status: link.Active, RedirectType: 302, Version: 1}
	for { // ristretto may drop a Set: set until it holds
		c.c.Set(c.key(link.DefaultDomain, []byte("promo")), cached{e: other, gen: c.gen.Load()}, 1)
		c.Wait()
		if _, ok := c.c.Get(c.key(link.DefaultDomain, []byte("promo"))); ok {
			break
		}
	}
	if e, ok := c.Get(link.DefaultDomain, []byte("promo")); ok {
		t.Errorf("Get(0, promo) answered domain %d's entry", e.Domain)
	}
}
