package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// domainEvents are the outbox's domain rows of domain id, oldest first, as
// their configurations.
func domainEvents(t *testing.T, st *Store, id link.DomainID) []link.Domain {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT domain_conf FROM outbox WHERE kind = 'domain' AND domain_id = $1 ORDER BY version`, int64(id))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []link.Domain
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var d link.Domain
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("domain_conf %s: %v", raw, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCreateDomainWithNamespaceAndEvent(t *testing.T) {
	st, tenant := storeWithTenant(t)
	ctx := context.Background()
	in := link.Domain{Host: "go.acme.test", TenantID: tenant, CodeMode: link.CodesFF1, KeyIDs: []string{"k1"},
		RootRedirect: "https://acme.test/", Robots: "User-agent: *\nAllow: /\n"}
	d, err := st.CreateDomain(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID == link.DefaultDomain || d.Version == 0 || d.Status != link.DomainActive {
		t.Fatalf("created %+v: want a new ID, a version, active", d)
	}
	got, err := st.DomainByHost(ctx, "go.acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("DomainByHost differs from what CreateDomain answered (-created +read):\n%s", diff)
	}
	// Its namespace exists with the domain's range and a ceiling in force.
	var lower, upper, next, ceiling int64
	if err := st.Pool().QueryRow(ctx, `SELECT n.lower_bound, n.upper_bound, n.next_id, c.ceiling
		FROM alloc_namespaces n JOIN alloc_ceilings c USING (namespace) WHERE namespace = $1`, link.NamespaceOf(d.ID)).
		Scan(&lower, &upper, &next, &ceiling); err != nil {
		t.Fatalf("namespace %s: %v", link.NamespaceOf(d.ID), err)
	}
	start, end := link.IDRange(d.ID)
	if uint64(lower) != start || uint64(upper) != end || uint64(next) != start || ceiling <= next {
		t.Errorf("namespace [%d, %d) next %d ceiling %d; want [%d, %d) next %d and a ceiling above", lower, upper, next, ceiling, start, end, start)
	}
	if ev := domainEvents(t, st, d.ID); len(ev) != 1 || !cmp.Equal(ev[0], d) {
		t.Errorf("outbox domain events %+v; want exactly the created domain %+v", ev, d)
	}

	// A taken host is refused and leaves nothing behind.
	var namespaces int
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM alloc_namespaces`).Scan(&namespaces)
	if _, err := st.CreateDomain(ctx, link.Domain{Host: "go.acme.test", TenantID: tenant, CodeMode: link.CodesSequential}); !errors.Is(err, link.ErrDomainTaken) {
		t.Fatalf("second go.acme.test: %v, want ErrDomainTaken", err)
	}
	var after int
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM alloc_namespaces`).Scan(&after)
	if after != namespaces {
		t.Errorf("a refused domain left a namespace: %d namespaces, want %d", after, namespaces)
	}
	if _, err := st.CreateDomain(ctx, link.Domain{Host: "platform.invalid", TenantID: tenant, CodeMode: link.CodesSequential}); !errors.Is(err, link.ErrDomainTaken) {
		t.Errorf("the platform's host: %v, want ErrDomainTaken", err)
	}

	// Updates are the owner's (or the operator's), each with an event.
	other, err := st.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateDomain(ctx, other, "go.acme.test", func(d *link.Domain) error { d.Robots = ""; return nil }); !errors.Is(err, link.ErrNotFound) {
		t.Errorf("another tenant's update: %v, want ErrNotFound", err)
	}
	refuse := errors.New("refused by change")
	if _, err := st.UpdateDomain(ctx, tenant, "go.acme.test", func(d *link.Domain) error { d.Robots = "x"; return refuse }); !errors.Is(err, refuse) {
		t.Errorf("update whose change fails: %v, want its error", err)
	}
	up, err := st.UpdateDomain(ctx, 0, "go.acme.test", func(d *link.Domain) error {
		d.KeyIDs = append([]string{"k2"}, d.KeyIDs...)
		d.Status = link.DomainRemoved
		d.TenantID, d.Host = 999, "hijack.test" // not changeable
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.Version <= d.Version || up.Host != "go.acme.test" || up.TenantID != tenant || up.Status != link.DomainRemoved ||
		!cmp.Equal(up.KeyIDs, []string{"k2", "k1"}) || up.Robots != in.Robots {
		t.Errorf("updated %+v; want a newer version, same host and owner, removed, keys [k2 k1], robots kept", up)
	}
	if ev := domainEvents(t, st, d.ID); len(ev) != 2 || !cmp.Equal(ev[1], up) {
		t.Errorf("outbox domain events %+v; want the create and then %+v", ev, up)
	}

	list, err := st.Domains(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != d.ID || list[1].ID != link.DefaultDomain {
		t.Errorf("tenant's list %+v; want its domain, then the platform's", list)
	}
}

func TestEnsureDefaultDomain(t *testing.T) {
	st, tenant := storeWithTenant(t)
	ctx := context.Background()
	before := domainEvents(t, st, link.DefaultDomain)
	d, err := st.EnsureDefaultDomain(ctx, "s.edgelink.test")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != link.DefaultDomain || d.Host != "s.edgelink.test" || d.CodeMode != link.CodesSequential {
		t.Fatalf("platform domain %+v", d)
	}
	if ev := domainEvents(t, st, link.DefaultDomain); len(ev) != len(before)+1 || !cmp.Equal(ev[len(ev)-1], d) {
		t.Fatalf("events after the first ensure %+v; want one more, %+v", ev, d)
	}
	// Again with the same host: nothing written.
	again, err := st.EnsureDefaultDomain(ctx, "s.edgelink.test")
	if err != nil {
		t.Fatal(err)
	}
	if again.Version != d.Version || len(domainEvents(t, st, link.DefaultDomain)) != len(before)+1 {
		t.Errorf("a repeated ensure wrote: version %d (was %d)", again.Version, d.Version)
	}
	// A host another domain has is refused; a host not canonical too.
	if _, err := st.CreateDomain(ctx, link.Domain{Host: "acme.test", TenantID: tenant, CodeMode: link.CodesSequential}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureDefaultDomain(ctx, "acme.test"); !errors.Is(err, link.ErrDomainTaken) {
		t.Errorf("ensure with a tenant's host: %v, want ErrDomainTaken", err)
	}
	if _, err := st.EnsureDefaultDomain(ctx, "S.Edgelink.Test"); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("ensure with a host not canonical: %v, want ErrInvalidInput", err)
	}
	if cur, _ := st.DomainByID(ctx, link.DefaultDomain); cur.Host != "s.edgelink.test" {
		t.Errorf("platform host %q after refused changes, want s.edgelink.test", cur.Host)
	}
}

// The same code on two domains is two links; a taken (domain, code) is
// not inserted, in one statement or across two.
func TestCodesUniquePerDomain(t *testing.T) {
	st, tenant := storeWithTenant(t)
	ctx := context.Background()
	dom, err := st.CreateDomain(ctx, link.Domain{Host: "acme.test", TenantID: tenant, CodeMode: link.CodesSequential})
	if err != nil {
		t.Fatal(err)
	}
	base := link.IDBase(dom.ID)
	mk := func(id uint64, url string) *link.Link {
		return &link.Link{ID: id, Code: "sale-1", TenantID: tenant, Namespace: "default", URL: url, URLOriginal: url, RedirectType: 302}
	}
	tx := st.Autocommit()
	ins, err := tx.InsertLinks(ctx, []links.NewLink{
		{Link: mk(10, "https://platform.test/"), Custom: true},
		{Link: mk(base+10, "https://acme.test/sale"), Domain: dom.ID, Custom: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ins[0] || !ins[1] {
		t.Fatalf("inserted %v; want both: one code on two domains is two links", ins)
	}
	ins, err = tx.InsertLinks(ctx, []links.NewLink{{Link: mk(base+11, "https://acme.test/again"), Domain: dom.ID, Custom: true}})
	if err != nil {
		t.Fatal(err)
	}
	if ins[0] {
		t.Errorf("sale-1 inserted twice on %s", dom.Host)
	}
	if err := st.CreateLinkOn(ctx, dom.ID, mk(base+12, "https://acme.test/third"), true); !errors.Is(err, link.ErrCodeTaken) {
		t.Errorf("CreateLinkOn a taken (domain, code): %v, want ErrCodeTaken", err)
	}
	for _, tc := range []struct {
		d         link.DomainID
		url, host string
	}{{link.DefaultDomain, "https://platform.test/", "platform.invalid"}, {dom.ID, "https://acme.test/sale", "acme.test"}} {
		l, err := st.GetLink(ctx, tenant, tc.d, "sale-1")
		if err != nil {
			t.Fatal(err)
		}
		if l.URL != tc.url || l.DomainID != tc.d || l.Domain != tc.host {
			t.Errorf("sale-1 on domain %d: %s on %d (%s); want %s on %s", tc.d, l.URL, l.DomainID, l.Domain, tc.url, tc.host)
		}
		u, err := st.UpdateLink(ctx, tenant, tc.d, "sale-1", links.Change{SetTitle: true, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if u.URL != tc.url || u.DomainID != tc.d || u.Domain != tc.host {
			t.Errorf("updated sale-1 on domain %d: %s on %d (%s)", tc.d, u.URL, u.DomainID, u.Domain)
		}
	}
	var rows int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'link' AND code = 'sale-1' AND domain_id = $1`, int64(dom.ID)).Scan(&rows); err != nil || rows != 2 {
		t.Errorf("%d link events of sale-1 on %s (%v); want 2 (create, update), carrying the domain", rows, dom.Host, err)
	}
	only := dom.ID
	ls, err := st.ListLinks(ctx, tenant, &only, links.ListRequest{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].DomainID != dom.ID {
		t.Errorf("list on %s: %d links; want its one", dom.Host, len(ls))
	}
	if ls, _ := st.ListLinks(ctx, tenant, nil, links.ListRequest{Limit: 10}); len(ls) != 2 {
		t.Errorf("list on every domain: %d links; want 2", len(ls))
	}
	tagged, err := st.TagLinks(ctx, tenant, dom.ID, links.TagChange{Codes: []string{"sale-1"}, Add: []string{"spring"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tagged) != 1 || tagged[0].URL != "https://acme.test/sale" {
		t.Errorf("tagged %+v; want acme.test's sale-1", tagged)
	}
	if l, _ := st.GetLink(ctx, tenant, link.DefaultDomain, "sale-1"); len(l.Tags) != 0 {
		t.Errorf("platform's sale-1 got tags %v from another domain's change", l.Tags)
	}
}
