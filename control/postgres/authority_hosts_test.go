package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// TestLookupKeysHosts: hosts are answered by the active domains that have
// them, whole, in the same read as the codes; a removed domain's host and
// a host nobody has are absent.
func TestLookupKeysHosts(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	authorityTestDomain(t, pool, 1, "go.acme.com", tenant)
	authorityTestDomain(t, pool, 2, "old.acme.com", tenant)
	if _, err := pool.Exec(ctx, `UPDATE domains SET status = 'removed', not_found_redirect = NULL WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE domains SET not_found_redirect = 'https://acme.example/404' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	v1 := authorityTestLink(t, pool, 1, 5, "spring", "https://acme.example/one", tenant)

	reps, found, version, err := st.LookupKeys(ctx, []link.DomainID{1, 1}, []string{"spring", "autumn"},
		[]string{"go.acme.com", "old.acme.com", "nobody.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].Kind != authority.Found || reps[0].Version != v1 || reps[1].Kind != authority.NotFound {
		t.Errorf("code replies = %+v; want spring found at version %d, autumn not found", reps, v1)
	}
	if version < v1 {
		t.Errorf("version %d; want at least %d", version, v1)
	}
	if len(found) != 1 {
		t.Fatalf("domains found = %+v; want go.acme.com only", found)
	}
	d := found[0]
	if d.ID != 1 || d.Host != "go.acme.com" || d.TenantID != tenant || d.Status != link.DomainActive ||
		d.CodeMode != link.CodesSequential || d.NotFoundRedirect != "https://acme.example/404" || d.Version == 0 {
		t.Errorf("domain found = %+v", d)
	}
	// What it found encodes as an answer.
	for i := range reps {
		reps[i].Code = ""
	}
	if _, err := authority.MarshalAnswer(nil, &authority.Answer{Kind: authority.Found, Version: version, Replies: reps, Domains: found}); err != nil {
		t.Errorf("the answer does not encode: %v", err)
	}

	// Hosts alone; and without hosts it is LookupCodes.
	_, found, _, err = st.LookupKeys(ctx, nil, nil, []string{"go.acme.com"})
	if err != nil || len(found) != 1 || found[0].ID != 1 {
		t.Errorf("hosts only = %+v, %v", found, err)
	}
	reps, found, _, err = st.LookupKeys(ctx, []link.DomainID{1}, []string{"spring"}, nil)
	if err != nil || found != nil || len(reps) != 1 || reps[0].Kind != authority.Found {
		t.Errorf("codes only = %+v, %+v, %v", reps, found, err)
	}
	// The platform's domain is a domain like the others.
	_, found, _, err = st.LookupKeys(ctx, nil, nil, []string{"platform.invalid", "go.acme.com"})
	if err != nil || !slices.ContainsFunc(found, func(d link.Domain) bool { return d.ID == link.DefaultDomain }) {
		t.Errorf("platform host = %+v, %v", found, err)
	}
}
