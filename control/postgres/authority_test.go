package postgres

import (
	"context"
	"testing"
	"time"

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
	got, version, err := st.LookupCodes(ctx, codes)
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
