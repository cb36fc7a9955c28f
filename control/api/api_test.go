package api

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/shared/link"
)

func TestIdempotentConcurrentCreates(t *testing.T) {
	e, key := newEnvWithTenant(t)
	body := []byte(`{"url": "https://Example.com/sale?x=1", "redirect_type": 307}`)

	const n = 100
	got := make([]resp, n)
	parallel(n, func(i int) {
		got[i] = e.do(t, "POST", "/api/v1/links", key, body, "Idempotency-Key", "order-42")
	})
	replays := 0
	for i, r := range got {
		if r.status != http.StatusCreated || !bytes.Equal(r.body, got[0].body) {
			t.Fatalf("response %d: %v; want 201 with the same body as response 0: %v", i, r, got[0])
		}
		if r.header.Get("Idempotent-Replayed") == "true" {
			replays++
		}
	}
	if replays != n-1 {
		t.Errorf("%d responses were marked replayed; want %d", replays, n-1)
	}
	if links, events := e.count(t, "links"), e.count(t, linkEvents); links != 1 || events != 1 {
		t.Fatalf("%d links and %d outbox rows after %d creates with one key; want 1 and 1", links, events, n)
	}

	// The same key later, even after the link changed: the original answer.
	code := got[0].json(t)["code"].(string)
	if r := e.do(t, "PATCH", "/api/v1/links/"+code, key, []byte(`{"status": "disabled"}`)); r.status != http.StatusOK {
		t.Fatalf("patch: %v", r)
	}
	if r := e.do(t, "POST", "/api/v1/links", key, body, "Idempotency-Key", "order-42"); r.status != 201 || !bytes.Equal(r.body, got[0].body) {
		t.Fatalf("replay after a change: %v; want the original %v", r, got[0])
	}
	// A different spelling of the same request is the same request.
	same := []byte(`{"url": "HTTPS://example.COM:443/sale?x=1", "redirect_type": 307, "namespace": "default"}`)
	if r := e.do(t, "POST", "/api/v1/links", key, same, "Idempotency-Key", "order-42"); r.status != 201 || !bytes.Equal(r.body, got[0].body) {
		t.Fatalf("replay of an equivalent request: %v; want the original %v", r, got[0])
	}

	for _, changed := range []string{
		`{"url": "https://example.com/other"}`,
		`{"url": "https://Example.com/sale?x=1", "redirect_type": 302}`,
		`{"url": "https://Example.com/sale?x=1", "redirect_type": 307, "expires_at": "2099-01-01T00:00:00Z"}`,
		`{"url": "https://Example.com/sale?x=1", "redirect_type": 307, "code": "my-sale"}`,
	} {
		r := e.do(t, "POST", "/api/v1/links", key, []byte(changed), "Idempotency-Key", "order-42")
		if r.status != http.StatusConflict {
			t.Errorf("changed body %s with the same key: %v; want 409", changed, r)
		}
	}
	// The batch endpoint is another request kind: the key conflicts there too.
	if r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [`+string(body)+`]}`), "Idempotency-Key", "order-42"); r.status != http.StatusConflict {
		t.Errorf("batch with a single create's key: %v; want 409", r)
	}
	if links := e.count(t, "links"); links != 1 {
		t.Fatalf("%d links; want 1", links)
	}
}

// TestHostileInputsWriteNothing: every hostile request is a clear 4xx
// problem that shows no Go internals, and neither links, their change events
// nor idempotency keys are written.
func TestHostileInputsWriteNothing(t *testing.T) {
	e, key := newEnvWithTenant(t)
	big := strings.Repeat("a", 100<<10)
	cases := []struct {
		name   string
		body   string
		status int
		detail string
		// whole: the body itself is refused, so the case cannot be tried
		// as one item of a batch.
		whole   bool
		headers []string
	}{
		{name: "javascript url", body: `{"url": "javascript:alert(1)"}`, status: 400, detail: "scheme"},
		{name: "javascript url with host", body: `{"url": "javascript://example.com/%0Aalert(1)"}`, status: 400, detail: "scheme"},
		{name: "data url", body: `{"url": "data:text/html;base64,PHNjcmlwdD4="}`, status: 400, detail: "scheme"},
		{name: "CR LF", body: `{"url": "https://example.com/\r\nSet-Cookie: a=b"}`, status: 400, detail: "control character"},
		{name: "bare LF", body: `{"url": "https://example.com/\nx"}`, status: 400, detail: "control character"},
		{name: "100 KB url", body: `{"url": "https://example.com/` + big + `"}`, status: 413, detail: "larger than", whole: true},
		{name: "5 KB url", body: `{"url": "https://example.com/` + strings.Repeat("a", 5000) + `"}`, status: 400, detail: "4096"},
		{name: "credentials", body: `{"url": "https://user:pass@example.com/"}`, status: 400, detail: "credentials"},
		{name: "username only", body: `{"url": "https://user@example.com/"}`, status: 400, detail: "credentials"},
		{name: "blocked domain", body: `{"url": "https://evil.example/x"}`, status: 400, detail: "blocked"},
		{name: "blocked subdomain, upper case", body: `{"url": "https://WWW.Evil.Example./x"}`, status: 400, detail: "blocked"},
		{name: "relative url", body: `{"url": "/just/a/path"}`, status: 400, detail: "absolute"},
		{name: "no host", body: `{"url": "https:///path"}`, status: 400, detail: "absolute"},
		{name: "ftp", body: `{"url": "ftp://example.com/"}`, status: 400, detail: "scheme"},
		{name: "bad percent-escape in the path", body: `{"url": "https://example.com/%zz"}`, status: 400, detail: "url"},
		{name: "reserved code: control route", body: `{"url": "https://example.com/", "code": "api"}`, status: 400, detail: `code "api" is reserved`},
		{name: "reserved code: control route, other case", body: `{"url": "https://example.com/", "code": "API"}`, status: 400, detail: `code "API" is reserved`},
		{name: "reserved code: edge route", body: `{"url": "https://example.com/", "code": "livez"}`, status: 400, detail: "reserved"},
		{name: "reserved code: edge file", body: `{"url": "https://example.com/", "code": "robots.txt"}`, status: 400, detail: `code "robots.txt" is reserved`},
		{name: "reserved code: edge operations segment", body: `{"url": "https://example.com/", "code": "-"}`, status: 400, detail: `code "-" is reserved`},
		{name: "reserved code: policy, other case", body: `{"url": "https://example.com/", "code": "Login"}`, status: 400, detail: "reserved"},
		{name: "generated-shape code", body: `{"url": "https://example.com/", "code": "abc123"}`, status: 400, detail: "generated"},
		{name: "code of zeros", body: `{"url": "https://example.com/", "code": "000000"}`, status: 400, detail: "generated"},
		{name: "code with slash", body: `{"url": "https://example.com/", "code": "a/b/c"}`, status: 400, detail: "characters"},
		{name: "code too short", body: `{"url": "https://example.com/", "code": "ab"}`, status: 400, detail: "characters"},
		{name: "code too long", body: `{"url": "https://example.com/", "code": "` + strings.Repeat("x", 33) + `"}`, status: 400, detail: "characters"},
		{name: "code with unicode", body: `{"url": "https://example.com/", "code": "cafés"}`, status: 400, detail: "characters"},
		{name: "bad redirect type", body: `{"url": "https://example.com/", "redirect_type": 303}`, status: 400, detail: "redirect_type"},
		{name: "expiry in the past", body: `{"url": "https://example.com/", "expires_at": "2001-01-01T00:00:00Z"}`, status: 400, detail: "future"},
		{name: "expiry not RFC 3339", body: `{"url": "https://example.com/", "expires_at": "tomorrow"}`, status: 400, detail: "RFC 3339"},
		{name: "expiry with a comma for the fraction", body: `{"url": "https://example.com/", "expires_at": "2090-01-01T00:00:00,5Z"}`, status: 400, detail: "RFC 3339"},
		{name: "expiry with a 24-hour offset", body: `{"url": "https://example.com/", "expires_at": "2090-01-01T00:00:00+24:00"}`, status: 400, detail: "RFC 3339"},
		{name: "expiry on 30 February", body: `{"url": "https://example.com/", "expires_at": "2090-02-30T00:00:00Z"}`, status: 400, detail: "no such day"},
		{name: "expiry with nanoseconds", body: `{"url": "https://example.com/", "expires_at": "2090-01-01T00:00:00.123456789Z"}`, status: 400, detail: "microseconds"},
		{name: "expiry: a second 60 that is no leap second", body: `{"url": "https://example.com/", "expires_at": "2090-01-01T10:30:60Z"}`, status: 400, detail: "leap second"},
		{name: "unknown namespace", body: `{"url": "https://example.com/", "namespace": "other"}`, status: 400, detail: "namespace"},
		{name: "10 MB body", body: `{"url": "https://example.com/", "code": "` + strings.Repeat("x", 10<<20) + `"}`, status: 413, detail: "larger than", whole: true},
		{name: "bad JSON", body: `{"url": "https://example.com/"`, status: 400, detail: "malformed JSON", whole: true},
		{name: "two objects", body: `{"url": "https://example.com/"} {}`, status: 400, detail: "after the JSON object", whole: true},
		{name: "trailing garbage", body: `{"url": "https://example.com/"}x`, status: 400, detail: "after the JSON object", whole: true},
		{name: "unknown field", body: `{"url": "https://example.com/", "owner": "me"}`, status: 400, detail: `unknown field "owner"`, whole: true},
		{name: "field in another case", body: `{"URL": "https://a.com/"}`, status: 400, detail: `unknown field "URL": field names are case-sensitive; did you mean "url"?`, whole: true},
		{name: "duplicate field", body: `{"url": "https://a.com/", "url": "https://b.com/"}`, status: 400, detail: `duplicate field "url"`, whole: true},
		{name: "duplicate field in another case", body: `{"url": "https://a.com/", "Url": "https://b.com/"}`, status: 400, detail: `unknown field "Url"`, whole: true},
		{name: "url not a string", body: `{"url": 5}`, status: 400, detail: "url must be a string, not a number", whole: true},
		{name: "url null", body: `{"url": null}`, status: 400, detail: "url must be a string, not null", whole: true},
		{name: "code not a string", body: `{"url": "https://example.com/", "code": ["x"]}`, status: 400, detail: "code must be a string, not an array", whole: true},
		{name: "redirect type a string", body: `{"url": "https://example.com/", "redirect_type": "302"}`, status: 400, detail: "redirect_type must be an integer, not a string", whole: true},
		{name: "redirect type a fraction", body: `{"url": "https://example.com/", "redirect_type": 302.5}`, status: 400, detail: "redirect_type must be an integer", whole: true},
		{name: "redirect type too big", body: `{"url": "https://example.com/", "redirect_type": 1e400}`, status: 400, detail: "redirect_type must be an integer", whole: true},
		{name: "expiry an object", body: `{"url": "https://example.com/", "expires_at": {"t": 1}}`, status: 400, detail: "expires_at must be a string or null, not an object", whole: true},
		{name: "array body", body: `[{"url": "https://example.com/"}]`, status: 400, detail: "the body must be a JSON object, not an array", whole: true},
		{name: "string body", body: `"https://example.com/"`, status: 400, detail: "the body must be a JSON object, not a string", whole: true},
		{name: "invalid UTF-8", body: "{\"url\": \"https://example.com/\xff\xfe\"}", status: 400, detail: "not valid UTF-8", whole: true},
		{name: "lone surrogate escape", body: `{"url": "https://example.com/\ud800"}`, status: 400, detail: "surrogate", whole: true},
		{name: "no url", body: `{}`, status: 400, detail: "url is required", whole: true},
		{name: "empty body", body: ``, status: 400, detail: "empty", whole: true},
		{name: "gzip bomb", body: gzipped(t, `{"url": "https://example.com/", "code": "`+strings.Repeat("x", 10<<20)+`"}`), status: 413, detail: "decoded", whole: true, headers: []string{"Content-Encoding", "gzip"}},
		{name: "corrupt gzip", body: gzipped(t, `{"url": "https://example.com/"}`)[:20], status: 400, detail: "gzip", whole: true, headers: []string{"Content-Encoding", "gzip"}},
		{name: "gzip header on a plain body", body: `{"url": "https://example.com/"}`, status: 400, detail: "gzip", whole: true, headers: []string{"Content-Encoding", "gzip"}},
		{name: "brotli", body: `{"url": "https://example.com/"}`, status: 415, detail: "gzip", whole: true, headers: []string{"Content-Encoding", "br"}},
		{name: "gzip twice", body: gzipped(t, gzipped(t, `{"url": "https://example.com/"}`)), status: 415, detail: "gzip", whole: true, headers: []string{"Content-Encoding", "gzip, gzip"}},
		{name: "text/plain", body: `{"url": "https://example.com/"}`, status: 415, detail: "application/json", whole: true, headers: []string{"Content-Type", "text/plain"}},
		{name: "a JSON-looking media type", body: `{"url": "https://example.com/"}`, status: 415, detail: "application/json", whole: true, headers: []string{"Content-Type", "application/jsonp"}},
		{name: "latin-1 charset", body: `{"url": "https://example.com/"}`, status: 415, detail: "utf-8", whole: true, headers: []string{"Content-Type", "application/json; charset=iso-8859-1"}},
		{name: "idempotency key with a tab", body: `{"url": "https://example.com/"}`, status: 400, detail: "printable ASCII", whole: true, headers: []string{"Idempotency-Key", "a\tb"}},
		{name: "idempotency key not ASCII", body: `{"url": "https://example.com/"}`, status: 400, detail: "printable ASCII", whole: true, headers: []string{"Idempotency-Key", "clé"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			headers := append([]string{"Idempotency-Key", "k-" + strings.ReplaceAll(tc.name, " ", "-")}, tc.headers...)
			r := e.do(t, "POST", "/api/v1/links", key, []byte(tc.body), headers...)
			p := r.json(t)
			detail := fmt.Sprint(p["detail"])
			if r.status != tc.status || p["status"] != float64(tc.status) || !strings.Contains(detail, tc.detail) || p["request_id"] == "" {
				t.Errorf("answered %d %v; want %d problem with detail containing %q", r.status, p, tc.status, tc.detail)
			}
			if leak := goInternals(detail); leak != "" {
				t.Errorf("detail %q shows Go internals (%q)", detail, leak)
			}
			if tc.status == 415 && tc.headers[0] == "Content-Encoding" && r.header.Get("Accept-Encoding") != "gzip" {
				t.Errorf("415 for Content-Encoding %q with Accept-Encoding %q; want gzip", tc.headers[1], r.header.Get("Accept-Encoding"))
			}
		})
	}
	// The same hostile items inside a batch fail one by one.
	var items []string
	for _, tc := range cases {
		if !tc.whole {
			items = append(items, tc.body)
		}
	}
	r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [`+strings.Join(items, ",")+`]}`), "Idempotency-Key", "hostile-batch")
	if r.status != 200 {
		t.Fatalf("batch of hostile items: %v", r)
	}
	var ba batchAnswer
	if err := json.Unmarshal(r.body, &ba); err != nil {
		t.Fatal(err)
	}
	if ba.Created != 0 || ba.Failed != len(items) {
		t.Errorf("batch of %d hostile items: created %d, failed %d", len(items), ba.Created, ba.Failed)
	}
	for _, it := range ba.Results {
		if it.Status != 400 || it.Error == nil {
			t.Errorf("batch item %d (%.60s): %+v; want a 400 problem", it.Index, items[it.Index], it)
		} else if leak := goInternals(it.Error.Detail); leak != "" {
			t.Errorf("batch item %d: detail %q shows Go internals (%q)", it.Index, it.Error.Detail, leak)
		}
	}
	if links, events := e.count(t, "links"), e.count(t, linkEvents); links != 0 || events != 0 {
		t.Fatalf("hostile input wrote %d links and %d outbox rows; want none", links, events)
	}
	// A batch of only refused items keeps its answer under its key, and
	// nothing else.
	if keys := e.count(t, "idempotency_keys"); keys != 1 {
		t.Fatalf("%d idempotency keys; want only the batch's", keys)
	}
}

// goInternals returns the part of a problem's detail that names Go's types
// or its parsers' messages, or "" when there is none.
func goInternals(detail string) string {
	for _, s := range []string{"Go value", "Go struct", "json: ", "unmarshal", "api.", "parse \"", "strconv", "time.", "parsing time"} {
		if strings.Contains(detail, s) {
			return s
		}
	}
	return ""
}

// gzipped is s compressed with gzip.
func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.tenant(t, "alice"), e.tenant(t, "bob")
	r := e.do(t, "POST", "/api/v1/links", alice, []byte(`{"url": "https://alice.example/", "code": "alice-sale"}`), "Idempotency-Key", "same-key")
	if r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	before := r.json(t)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/v1/links/alice-sale", ""},
		{"PATCH", "/api/v1/links/alice-sale", `{"url": "https://bob.example/"}`},
		{"PATCH", "/api/v1/links/alice-sale", `{"status": "disabled"}`},
		{"DELETE", "/api/v1/links/alice-sale", ""},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		if r := e.do(t, tc.method, tc.path, bob, body); r.status != http.StatusNotFound {
			t.Errorf("bob %s %s: %v; want 404 exactly as for an unknown code", tc.method, tc.path, r)
		}
	}
	for _, q := range []string{"", "?status=active", "?status=deleted", "?status=disabled"} {
		if r := e.do(t, "GET", "/api/v1/links"+q, bob, nil); r.status != 200 || len(r.json(t)["links"].([]any)) != 0 {
			t.Errorf("bob lists %s: %v; want no links", q, r)
		}
	}
	// Bob's idempotency key space is his own: the same key creates his link.
	r = e.do(t, "POST", "/api/v1/links", bob, []byte(`{"url": "https://bob.example/"}`), "Idempotency-Key", "same-key")
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" || r.json(t)["url"] != "https://bob.example/" {
		t.Fatalf("bob's create with alice's key: %v", r)
	}
	// Nor can bob take alice's code.
	if r := e.do(t, "POST", "/api/v1/links", bob, []byte(`{"url": "https://bob.example/", "code": "alice-sale"}`)); r.status != http.StatusConflict {
		t.Errorf("bob takes alice's code: %v; want 409", r)
	}
	if r := e.do(t, "POST", "/api/v1/links/batch", bob, []byte(`{"links": [{"url": "https://bob.example/", "code": "alice-sale"}]}`)); r.status != 200 || !strings.Contains(string(r.body), `"status":409`) {
		t.Errorf("bob takes alice's code in a batch: %v; want a 409 item", r)
	}
	after := e.do(t, "GET", "/api/v1/links/alice-sale", alice, nil).json(t)
	if after["version"] != before["version"] || after["url"] != before["url"] || after["status"] != "active" {
		t.Errorf("alice's link changed: %v, was %v", after, before)
	}
	if r := e.do(t, "GET", "/api/v1/links", alice, nil); len(r.json(t)["links"].([]any)) != 1 {
		t.Errorf("alice lists %v; want her one link", r)
	}
}

func TestRevokedKeyFailsNextRequest(t *testing.T) {
	e := newEnv(t, withDomains)
	key := e.tenant(t, "acme")
	if r := e.do(t, "GET", "/api/v1/links", key, nil); r.status != 200 {
		t.Fatalf("list: %v", r)
	}
	if err := e.store.RevokeAPIKey(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/v1/links", ""},
		{"POST", "/api/v1/links", `{"url": "https://example.com/"}`},
		{"POST", "/api/v1/links/batch", `{"links": [{"url": "https://example.com/"}]}`},
		{"GET", "/api/v1/links/abcd", ""},
		{"PATCH", "/api/v1/links/abcd", `{"status": "disabled"}`},
		{"DELETE", "/api/v1/links/abcd", ""},
		{"GET", "/api/v1/domains", ""},
		{"POST", "/api/v1/domains", `{"host": "go.example"}`},
		{"PATCH", "/api/v1/domains/go.example", `{"robots": ""}`},
		{"DELETE", "/api/v1/domains/go.example", ""},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		r := e.do(t, tc.method, tc.path, key, body)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("revoked key %s %s: %v; want 401 with WWW-Authenticate", tc.method, tc.path, r)
		}
	}
	for _, bad := range []string{"", "elk_nope", "not-a-key"} {
		if r := e.do(t, "GET", "/api/v1/links", bad, nil); r.status != http.StatusUnauthorized {
			t.Errorf("key %q: %v; want 401", bad, r)
		}
	}
	if links, domains := e.count(t, "links"), e.count(t, "domains"); links != 0 || domains != 1 {
		t.Fatalf("a revoked key wrote %d links and %d domains beside the platform's", links, domains-1)
	}
}

func TestLifecycle(t *testing.T) {
	e, key := newEnvWithTenant(t)
	r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://xn--bcher-kva.example/ä?q=1", "code": "spring_sale", "expires_at": "2090-05-01t10:00:00.123456+02:00"}`))
	created := r.json(t)
	if r.status != 201 || created["url"] != "https://xn--bcher-kva.example/%C3%A4?q=1" || created["url_original"] != "https://xn--bcher-kva.example/ä?q=1" ||
		created["expires_at"] != "2090-05-01T08:00:00.123456Z" || created["short_url"] != "https://sho.rt/spring_sale" || r.header.Get("Location") != "/api/v1/links/spring_sale" {
		t.Fatalf("create: %v", r)
	}
	idn := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://Bücher.example/"}`)).json(t)
	if idn["url"] != "https://xn--bcher-kva.example/" || len(idn["code"].(string)) != 6 {
		t.Fatalf("IDN create: %v", idn)
	}

	v0 := created["version"].(float64)
	steps := []struct {
		body  string
		check func(m map[string]any) bool
	}{
		{`{"url": "https://example.org/new"}`, func(m map[string]any) bool { return m["url"] == "https://example.org/new" }},
		{`{"redirect_type": 301}`, func(m map[string]any) bool { return m["redirect_type"] == float64(301) }},
		{`{"expires_at": null}`, func(m map[string]any) bool { return m["expires_at"] == nil }},
		{`{"status": "disabled"}`, func(m map[string]any) bool { return m["status"] == "disabled" }},
		{`{"status": "active", "expires_at": "2091-01-01T00:00:00Z"}`, func(m map[string]any) bool {
			return m["status"] == "active" && m["expires_at"] == "2091-01-01T00:00:00Z"
		}},
	}
	last := v0
	for _, s := range steps {
		r := e.do(t, "PATCH", "/api/v1/links/spring_sale", key, []byte(s.body))
		m := r.json(t)
		if r.status != 200 || !s.check(m) || m["version"].(float64) <= last || m["url"] == nil {
			t.Fatalf("patch %s: %v (previous version %v)", s.body, r, last)
		}
		last = m["version"].(float64)
	}
	for _, bad := range []struct{ body, detail string }{
		{`{}`, "nothing to change"},
		{`{"status": "deleted"}`, "status"},
		{`{"url": "javascript:alert(1)"}`, "scheme"},
		{`{"redirect_type": 200}`, "redirect_type"},
		{`{"expires_at": "2001-01-01T00:00:00Z"}`, "future"},
		{`{"expires_at": "2091-01-01T00:00:00.0000001Z"}`, "microseconds"},
		{`{"expires_at": 5}`, "expires_at must be a string or null, not a number"},
		{`{"code": "x"}`, `unknown field "code"`},
		{`{"Status": "active"}`, `unknown field "Status": field names are case-sensitive; did you mean "status"?`},
		{`{"status": "disabled", "status": "active"}`, `duplicate field "status"`},
		{`{"url": "https://a.example/", "url": "https://b.example/"}`, `duplicate field "url"`},
		{`{"url": null}`, "url must be a string, not null"},
		{`{"status": null}`, "status must be a string, not null"},
		{`{"redirect_type": null}`, "redirect_type must be an integer, not null"},
		{`{"status": "disabled"} {"status": "active"}`, "after the JSON object"},
		{`null`, "the body must be a JSON object, not null"},
	} {
		r := e.do(t, "PATCH", "/api/v1/links/spring_sale", key, []byte(bad.body))
		if detail := fmt.Sprint(r.json(t)["detail"]); r.status != 400 || !strings.Contains(detail, bad.detail) || goInternals(detail) != "" {
			t.Errorf("patch %s: %v; want 400 with detail containing %q", bad.body, r, bad.detail)
		}
	}
	if m := e.do(t, "GET", "/api/v1/links/spring_sale", key, nil).json(t); m["version"].(float64) != last {
		t.Fatalf("refused patches changed the link: %v, version was %v", m, last)
	}
	if r := e.do(t, "PATCH", "/api/v1/links/nope-nope", key, []byte(`{"status": "disabled"}`)); r.status != 404 {
		t.Errorf("patch unknown: %v", r)
	}
	if r := e.do(t, "DELETE", "/api/v1/links/spring_sale", key, nil); r.status != 204 {
		t.Fatalf("delete: %v", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/spring_sale", key, nil); r.status != 200 || r.json(t)["status"] != "deleted" {
		t.Fatalf("get deleted: %v", r)
	}
	if r := e.do(t, "DELETE", "/api/v1/links/spring_sale", key, nil); r.status != 204 {
		t.Errorf("delete again: %v; want 204", r)
	}
	if r := e.do(t, "PATCH", "/api/v1/links/spring_sale", key, []byte(`{"status": "active"}`)); r.status != http.StatusGone {
		t.Errorf("patch deleted: %v; want 410", r)
	}
	// A tombstone keeps its code for good.
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/", "code": "spring_sale"}`)); r.status != 409 {
		t.Errorf("reuse a deleted code: %v; want 409", r)
	}
	// Every mutation wrote one outbox row with the full new state; the
	// second delete wrote none.
	rows, err := e.pool.Query(t.Context(), `SELECT version, status, url, redirect_type FROM outbox WHERE code = 'spring_sale' ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var (
			v     int64
			st, u string
			rt    int16
		)
		if err := rows.Scan(&v, &st, &u, &rt); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %d", st, u, rt))
	}
	want := []string{
		"active https://xn--bcher-kva.example/%C3%A4?q=1 302",
		"active https://example.org/new 302",
		"active https://example.org/new 301",
		"active https://example.org/new 301",
		"disabled https://example.org/new 301",
		"active https://example.org/new 301",
		"deleted https://example.org/new 301",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outbox for the code:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestListPagination(t *testing.T) {
	e, key := newEnvWithTenant(t)
	var items []string
	for i := range 25 {
		items = append(items, fmt.Sprintf(`{"url": "https://example.com/%d"}`, i))
	}
	if r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [`+strings.Join(items, ",")+`]}`)); r.status != 200 {
		t.Fatalf("batch: %v", r)
	}
	var codes []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/api/v1/links?limit=10"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		m := e.do(t, "GET", path, key, nil).json(t)
		for _, l := range m["links"].([]any) {
			codes = append(codes, l.(map[string]any)["code"].(string))
		}
		if m["next_cursor"] == nil {
			break
		}
		cursor = m["next_cursor"].(string)
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if len(codes) != 25 || !slices.IsSortedFunc(codes, func(a, b string) int { return strings.Compare(b, a) }) || slices.Compact(slices.Clone(codes))[24] != codes[24] {
		t.Fatalf("paged through %d codes %v; want 25 distinct, newest first", len(codes), codes)
	}
	e.do(t, "PATCH", "/api/v1/links/"+codes[0], key, []byte(`{"status": "disabled"}`))
	e.do(t, "DELETE", "/api/v1/links/"+codes[1], key, nil)
	for q, want := range map[string]int{
		"?limit=200":                                    24,
		"?status=disabled":                              1,
		"?status=deleted":                               1,
		"?status=active&limit=200":                      23,
		"?namespace=default&limit=200":                  24,
		"?namespace=other":                              0,
		"?created_before=2000-01-01T00:00:00Z":          0,
		"?created_after=2000-01-01T00:00:00Z&limit=200": 24,
	} {
		if r := e.do(t, "GET", "/api/v1/links"+q, key, nil); r.status != 200 || len(r.json(t)["links"].([]any)) != want {
			t.Errorf("list %s: %v; want %d links", q, r, want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=201", "?limit=x", "?cursor=bogus", "?status=gone", "?sort=asc", "?created_after=yesterday"} {
		if r := e.do(t, "GET", "/api/v1/links"+q, key, nil); r.status != 400 {
			t.Errorf("list %s: %v; want 400", q, r)
		}
	}
}

func TestBatch(t *testing.T) {
	e, key := newEnvWithTenant(t)
	var items []string
	for i := range 1000 {
		switch {
		case i == 10:
			items = append(items, `{"url": "javascript:alert(1)"}`)
		case i == 20 || i == 21:
			items = append(items, `{"url": "https://example.com/dup", "code": "dup-code"}`)
		case i == 30:
			items = append(items, `{"url": "https://example.com/", "expires_at": "soon"}`)
		default:
			items = append(items, fmt.Sprintf(`{"url": "https://example.com/%d", "redirect_type": 308}`, i))
		}
	}
	body := []byte(`{"links": [` + strings.Join(items, ",") + `]}`)
	r := e.do(t, "POST", "/api/v1/links/batch", key, body, "Idempotency-Key", "import-1")
	var ba batchAnswer
	if err := json.Unmarshal(r.body, &ba); err != nil || r.status != 200 {
		t.Fatalf("batch: %v %v", r.status, err)
	}
	if ba.Created != 997 || ba.Failed != 3 || len(ba.Results) != 1000 {
		for _, it := range ba.Results {
			if it.Status != 201 {
				t.Logf("item %d: %+v", it.Index, it.Error)
			}
		}
		t.Fatalf("created %d, failed %d, %d results; want 997, 3, 1000", ba.Created, ba.Failed, len(ba.Results))
	}
	for i, want := range map[int]int{10: 400, 20: 201, 21: 409, 30: 400, 0: 201, 999: 201} {
		if ba.Results[i].Index != i || ba.Results[i].Status != want {
			t.Errorf("item %d: %+v; want status %d", i, ba.Results[i], want)
		}
	}
	if links, events := e.count(t, "links"), e.count(t, linkEvents); links != 997 || events != 997 {
		t.Fatalf("%d links, %d outbox rows; want 997 each", links, events)
	}
	again := e.do(t, "POST", "/api/v1/links/batch", key, body, "Idempotency-Key", "import-1")
	if again.status != 200 || !bytes.Equal(again.body, r.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed batch differs from the original (status %d, %d bytes vs %d)", again.status, len(again.body), len(r.body))
	}
	changed := bytes.Replace(body, []byte("example.com/999"), []byte("example.com/1000"), 1)
	if r := e.do(t, "POST", "/api/v1/links/batch", key, changed, "Idempotency-Key", "import-1"); r.status != http.StatusConflict {
		t.Errorf("changed batch with the same key: %v; want 409", r)
	}
	if links := e.count(t, "links"); links != 997 {
		t.Fatalf("%d links after replays; want 997", links)
	}
	for _, bad := range []struct{ body, detail string }{
		{`{"links": []}`, "1 to 1000"},
		{`{"links": [` + strings.Repeat(`{"url": "https://example.com/"},`, 1000) + `{"url": "https://example.com/"}]}`, "1 to 1000"},
		{`{"items": []}`, `unknown field "items"`},
		{`[]`, "the body must be a JSON object, not an array"},
		{`{"links": null}`, "links must be an array, not null"},
		{`{"links": [null]}`, "links[0] must be an object, not null"},
		{`{"Links": [{"url": "https://example.com/"}]}`, `did you mean "links"?`},
		{`{"links": [{"url": "https://example.com/"}], "links": [{"url": "https://example.com/x"}]}`, `duplicate field "links"`},
		{`{"links": [{"url": "https://example.com/"}, {"url": "https://a.example/", "URL": "https://b.example/"}]}`, `unknown field "URL" in links[1]`},
		{`{"links": [{"url": "https://example.com/"}, {"url": "https://example.com/", "code": 7}]}`, "links[1].code must be a string, not a number"},
		{`{"links": [{"url": "https://a.example/", "url": "https://b.example/"}]}`, `duplicate field "url" in links[0]`},
	} {
		r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(bad.body))
		if detail := fmt.Sprint(r.json(t)["detail"]); r.status != 400 || !strings.Contains(detail, bad.detail) || goInternals(detail) != "" {
			t.Errorf("batch %.60s: %v; want 400 with detail containing %q", bad.body, r, bad.detail)
		}
	}
	if links := e.count(t, "links"); links != 997 {
		t.Fatalf("%d links after refused batches; want 997", links)
	}
}

func TestRateLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e := newEnv(t, func(c *Config, _ *postgres.Store) {
		c.RatePerSecond, c.Burst = 0.5, 2
		c.Now = func() time.Time { return now }
	})
	alice, bob := e.tenant(t, "alice"), e.tenant(t, "bob")
	for i := range 2 {
		if r := e.do(t, "GET", "/api/v1/links", alice, nil); r.status != 200 {
			t.Fatalf("request %d within the burst: %v", i, r)
		}
	}
	r := e.do(t, "GET", "/api/v1/links", alice, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" {
		t.Fatalf("request past the burst: %v Retry-After %q; want 429, Retry-After 2", r, r.header.Get("Retry-After"))
	}
	if r := e.do(t, "GET", "/api/v1/links", bob, nil); r.status != 200 {
		t.Errorf("another tenant is limited too: %v", r)
	}
}

func TestProblemsForUnknownPathsAndMethods(t *testing.T) {
	e, key := newEnvWithTenant(t)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/nope", 404, ""},
		{"GET", "/api/v2/links", 404, ""},
		{"PUT", "/api/v1/links", 405, "POST, GET, HEAD"},
		{"POST", "/api/v1/links/abcd", 405, "GET, PATCH, DELETE, HEAD"},
		{"DELETE", "/livez", 405, "GET, HEAD"},
	} {
		r := e.do(t, tc.method, tc.path, key, nil)
		if r.status != tc.status || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %v Allow %q; want %d Allow %q", tc.method, tc.path, r, r.header.Get("Allow"), tc.status, tc.allow)
		}
	}
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/"}`), "Idempotency-Key", strings.Repeat("k", 256)); r.status != 400 {
		t.Errorf("256-byte idempotency key: %v; want 400", r)
	}
	for _, p := range []string{"/livez", "/readyz", "/startupz", "/api/v1/openapi.json"} {
		if r := e.do(t, "GET", p, "", nil); r.status != 200 {
			t.Errorf("GET %s: %v", p, r)
		}
	}
}

// TestRouteTableAndDocument: the reserved codes are the route table's own
// first segments, every route is in the OpenAPI document and the other way
// round, and the top-level namespace stays frozen: new endpoints go under
// /api, so no future route can shadow a code a creator holds today.
func TestRouteTableAndDocument(t *testing.T) {
	if want := []string{"api", "livez", "readyz", "startupz", "metrics"}; !slices.Equal(Routes, want) {
		t.Errorf("Routes = %v; want %v (a new top-level path shadows creators' codes: put it under /api)", Routes, want)
	}
	// Beside /api, control serves only the operational paths every
	// binary serves (the edge under /-/, where no code can be).
	for _, r := range Routes {
		if r != "api" && !slices.Contains(link.EdgeRoutes, "/-/"+r) {
			t.Errorf("top-level route %q is not one of link.EdgeRoutes %v under /-/", r, link.EdgeRoutes)
		}
	}
	doc := loadDoc(t)
	seen := map[string]bool{}
	for _, r := range routeTable {
		item := doc.Paths.Value(r.path)
		if item == nil || item.GetOperation(r.method) == nil {
			t.Errorf("%s %s is served but not in openapi.json", r.method, r.path)
		}
		seen[r.method+" "+r.path] = true
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !seen[method+" "+path] {
				t.Errorf("openapi.json documents %s %s, which is not served", method, path)
			}
		}
	}
}
