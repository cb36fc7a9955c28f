package console_test

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	goqr "github.com/piglig/go-qr"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// rows are the (element id, short URL) pairs of a list page, in order.
func rows(body string) []string {
	var out []string
	for _, m := range regexpRow.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestTwoDomainsOneCode: a tenant with a domain of its own picks it on
// the create form; the same code on the platform's domain and on its own
// is two links, two rows, two pages, each changed, drawn, counted and
// deleted apart, with short URLs on their own hosts; a host that is not
// the tenant's is refused on every page.
func TestTwoDomainsOneCode(t *testing.T) {
	e := newEnv(t, console.Config{PublicURL: "https://sho.rt:8443"})
	ctx := context.Background()
	e.addDomain(t, e.tenant, "go.acme.test")
	other, otherKey, err := e.store.CreateTenantWithKey(ctx, "rival")
	if err != nil {
		t.Fatal(err)
	}
	e.addDomain(t, other, "rival.test")
	b := e.browser("10.0.2.1")
	token := b.signIn(t, e.key)

	form := b.do("GET", "/console/links/new", nil).Body.String()
	for _, want := range []string{`<select id="domain" name="domain">`, `<option value="" selected>sho.rt (platform)</option>`, `<option value="go.acme.test">go.acme.test</option>`} {
		if !strings.Contains(form, want) {
			t.Errorf("the create form lacks %s:\n%.3000s", want, form)
		}
	}
	if strings.Contains(form, "rival.test") {
		t.Error("the create form offers another tenant's domain")
	}

	wantRedirect(t, b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/platform"}, "code": {"same-1"}}),
		"/console/links/same-1?done=created")
	wantRedirect(t, b.do("POST", "/console/links", url.Values{"csrf": {token}, "domain": {"go.acme.test"}, "url": {"https://example.com/own"}, "code": {"same-1"}}),
		"/console/links/same-1?domain=go.acme.test&done=created")
	// The redirect after a create is the new link's page on its domain.
	w := b.do("POST", "/console/links", url.Values{"csrf": {token}, "domain": {"go.acme.test"}, "url": {"https://example.com/own-2"}, "code": {"same-2"}})
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != "/console/links/same-2?domain=go.acme.test&done=created" {
		t.Fatalf("create on a domain: %d to %q; want 303 to its page with ?domain=", w.Code, loc)
	}
	for _, c := range []struct{ domain, url string }{{"", "https://example.com/platform"}, {"go.acme.test", "https://example.com/own"}} {
		l, err := e.svc.Get(ctx, e.tenant, c.domain, "same-1")
		if err != nil || l.URL != c.url {
			t.Fatalf("same-1 on %q: %+v, %v; want %s", c.domain, l, err, c.url)
		}
	}

	// The list: one row per (domain, code), each with its own short URL.
	list := b.do("GET", "/console/links?q=same-1", nil).Body.String()
	if got := strings.Join(rows(list), " "); got != "same-1@go.acme.test same-1" {
		t.Errorf("rows %q; want the domain's same-1, then the platform's", got)
	}
	for _, want := range []string{`value="https://go.acme.test:8443/same-1"`, `value="https://sho.rt:8443/same-1"`, `<td data-label="Domain" class="domain">go.acme.test</td>`,
		`href="/console/links/same-1?domain=go.acme.test"`, `action="/console/links/same-1/status?domain=go.acme.test"`} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %s:\n%.4000s", want, list)
		}
	}
	// The filter: every domain, or one.
	for _, c := range []struct {
		query string
		want  string
	}{
		{"domain=go.acme.test", "same-2@go.acme.test same-1@go.acme.test"},
		{"domain=sho.rt", "same-1"},
		{"", "same-2@go.acme.test same-1@go.acme.test same-1"},
	} {
		body := b.do("GET", "/console/links?"+c.query, nil).Body.String()
		if got := strings.Join(rows(body), " "); got != c.want {
			t.Errorf("?%s lists %q; want %q", c.query, got, c.want)
		}
		if !strings.Contains(body, `<option value="go.acme.test">go.acme.test</option>`) && !strings.Contains(body, `<option value="go.acme.test" selected>go.acme.test</option>`) {
			t.Errorf("?%s: the filter does not offer the tenant's domain", c.query)
		}
	}
	if w := b.do("GET", "/console/links?domain=rival.test", nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not one of this tenant") {
		t.Errorf("another tenant's domain as the filter: %d; want 400 with the reason", w.Code)
	}

	// Pages by (domain, code).
	page := b.do("GET", "/console/links/same-1?domain=go.acme.test", nil).Body.String()
	if !strings.Contains(page, "https://example.com/own") || !strings.Contains(page, `action="/console/links/same-1?domain=go.acme.test"`) ||
		!strings.Contains(page, `href="/console/links/same-1/delete?domain=go.acme.test"`) || !strings.Contains(page, `src="/console/links/same-1/qr?domain=go.acme.test&amp;format=svg"`) {
		t.Errorf("the domain's page of same-1:\n%.5000s", page)
	}
	// Edit, tag and disable the domain's same-1: the platform's is untouched.
	before, _ := e.svc.Get(ctx, e.tenant, "", "same-1")
	wantRedirect(t, b.do("POST", "/console/links/same-1?domain=go.acme.test", url.Values{"csrf": {token}, "url": {"https://example.com/own-edited"}, "redirect": {"302"}, "tags": {"own"}}),
		"/console/links/same-1?domain=go.acme.test&done=saved")
	wantRedirect(t, b.do("POST", "/console/links/same-1/status?domain=go.acme.test", url.Values{"csrf": {token}, "status": {"disabled"}}),
		"/console/links/same-1?domain=go.acme.test&done=disabled")
	w = b.do("POST", "/console/links/same-1/status?domain=go.acme.test", url.Values{"csrf": {token}, "status": {"active"}, "from": {"list"}}, "HX-Request", "true")
	if w.Code != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(w.Body.String()), `<tr id="row-same-1@go.acme.test">`) {
		t.Errorf("htmx enable on the domain: %d\n%s", w.Code, w.Body.String())
	}
	own, _ := e.svc.Get(ctx, e.tenant, "go.acme.test", "same-1")
	plat, _ := e.svc.Get(ctx, e.tenant, "", "same-1")
	if own.URL != "https://example.com/own-edited" || strings.Join(own.Tags, ",") != "own" || own.Status != link.Active ||
		plat.URL != "https://example.com/platform" || len(plat.Tags) != 0 || plat.Version != before.Version {
		t.Errorf("after the domain's edits: own %s %v %s, platform %s %v v%d; want only the domain's changed", own.URL, own.Tags, own.Status, plat.URL, plat.Tags, plat.Version)
	}

	// The QR code draws the short URL on the link's own host.
	w = b.do("GET", "/console/links/same-1/qr?domain=go.acme.test&format=png", nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Disposition"), `filename="go.acme.test-same-1.png"`) {
		t.Fatalf("the domain's QR: %d %q", w.Code, w.Header().Get("Content-Disposition"))
	}
	img, err := png.Decode(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := goqr.DecodeDetailed(img); err != nil || res.Text != "https://go.acme.test:8443/same-1" {
		t.Errorf("the domain's QR decodes to %+v, %v; want https://go.acme.test:8443/same-1", res, err)
	}

	// Statistics: the page and its CSV are the domain's link's.
	stats := b.do("GET", "/console/links/same-1/stats?domain=go.acme.test", nil)
	if stats.Code != http.StatusOK || !strings.Contains(stats.Body.String(), "/console/links/same-1/stats.csv?domain=go.acme.test&amp;from=") {
		t.Errorf("the domain's stats page: %d\n%.3000s", stats.Code, stats.Body.String())
	}

	// Delete the domain's same-1: the platform's stays.
	if w := b.do("GET", "/console/links/same-1/delete?domain=go.acme.test", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "https://go.acme.test:8443/same-1") {
		t.Errorf("the delete confirmation names %d\n%.2000s", w.Code, w.Body.String())
	}
	wantRedirect(t, b.do("POST", "/console/links/same-1/delete?domain=go.acme.test", url.Values{"csrf": {token}}), "/console/links?done=deleted")
	if own, _ = e.svc.Get(ctx, e.tenant, "go.acme.test", "same-1"); own.Status != link.Deleted {
		t.Errorf("the domain's same-1 is %s; want deleted", own.Status)
	}
	if plat, _ = e.svc.Get(ctx, e.tenant, "", "same-1"); plat.Status != link.Active {
		t.Errorf("the platform's same-1 is %s after the domain's was deleted; want active", plat.Status)
	}

	// Another tenant's host: refused on create, not found on every page.
	w = b.do("POST", "/console/links", url.Values{"csrf": {token}, "domain": {"rival.test"}, "url": {"https://example.com/x"}, "code": {"grab-1"}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not one of this tenant") || !strings.Contains(w.Body.String(), `value="grab-1"`) {
		t.Errorf("create on another tenant's domain: %d; want 400 with the form kept\n%.2000s", w.Code, w.Body.String())
	}
	rb := e.browser("10.0.2.2")
	rtoken := rb.signIn(t, otherKey)
	wantRedirect(t, rb.do("POST", "/console/links", url.Values{"csrf": {rtoken}, "domain": {"rival.test"}, "url": {"https://example.com/r"}, "code": {"rival-1"}}),
		"/console/links/rival-1?domain=rival.test&done=created")
	for _, path := range []string{"/console/links/rival-1?domain=rival.test", "/console/links/rival-1/stats?domain=rival.test", "/console/links/rival-1/qr?domain=rival.test",
		"/console/links/rival-1/delete?domain=rival.test", "/console/links/same-2?domain=nowhere.test"} {
		if w := b.do("GET", path, nil); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d; want 404", path, w.Code)
		}
	}
	hostile := url.QueryEscape(`"><script>alert(1)</script>`)
	for _, path := range []string{"/console/links/same-2?domain=" + hostile, "/console/links?domain=" + hostile} {
		if w := b.do("GET", path, nil); w.Code == http.StatusOK || strings.Contains(w.Body.String(), "<script>alert") {
			t.Errorf("GET %s: %d, or the domain written unescaped", path, w.Code)
		}
	}
	w = b.do("POST", "/console/links", url.Values{"csrf": {token}, "domain": {`"><script>alert(1)</script>`}, "url": {"https://example.com/x"}})
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "<script>alert") {
		t.Errorf("create on a hostile domain: %d, or written unescaped", w.Code)
	}
	if w := b.do("POST", "/console/links/rival-1/status?domain=rival.test", url.Values{"csrf": {token}, "status": {"disabled"}}); w.Code != http.StatusNotFound {
		t.Errorf("disable another tenant's link: %d; want 404", w.Code)
	}
	if l, _ := e.svc.Get(ctx, other, "rival.test", "rival-1"); l.Status != link.Active {
		t.Errorf("the rival's link is %s; want active", l.Status)
	}

	// A removed domain takes no new links; its links stay listed and
	// filtered by it.
	if _, err := e.domains.Remove(ctx, e.tenant, "go.acme.test"); err != nil {
		t.Fatal(err)
	}
	// The links service trusts a domain it read for a while
	// (links.DefaultDomainTTL): past it, the removal is seen.
	e.clock.advance(links.DefaultDomainTTL + time.Second)
	if form := b.do("GET", "/console/links/new", nil).Body.String(); strings.Contains(form, "go.acme.test") || strings.Contains(form, `<select id="domain"`) {
		t.Errorf("the create form offers a removed domain:\n%.3000s", form)
	}
	list = b.do("GET", "/console/links?domain=go.acme.test", nil).Body.String()
	if !strings.Contains(list, `<option value="go.acme.test" selected>go.acme.test (removed)</option>`) || strings.Join(rows(list), " ") != "same-2@go.acme.test" {
		t.Errorf("the removed domain's links: %q\n%.3000s", rows(list), list)
	}
	w = b.do("POST", "/console/links", url.Values{"csrf": {token}, "domain": {"go.acme.test"}, "url": {"https://example.com/late"}, "code": {"late-1"}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "removed") || !strings.Contains(w.Body.String(), `value="late-1"`) {
		t.Errorf("create on a removed domain: %d; want 400 with the reason\n%.2000s", w.Code, w.Body.String())
	}
}
