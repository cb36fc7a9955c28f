package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/apiwire"
)

func wire(t *testing.T, r resp) apiwire.Link {
	t.Helper()
	var l apiwire.Link
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("%v is not a link: %v", r, err)
	}
	return l
}

func page(t *testing.T, r resp) []apiwire.Link {
	t.Helper()
	var p struct {
		Links []apiwire.Link `json:"links"`
	}
	if r.status != http.StatusOK {
		t.Fatalf("want a page of links, got %v", r)
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("%v is not a page of links: %v", r, err)
	}
	return p.Links
}

func codesOf(ls []apiwire.Link) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.Code)
	}
	return out
}

// TestCreateWithTagsAndTitle: tags are normalized as Shlink and Dub do
// (case, spaces), stored with the link, answered on every read, and part
// of the request an idempotency key replays.
func TestCreateWithTagsAndTitle(t *testing.T) {
	e, key := newEnvWithTenant(t)
	body := []byte(`{"url": "https://example.com/", "title": "Poster — Été 2026", "tags": ["Summer Sale", " summer-sale ", "Q4", "Été"]}`)
	r := e.do(t, "POST", "/api/v1/links", key, body, "Idempotency-Key", "k1")
	if r.status != http.StatusCreated {
		t.Fatalf("create: %v", r)
	}
	l := wire(t, r)
	if want := []string{"q4", "summer-sale", "été"}; !slices.Equal(l.Tags, want) || l.Title == nil || *l.Title != "Poster — Été 2026" {
		t.Fatalf("created with tags %q, title %v; want %q and the title as sent", l.Tags, l.Title, want)
	}
	if got := wire(t, e.do(t, "GET", "/api/v1/links/"+l.Code, key, nil)); !slices.Equal(got.Tags, l.Tags) || *got.Title != *l.Title {
		t.Errorf("read back %q %v; want %q %q", got.Tags, got.Title, l.Tags, *l.Title)
	}
	// The same request spelled otherwise is a replay, with the same tags.
	same := []byte(`{"url": "https://EXAMPLE.com", "title": "Poster — Été 2026", "tags": ["q4", "ÉTÉ", "SUMMER   SALE"]}`)
	if again := e.do(t, "POST", "/api/v1/links", key, same, "Idempotency-Key", "k1"); again.status != 201 || string(again.body) != string(r.body) ||
		again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %v; want the original %v", again, r)
	}
	for _, other := range []string{
		`{"url": "https://example.com/", "title": "Poster — Été 2026", "tags": ["q4"]}`,
		`{"url": "https://example.com/", "title": "Other", "tags": ["Summer Sale", "Q4", "Été"]}`,
		`{"url": "https://example.com/", "tags": ["Summer Sale", "Q4", "Été"]}`,
	} {
		if r := e.do(t, "POST", "/api/v1/links", key, []byte(other), "Idempotency-Key", "k1"); r.status != http.StatusConflict {
			t.Errorf("other tags or title with the key: %v; want 409", r)
		}
	}
	// A link without any reads title null and tags [].
	r = e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/bare"}`))
	if !strings.Contains(string(r.body), `"title":null,"tags":[]`) {
		t.Errorf("a bare link: %v; want title null and tags []", r)
	}

	// A batch carries them, and replays them.
	batch := []byte(`{"links": [{"url": "https://a.example/", "tags": ["A", "b"]}, {"url": "https://b.example/", "title": "B", "tags": ["x"]}]}`)
	b1 := e.do(t, "POST", "/api/v1/links/batch", key, batch, "Idempotency-Key", "b1")
	b2 := e.do(t, "POST", "/api/v1/links/batch", key, batch, "Idempotency-Key", "b1")
	if b1.status != 200 || string(b1.body) != string(b2.body) || !strings.Contains(string(b1.body), `"tags":["a","b"]`) || !strings.Contains(string(b1.body), `"title":"B","tags":["x"]`) {
		t.Errorf("batch with tags: %v, replayed %v", b1, b2)
	}
}

// TestTagsAndTitleHostileInput: every refused tag or title is a 400 that
// says why, and writes no link, tag or event.
func TestTagsAndTitleHostileInput(t *testing.T) {
	e, key := newEnvWithTenant(t)
	many := make([]string, 21)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprint("t", i))
	}
	for _, tc := range []struct{ body, detail string }{
		{`{"url": "https://example.com/", "tags": [` + strings.Join(many, ",") + `]}`, "at most 20 tags, not 21"},
		{`{"url": "https://example.com/", "tags": ["` + strings.Repeat("x", 65) + `"]}`, "a tag is 1 to 64 characters, not 65"},
		{`{"url": "https://example.com/", "tags": ["   "]}`, "a tag is 1 to 64 characters, not 0"},
		{`{"url": "https://example.com/", "tags": [""]}`, "a tag is 1 to 64 characters"},
		{`{"url": "https://example.com/", "tags": ["<script>"]}`, "a tag is letters, digits"},
		{`{"url": "https://example.com/", "tags": ["a,b"]}`, "a tag is letters, digits"},
		{`{"url": "https://example.com/", "tags": ["tab\there"]}`, ""}, // a tab is a space: "tab-here" is fine
		{`{"url": "https://example.com/", "tags": ["nul\u0000"]}`, "a tag is letters, digits"},
		{`{"url": "https://example.com/", "tags": "summer"}`, "tags must be an array"},
		{`{"url": "https://example.com/", "tags": [1]}`, "tags[0] must be a string"},
		{`{"url": "https://example.com/", "tags": null}`, "tags must be an array"},
		{`{"url": "https://example.com/", "title": "` + strings.Repeat("é", 257) + `"}`, "title is at most 256 characters, not 257"},
		{`{"url": "https://example.com/", "title": "two\nlines"}`, "control character"},
		{`{"url": "https://example.com/", "title": "bidi\u2028"}`, "control character"},
		{`{"url": "https://example.com/", "title": null}`, "title must be a string"},
		{`{"url": "https://example.com/", "title": 7}`, "title must be a string"},
	} {
		r := e.do(t, "POST", "/api/v1/links", key, []byte(tc.body))
		if tc.detail == "" {
			if r.status != 201 {
				t.Errorf("%.80s: %v; want 201", tc.body, r)
			}
			continue
		}
		detail, _ := r.json(t)["detail"].(string)
		if r.status != 400 || !strings.Contains(detail, tc.detail) {
			t.Errorf("%.80s: %v; want 400 saying %q", tc.body, r, tc.detail)
		}
	}
	if n := e.count(t, "links"); n != 1 {
		t.Errorf("%d links; want only the one accepted", n)
	}
	if n, o := e.count(t, "link_tags"), e.count(t, linkEvents); n != 1 || o != 1 {
		t.Errorf("%d tags, %d events; want the accepted link's 1 and 1", n, o)
	}
}

// TestListByTagsAndSearch: the tag filter (any, all) and search (code,
// host and its subdomains, title) select within the tenant, page by the
// cursor, and treat LIKE's wildcards as the characters they are.
func TestListByTagsAndSearch(t *testing.T) {
	e, key := newEnvWithTenant(t)
	other := e.tenant(t, "globex")
	create := func(key, body string) string {
		t.Helper()
		r := e.do(t, "POST", "/api/v1/links", key, []byte(body))
		if r.status != 201 {
			t.Fatalf("create %s: %v", body, r)
		}
		return wire(t, r).Code
	}
	a := create(key, `{"url": "https://shop.example.com/a", "code": "spring-a", "title": "Spring sale: 50% off", "tags": ["spring", "sale"]}`)
	b := create(key, `{"url": "https://example.com/b", "code": "spring-b", "tags": ["spring"]}`)
	c := create(key, `{"url": "https://other.example/c", "code": "autumn_c", "title": "Autumn", "tags": ["sale", "autumn"]}`)
	d := create(key, `{"url": "https://notexample.com/d", "code": "plain-d"}`)
	create(other, `{"url": "https://example.com/x", "code": "spring-x", "title": "Spring", "tags": ["spring", "sale"]}`)

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"tag=spring", []string{b, a}},
		{"tag=Spring&tag=AUTUMN", []string{c, b, a}},
		{"tag=spring,autumn", []string{c, b, a}},
		{"tag=spring&tag=sale&tag_mode=all", []string{a}},
		{"tag=spring&tag=autumn&tag_mode=all", nil},
		{"tag=sale&tag_mode=any", []string{c, a}},
		{"tag=nobody", nil},
		{"q=spring-", []string{b, a}},     // code prefix
		{"q=Spring-", nil},                // codes are case-sensitive
		{"q=example.com", []string{b, a}}, // the host and its subdomains, not notexample.com
		{"q=EXAMPLE.COM", []string{b, a}},
		{"q=shop.example.com", []string{a}},
		{"q=sale", []string{a}}, // title, any case
		{"q=50%25", []string{a}},
		{"q=%25", []string{a}}, // the title's literal percent sign, not "anything"
		{"q=autumn_", []string{c}},
		{"q=spring_", nil}, // a literal underscore, not "any character"
		{"q=autumn&tag=sale", []string{c}},
		{"q=spring&tag=autumn", nil},
		{"q=plain&status=active", []string{d}},
	} {
		got := codesOf(page(t, e.do(t, "GET", "/api/v1/links?"+tc.query, key, nil)))
		if !slices.Equal(got, append([]string{}, tc.want...)) {
			t.Errorf("?%s: %v; want %v", tc.query, got, tc.want)
		}
	}
	// Pages of a tag filter follow the cursor to the end, each link once.
	var seen []string
	cursor := ""
	for range 5 {
		r := e.do(t, "GET", "/api/v1/links?tag=spring&tag=autumn&limit=1"+cursor, key, nil)
		seen = append(seen, codesOf(page(t, r))...)
		next, _ := r.json(t)["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = "&cursor=" + url.QueryEscape(next)
	}
	if want := []string{c, b, a}; !slices.Equal(seen, want) {
		t.Errorf("paged tag filter: %v; want %v", seen, want)
	}
	for _, tc := range []struct{ query, detail string }{
		{"tag=<b>", "a tag is letters"},
		{"tag=" + strings.Repeat("t,", 21) + "u", ""},
		{"tag=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u", "at most 20 tags"},
		{"q=%zz", "malformed"},
		{"tag_mode=some&tag=a", "tag_mode must be any or all"},
		{"tag_mode=any&tag_mode=all", "send tag_mode once"},
		{"q=", "q is empty"},
		{"q=" + strings.Repeat("a", 101), "q is 1 to 100 characters"},
		{"q=a%0Ab", "control character"},
		{"q=a&q=b", "send q once"},
	} {
		r := e.do(t, "GET", "/api/v1/links?"+tc.query, key, nil)
		if tc.detail == "" {
			if r.status != 200 {
				t.Errorf("?%.60s: %v; want 200", tc.query, r)
			}
			continue
		}
		if detail, _ := r.json(t)["detail"].(string); r.status != 400 || !strings.Contains(detail, tc.detail) {
			t.Errorf("?%.60s: %v; want 400 saying %q", tc.query, r, tc.detail)
		}
	}
}

// TestBulkTags: one request adds and removes tags on many links, all or
// nothing, within the tenant and the limit of 20, without a new version.
func TestBulkTags(t *testing.T) {
	e, key := newEnvWithTenant(t)
	other := e.tenant(t, "globex")
	var codes []string
	for i := range 3 {
		r := e.do(t, "POST", "/api/v1/links", key, []byte(fmt.Sprintf(`{"url": "https://example.com/%d", "code": "bulk-%d", "tags": ["old"]}`, i, i)))
		codes = append(codes, wire(t, r).Code)
	}
	theirs := wire(t, e.do(t, "POST", "/api/v1/links", other, []byte(`{"url": "https://example.com/", "code": "their-s"}`))).Code
	before := wire(t, e.do(t, "GET", "/api/v1/links/bulk-0", key, nil))

	r := e.do(t, "POST", "/api/v1/links/tags", key, []byte(`{"codes": ["bulk-2", "bulk-0", "bulk-1"], "add": ["New One", "x"], "remove": ["OLD", "absent"]}`))
	ls := page(t, r)
	if got := codesOf(ls); !slices.Equal(got, []string{"bulk-2", "bulk-0", "bulk-1"}) {
		t.Errorf("answered %v; want the links in the order asked", got)
	}
	for _, l := range ls {
		if !slices.Equal(l.Tags, []string{"new-one", "x"}) {
			t.Errorf("%s has tags %q after the change; want [new-one x]", l.Code, l.Tags)
		}
	}
	after := wire(t, e.do(t, "GET", "/api/v1/links/bulk-0", key, nil))
	if after.Version != before.Version || after.UpdatedAt != before.UpdatedAt {
		t.Errorf("tagging moved version %d→%d, updated_at %s→%s; tags are no change edges see", before.Version, after.Version, before.UpdatedAt, after.UpdatedAt)
	}
	events := e.count(t, linkEvents)

	state := func() string {
		var s strings.Builder
		for _, c := range codes {
			fmt.Fprintf(&s, "%s=%q ", c, wire(t, e.do(t, "GET", "/api/v1/links/"+c, key, nil)).Tags)
		}
		return s.String()
	}
	unchanged := state()
	twenty := make([]string, 19)
	for i := range twenty {
		twenty[i] = fmt.Sprintf(`"t%02d"`, i)
	}
	for _, tc := range []struct {
		body   string
		status int
		detail string
	}{
		{`{"codes": ["bulk-0", "nope-1", "` + theirs + `"], "add": ["y"]}`, 404, "no link (or a deleted one) with code nope-1, their-s"},
		{`{"codes": ["bulk-0", "bulk-1"], "add": [` + strings.Join(twenty, ",") + `]}`, 400, "at most 20 tags; this change would give more to bulk-0 (21), bulk-1 (21)"},
		{`{"codes": ["bulk-0", "bulk-0"], "add": ["y"]}`, 400, "listed twice"},
		{`{"codes": ["bulk-0"], "add": ["y"], "remove": ["Y"]}`, 400, "both added and removed"},
		{`{"codes": ["bulk-0"]}`, 400, "nothing to change"},
		{`{"codes": [], "add": ["y"]}`, 400, "codes must hold 1 to 1000 codes, not 0"},
		{`{"add": ["y"]}`, 400, "codes must hold"},
		{`{"codes": ["bulk-0"], "add": ["<y>"]}`, 400, "add: invalid input: tag"},
		{`{"codes": ["bulk-0"], "add": ["y"], "colour": "red"}`, 400, `unknown field "colour"`},
		{`{"codes": "bulk-0", "add": ["y"]}`, 400, "codes must be an array"},
		{`{"codes": ["bulk-0"], "add": ["y"]`, 400, "malformed JSON"},
		{`{"codes": ["` + strings.Repeat("a", 70000) + `"]}`, 413, "larger than"},
	} {
		r := e.do(t, "POST", "/api/v1/links/tags", key, []byte(tc.body))
		if detail, _ := r.json(t)["detail"].(string); r.status != tc.status || !strings.Contains(detail, tc.detail) {
			t.Errorf("%.70s: %v; want %d saying %q", tc.body, r, tc.status, tc.detail)
		}
	}
	if got := state(); got != unchanged {
		t.Errorf("refused changes changed tags:\n got %s\nwant %s", got, unchanged)
	}
	if r := e.do(t, "GET", "/api/v1/links/their-s", other, nil); len(wire(t, r).Tags) != 0 {
		t.Errorf("another tenant's link got tags: %v", r)
	}
	// Exactly 20 is allowed.
	r = e.do(t, "POST", "/api/v1/links/tags", key, []byte(`{"codes": ["bulk-0"], "add": [`+strings.Join(twenty[:18], ",")+`]}`))
	if ls := page(t, r); len(ls[0].Tags) != 20 {
		t.Errorf("tags after adding up to 20: %q", ls[0].Tags)
	}
	if n := e.count(t, linkEvents); n != events {
		t.Errorf("tagging wrote %d change events; edges never see tags", n-events)
	}
}

// TestConcurrentTaggingKeepsTheLimit: changes that each fit but together
// would pass 20 tags on one link are decided one after the other; the link
// never holds more than 20.
func TestConcurrentTaggingKeepsTheLimit(t *testing.T) {
	e, key := newEnvWithTenant(t)
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/", "code": "contended"}`)); r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	const n = 8
	results := make([]resp, n)
	parallel(n, func(i int) {
		tags := make([]string, 6)
		for j := range tags {
			tags[j] = fmt.Sprintf(`"w%d-%d"`, i, j)
		}
		results[i] = e.do(t, "POST", "/api/v1/links/tags", key, []byte(`{"codes": ["contended"], "add": [`+strings.Join(tags, ",")+`]}`))
	})
	ok := 0
	for _, r := range results {
		switch r.status {
		case 200:
			ok++
		case 400:
		default:
			t.Errorf("concurrent tagging: %v", r)
		}
	}
	l := wire(t, e.do(t, "GET", "/api/v1/links/contended", key, nil))
	if ok != 3 || len(l.Tags) != 18 {
		t.Errorf("%d changes of 6 tags succeeded, the link has %d tags; want 3 and 18 (a fourth would pass 20)", ok, len(l.Tags))
	}
}

func TestPatchTitle(t *testing.T) {
	e, key := newEnvWithTenant(t)
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/", "code": "titled-1", "title": "One"}`)); r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	for _, tc := range []struct {
		body string
		want *string
	}{
		{`{"title": "Two"}`, ptr("Two")},
		{`{"title": null}`, nil},
		{`{"title": "Three"}`, ptr("Three")},
		{`{"title": ""}`, nil},
	} {
		l := wire(t, e.do(t, "PATCH", "/api/v1/links/titled-1", key, []byte(tc.body)))
		if (l.Title == nil) != (tc.want == nil) || (l.Title != nil && *l.Title != *tc.want) {
			t.Errorf("PATCH %s: title %v; want %v", tc.body, l.Title, tc.want)
		}
	}
	if r := e.do(t, "PATCH", "/api/v1/links/titled-1", key, []byte(`{"title": "a\u0007b"}`)); r.status != 400 {
		t.Errorf("a title with BEL: %v; want 400", r)
	}
}
