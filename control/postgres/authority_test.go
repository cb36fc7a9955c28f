package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

func TestLookupForEdge(t *testing.T) {
	ctx := context.Background()
	st := New(pgtest.Pool(t))
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
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
