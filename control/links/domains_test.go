package links_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/idalloctest"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// testKeys is a key file of two keys, k1 and k2.
func testKeys(t testing.TB) *ff1.Keys {
	t.Helper()
	k1 := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	k2 := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	keys, err := ff1.ParseKeys(strings.NewReader("k1 " + k1 + "\nk2 " + k2 + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// newDomain creates a domain for tenant in the store.
func newDomain(t testing.TB, st *postgres.Store, tenant int64, host string, mode link.CodeMode, keys ...string) link.Domain {
	t.Helper()
	d, err := st.CreateDomain(context.Background(), link.Domain{Host: host, TenantID: tenant, CodeMode: mode, KeyIDs: keys})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The same custom code on two domains is two links, each read, changed
// and listed on its own domain; taken on one domain it is taken there only.
func TestSameCodeOnTwoDomains(t *testing.T) {
	svc, st, _, tenant := setupCounted(t)
	ctx := context.Background()
	dom := newDomain(t, st, tenant, "go.acme.test", link.CodesSequential)
	a, err := svc.Create(ctx, tenant, links.CreateRequest{URL: "https://platform.example/", Code: "spring-sale"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "Go.Acme.Test.", URL: "https://acme.example/", Code: "spring-sale"})
	if err != nil {
		t.Fatalf("the same code on another domain: %v", err)
	}
	if a.Link.DomainID != link.DefaultDomain || b.Link.DomainID != dom.ID || b.Link.Domain != "go.acme.test" || a.Link.ID == b.Link.ID {
		t.Fatalf("links %+v and %+v; want one per domain", a.Link, b.Link)
	}
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "go.acme.test", URL: "https://acme.example/2", Code: "spring-sale"}); !errors.Is(err, link.ErrCodeTaken) {
		t.Errorf("spring-sale again on go.acme.test: %v, want ErrCodeTaken", err)
	}
	for _, tc := range []struct{ domain, url string }{{"", "https://platform.example/"}, {"go.acme.test", "https://acme.example/"}} {
		l, err := svc.Get(ctx, tenant, tc.domain, "spring-sale")
		if err != nil {
			t.Fatal(err)
		}
		if l.URL != tc.url {
			t.Errorf("spring-sale on %q goes to %s, want %s", tc.domain, l.URL, tc.url)
		}
	}
	u := "https://acme.example/changed"
	if _, err := svc.Update(ctx, tenant, "go.acme.test", "spring-sale", links.Update{URL: &u}); err != nil {
		t.Fatal(err)
	}
	if l, _ := svc.Get(ctx, tenant, "", "spring-sale"); l.URL != "https://platform.example/" {
		t.Errorf("changing go.acme.test's spring-sale changed the platform's: %s", l.URL)
	}
	ls, _, err := svc.List(ctx, tenant, links.ListRequest{Domain: "go.acme.test", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].URL != u {
		t.Errorf("list on go.acme.test: %+v; want its one link", ls)
	}
	if all, _, _ := svc.List(ctx, tenant, links.ListRequest{Limit: 10}); len(all) != 2 {
		t.Errorf("list on every domain: %d links, want 2", len(all))
	}
	if _, err := svc.Delete(ctx, tenant, "go.acme.test", "spring-sale"); err != nil {
		t.Fatal(err)
	}
	if l, _ := svc.Get(ctx, tenant, "", "spring-sale"); l.Status != link.Active {
		t.Errorf("deleting go.acme.test's spring-sale left the platform's %s", l.Status)
	}
	// Generated codes: each domain counts from its own first ID.
	g, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "go.acme.test", URL: "https://acme.example/g"})
	if err != nil {
		t.Fatal(err)
	}
	// Custom links take IDs too: two did on go.acme.test before.
	if start, _ := link.IDRange(dom.ID); g.Link.ID != start+2 || g.Link.Code != "000003" {
		t.Errorf("generated link on go.acme.test: id %d code %s; want %d, 000003 (its own third id)", g.Link.ID, g.Link.Code, start+2)
	}
}

// A tenant uses its own domains and the platform's; another tenant's host
// answers exactly as one that does not exist, and a removed domain takes
// no new links.
func TestDomainsATenantMayUse(t *testing.T) {
	svc, st, _, tenant := setupCounted(t)
	ctx := context.Background()
	other, err := st.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	theirs := newDomain(t, st, other, "other.test", link.CodesSequential)
	if _, err := svc.Create(ctx, other, links.CreateRequest{Domain: theirs.Host, URL: "https://other.example/", Code: "their-code"}); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"create": func() error {
			_, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "other.test", URL: "https://example.com/"})
			return err
		},
		"batch": func() error {
			res, err := svc.CreateBatch(ctx, tenant, "", []links.CreateRequest{{Domain: "other.test", URL: "https://example.com/"}})
			if err != nil {
				return err
			}
			return res.Items[0].Err
		},
		"get":    func() error { _, err := svc.Get(ctx, tenant, "other.test", "their-code"); return err },
		"delete": func() error { _, err := svc.Delete(ctx, tenant, "other.test", "their-code"); return err },
		"tags": func() error {
			_, err := svc.TagLinks(ctx, tenant, links.TagChange{Domain: "other.test", Codes: []string{"their-code"}, Add: []string{"x"}})
			return err
		},
		"list": func() error {
			_, _, err := svc.List(ctx, tenant, links.ListRequest{Domain: "other.test", Limit: 1})
			return err
		},
		"unknown": func() error { _, err := svc.Get(ctx, tenant, "nowhere.test", "their-code"); return err },
	} {
		err := call()
		if !errors.Is(err, link.ErrNotFound) || !strings.Contains(err.Error(), "unknown domain") {
			t.Errorf("%s on another tenant's domain: %v, want ErrNotFound (unknown domain)", name, err)
		}
	}
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "not a host", URL: "https://example.com/"}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("create on a malformed host: %v, want ErrInvalidInput", err)
	}
	if l, err := st.GetLink(ctx, other, theirs.ID, "their-code"); err != nil || l.Status != link.Active {
		t.Errorf("the other tenant's link after the attempts: %+v, %v", l, err)
	}

	mine := newDomain(t, st, tenant, "mine.test", link.CodesSequential)
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "mine.test", URL: "https://example.com/", Code: "kept"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateDomain(ctx, tenant, mine.Host, func(d *link.Domain) error { d.Status = link.DomainRemoved; return nil }); err != nil {
		t.Fatal(err)
	}
	// The service trusts what it read for links.DefaultDomainTTL, unless
	// told to forget it (as control does after changing a domain).
	svc.ForgetDomain("mine.test")
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: "mine.test", URL: "https://example.com/"}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("create on a removed domain: %v, want ErrInvalidInput", err)
	}
	if l, err := svc.Get(ctx, tenant, "mine.test", "kept"); err != nil || l.Code != "kept" {
		t.Errorf("a removed domain's link reads %+v, %v; want it kept", l, err)
	}
}

// On an FF1 domain each generated code is the FF1 code of the link's local
// ID under the domain's key: decodable back to it, unique, never in the
// order of creation.
func TestFF1CodesDecodeToTheirIDs(t *testing.T) {
	keys := testKeys(t)
	ids := &counterIDs{}
	svc, st, pool, tenant := setup(t, ids, links.Config{Keys: keys})
	t.Cleanup(func() { checkDone(t, ids, pool) })
	ctx := context.Background()
	dom := newDomain(t, st, tenant, "go.acme.test", link.CodesFF1, "k1")
	codes, err := keys.Codes("k1", dom.Host)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	start, end := link.IDRange(dom.ID)
	sequential := 0
	const batches, perBatch = 3, 1000
	for range batches {
		reqs := make([]links.CreateRequest, perBatch)
		for i := range reqs {
			reqs[i] = links.CreateRequest{Domain: dom.Host, URL: "https://acme.example/"}
		}
		res, err := svc.CreateBatch(ctx, tenant, "", reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			if it.Err != nil {
				t.Fatal(it.Err)
			}
			l := it.Link
			if l.ID < start || l.ID >= end || l.DomainID != dom.ID {
				t.Fatalf("link %s has id %d on domain %d; want an id of domain %d, [%d, %d)", l.Code, l.ID, l.DomainID, dom.ID, start, end)
			}
			local, err := codes.ID(l.Code)
			if err != nil || local != l.ID-link.IDBase(dom.ID) {
				t.Fatalf("code %s decodes to %d (%v); want the local id %d", l.Code, local, err, l.ID-link.IDBase(dom.ID))
			}
			if seen[l.Code] {
				t.Fatalf("code %s handed out twice", l.Code)
			}
			seen[l.Code] = true
			if want, _ := base62.Encode(l.ID - link.IDBase(dom.ID)); l.Code == want {
				sequential++
			}
		}
	}
	if len(seen) != batches*perBatch {
		t.Errorf("%d distinct codes, want %d", len(seen), batches*perBatch)
	}
	if sequential > 1 {
		t.Errorf("%d codes equal the base62 of their id; FF1 codes should not", sequential)
	}
	// A sequential domain of the same tenant and the platform keep base62.
	seq := newDomain(t, st, tenant, "seq.acme.test", link.CodesSequential)
	c, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: seq.Host, URL: "https://acme.example/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Link.Code != "000001" {
		t.Errorf("first code on a sequential domain %s, want 000001", c.Link.Code)
	}
	// An FF1 domain whose key this control lacks: 503, nothing written.
	lacking := newDomain(t, st, tenant, "lacking.test", link.CodesFF1, "k9")
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: lacking.Host, URL: "https://acme.example/"}); !errors.Is(err, link.ErrUnavailable) || strings.Contains(err.Error(), "0123456789abcdef") {
		t.Errorf("create on a domain whose key is missing: %v, want ErrUnavailable naming no key bytes", err)
	}
}

// The generator skips an ID whose FF1 code is a reserved word, and one
// whose code a link already holds (imported, or made under another key).
func TestFF1GeneratorSkipsReservedAndTakenCodes(t *testing.T) {
	keys := testKeys(t)
	ids := &counterIDs{}
	svc, st, pool, tenant := setup(t, ids, links.Config{Keys: keys})
	t.Cleanup(func() { checkDone(t, ids, pool) })
	ctx := context.Background()
	dom := newDomain(t, st, tenant, "go.acme.test", link.CodesFF1, "k1")
	codes, err := keys.Codes("k1", dom.Host)
	if err != nil {
		t.Fatal(err)
	}
	// The local ID whose code is the reserved word "readyz".
	x, err := codes.ID("readyz")
	if err != nil {
		t.Fatal(err)
	}
	ids.mu.Lock()
	ids.perDomain = map[link.DomainID]uint64{dom.ID: x - 1} // hands out x next
	ids.mu.Unlock()
	c, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: dom.Host, URL: "https://acme.example/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Link.Code == "readyz" || c.Link.ID != link.IDBase(dom.ID)+x+1 {
		t.Errorf("created %s with id %d; want readyz's id %d skipped, the next one taken", c.Link.Code, c.Link.ID, link.IDBase(dom.ID)+x)
	}
	if s := svc.Stats().ReservedSkips; s != 1 {
		t.Errorf("%d reserved skips, want 1", s)
	}
	// A link already holds the code of the next ID (as an import, or a
	// code made under an earlier key, would).
	nextLocal := x + 2
	held, err := codes.Encode(nextLocal)
	if err != nil {
		t.Fatal(err)
	}
	imported := &link.Link{ID: link.IDBase(dom.ID) + 1_000_000, Code: string(held[:]), TenantID: tenant, Namespace: "default",
		URL: "https://imported.example/", URLOriginal: "https://imported.example/", RedirectType: 302}
	if err := st.CreateLinkOn(ctx, dom.ID, imported, true); err != nil {
		t.Fatal(err)
	}
	c, err = svc.Create(ctx, tenant, links.CreateRequest{Domain: dom.Host, URL: "https://acme.example/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Link.Code == string(held[:]) || c.Link.ID != link.IDBase(dom.ID)+nextLocal+1 {
		t.Errorf("created %s with id %d; want the held code %s's id skipped", c.Link.Code, c.Link.ID, held)
	}
	if w := svc.Stats().WastedIDs; w != 1 {
		t.Errorf("%d wasted ids, want 1", w)
	}
	if got, _ := codes.ID(c.Link.Code); got != nextLocal+1 {
		t.Errorf("code %s decodes to %d, want %d", c.Link.Code, got, nextLocal+1)
	}
}

// domainIDs is the create path's ID source over a real allocator, as
// control wires it: the platform's namespace, or the domain's.
type domainIDs struct{ a *idalloc.Allocator }

func (x domainIDs) NextID(ctx context.Context, d link.DomainID) (uint64, error) {
	return x.a.Next(ctx, link.NamespaceOf(d))
}
func (x domainIDs) Done(id uint64, committed bool) { x.a.Done(id, committed) }

// A domain created while the service runs takes links at once, from its own
// namespace, learned by the running allocator; exhausting it leaves the
// other domains creating.
func TestRunTimeDomainAndExhaustionPerDomain(t *testing.T) {
	keys := testKeys(t)
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	as := allocstore.New(pool)
	cfg := idalloctest.Config(t, nil, idalloc.Namespace{Name: "default", Start: 1, End: base62.Space, Step: 100})
	cfg.Lookup = as.LookupNamespace
	alloc := idalloctest.Start(t, as, cfg)
	svc := links.New(st, domainIDs{alloc}, links.Config{Keys: keys})

	// Made after the allocator and the service started.
	dom := newDomain(t, st, tenant, "late.test", link.CodesFF1, "k1")
	c, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: dom.Host, URL: "https://acme.example/"})
	if err != nil {
		t.Fatalf("first create on a domain made at run time: %v", err)
	}
	if start, _ := link.IDRange(dom.ID); c.Link.ID != start {
		t.Errorf("first id on late.test %d, want its first, %d", c.Link.ID, start)
	}
	// A second domain, with two IDs left.
	tiny := newDomain(t, st, tenant, "tiny.test", link.CodesSequential)
	_, end := link.IDRange(tiny.ID)
	if _, err := pool.Exec(ctx, `UPDATE alloc_namespaces SET next_id = $2 WHERE namespace = $1`, link.NamespaceOf(tiny.ID), int64(end-2)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		c, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: tiny.Host, URL: "https://acme.example/"})
		if errors.Is(err, idalloc.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatalf("create on tiny.test after %v: %v", got, err)
		}
		got = append(got, c.Link.Code)
	}
	if want := fmt.Sprint([]string{"zzzzzy", "zzzzzz"}); fmt.Sprint(got) != want {
		t.Errorf("tiny.test handed out %v, want %s, then exhaustion", got, want)
	}
	for _, host := range []string{"", dom.Host} {
		if _, err := svc.Create(ctx, tenant, links.CreateRequest{Domain: host, URL: "https://acme.example/"}); err != nil {
			t.Errorf("create on %q after tiny.test ran out: %v", host, err)
		}
	}
}

// Creates on several domains at once share transactions: each domain takes
// the same custom code once, and generated codes stay unique per domain and
// in its IDs.
func TestConcurrentCreatesAcrossDomains(t *testing.T) {
	keys := testKeys(t)
	ids := &counterIDs{}
	svc, st, pool, tenant := setup(t, ids, links.Config{Keys: keys})
	t.Cleanup(func() { checkDone(t, ids, pool) })
	ctx := context.Background()
	hosts := []string{"", newDomain(t, st, tenant, "a.test", link.CodesFF1, "k1").Host, newDomain(t, st, tenant, "b.test", link.CodesSequential).Host}
	const workers = 12
	type result struct {
		host string
		l    *links.Link
		err  error
	}
	out := make(chan result, workers*len(hosts)*3)
	var wg sync.WaitGroup
	for w := range workers {
		for _, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 3 {
					req := links.CreateRequest{Domain: h, URL: fmt.Sprintf("https://example.com/%d/%d", w, i)}
					if i == 0 {
						req.Code = "same-code"
					}
					c, err := svc.Create(ctx, tenant, req)
					out <- result{h, c.Link, err}
				}
			}()
		}
	}
	wg.Wait()
	close(out)
	custom := map[string]int{}
	codes := map[string]bool{}
	for r := range out {
		switch {
		case errors.Is(r.err, link.ErrCodeTaken):
		case r.err != nil:
			t.Fatalf("create on %q: %v", r.host, r.err)
		case r.l.Code == "same-code":
			custom[r.host]++
		default:
			k := r.l.Domain + "/" + r.l.Code
			if codes[k] {
				t.Errorf("%s handed out twice", k)
			}
			codes[k] = true
			if d, _ := link.SplitID(r.l.ID); d != r.l.DomainID {
				t.Errorf("link %s on domain %d has id %d of domain %d", k, r.l.DomainID, r.l.ID, d)
			}
		}
	}
	for _, h := range hosts {
		if custom[h] != 1 {
			t.Errorf("same-code created %d times on %q, want once", custom[h], h)
		}
	}
	if len(codes) != workers*len(hosts)*2 {
		t.Errorf("%d generated links, want %d", len(codes), workers*len(hosts)*2)
	}
}
