package snapshots

import (
	"bytes"
	"context"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// domainFixture writes, straight into the tables, domains 1 (an FF1
// domain), 2 (removed) and 3 (no links) of one tenant, and links on
// domains 0, 1 and 2: the same codes on 0 and 1 with other targets.
func domainFixture(t *testing.T, pool *pgxpool.Pool) (tenant int64, links map[snapshot.Key]string) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('t') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		id           int
		host, mode   string
		keys         []string
		status, root string
	}{
		{1, "go.acme.example", "ff1", []string{"k2", "k1"}, "active", "https://acme.example/"},
		{2, "old.acme.example", "sequential", []string{}, "removed", ""},
		{3, "empty.acme.example", "ff1", []string{"k1"}, "active", ""},
	} {
		if _, err := pool.Exec(ctx, `INSERT INTO domains (id, host, tenant_id, code_mode, key_ids, status, root_redirect, version)
			VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), nextval('change_version_seq'))`, d.id, d.host, tenant, d.mode, d.keys, d.status, d.root); err != nil {
			t.Fatal(err)
		}
	}
	links = map[snapshot.Key]string{}
	for i, l := range []struct {
		d      link.DomainID
		code   string
		status string
	}{
		{0, "000001", "active"}, {0, "promo", "active"},
		{1, "000001", "active"}, {1, "promo", "active"}, {1, "k3Zq9X", "active"},
		{2, "Zz0009", "deleted"},
	} {
		url := "https://" + l.code + ".example/on/" + string(rune('0'+l.d))
		if _, err := pool.Exec(ctx, `INSERT INTO links (id, domain_id, code, tenant_id, code_source, url_original, url, status, version)
			VALUES ($1, $2, $3, $4, 'custom', $5, $5, $6, nextval('change_version_seq'))`,
			int64(link.IDBase(l.d))+int64(i)+1, int32(l.d), l.code, tenant, url, l.status); err != nil {
			t.Fatal(err)
		}
		if l.status != "active" {
			url = ""
		}
		links[key(l.d, l.code)] = url
	}
	return tenant, links
}

// TestBuildHoldsEveryDomain: a snapshot built from PostgreSQL holds the
// links of every domain apart, under their own codes, each domain's bloom
// over its own codes, and the domain table with every domain: the removed
// one (so edges learn the removal) and the one without links.
func TestBuildHoldsEveryDomain(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	tenant, links := domainFixture(t, pool)
	var buf bytes.Buffer
	h, err := New(postgres.New(pool), js, nil).Build(ctx, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if h.Entries != uint64(len(links)) || h.BloomCount != uint64(len(links)) || snap.Header.BloomCount != h.BloomCount {
		t.Errorf("header %+v, file's %+v: want %d entries and bloom codes", h, snap.Header, len(links))
	}
	type dom struct {
		ID       link.DomainID
		Host     string
		Tenant   int64
		Mode     link.CodeMode
		Keys     []string
		Status   link.DomainStatus
		Root     string
		Versions bool
	}
	var got []dom
	for _, d := range snap.Domains() {
		got = append(got, dom{d.ID, d.Host, d.TenantID, d.CodeMode, d.KeyIDs, d.Status, d.RootRedirect, d.Version > 0})
	}
	want := []dom{
		{0, "platform.invalid", 0, link.CodesSequential, nil, link.DomainActive, "", true},
		{1, "go.acme.example", tenant, link.CodesFF1, []string{"k2", "k1"}, link.DomainActive, "https://acme.example/", true},
		{2, "old.acme.example", tenant, link.CodesSequential, nil, link.DomainRemoved, "", true},
		{3, "empty.acme.example", tenant, link.CodesFF1, []string{"k1"}, link.DomainActive, "", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("domain table (-want +got):\n%s", diff)
	}
	for k, url := range links {
		e, ok := snap.Lookup(k.Domain, []byte(k.Code))
		if !ok || string(e.AppendURL(nil)) != url {
			t.Errorf("Lookup(%d, %q) = %q, %v; want %q", k.Domain, k.Code, e.AppendURL(nil), ok, url)
		}
	}
	for _, miss := range []snapshot.Key{key(0, "k3Zq9X"), key(2, "000001"), key(3, "000001"), key(3, "promo"), key(4, "promo")} {
		if _, ok := snap.Lookup(miss.Domain, []byte(miss.Code)); ok {
			t.Errorf("Lookup(%d, %q) found another domain's link", miss.Domain, miss.Code)
		}
	}
	codesOn := map[link.DomainID]int{}
	for k := range links {
		codesOn[k.Domain]++
	}
	for _, d := range []link.DomainID{0, 1, 2, 3} {
		f := new(bloom.BloomFilter)
		if _, err := f.ReadFrom(bytes.NewReader(snap.Bloom(d))); err != nil || f.Cap() == 0 {
			t.Fatalf("domain %d's bloom: %v (capacity %d)", d, err, f.Cap())
		}
		for k := range links {
			if k.Domain == d && !f.TestString(k.Code) {
				t.Errorf("domain %d's bloom lacks %q", d, k.Code)
			}
		}
		// Small sets are counted exactly: each bloom holds its own codes.
		if n := f.ApproximatedSize(); int(n) != codesOn[d] {
			t.Errorf("domain %d's bloom holds about %d codes, want its %d", d, n, codesOn[d])
		}
	}
}

// TestBudgetIsPerLink: the memory budget keeps links by (domain, code):
// a hot code on one domain does not keep the same code of another, and
// every domain's bloom still covers all of its codes.
func TestBudgetIsPerLink(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	_, links := domainFixture(t, pool)
	hot := hotList{key(1, "promo"), key(0, "000001"), key(2, "Zz0009")}
	var buf bytes.Buffer
	if _, err := New(postgres.New(pool), js, nil).WithBudget(2, hot).Build(ctx, &buf, nil); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Header.Flags&snapshot.FlagPartial == 0 || snap.Len() != 2 || snap.Header.BloomCount != uint64(len(links)) {
		t.Fatalf("header %+v: want partial, 2 entries, blooms of %d", snap.Header, len(links))
	}
	for k := range links {
		_, in := snap.Lookup(k.Domain, []byte(k.Code))
		if want := k == key(1, "promo") || k == key(0, "000001"); in != want {
			t.Errorf("%d/%s in the entries: %v, want %v", k.Domain, k.Code, in, want)
		}
		f := new(bloom.BloomFilter)
		if _, err := f.ReadFrom(bytes.NewReader(snap.Bloom(k.Domain))); err != nil || !f.TestString(k.Code) {
			t.Errorf("%d/%s missing from its domain's bloom (%v)", k.Domain, k.Code, err)
		}
	}
}
