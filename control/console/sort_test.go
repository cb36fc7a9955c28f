package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// listAll follows a list's Next page links from first (a plain GET each,
// as a browser with JavaScript off does) and returns the codes in order.
func listAll(t *testing.T, b *browser, first string) []string {
	t.Helper()
	var codes []string
	next := first
	for pages := 0; next != ""; pages++ {
		w := b.do("GET", next, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%.1500s", next, w.Code, w.Body.String())
		}
		body := w.Body.String()
		for _, m := range regexpRow.FindAllStringSubmatch(body, -1) {
			codes = append(codes, m[1])
		}
		next = ""
		if m := regexpNext.FindStringSubmatch(body); m != nil {
			next = "/console/links?" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
		if pages > 20 {
			t.Fatalf("%s: pages never end", first)
		}
	}
	return codes
}

// TestListSorts lists 120 links in every order the console offers, page
// by page through the cursors the pages carry, and compares each with the
// links sorted as the order promises: every link once, in order. The
// order and the filters stay on every page.
func TestListSorts(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.2.1")
	b.signIn(t, e.key)
	ctx := context.Background()
	hosts := []string{"zeta.example.com", "alpha.example.org", "mid.example.net", "alpha.example.org"}
	for i := range 120 {
		req := links.CreateRequest{URL: fmt.Sprintf("https://%s/p/%d", hosts[i%len(hosts)], i)}
		if i%3 == 0 {
			// Custom codes, so code order is not ID order.
			req.Code = fmt.Sprintf("c-%03d", (i*37)%120)
		}
		if i%5 == 0 {
			req.Tags = []string{"five"}
		}
		if _, err := e.svc.Create(ctx, e.tenant, req); err != nil {
			t.Fatal(err)
		}
		e.clock.advance(1)
	}
	all, _, err := e.svc.List(ctx, e.tenant, links.ListRequest{Limit: links.MaxPage})
	if err != nil || len(all) != 120 {
		t.Fatalf("listed %d links, %v; want 120", len(all), err)
	}
	for _, c := range []struct {
		sort string
		cmp  func(a, b *links.Link) int
	}{
		{"", func(a, b *links.Link) int { return -compareCreated(a, b) }},
		{"newest", func(a, b *links.Link) int { return -compareCreated(a, b) }},
		{"oldest", compareCreated},
		{"code", func(a, b *links.Link) int { return cmpOr(strings.Compare(a.Code, b.Code), a, b) }},
		{"host", func(a, b *links.Link) int {
			return cmpOr(strings.Compare(links.ListHost(a.URL), links.ListHost(b.URL)), a, b)
		}},
	} {
		for _, filter := range []string{"", "tag=five&"} {
			want := slices.Clone(all)
			if filter != "" {
				want = slices.DeleteFunc(want, func(l *links.Link) bool { return !slices.Contains(l.Tags, "five") })
			}
			slices.SortFunc(want, c.cmp)
			var wantCodes []string
			for _, l := range want {
				wantCodes = append(wantCodes, l.Code)
			}
			got := listAll(t, b, "/console/links?"+filter+"sort="+c.sort)
			if !slices.Equal(got, wantCodes) {
				t.Errorf("sort %q, filter %q: listed\n%v\nwant\n%v", c.sort, filter, got, wantCodes)
			}
		}
	}
	// The form shows the order chosen.
	if body := b.do("GET", "/console/links?sort=host", nil).Body.String(); !strings.Contains(body, `<option value="host" selected>`) {
		t.Errorf("the sort select does not keep host")
	}
}

func compareCreated(a, b *links.Link) int { return cmpOr(a.CreatedAt.Compare(b.CreatedAt), a, b) }

// cmpOr is c, or the IDs' order when c is a tie: every order ends in the ID.
func cmpOr(c int, a, b *links.Link) int {
	if c != 0 {
		return c
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// TestListRefusesBadSortsAndCursors: an unknown or hostile order, a cursor
// that does not decode, and a cursor of another order are each a 400 that
// says why and keeps the form as typed; the value is shown escaped.
func TestListRefusesBadSortsAndCursors(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.2.2")
	b.signIn(t, e.key)
	ctx := context.Background()
	for i := range 60 {
		if _, err := e.svc.Create(ctx, e.tenant, links.CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	newest, err := e.svc.ListPage(ctx, e.tenant, links.ListRequest{Sort: links.SortNewest, Limit: 10, Now: e.clock.now()})
	if err != nil || newest.Next.IsZero() {
		t.Fatalf("a page with a next: %v", err)
	}
	tooLong := strings.Repeat("A", 600)
	for _, c := range []struct{ query, why string }{
		{"sort=random&q=kept-term", "sort must be"},
		{"sort=%3Cscript%3Ealert(1)%3C%2Fscript%3E&q=kept-term", "sort must be"},
		{"sort=id&q=kept-term", "sort must be"},
		{"sort=code;DROP+TABLE+links&q=kept-term", "query string is malformed"},
		{"cursor=x&q=kept-term", "cursor is not valid"},
		{"cursor=" + tooLong + "&q=kept-term", "cursor is not valid"},
		{"cursor=" + url.QueryEscape(links.Cursor{Sort: links.SortCode, Key: "a b", ID: 1}.String()) + "&sort=code&q=kept-term", "cursor is not valid"},
		{"cursor=" + newest.Next.String() + "&sort=code&q=kept-term", "another order"},
		{"cursor=" + newest.Next.String() + "&sort=oldest&q=kept-term", "another order"},
	} {
		w := b.do("GET", "/console/links?"+c.query, nil)
		body := w.Body.String()
		if w.Code != http.StatusBadRequest || !strings.Contains(body, `role="alert"`) || !strings.Contains(body, c.why) ||
			!strings.Contains(body, `value="kept-term"`) {
			t.Errorf("?%.80s: %d; want 400 saying %q with the search kept\n%.1500s", c.query, w.Code, c.why, body)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("?%.80s: the value is written unescaped", c.query)
		}
	}
	// The same cursor in its own order resumes.
	if w := b.do("GET", "/console/links?sort=newest&cursor="+newest.Next.String(), nil); w.Code != http.StatusOK {
		t.Errorf("a newest cursor with sort=newest: %d", w.Code)
	}
}

// TestEditIsOneChange: the detail form's edit of the target and the tags
// is one change — one version — and an edit refused for either part
// changes neither.
func TestEditIsOneChange(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.2.3")
	token := b.signIn(t, e.key)
	ctx := context.Background()
	wantRedirect(t, b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/a"}, "code": {"edit-one"}, "tags": {"old"}}),
		"/console/links/edit-one")
	before, err := e.svc.Get(ctx, e.tenant, "", "edit-one")
	if err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, b.do("POST", "/console/links/edit-one", url.Values{"csrf": {token}, "url": {"https://example.com/b"}, "redirect": {"302"},
		"tags": {"new, other"}}), "/console/links/edit-one?done=saved")
	after, _ := e.svc.Get(ctx, e.tenant, "", "edit-one")
	if after.URL != "https://example.com/b" || strings.Join(after.Tags, ",") != "new,other" || after.Version <= before.Version {
		t.Fatalf("after the edit: %s %v version %d (was %d)", after.URL, after.Tags, after.Version, before.Version)
	}
	var events int
	if err := e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE code = 'edit-one' AND version > $1`, int64(before.Version)).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("the edit wrote %d change events; want 1", events)
	}
	for _, form := range []url.Values{
		{"url": {"https://example.com/c"}, "tags": {"new, <bad>"}},
		{"url": {"javascript:alert(1)"}, "tags": {"fine"}},
		{"url": {"https://example.com/c"}, "tags": {manyTags(links.MaxTags + 1)}},
	} {
		form.Set("csrf", token)
		form.Set("redirect", "302")
		if w := b.do("POST", "/console/links/edit-one", form); w.Code != http.StatusBadRequest {
			t.Errorf("a refused edit %v: %d; want 400", form, w.Code)
		}
		now, _ := e.svc.Get(ctx, e.tenant, "", "edit-one")
		if now.URL != after.URL || strings.Join(now.Tags, ",") != "new,other" || now.Version != after.Version {
			t.Errorf("a refused edit %v wrote: %s %v version %d", form.Get("tags"), now.URL, now.Tags, now.Version)
		}
	}
	if l, _ := e.svc.Get(ctx, e.tenant, "", "edit-one"); l.Status != link.Active {
		t.Errorf("status %s", l.Status)
	}
}

// manyTags is n distinct tags, comma-separated.
func manyTags(n int) string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("t%d", i)
	}
	return strings.Join(tags, ", ")
}
