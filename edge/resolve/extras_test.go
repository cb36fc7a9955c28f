package resolve

import (
	"testing"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// TestExtrasFromTheAuthority: a link the authority answers with extras
// (rules, a password hash, a click limit) is resolved, and kept in the
// long-tail cache, with them: the edge never holds such a link without
// them.
func TestExtrasFromTheAuthority(t *testing.T) {
	r, auth := newResolver(t)
	x, err := link.AppendExtras(nil, &link.Extras{MaxClicks: 5, Rules: []link.Rule{{Languages: []string{"de"}, URL: "https://example.de/"}}})
	if err != nil {
		t.Fatal(err)
	}
	auth.links[key{0, "locked-link"}] = authority.Reply{Kind: authority.Found, Version: 9, Code: "locked-link", URL: "https://example.com/",
		RedirectType: 302, Status: link.Active, Extras: string(x)}
	e, got := r.Resolve(platform, []byte("locked-link"))
	if got != Found || e.Extras != string(x) {
		t.Fatalf("Resolve = %+v, %d; want the link with its extras", e, got)
	}
	r.Cache.Wait()
	c, ok := r.Cache.Get(link.DefaultDomain, []byte("locked-link"))
	if !ok || c.Extras != string(x) {
		t.Errorf("the cached entry = %+v, %v; want it with its extras", c, ok)
	}
}
