package api

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	goqr "github.com/piglig/go-qr"

	"github.com/edgelink/edgelink/control/apiwire"
)

func wireDomainOf(t *testing.T, r resp) apiwire.Domain {
	t.Helper()
	var d apiwire.Domain
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatalf("%v is not a domain: %v", r, err)
	}
	return d
}

func hostsOf(t *testing.T, r resp) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("want a list of domains, got %v", r)
	}
	var l apiwire.DomainList
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("%v is not a list of domains: %v", r, err)
	}
	out := []string{}
	for _, d := range l.Domains {
		out = append(out, d.Host)
	}
	return out
}

// TestDomainLifecycle: a tenant adds a domain, finds it in its list before
// the platform's, reads it in any spelling, changes and clears its
// settings, and removes it; every answer is what the document says.
func TestDomainLifecycle(t *testing.T) {
	e := newEnv(t, withDomains)
	key := e.tenant(t, "alice")
	r := e.do(t, "POST", "/api/v1/domains", key, []byte(`{"host": "Go.Alice.Example.", "not_found_redirect": "https://alice.example/missing"}`))
	if r.status != http.StatusCreated || r.header.Get("Location") != "/api/v1/domains/go.alice.example" {
		t.Fatalf("create: %v (Location %q)", r, r.header.Get("Location"))
	}
	d := wireDomainOf(t, r)
	if d.Host != "go.alice.example" || d.Platform || d.CodeMode != "ff1" || d.Status != "active" || d.VerifiedAt != nil ||
		d.RootRedirect != nil || d.Robots != nil || d.NotFoundRedirect == nil || *d.NotFoundRedirect != "https://alice.example/missing" || d.Version == 0 {
		t.Fatalf("created %+v", d)
	}
	if got := hostsOf(t, e.do(t, "GET", "/api/v1/domains", key, nil)); !slices.Equal(got, []string{"go.alice.example", platformHost}) {
		t.Errorf("list: %q; want alice's domain, then the platform's", got)
	}
	for _, spelling := range []string{"go.alice.example", "GO.ALICE.EXAMPLE", "go.alice.example.", "go.alice.example:443"} {
		if r := e.do(t, "GET", "/api/v1/domains/"+url.PathEscape(spelling), key, nil); r.status != 200 || wireDomainOf(t, r).Host != "go.alice.example" {
			t.Errorf("get %q: %v", spelling, r)
		}
	}
	r = e.do(t, "PATCH", "/api/v1/domains/go.alice.example", key, []byte(`{"root_redirect": "https://alice.example/", "robots": "User-agent: *\nAllow: /\n", "not_found_redirect": null}`),
		"Content-Type", "application/merge-patch+json")
	d = wireDomainOf(t, r)
	if r.status != 200 || d.RootRedirect == nil || *d.RootRedirect != "https://alice.example/" || d.Robots == nil || *d.Robots != "User-agent: *\nAllow: /\n" ||
		d.NotFoundRedirect != nil {
		t.Fatalf("patch: %v", r)
	}
	r = e.do(t, "PATCH", "/api/v1/domains/go.alice.example", key, []byte(`{"robots": ""}`))
	if d2 := wireDomainOf(t, r); r.status != 200 || d2.Robots != nil || d2.RootRedirect == nil || d2.Version <= d.Version {
		t.Fatalf("clearing robots: %v; want it cleared, the root redirect kept and a new version", r)
	}
	// The platform's domain is listed and readable, not the tenant's to
	// change or remove.
	if r := e.do(t, "GET", "/api/v1/domains/"+platformHost, key, nil); r.status != 200 || !wireDomainOf(t, r).Platform {
		t.Errorf("get the platform's domain: %v", r)
	}
	for _, tc := range []struct{ method, body string }{{"PATCH", `{"root_redirect": "https://alice.example/"}`}, {"DELETE", ""}} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		if r := e.do(t, tc.method, "/api/v1/domains/"+platformHost, key, body); r.status < 400 || r.status >= 500 {
			t.Errorf("%s the platform's domain: %v; want it refused", tc.method, r)
		}
	}
	if r := e.do(t, "DELETE", "/api/v1/domains/go.alice.example", key, nil); r.status != http.StatusNoContent {
		t.Fatalf("remove: %v", r)
	}
	if r := e.do(t, "GET", "/api/v1/domains/go.alice.example", key, nil); r.status == 200 && wireDomainOf(t, r).Status != "removed" {
		t.Errorf("after remove: %v; want it removed or gone", r)
	}
	// No link is made on a removed domain: its owner is told why.
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"domain": "go.alice.example", "url": "https://alice.example/x"}`)); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "removed") {
		t.Errorf("create on a removed domain: %v; want 400 saying it was removed", r)
	}
	if n := e.count(t, "links"); n != 0 {
		t.Errorf("%d links after the refused create", n)
	}
}

// TestDomainErrors: a taken host is 409 without saying whose, another
// tenant's domain is 404 exactly like an unknown one on every route, and
// bad hosts, redirects, robots and bodies are 400s saying why; none of
// them writes a domain.
func TestDomainErrors(t *testing.T) {
	e := newEnv(t, withDomains)
	alice, bob := e.tenant(t, "alice"), e.tenant(t, "bob")
	if r := e.do(t, "POST", "/api/v1/domains", alice, []byte(`{"host": "go.alice.example"}`)); r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	domains := e.count(t, "domains")
	outbox := e.count(t, "outbox")
	for _, tc := range []struct {
		name   string
		body   string
		status int
		detail string
	}{
		{"taken by another tenant", `{"host": "go.alice.example"}`, 409, "already a domain"},
		{"taken, in another spelling", `{"host": "GO.alice.example."}`, 409, "already a domain"},
		{"the platform's host", `{"host": "` + platformHost + `"}`, 409, ""},
		{"no host", `{}`, 400, "host is required"},
		{"empty host", `{"host": ""}`, 400, "host is empty"},
		{"host with a space", `{"host": "go alice.example"}`, 400, "invalid host name"},
		{"host with a path", `{"host": "go.example/x"}`, 400, "invalid host name"},
		{"host with a scheme", `{"host": "https://go.example"}`, 400, "invalid host name"},
		{"label too long", `{"host": "` + strings.Repeat("a", 64) + `.example"}`, 400, "invalid host name"},
		{"host too long", `{"host": "` + strings.Repeat("abcdefghi.", 26) + `example"}`, 400, "invalid host name"},
		{"unclosed IPv6", `{"host": "[::1"}`, 400, "invalid host name"},
		{"bad port", `{"host": "go.example:http"}`, 400, "invalid host name"},
		{"host not a string", `{"host": 5}`, 400, "host must be a string"},
		{"javascript root redirect", `{"host": "x.example", "root_redirect": "javascript:alert(1)"}`, 400, "scheme"},
		{"relative not-found redirect", `{"host": "x.example", "not_found_redirect": "/missing"}`, 400, "absolute"},
		{"robots over 4096 bytes", `{"host": "x.example", "robots": "` + strings.Repeat("a", 4097) + `"}`, 400, "4096"},
		{"unknown code mode", `{"host": "x.example", "code_mode": "random"}`, 400, "code_mode must be ff1 or sequential"},
		{"unknown field", `{"host": "x.example", "key_id": "k1"}`, 400, `unknown field "key_id"`},
		{"field in another case", `{"Host": "x.example"}`, 400, `did you mean "host"`},
		{"duplicate field", `{"host": "x.example", "host": "y.example"}`, 400, `duplicate field "host"`},
		{"not an object", `["x.example"]`, 400, "must be a JSON object"},
		{"100 KB body", `{"host": "x.example", "robots": "` + strings.Repeat("a", 100<<10) + `"}`, 413, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/api/v1/domains", bob, []byte(tc.body))
			detail, _ := r.json(t)["detail"].(string)
			if r.status != tc.status || !strings.Contains(detail, tc.detail) {
				t.Errorf("answered %v; want %d saying %q", r, tc.status, tc.detail)
			}
			if r.status == http.StatusConflict && strings.Contains(detail, "alice") {
				t.Errorf("the answer names the owner: %q", detail)
			}
			if leak := goInternals(detail); leak != "" {
				t.Errorf("detail %q shows Go internals (%q)", detail, leak)
			}
		})
	}
	// Bob cannot see, change or remove alice's domain, nor use it: each
	// answer is the one for a host nobody has.
	answers := map[string][]string{}
	for _, host := range []string{"go.alice.example", "nobody.example"} {
		for _, tc := range []struct{ method, path, body string }{
			{"GET", "/api/v1/domains/" + host, ""},
			{"PATCH", "/api/v1/domains/" + host, `{"root_redirect": "https://bob.example/"}`},
			{"DELETE", "/api/v1/domains/" + host, ""},
			{"POST", "/api/v1/links", `{"domain": "` + host + `", "url": "https://bob.example/"}`},
			{"POST", "/api/v1/links", `{"domain": "` + host + `", "url": "https://bob.example/", "code": "bobs-link"}`},
			{"GET", "/api/v1/links?domain=" + host, ""},
			{"GET", "/api/v1/links/bobs-link?domain=" + host, ""},
		} {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := e.do(t, tc.method, tc.path, bob, body)
			if r.status != http.StatusNotFound {
				t.Errorf("bob %s %s: %v; want 404", tc.method, tc.path, r)
			}
			detail, _ := r.json(t)["detail"].(string)
			answers[host] = append(answers[host], strings.ReplaceAll(detail, host, "HOST"))
		}
	}
	if a, b := answers["go.alice.example"], answers["nobody.example"]; !slices.Equal(a, b) {
		t.Errorf("alice's domain answers bob %q, a domain nobody has %q: they must not differ", a, b)
	}
	r := e.do(t, "POST", "/api/v1/links/batch", bob, []byte(`{"links": [{"domain": "go.alice.example", "url": "https://bob.example/"}, {"url": "https://bob.example/ok"}]}`))
	var ba batchAnswer
	if err := json.Unmarshal(r.body, &ba); err != nil || r.status != 200 || ba.Created != 1 || ba.Results[0].Status != 404 || ba.Results[1].Status != 201 {
		t.Errorf("bob's batch on alice's domain: %v; want that item 404, the other created", r)
	}
	if n := e.count(t, "domains"); n != domains {
		t.Errorf("%d domains after the refusals; want %d", n, domains)
	}
	if n := e.count(t, "outbox"); n != outbox+1 {
		t.Errorf("%d outbox rows after the refusals; want %d (bob's one link)", n, outbox+1)
	}
	var onAlice int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM links WHERE domain_id <> 0`).Scan(&onAlice); err != nil || onAlice != 0 {
		t.Errorf("%d links on alice's domain (%v); want none", onAlice, err)
	}
	// Bad patches change nothing.
	before := wireDomainOf(t, e.do(t, "GET", "/api/v1/domains/go.alice.example", alice, nil))
	for _, body := range []string{`{"root_redirect": "ftp://x.example/"}`, `{"robots": "` + strings.Repeat("r", 5000) + `"}`, `{"root_redirect": 5}`, `{"host": "y.example"}`, `{"code_mode": "sequential"}`} {
		if r := e.do(t, "PATCH", "/api/v1/domains/go.alice.example", alice, []byte(body)); r.status != 400 {
			t.Errorf("patch %.60s: %v; want 400", body, r)
		}
	}
	if after := wireDomainOf(t, e.do(t, "GET", "/api/v1/domains/go.alice.example", alice, nil)); after.Version != before.Version {
		t.Errorf("refused patches changed the domain: %+v, was %+v", after, before)
	}
	for _, path := range []string{"/api/v1/domains/a%20b", "/api/v1/domains/%5B%3A%3A1"} {
		if r := e.do(t, "GET", path, alice, nil); r.status != 400 {
			t.Errorf("GET %s: %v; want 400", path, r)
		}
	}
	if r := e.do(t, "GET", "/api/v1/domains?tenant=1", alice, nil); r.status != 400 {
		t.Errorf("list with a query: %v; want 400", r)
	}
}

// TestSameCodeOnTwoDomains: the same custom code on the platform's domain
// and on a tenant's is two links with two targets; each route addresses
// the one its domain names, and the short URLs are on their own hosts.
func TestSameCodeOnTwoDomains(t *testing.T) {
	e := newEnv(t, withDomains)
	key := e.tenant(t, "alice")
	if r := e.do(t, "POST", "/api/v1/domains", key, []byte(`{"host": "go.alice.example"}`)); r.status != 201 {
		t.Fatalf("create domain: %v", r)
	}
	r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://platform.example/", "code": "spring-sale"}`))
	if l := wire(t, r); r.status != 201 || l.Domain != platformHost || l.ShortURL != "https://sho.rt/spring-sale" || r.header.Get("Location") != "/api/v1/links/spring-sale" {
		t.Fatalf("create on the platform's domain: %v (Location %q)", r, r.header.Get("Location"))
	}
	r = e.do(t, "POST", "/api/v1/links", key, []byte(`{"domain": "GO.Alice.Example", "url": "https://alice.example/", "code": "spring-sale"}`))
	if l := wire(t, r); r.status != 201 || l.Domain != "go.alice.example" || l.ShortURL != "https://go.alice.example/spring-sale" ||
		r.header.Get("Location") != "/api/v1/links/spring-sale?domain=go.alice.example" {
		t.Fatalf("create on alice's domain: %v (Location %q)", r, r.header.Get("Location"))
	}
	// The same code taken again on either domain is 409.
	for _, body := range []string{`{"url": "https://x.example/", "code": "spring-sale"}`, `{"domain": "go.alice.example", "url": "https://x.example/", "code": "spring-sale"}`} {
		if r := e.do(t, "POST", "/api/v1/links", key, []byte(body)); r.status != http.StatusConflict {
			t.Errorf("%s: %v; want 409", body, r)
		}
	}
	get := func(query string) apiwire.Link {
		t.Helper()
		r := e.do(t, "GET", "/api/v1/links/spring-sale"+query, key, nil)
		if r.status != 200 {
			t.Fatalf("get%s: %v", query, r)
		}
		return wire(t, r)
	}
	if l := get(""); l.URL != "https://platform.example/" {
		t.Errorf("platform's spring: %+v", l)
	}
	if l := get("?domain=" + platformHost); l.URL != "https://platform.example/" {
		t.Errorf("platform's spring by its host: %+v", l)
	}
	if l := get("?domain=go.alice.example."); l.URL != "https://alice.example/" || l.Domain != "go.alice.example" {
		t.Errorf("alice's spring: %+v", l)
	}
	// A change on one domain leaves the other's link as it was.
	if r := e.do(t, "PATCH", "/api/v1/links/spring-sale?domain=go.alice.example", key, []byte(`{"status": "disabled"}`)); r.status != 200 || wire(t, r).Status != "disabled" {
		t.Fatalf("disable alice's: %v", r)
	}
	if l := get(""); l.Status != "active" {
		t.Errorf("disabling alice's spring disabled the platform's: %+v", l)
	}
	r = e.do(t, "POST", "/api/v1/links/tags", key, []byte(`{"domain": "go.alice.example", "codes": ["spring-sale"], "add": ["alice"]}`))
	if ls := page(t, r); len(ls) != 1 || !slices.Equal(ls[0].Tags, []string{"alice"}) || ls[0].Domain != "go.alice.example" {
		t.Fatalf("tag alice's: %v", r)
	}
	if l := get(""); len(l.Tags) != 0 {
		t.Errorf("tagging alice's spring tagged the platform's: %+v", l)
	}
	// Lists: every domain's by default, one domain's with the filter.
	domainsOf := func(ls []apiwire.Link) []string {
		out := []string{}
		for _, l := range ls {
			out = append(out, l.Domain+"/"+l.Code)
		}
		return out
	}
	if got := domainsOf(page(t, e.do(t, "GET", "/api/v1/links", key, nil))); !slices.Equal(got, []string{"go.alice.example/spring-sale", platformHost + "/spring-sale"}) {
		t.Errorf("list: %q", got)
	}
	if got := domainsOf(page(t, e.do(t, "GET", "/api/v1/links?domain=go.alice.example", key, nil))); !slices.Equal(got, []string{"go.alice.example/spring-sale"}) {
		t.Errorf("list ?domain=go.alice.example: %q", got)
	}
	if got := domainsOf(page(t, e.do(t, "GET", "/api/v1/links?domain="+platformHost, key, nil))); !slices.Equal(got, []string{platformHost + "/spring-sale"}) {
		t.Errorf("list ?domain=%s: %q", platformHost, got)
	}
	// The QR code of alice's link is its own short URL.
	r = e.do(t, "GET", "/api/v1/links/spring-sale/qr?domain=go.alice.example&size=200", key, nil)
	if r.status != 200 {
		t.Fatalf("qr: %v", r)
	}
	img, err := png.Decode(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := goqr.DecodeDetailed(img); err != nil || res.Text != "https://go.alice.example/spring-sale" {
		t.Errorf("alice's QR code reads %+v (%v); want https://go.alice.example/spring-sale", res, err)
	}
	// Deleting one leaves the other.
	if r := e.do(t, "DELETE", "/api/v1/links/spring-sale?domain=go.alice.example", key, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete alice's: %v", r)
	}
	if l := get(""); l.Status != "active" {
		t.Errorf("deleting alice's spring touched the platform's: %+v", l)
	}
	if l := get("?domain=go.alice.example"); l.Status != "deleted" {
		t.Errorf("alice's spring after delete: %+v", l)
	}
	// A batch makes links on both.
	r = e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [{"domain": "go.alice.example", "url": "https://alice.example/b", "code": "batch-1"}, {"url": "https://platform.example/b", "code": "batch-1"}]}`))
	var ba batchAnswer
	if err := json.Unmarshal(r.body, &ba); err != nil || ba.Created != 2 || ba.Results[0].Link.ShortURL != "https://go.alice.example/batch-1" || ba.Results[1].Link.ShortURL != "https://sho.rt/batch-1" {
		t.Errorf("batch on two domains: %v", r)
	}
}

// TestLinkRoutesRefuseBadDomainQueries: a link route refuses a domain
// that is no host, an empty or repeated one, and a parameter it does not
// know (a misspelt domain would otherwise address the platform's link);
// none of them changes the link.
func TestLinkRoutesRefuseBadDomainQueries(t *testing.T) {
	e := newEnv(t, withDomains)
	key := e.tenant(t, "alice")
	r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://platform.example/", "code": "keep-me"}`))
	if r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	created := wire(t, r)
	for _, tc := range []struct{ query, detail string }{
		{"domian=go.alice.example", `unknown query parameter "domian"`},
		{"domain=", "domain is empty"},
		{"domain=a&domain=b", "send domain once"},
		{"domain=a%20b", "invalid host name"},
		{"domain=%zz", "malformed"},
		{"domain=" + strings.Repeat("a", 300), "invalid host name"},
	} {
		for _, m := range []struct{ method, suffix, body string }{
			{"GET", "", ""}, {"PATCH", "", `{"status": "disabled"}`}, {"DELETE", "", ""}, {"GET", "/qr", ""},
		} {
			var body []byte
			if m.body != "" {
				body = []byte(m.body)
			}
			r := e.do(t, m.method, "/api/v1/links/keep-me"+m.suffix+"?"+tc.query, key, body)
			detail, _ := r.json(t)["detail"].(string)
			if r.status != 400 || !strings.Contains(detail, tc.detail) {
				t.Errorf("%s keep-me%s?%.40s: %v; want 400 saying %q", m.method, m.suffix, tc.query, r, tc.detail)
			}
			if len(detail) > 400 {
				t.Errorf("the detail echoes the input at length: %q", detail)
			}
		}
	}
	for _, q := range []string{"domain=", "domain=a%20b", "domain=a&domain=b"} {
		if r := e.do(t, "GET", "/api/v1/links?"+q, key, nil); r.status != 400 {
			t.Errorf("list ?%s: %v; want 400", q, r)
		}
	}
	for _, body := range []string{`{"domain": "a b", "url": "https://x.example/"}`, `{"domain": 7, "url": "https://x.example/"}`} {
		if r := e.do(t, "POST", "/api/v1/links", key, []byte(body)); r.status != 400 {
			t.Errorf("create %s: %v; want 400", body, r)
		}
	}
	if r := e.do(t, "POST", "/api/v1/links/tags", key, []byte(`{"domain": "a b", "codes": ["keep-me"], "add": ["x"]}`)); r.status != 400 {
		t.Errorf("tags on a bad domain: %v; want 400", r)
	}
	if l := wire(t, e.do(t, "GET", "/api/v1/links/keep-me", key, nil)); l.Status != "active" || l.Version != created.Version || len(l.Tags) != 0 {
		t.Errorf("refused requests changed the link: %+v", l)
	}
}

// TestConcurrentDomainCreates: many tenants racing for one host get one
// 201 between them and 409 for the rest, in any spelling; one domain and
// one change event are written.
func TestConcurrentDomainCreates(t *testing.T) {
	e := newEnv(t, withDomains)
	keys := make([]string, 4)
	for i := range keys {
		keys[i] = e.tenant(t, "t"+string(rune('a'+i)))
	}
	domains, events := e.count(t, "domains"), e.count(t, "outbox")
	spellings := []string{"race.example", "RACE.example", "race.example.", "Race.Example:8443"}
	statuses := make([]int, 24)
	parallel(len(statuses), func(i int) {
		r := e.do(t, "POST", "/api/v1/domains", keys[i%len(keys)], []byte(`{"host": "`+spellings[i%len(spellings)]+`"}`))
		statuses[i] = r.status
	})
	created := 0
	for _, st := range statuses {
		switch st {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("a racing create answered %d; want 201 or 409", st)
		}
	}
	if created != 1 {
		t.Errorf("%d creates of one host succeeded (%v); want 1", created, statuses)
	}
	if n := e.count(t, "domains"); n != domains+1 {
		t.Errorf("%d domains; want %d", n, domains+1)
	}
	if n := e.count(t, "outbox"); n != events+1 {
		t.Errorf("%d outbox rows; want %d (the one domain's)", n, events+1)
	}
}
