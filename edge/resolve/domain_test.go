package resolve

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// testKeys is a key file with keys "k1" and "k2" (test keys, never used
// anywhere else).
func testKeys(t testing.TB) *ff1.Keys {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"k1", "k2"} {
		key := make([]byte, 32)
		for i := range key {
			key[i] = byte(len(name)*31 + int(name[1])*7 + i)
		}
		fmt.Fprintf(&b, "%s %s\n", name, base64.StdEncoding.EncodeToString(key))
	}
	k, err := ff1.ParseKeys(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// domainOf applies conf to a table holding keys and returns its state.
func domainOf(t testing.TB, keys *ff1.Keys, conf link.Domain) *store.DomainState {
	t.Helper()
	ds := store.NewDomains(keys)
	conf.Status, conf.Version = link.DomainActive, 1
	if err := ds.Apply(conf); err != nil {
		t.Fatal(err)
	}
	s, ok := ds.Get(conf.ID)
	if !ok {
		t.Fatalf("domain %d not in the table", conf.ID)
	}
	return s
}

// encode is the FF1 code of a local ID under the named key.
func encode(t testing.TB, keys *ff1.Keys, name, host string, local uint64) []byte {
	t.Helper()
	c, err := keys.Codes(name, host)
	if err != nil {
		t.Fatal(err)
	}
	code, err := c.Encode(local)
	if err != nil {
		t.Fatal(err)
	}
	return code[:]
}

func foundReply(code, url string) authority.Reply {
	return authority.Reply{Kind: authority.Found, Version: 7, Code: code, URL: url, RedirectType: 302, Status: link.Active}
}

// TestSameCodeOnTwoDomains: a code is a different link on each domain: its
// ID (and so its segment and frontier) is the domain's, the authority is
// asked about (domain, code), and the cache keeps the answers apart.
func TestSameCodeOnTwoDomains(t *testing.T) {
	r, auth := newResolver(t)
	other := domainOf(t, nil, link.Domain{ID: 5, Host: "acme.link", CodeMode: link.CodesSequential})
	auth.ceilings = map[link.DomainID]uint64{5: 100_000}
	c := string(code(2500))
	auth.links[key{5, c}] = foundReply(c, "https://acme.example/2500")
	for range 2 { // asked, then from the cache
		e0, got0 := r.Resolve(platform, []byte(c))
		e5, got5 := r.Resolve(other, []byte(c))
		if got0 != Found || got5 != Found || e0.URL != "https://example.com/"+c || e5.URL != "https://acme.example/2500" ||
			e0.Domain != 0 || e5.Domain != 5 {
			t.Fatalf("Resolve(%s) on domains 0 and 5: %+v %d, %+v %d; want each its own link", c, e0, got0, e5, got5)
		}
		r.Cache.Wait()
	}
	if n := auth.calls.Load(); n != 2 {
		t.Errorf("%d asks; want 2 (one per domain, then the cache)", n)
	}
	if want := []key{{0, c}, {5, c}}; !slices.Equal(auth.asked, want) {
		t.Errorf("asked %v; want %v", auth.asked, want)
	}

	// Domain 5's own segments decide for its codes: [1000, 2000) is
	// sealed on domain 0, not on 5, and 5's ceiling is below 1234.
	auth.ceilings[5] = 1200
	r.Segments.Seal(link.IDBase(5)+2000, link.IDBase(5)+3000)
	for _, tt := range []struct {
		dom   *store.DomainState
		code  []byte
		want  Outcome
		asked bool
	}{
		{platform, code(1234), NotFound, false},    // sealed on 0, not in its hint
		{other, code(1234), NotFound, false},       // beyond 5's frontier
		{other, code(1100), NotFound, true},        // below it, open on 5: asked
		{other, code(2100), NotFound, false},       // sealed on 5
		{platform, code(2100), NotFound, true},     // open on 0: asked
		{other, []byte("000000"), NotFound, false}, // the sentinel
	} {
		before := auth.calls.Load()
		if _, got := r.Resolve(tt.dom, tt.code); got != tt.want || (auth.calls.Load() > before) != tt.asked {
			t.Errorf("Resolve(domain %d, %s) = %d, asked %v; want %d, asked %v", tt.dom.Conf.ID, tt.code, got,
				auth.calls.Load() > before, tt.want, tt.asked)
		}
	}
	// The hint is per domain: 5's copy of a sealed code is let through.
	r.Hint.Add(5, string(code(2100)))
	if _, got := r.Resolve(other, code(2100)); got != NotFound || auth.calls.Load() == 0 || auth.asked[len(auth.asked)-1] != (key{5, string(code(2100))}) {
		t.Errorf("a sealed code in domain 5's hint: %d, last asked %v; want it asked on domain 5", got, auth.asked[len(auth.asked)-1])
	}
}

// TestFF1Domain: on an FF1 domain a miss is decoded with the domain's key
// to its ID, and the sealed-segment and frontier rules apply to that ID:
// random codes are answered 404 from memory, a code the generator made
// below the frontier is asked about.
func TestFF1Domain(t *testing.T) {
	keys := testKeys(t)
	const host = "go.acme.test"
	dom := domainOf(t, keys, link.Domain{ID: 3, Host: host, CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}})
	r, auth := newResolver(t)
	auth.ceilings = map[link.DomainID]uint64{3: 1000}
	base := link.IDBase(3)
	r.Segments.Seal(base+1, base+600)
	made := encode(t, keys, "k1", host, 700) // open segment, below the ceiling
	auth.links[key{3, string(made)}] = foundReply(string(made), "https://acme.example/700")

	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		c := make([]byte, base62.Length)
		for i := range c {
			c[i] = base62.Alphabet[rng.IntN(62)]
		}
		if _, got := r.Resolve(dom, c); got != NotFound {
			t.Fatalf("Resolve(random %s) = %d; want NotFound", c, got)
		}
	}
	if n := auth.calls.Load(); n != 0 {
		t.Fatalf("500 random codes on an FF1 domain asked the authority %d times; want 0 (beyond the frontier)", n)
	}
	if r.BeyondFrontier.Load() != 500 {
		t.Errorf("BeyondFrontier = %d; want 500", r.BeyondFrontier.Load())
	}
	// The same codes read as base62 digits would be below the ceiling,
	// so this is the decoding at work, not the digits.
	if e, got := r.Resolve(dom, made); got != Found || e.URL != "https://acme.example/700" {
		t.Fatalf("Resolve(the code of local ID 700) = %+v, %d; want Found", e, got)
	}
	sealedCode := encode(t, keys, "k1", host, 100)
	if _, got := r.Resolve(dom, sealedCode); got != NotFound || auth.calls.Load() != 1 {
		t.Errorf("a sealed code not in the hint: %d after %d asks; want NotFound from memory", got, auth.calls.Load())
	}
	r.Hint.Add(3, string(sealedCode))
	if _, got := r.Resolve(dom, sealedCode); got != NotFound || auth.calls.Load() != 2 {
		t.Errorf("a sealed code in the hint: %d after %d asks; want it asked", got, auth.calls.Load())
	}
	// A code made under another key of the edge's file (k2) names a
	// random ID under k1, beyond the frontier; but k2 may be the key the
	// domain was just rotated to, a change this edge has not applied yet,
	// and under k2 the code is an open segment's: so it is asked, and the
	// link control made under k2 is found.
	pending := encode(t, keys, "k2", host, 700)
	auth.links[key{3, string(pending)}] = foundReply(string(pending), "https://acme.example/rotated")
	if e, got := r.Resolve(dom, pending); got != Found || e.URL != "https://acme.example/rotated" || auth.calls.Load() != 3 {
		t.Errorf("a code made under k2 before the edge learned of the rotation: %+v %d after %d asks; want it asked and found", e, got, auth.calls.Load())
	}
}

// TestFF1RotatedKey: after a key rotation a domain's codes were made under
// either key; a code is a 404 from memory only if it is ruled out under
// both, so a link made under the old key is still asked about and found.
func TestFF1RotatedKey(t *testing.T) {
	keys := testKeys(t)
	const host = "go.acme.test"
	dom := domainOf(t, keys, link.Domain{ID: 3, Host: host, CodeMode: link.CodesFF1, KeyIDs: []string{"k2", "k1"}})
	r, auth := newResolver(t)
	auth.ceilings = map[link.DomainID]uint64{3: 1000}
	old := encode(t, keys, "k1", host, 500)
	current := encode(t, keys, "k2", host, 900)
	auth.links[key{3, string(old)}] = foundReply(string(old), "https://acme.example/old")
	auth.links[key{3, string(current)}] = foundReply(string(current), "https://acme.example/new")
	for _, tt := range []struct {
		code []byte
		url  string
	}{{old, "https://acme.example/old"}, {current, "https://acme.example/new"}} {
		if e, got := r.Resolve(dom, tt.code); got != Found || e.URL != tt.url {
			t.Errorf("Resolve(%s) = %+v, %d; want Found %s", tt.code, e, got, tt.url)
		}
	}
	auth.mu.Lock()
	auth.settled = nil
	auth.mu.Unlock()
	before := auth.calls.Load()
	random := []byte("Zz9aQ1")
	if _, got := r.Resolve(dom, random); got != NotFound || auth.calls.Load() != before {
		t.Fatalf("a random code: %d after %d asks; want NotFound from memory", got, auth.calls.Load()-before)
	}
	auth.mu.Lock()
	defer auth.mu.Unlock()
	if len(auth.settled) != 2 {
		t.Errorf("a random code was settled for %d IDs (%v); want one per key", len(auth.settled), auth.settled)
	}
}

// TestUndecodableDomainAsks: an FF1 domain whose key the edge's file lacks
// rules nothing out from memory: every miss is asked, and counted.
func TestUndecodableDomainAsks(t *testing.T) {
	dom := domainOf(t, testKeys(t), link.Domain{ID: 4, Host: "acme.link", CodeMode: link.CodesFF1, KeyIDs: []string{"missing"}})
	if !dom.Undecodable {
		t.Fatal("setup: a domain with a key the file lacks is not Undecodable")
	}
	r, auth := newResolver(t)
	auth.ceilings = map[link.DomainID]uint64{4: 1}
	for _, c := range []string{"Zz9aQ1", "000001", "some-custom"} {
		if _, got := r.Resolve(dom, []byte(c)); got != NotFound {
			t.Errorf("Resolve(%s) = %d; want NotFound from the authority", c, got)
		}
	}
	if n := auth.calls.Load(); n != 3 {
		t.Errorf("%d asks; want 3: nothing can be ruled out without the key", n)
	}
	if n := r.Undecodable.Load(); n != 2 {
		t.Errorf("Undecodable = %d; want 2 (the codes of the generator's shape)", n)
	}
}
