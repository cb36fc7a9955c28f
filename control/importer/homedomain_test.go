package importer

import (
	"context"
	"testing"
)

// TestImportOntoADomain: with Options.Domain, rows that name no domain of
// their own (none, Shlink's DEFAULT, the export's own default host) go on
// that domain of the tenant's; rows naming another domain stay on it.
func TestImportOntoADomain(t *testing.T) {
	e := newAPIEnv(t)
	c, tenant := e.client(t, "importer")
	e.addDomain(t, tenant, "acme.link")
	e.addDomain(t, tenant, "other.link")
	input := "createdAt,shortUrl,domain,shortCode,longUrl\n" +
		"2024-01-01,https://s.test/home-1,s.test,home-1,https://example.com/1\n" + // 2: the export's default
		"2024-01-01,https://x/home-2,,home-2,https://example.com/2\n" + // 3: none
		"2024-01-01,https://x/home-3,DEFAULT,home-3,https://example.com/3\n" + // 4: Shlink's DEFAULT
		"2024-01-01,https://other.link/home-4,other.link,home-4,https://example.com/4\n" // 5: its own
	sum, err := runImport(t, input, c, Options{Domain: "ACME.link", DefaultDomains: []string{"s.test"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{2: "acme.link", 3: "acme.link", 4: "acme.link", 5: "other.link"}
	for _, o := range sum.Outcomes {
		if o.Kind != Kept || o.Domain != want[o.Line] {
			t.Errorf("line %d: %s on %q (%s); want kept on %q", o.Line, o.Kind, o.Domain, o.Reason, want[o.Line])
		}
	}
	if len(sum.Outcomes) != len(want) {
		t.Fatalf("%d outcomes; want %d", len(sum.Outcomes), len(want))
	}
	for _, code := range []string{"home-1", "home-2", "home-3"} {
		if _, err := c.Lookup(context.Background(), "acme.link", code); err != nil {
			t.Errorf("%s on acme.link: %v", code, err)
		}
		if _, err := c.Lookup(context.Background(), "", code); err == nil {
			t.Errorf("%s is on the platform's domain too", code)
		}
	}
	if _, err := runImport(t, input, c, Options{Domain: "not a host"}); err == nil {
		t.Error("a domain that is no host was taken")
	}
}
