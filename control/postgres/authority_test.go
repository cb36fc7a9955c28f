package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

func TestLookupForEdge(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	miss, err := st.LookupForEdge(ctx, "00000A")
	if err != nil || miss.Kind != authority.NotFound {
		t.Fatalf("LookupForEdge(unknown) = %+v, %v; want NotFound", miss, err)
	}
	exp := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	l := &link.Link{ID: 10, Code: "00000A", TenantID: tenant, Namespace: "default", URL: "https://example.com/",
		URLOriginal: "https://EXAMPLE.com/", RedirectType: 307, ExpiresAt: exp}
	if err := st.CreateLink(ctx, l, false); err != nil {
		t.Fatal(err)
	}
	got, err := st.LookupForEdge(ctx, "00000A")
	want := authority.Reply{Kind: authority.Found, Version: l.Version, Code: "00000A", URL: "https://example.com/",
		RedirectType: 307, Status: link.Active, ExpiresAt: exp.UnixMilli()}
	if err != nil || got != want {
		t.Fatalf("LookupForEdge(created) = %+v, %v; want %+v", got, err, want)
	}
	// Codes compare byte-wise, and a NotFound carries a version at least
	// that of every committed change.
	miss, err = st.LookupForEdge(ctx, "00000a")
	if err != nil || miss.Kind != authority.NotFound || miss.Version < l.Version {
		t.Fatalf("LookupForEdge(00000a) = %+v, %v; want NotFound at >= %d", miss, err, l.Version)
	}
}

// TestLookupCodes: many codes in one read, each answered at its index, byte
// for byte (00000a is not 00000A), the same code twice included; NotFound
// carries the change version reached.
func TestLookupCodes(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	l := &link.Link{ID: 10, Code: "00000A", TenantID: tenant, Namespace: "default", URL: "https://example.com/",
		URLOriginal: "https://example.com/", RedirectType: 302}
	if err := st.CreateLink(ctx, l, false); err != nil {
		t.Fatal(err)
	}
	c := &link.Link{ID: 11, Code: "spring-sale", TenantID: tenant, Namespace: "default", URL: "https://example.com/s",
		URLOriginal: "https://example.com/s", RedirectType: 307}
	if err := st.CreateLink(ctx, c, true); err != nil {
		t.Fatal(err)
	}
	codes := []string{"00000a", "00000A", "spring-sale", "nothing", "00000A"}
	got, version, err := st.LookupCodes(ctx, nil, codes)
	if err != nil {
		t.Fatal(err)
	}
	a := authority.Reply{Kind: authority.Found, Version: l.Version, Code: "00000A", URL: "https://example.com/", RedirectType: 302, Status: link.Active}
	want := []authority.Reply{
		{Kind: authority.NotFound}, a,
		{Kind: authority.Found, Version: c.Version, Code: "spring-sale", URL: "https://example.com/s", RedirectType: 307, Status: link.Active},
		{Kind: authority.NotFound}, a,
	}
	if len(got) != len(want) {
		t.Fatalf("LookupCodes(%q) = %d replies; want %d", codes, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d (%s) = %+v; want %+v", i, codes[i], got[i], want[i])
		}
	}
	if version < c.Version {
		t.Errorf("version %d; want at least %d", version, c.Version)
	}
}

// authorityTestDomain writes a tenant's domain row straight into the table, as
// control/domains would (these tests do not depend on it).
func authorityTestDomain(t *testing.T, pool *pgxpool.Pool, id link.DomainID, host string, tenant int64) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO domains (id, host, tenant_id, code_mode, version)
		VALUES ($1, $2, $3, 'sequential', nextval('change_version_seq'))`, int32(id), host, tenant); err != nil {
		t.Fatal(err)
	}
}

// authorityTestLink writes an active link on domain d with local ID local
// straight into the table, returning its version.
func authorityTestLink(t *testing.T, pool *pgxpool.Pool, d link.DomainID, local uint64, code, url string, tenant int64) uint64 {
	t.Helper()
	var v int64
	if err := pool.QueryRow(context.Background(), `
		INSERT INTO links (id, domain_id, code, tenant_id, code_source, namespace, url_original, url, version)
		VALUES ($1, $2, $3, $4, 'custom', $5, $6, $6, nextval('change_version_seq')) RETURNING version`,
		int64(link.IDBase(d)+local), int32(d), code, tenant, link.NamespaceOf(d), url).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return uint64(v)
}

// TestLookupCodesByDomain: (domain, code) is the key. The same code on two
// domains is two links, answered each on its own domain in one read; a code
// on a domain that does not exist, or on one that does not hold it, is
// NotFound, never another domain's link.
func TestLookupCodesByDomain(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	authorityTestDomain(t, pool, 1, "go.acme.com", tenant)
	authorityTestDomain(t, pool, 2, "acme.link", tenant)
	v0 := authorityTestLink(t, pool, 0, 5, "spring", "https://platform.example/", tenant)
	v1 := authorityTestLink(t, pool, 1, 5, "spring", "https://acme.example/one", tenant)
	v2 := authorityTestLink(t, pool, 2, 5, "spring", "https://acme.example/two", tenant)
	authorityTestLink(t, pool, 2, 6, "only-two", "https://acme.example/only", tenant)

	domains := []link.DomainID{1, 2, 0, 9, 1, link.MaxDomainID, 0}
	codes := []string{"spring", "spring", "spring", "spring", "only-two", "spring", "only-two"}
	got, version, err := st.LookupCodes(ctx, domains, codes)
	if err != nil {
		t.Fatal(err)
	}
	found := func(d link.DomainID, v uint64, url string) authority.Reply {
		return authority.Reply{Kind: authority.Found, Version: v, Domain: d, Code: "spring", URL: url, RedirectType: 302, Status: link.Active}
	}
	want := []authority.Reply{
		found(1, v1, "https://acme.example/one"),
		found(2, v2, "https://acme.example/two"),
		found(0, v0, "https://platform.example/"),
		{Kind: authority.NotFound}, // no domain 9
		{Kind: authority.NotFound}, // on domain 2 only
		{Kind: authority.NotFound},
		{Kind: authority.NotFound},
	}
	if len(got) != len(want) {
		t.Fatalf("LookupCodes = %d replies; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d (%d, %s) = %+v; want %+v", i, domains[i], codes[i], got[i], want[i])
		}
	}
	if version < v2 {
		t.Errorf("version %d; want at least %d", version, v2)
	}
	// Without domains every code is on the platform's.
	got, _, err = st.LookupCodes(ctx, nil, []string{"spring", "only-two"})
	if err != nil || got[0] != found(0, v0, "https://platform.example/") || got[1].Kind != authority.NotFound {
		t.Fatalf("LookupCodes without domains = %+v, %v; want the platform's links only", got, err)
	}
	// The single-code protocol is the platform domain's.
	rep, err := st.LookupForEdge(ctx, "spring")
	if err != nil || rep != found(0, v0, "https://platform.example/") {
		t.Fatalf("LookupForEdge(spring) = %+v, %v; want the platform's link", rep, err)
	}
	if rep, err := st.LookupForEdge(ctx, "only-two"); err != nil || rep.Kind != authority.NotFound {
		t.Fatalf("LookupForEdge(only-two) = %+v, %v; want NotFound (it is domain 2's)", rep, err)
	}
	if _, _, err := st.LookupCodes(ctx, []link.DomainID{1}, codes[:2]); err == nil {
		t.Error("LookupCodes with fewer domains than codes succeeded")
	}
}
