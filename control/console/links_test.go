package console_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// hostile is a stored value that breaks out of an attribute and opens a
// script if a page writes it unescaped.
const hostile = `https://x.example/"><script>alert(1)</script>`

func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.1")
	b.signIn(t, e.key)
	for _, path := range []string{"/console/sign-in", "/console/links", "/console/links/new", "/console/keys", "/console/nope", "/console/static/console.css", "/console/links/none-1"} {
		w := b.do("GET", path, nil)
		h := w.Header()
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q; want script-src 'self', frame-ancestors 'none', nothing inline", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
		if strings.HasPrefix(h.Get("Content-Type"), "text/html") && bytes.Contains(w.Body.Bytes(), []byte("<script>")) {
			t.Errorf("%s: an inline script", path)
		}
	}
}

func TestHostileTargetIsEscaped(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.2")
	token := b.signIn(t, e.key)
	w := b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {hostile}, "code": {"hostile-1"}})
	wantRedirect(t, w, "/console/links/hostile-1")
	for _, path := range []string{"/console/links", "/console/links/hostile-1", "/console/links/hostile-1/delete"} {
		body := b.do("GET", path, nil).Body.String()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, `"><script`) {
			t.Errorf("%s writes the target unescaped:\n%.3000s", path, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the target as text:\n%s", path, body)
		}
	}
}

func TestCreateEditToggleDelete(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.3")
	token := b.signIn(t, e.key)
	w := b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/sale?x=1"}, "code": {"sale-1"},
		"redirect": {"301"}, "utm_source": {"news"}, "utm_campaign": {"winter sale"}})
	wantRedirect(t, w, "/console/links/sale-1?done=created")
	l, err := e.svc.Get(context.Background(), e.tenant, "", "sale-1")
	if err != nil {
		t.Fatal(err)
	}
	if l.RedirectType != 301 || l.URLOriginal != "https://example.com/sale?utm_campaign=winter+sale&utm_source=news&x=1" {
		t.Errorf("created %d %s; want 301 with the UTM parameters", l.RedirectType, l.URLOriginal)
	}
	if body := b.do("GET", "/console/links", nil).Body.String(); !strings.Contains(body, "http://sho.rt/sale-1") {
		t.Errorf("the list does not show the short URL")
	}
	// Edit: only the target changes.
	w = b.do("POST", "/console/links/sale-1", url.Values{"csrf": {token}, "url": {"https://example.com/new"}, "redirect": {"301"}})
	wantRedirect(t, w, "/console/links/sale-1?done=saved")
	if l, _ = e.svc.Get(context.Background(), e.tenant, "", "sale-1"); l.URL != "https://example.com/new" || l.RedirectType != 301 {
		t.Errorf("after edit: %s %d", l.URL, l.RedirectType)
	}
	// Disable from the list, without JavaScript and with htmx.
	wantRedirect(t, b.do("POST", "/console/links/sale-1/status", url.Values{"csrf": {token}, "status": {"disabled"}, "from": {"list"}}), "/console/links?done=disabled")
	if l, _ = e.svc.Get(context.Background(), e.tenant, "", "sale-1"); l.Status != link.Disabled {
		t.Errorf("status %s; want disabled", l.Status)
	}
	w = b.do("POST", "/console/links/sale-1/status", url.Values{"csrf": {token}, "status": {"active"}, "from": {"list"}}, "HX-Request", "true")
	if w.Code != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(w.Body.String()), `<tr id="row-sale-1">`) || !strings.Contains(w.Body.String(), ">Disable<") {
		t.Errorf("htmx enable: %d\n%s\nwant the row alone, now offering Disable", w.Code, w.Body.String())
	}
	for _, st := range []string{"deleted", "", "paused"} {
		if w := b.do("POST", "/console/links/sale-1/status", url.Values{"csrf": {token}, "status": {st}}); w.Code != http.StatusBadRequest {
			t.Errorf("status %q: %d; want 400", st, w.Code)
		}
	}
	// Delete asks first, then deletes.
	if w := b.do("GET", "/console/links/sale-1/delete", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Delete for good") {
		t.Errorf("delete confirmation: %d", w.Code)
	}
	wantRedirect(t, b.do("POST", "/console/links/sale-1/delete", url.Values{"csrf": {token}}), "/console/links?done=deleted")
	if l, _ = e.svc.Get(context.Background(), e.tenant, "", "sale-1"); l.Status != link.Deleted {
		t.Errorf("status %s; want deleted", l.Status)
	}
	if body := b.do("GET", "/console/links?status=deleted", nil).Body.String(); !strings.Contains(body, "sale-1") {
		t.Errorf("the deleted filter does not list it")
	}
	if body := b.do("GET", "/console/links", nil).Body.String(); strings.Contains(body, "row-sale-1") {
		t.Errorf("the default list shows a deleted link")
	}
}

func TestBadInputIsRefusedAndKept(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.4")
	token := b.signIn(t, e.key)
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		keep   string
	}{
		{"not a URL", url.Values{"url": {"javascript:alert(1)"}, "code": {"keep-me"}}, 400, `value="keep-me"`},
		{"bad redirect", url.Values{"url": {"https://example.com/"}, "redirect": {"303"}, "utm_source": {"kept-source"}}, 400, `value="kept-source"`},
		{"bad expiry", url.Values{"url": {"https://example.com/x"}, "expires": {"tomorrow"}}, 400, `value="https://example.com/x"`},
		{"past expiry", url.Values{"url": {"https://example.com/x"}, "expires": {"2001-01-01T00:00"}}, 400, `value="2001-01-01T00:00"`},
		{"reserved code", url.Values{"url": {"https://example.com/"}, "code": {"console"}}, 400, `value="console"`},
		{"bad code", url.Values{"url": {"https://example.com/"}, "code": {"a b"}}, 400, `value="a b"`},
	} {
		c.form.Set("csrf", token)
		w := b.do("POST", "/console/links", c.form)
		if w.Code != c.status || !strings.Contains(w.Body.String(), `role="alert"`) || !strings.Contains(w.Body.String(), c.keep) {
			t.Errorf("%s: %d; want %d with the reason and %s kept\n%.2500s", c.name, w.Code, c.status, c.keep, w.Body.String())
		}
	}
	wantRedirect(t, b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/"}, "code": {"taken-1"}}), "/console/links/taken-1")
	if w := b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/2"}, "code": {"taken-1"}}); w.Code != http.StatusConflict {
		t.Errorf("a taken code: %d; want 409", w.Code)
	}
	ls, _, _ := e.svc.List(context.Background(), e.tenant, links.ListRequest{Limit: 50})
	if len(ls) != 1 {
		t.Errorf("%d links after refused creates; want the one", len(ls))
	}
	for _, q := range []string{"status=paused", "from=yesterday", "to=2026-13-01", "from=2026-02-01&to=2026-01-01", "cursor=x", "sort=x"} {
		if w := b.do("GET", "/console/links?"+q, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `role="alert"`) {
			t.Errorf("list ?%s: %d; want 400 with the reason", q, w.Code)
		}
	}
	big := url.Values{"csrf": {token}, "url": {"https://example.com/" + strings.Repeat("a", console.MaxFormBytes)}}
	if w := b.do("POST", "/console/links", big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized form: %d; want 413", w.Code)
	}
	if w := b.do("GET", "/console/links/no-such-1", nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown code: %d; want 404", w.Code)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.5")
	b.signIn(t, e.key)
	ctx := context.Background()
	for i := range 120 {
		if _, err := e.svc.Create(ctx, e.tenant, links.CreateRequest{URL: "https://example.com/" + string(rune('a'+i%26))}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	next := "/console/links"
	for pages := 0; next != ""; pages++ {
		body := b.do("GET", next, nil).Body.String()
		for _, m := range regexpRow.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Fatalf("%s listed twice", m[1])
			}
			seen[m[1]] = true
		}
		next = ""
		if m := regexpNext.FindStringSubmatch(body); m != nil {
			next = "/console/links?" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
		if pages > 5 {
			t.Fatal("pages never end")
		}
	}
	if len(seen) != 120 {
		t.Errorf("pages listed %d links; want 120", len(seen))
	}
	today := e.clock.now().UTC().Format("2006-01-02")
	if n := len(regexpRow.FindAllString(b.do("GET", "/console/links?status=active&from="+today+"&to="+today, nil).Body.String(), -1)); n != 50 {
		t.Errorf("today's active links on a page: %d; want 50", n)
	}
	if n := len(regexpRow.FindAllString(b.do("GET", "/console/links?to=2001-01-01", nil).Body.String(), -1)); n != 0 {
		t.Errorf("links created by 2001: %d; want 0", n)
	}
}

func TestQRDownloads(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.6")
	token := b.signIn(t, e.key)
	wantRedirect(t, b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/"}, "code": {"qr-1"}}), "/console/links/qr-1")
	w := b.do("GET", "/console/links/qr-1/qr?format=png", nil)
	if w.Code != 200 || w.Header().Get("Content-Type") != "image/png" || !bytes.HasPrefix(w.Body.Bytes(), []byte("\x89PNG")) ||
		!strings.Contains(w.Header().Get("Content-Disposition"), `filename="qr-1.png"`) {
		t.Errorf("PNG: %d %s %q", w.Code, w.Header().Get("Content-Type"), w.Header().Get("Content-Disposition"))
	}
	w = b.do("GET", "/console/links/qr-1/qr?format=svg", nil)
	if w.Code != 200 || w.Header().Get("Content-Type") != "image/svg+xml" || !bytes.HasPrefix(w.Body.Bytes(), []byte("<svg")) {
		t.Errorf("SVG: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	if w := b.do("GET", "/console/links/qr-1/qr?size=9", nil); w.Code != http.StatusBadRequest {
		t.Errorf("size 9: %d; want 400", w.Code)
	}
	// Another tenant's code is not found, as an unknown one.
	other, key2, err := e.store.CreateTenantWithKey(context.Background(), "other")
	if err != nil || other == e.tenant {
		t.Fatal(err)
	}
	b2 := e.browser("10.0.1.7")
	b2.signIn(t, key2)
	if w := b2.do("GET", "/console/links/qr-1/qr", nil); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's QR: %d; want 404", w.Code)
	}
	if w := b2.do("GET", "/console/links/qr-1", nil); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's link: %d; want 404", w.Code)
	}
}

func TestRevokingTheSessionsKeySignsOut(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.8")
	token := b.signIn(t, e.key)
	other := e.browser("10.0.1.9")
	other.signIn(t, e.key)
	body := b.do("GET", "/console/keys", nil).Body.String()
	m := regexpRevoke.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no revoke form:\n%s", body)
	}
	if w := b.do("POST", "/console/keys/999999/revoke", url.Values{"csrf": {token}}); w.Code != http.StatusNotFound {
		t.Errorf("revoke an unknown key: %d; want 404", w.Code)
	}
	wantRedirect(t, b.do("POST", "/console/keys/"+m[1]+"/revoke", url.Values{"csrf": {token}}), "/console/sign-in?ended=1")
	wantRedirect(t, b.do("GET", "/console/links", nil), "/console/sign-in")
	wantRedirect(t, other.do("GET", "/console/links", nil), "/console/sign-in")
	if _, err := e.store.TenantByKey(context.Background(), e.key); err == nil {
		t.Error("the API still takes the revoked key")
	}
}

func TestSearchTagsAndTitles(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.1.10")
	token := b.signIn(t, e.key)
	for _, l := range []url.Values{
		{"url": {"https://shop.example.org/a"}, "code": {"shop-a"}, "title": {"Winter sale"}, "tags": {"Sale, email"}},
		{"url": {"https://blog.example.net/b"}, "code": {"blog-b"}, "tags": {"blog"}},
		{"url": {"https://x.example/c"}, "code": {"other-c"}},
	} {
		l.Set("csrf", token)
		wantRedirect(t, b.do("POST", "/console/links", l), "/console/links/"+l.Get("code"))
	}
	l, err := e.svc.Get(context.Background(), e.tenant, "", "shop-a")
	if err != nil || l.Title != "Winter sale" || strings.Join(l.Tags, ",") != "email,sale" {
		t.Fatalf("created %+v, %v; want the title and tags email, sale", l, err)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"q=example.org", []string{"shop-a"}},
		{"q=winter", []string{"shop-a"}},
		{"q=blog-", []string{"blog-b"}},
		{"tag=sale", []string{"shop-a"}},
		{"tag=blog,+email", []string{"blog-b", "shop-a"}},
		{"tag=none", nil},
	} {
		var got []string
		for _, m := range regexpRow.FindAllStringSubmatch(b.do("GET", "/console/links?"+c.query, nil).Body.String(), -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("?%s lists %v; want %v", c.query, got, c.want)
		}
	}
	if w := b.do("GET", "/console/links?tag=no%20%3Cgood%3E", nil); w.Code != http.StatusBadRequest {
		t.Errorf("a malformed tag filter: %d; want 400", w.Code)
	}
	// Edit: a new title, one tag off and one on; the target is kept.
	w := b.do("POST", "/console/links/shop-a", url.Values{"csrf": {token}, "url": {"https://shop.example.org/a"}, "redirect": {"302"},
		"title": {"Spring sale"}, "tags": {"sale, spring"}})
	wantRedirect(t, w, "/console/links/shop-a?done=saved")
	l, _ = e.svc.Get(context.Background(), e.tenant, "", "shop-a")
	if l.Title != "Spring sale" || strings.Join(l.Tags, ",") != "sale,spring" || l.URL != "https://shop.example.org/a" {
		t.Errorf("after edit: %q %v %s; want Spring sale, [sale spring], the same target", l.Title, l.Tags, l.URL)
	}
	w = b.do("POST", "/console/links/shop-a", url.Values{"csrf": {token}, "url": {"https://shop.example.org/changed"}, "redirect": {"302"},
		"title": {"Spring sale"}, "tags": {"sale, <bad>"}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `value="sale, &lt;bad&gt;"`) {
		t.Errorf("a bad tag: %d; want 400 with the field kept\n%.2000s", w.Code, w.Body.String())
	}
	if l, _ = e.svc.Get(context.Background(), e.tenant, "", "shop-a"); l.URL != "https://shop.example.org/a" {
		t.Errorf("a refused edit changed the target to %s", l.URL)
	}
}
