package domains

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/scrape"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// domainID reads a domain's number from the authority.
func (e *env) domainID(t *testing.T, host string) link.DomainID {
	t.Helper()
	var id int64
	if err := e.pg.Pool().QueryRow(t.Context(), `SELECT id FROM domains WHERE host = $1`, host).Scan(&id); err != nil {
		t.Fatalf("domain %s: %v", host, err)
	}
	return link.DomainID(id)
}

// codesOf is the domain's permutation under the stack's key, which the test
// may know: it wrote the key file.
func (e *env) codesOf(t *testing.T, name, host string) *ff1.Codes {
	t.Helper()
	keys, err := ff1.LoadKeys(e.keys)
	if err != nil {
		t.Fatal(err)
	}
	c, err := keys.Codes(name, host)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFF1CodesCannotBeWalked: 10,000 consecutive creates on an FF1 domain.
// Adjacent IDs' codes differ in at least 4 of 6 characters on average and
// sorting the codes says nothing about creation order (Spearman's rank
// correlation between ID and code order near 0); the platform domain's
// sequential codes, measured the same way, fail both, so the measure can
// tell.
func TestFF1CodesCannotBeWalked(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.tenant(t, "acme")
	addDomain(t, c, `{"host":"go.acme.test"}`)
	const n = 10_000
	for _, domain := range []string{"go.acme.test", ""} {
		for start := 0; start < n; start += 1000 {
			var sb strings.Builder
			sb.WriteString(`{"links":[`)
			for i := start; i < start+1000; i++ {
				if i > start {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"url":"https://example.com/walk/%d","domain":%q}`, i, domain)
			}
			sb.WriteString(`]}`)
			if created, err := c.CreateBatch(ctx, []byte(sb.String())); err != nil || created != 1000 {
				t.Fatalf("batch on %q at %d: %d created, %v", domain, start, created, err)
			}
		}
	}
	measure := func(domain link.DomainID) (meanDiff, rho float64) {
		rows, err := e.pg.Pool().Query(ctx, `SELECT code FROM links WHERE domain_id = $1 AND code_source = 'generated' ORDER BY id`, int64(domain))
		if err != nil {
			t.Fatal(err)
		}
		var codes []string
		for rows.Next() {
			var code string
			if err := rows.Scan(&code); err != nil {
				t.Fatal(err)
			}
			codes = append(codes, code)
		}
		if rows.Err() != nil || len(codes) != n {
			t.Fatalf("domain %d: %d generated codes, %v", domain, len(codes), rows.Err())
		}
		return adjacentDiff(codes), spearman(codes)
	}
	d := e.domainID(t, "go.acme.test")
	ffDiff, ffRho := measure(d)
	seqDiff, seqRho := measure(link.DefaultDomain)
	// ρ of n random ranks has a standard deviation of 1/sqrt(n-1), 0.01
	// here: 0.05 is five of them.
	if ffDiff < 4 || math.Abs(ffRho) > 0.05 {
		t.Fatalf("FF1 domain: adjacent codes differ in %.2f characters, rank correlation %.4f; want >= 4 and |ρ| <= 0.05", ffDiff, ffRho)
	}
	if seqDiff >= 4 || seqRho < 0.99 {
		t.Fatalf("sequential domain: %.2f, ρ %.4f: the measure cannot tell sequential codes apart", seqDiff, seqRho)
	}
	evidence.Record(t, evidence.NonEnumerable, "%d consecutive creates on an FF1 domain: adjacent IDs' codes differ in %.2f of 6 characters on average, Spearman's ρ between creation order and code order %+.4f; the same measure on the platform's sequential domain gives %.2f and %+.4f",
		n, ffDiff, ffRho, seqDiff, seqRho)
}

// adjacentDiff is how many of the 6 characters differ between the codes of
// consecutive IDs, on average.
func adjacentDiff(codes []string) float64 {
	diff := 0
	for i := 1; i < len(codes); i++ {
		for j := range codes[i] {
			if codes[i][j] != codes[i-1][j] {
				diff++
			}
		}
	}
	return float64(diff) / float64(len(codes)-1)
}

// spearman is the rank correlation between creation order (the slice's)
// and the codes' byte order. Codes are distinct, so ranks have no ties.
func spearman(codes []string) float64 {
	order := make([]int, len(codes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(codes[a], codes[b]) })
	n := float64(len(codes))
	var d2 float64
	for rank, i := range order {
		d := float64(rank - i)
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// TestFF1CodesSkipReservedWords: with an FF1 domain's counter raised to just
// below the ID whose code is a reserved word, the generator skips that ID
// (counted as waste) and the links on either side of it redirect.
func TestFF1CodesSkipReservedWords(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.tenant(t, "acme")
	addDomain(t, c, `{"host":"go.acme.test"}`)
	d := e.domainID(t, "go.acme.test")
	codes := e.codesOf(t, stack.CodeKeyName, "go.acme.test")
	// A reserved word whose ID lies well above what the first segment may
	// have taken.
	var word string
	var local uint64
	for _, w := range []string{"signup", "signin", "static", "assets", "logout", "readyz"} {
		if x, ok := codes.Decode([]byte(w)); ok && x > 10_000_000 {
			word, local = w, x
			break
		}
	}
	if word == "" {
		t.Fatal("no reserved word above the first segments under this key")
	}
	if err := e.control.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := allocstore.New(e.pg.Pool()).RaiseFloor(ctx, link.NamespaceOf(d), link.IDBase(d)+local-2, "gate"); err != nil {
		t.Fatal(err)
	}
	e.control = stack.NewControl(t, e.ccfg)
	c.ControlURL = e.control.URL
	want := make([]string, 0, 3)
	for _, x := range []uint64{local - 2, local - 1, local + 1} {
		code, err := codes.Encode(x)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(code[:]))
	}
	v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(1))
	t.Cleanup(v.Close)
	var got []string
	for i := range 3 {
		r := c.CreatePatiently(ctx, stack.Link{URL: fmt.Sprintf("https://example.com/reserved/%d", i), Domain: "go.acme.test"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create %d: %d %v", i, r.Status, r.Problem)
		}
		if strings.EqualFold(r.Code, word) {
			t.Fatalf("generated code %q: the reserved word %q", r.Code, word)
		}
		if status, loc, err := v.FollowHost("go.acme.test", r.Code); err != nil || status != http.StatusFound || loc != r.URL {
			t.Fatalf("go.acme.test/%s: %d %q %v; want 302", r.Code, status, loc, err)
		}
		got = append(got, r.Code)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("generated codes %v; want %v (the codes of the IDs around %q's, which is skipped)", got, want, word)
	}
	fams, err := stack.Metrics(e.control.URL)
	if err != nil {
		t.Fatal(err)
	}
	skipped, _ := scrape.Value(fams, "control_links_generated_codes_skipped_total", "cause", "reserved")
	if skipped < 1 {
		t.Fatalf("control_links_generated_codes_skipped_total{cause=\"reserved\"} = %v; want >= 1", skipped)
	}
	evidence.Record(t, evidence.NonEnumerable, "FF1 domain counter raised to below the ID that encodes to the reserved word %q: the generator answered %v and skipped it (control_links_generated_codes_skipped_total{cause=\"reserved\"} = %v); each redirected on its domain",
		word, got, skipped)
}

// TestFF1CodesSkipTakenCodes: codes are stored, so rotating a domain's key
// changes only the codes of IDs allocated afterwards, and a new key's code
// can equal one an old key gave. With the counter raised to just below the
// ID whose code under the new key is a link's code under the old one, the
// generator skips that ID (counted as taken); the old link still redirects
// to its own target, and every new one to its.
func TestFF1CodesSkipTakenCodes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.tenant(t, "acme")
	addDomain(t, c, `{"host":"go.acme.test"}`)
	d := e.domainID(t, "go.acme.test")
	old := map[string]string{}
	for i := range 20 {
		r := c.CreatePatiently(ctx, stack.Link{URL: fmt.Sprintf("https://example.com/old/%d", i), Domain: "go.acme.test"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create %d: %d %v", i, r.Status, r.Problem)
		}
		old[r.Code] = r.URL
	}
	if err := e.control.Stop(); err != nil {
		t.Fatal(err)
	}
	keys, err := ff1.LoadKeys(e.keys)
	if err != nil {
		t.Fatal(err)
	}
	next := stack.CodeKeyNext
	rotated, err := domains.New(postgres.New(e.pg.Pool()), domains.Config{Keys: keys}).
		Update(ctx, 0, "go.acme.test", domains.Patch{KeyID: &next})
	if err != nil || len(rotated.KeyIDs) != 2 || rotated.KeyIDs[0] != next {
		t.Fatalf("rotate: %+v %v", rotated, err)
	}
	codes := e.codesOf(t, next, "go.acme.test")
	var taken string
	var local uint64
	for code := range old {
		if x, ok := codes.Decode([]byte(code)); ok && x > 10_000_000 && (taken == "" || x < local) {
			taken, local = code, x
		}
	}
	if taken == "" {
		t.Fatal("no old code lies above the counter under the new key")
	}
	if _, err := allocstore.New(e.pg.Pool()).RaiseFloor(ctx, link.NamespaceOf(d), link.IDBase(d)+local-2, "gate"); err != nil {
		t.Fatal(err)
	}
	e.control = stack.NewControl(t, e.ccfg)
	c.ControlURL = e.control.URL
	var want []string
	for _, x := range []uint64{local - 2, local - 1, local + 1} {
		code, err := codes.Encode(x)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(code[:]))
	}
	v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(1))
	t.Cleanup(v.Close)
	var got []string
	for i := range 3 {
		r := c.CreatePatiently(ctx, stack.Link{URL: fmt.Sprintf("https://example.com/new/%d", i), Domain: "go.acme.test"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create %d: %d %v", i, r.Status, r.Problem)
		}
		if _, dup := old[r.Code]; dup {
			t.Fatalf("generated code %q: taken by a link made under the old key", r.Code)
		}
		if status, loc, err := v.FollowHost("go.acme.test", r.Code); err != nil || status != http.StatusFound || loc != r.URL {
			t.Fatalf("go.acme.test/%s: %d %q %v; want 302", r.Code, status, loc, err)
		}
		got = append(got, r.Code)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("generated codes %v; want %v (the new key's codes around the ID whose code is %q, which is skipped)", got, want, taken)
	}
	for code, url := range old {
		if status, loc, err := v.FollowHost("go.acme.test", code); err != nil || status != http.StatusFound || loc != url {
			t.Fatalf("go.acme.test/%s made under the old key: %d %q %v; want 302 to %s", code, status, loc, err, url)
		}
	}
	fams, err := stack.Metrics(e.control.URL)
	if err != nil {
		t.Fatal(err)
	}
	skipped, _ := scrape.Value(fams, "control_links_generated_codes_skipped_total", "cause", "taken")
	if skipped < 1 {
		t.Fatalf("control_links_generated_codes_skipped_total{cause=\"taken\"} = %v; want >= 1", skipped)
	}
	evidence.Record(t, evidence.NonEnumerable, "an FF1 domain's key rotated after 20 links; counter raised to below the ID whose code under the new key is %q, an old link's: the generator answered %v and skipped it (control_links_generated_codes_skipped_total{cause=\"taken\"} = %v); the 20 old links and the 3 new ones each redirected to their own targets (custom codes cannot take the generated shape, on any domain, so a taken code can only come from an earlier key)",
		taken, got, skipped)
}
