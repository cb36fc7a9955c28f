package api

import (
	"bytes"
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
	if links, events := e.count(t, "links"), e.count(t, "outbox"); links != 1 || events != 1 {
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
// problem, and neither links, their change events nor idempotency keys are
// written.
func TestHostileInputsWriteNothing(t *testing.T) {
	e, key := newEnvWithTenant(t)
	big := strings.Repeat("a", 100<<10)
	cases := []struct {
		name   string
		body   string
		status int
		detail string
	}{
		{"javascript url", `{"url": "javascript:alert(1)"}`, 400, "scheme"},
		{"javascript url with host", `{"url": "javascript://example.com/%0Aalert(1)"}`, 400, "scheme"},
		{"data url", `{"url": "data:text/html;base64,PHNjcmlwdD4="}`, 400, "scheme"},
		{"CR LF", `{"url": "https://example.com/\r\nSet-Cookie: a=b"}`, 400, "control character"},
		{"bare LF", `{"url": "https://example.com/\nx"}`, 400, "control character"},
		{"100 KB url", `{"url": "https://example.com/` + big + `"}`, 413, "larger than"},
		{"5 KB url", `{"url": "https://example.com/` + strings.Repeat("a", 5000) + `"}`, 400, "4096"},
		{"credentials", `{"url": "https://user:pass@example.com/"}`, 400, "credentials"},
		{"username only", `{"url": "https://user@example.com/"}`, 400, "credentials"},
		{"blocked domain", `{"url": "https://evil.example/x"}`, 400, "blocked"},
		{"blocked subdomain, upper case", `{"url": "https://WWW.Evil.Example./x"}`, 400, "blocked"},
		{"relative url", `{"url": "/just/a/path"}`, 400, "scheme"},
		{"no host", `{"url": "https:///path"}`, 400, "absolute"},
		{"ftp", `{"url": "ftp://example.com/"}`, 400, "scheme"},
		{"reserved code: control route", `{"url": "https://example.com/", "code": "api"}`, 400, ""},
		{"reserved code: edge route", `{"url": "https://example.com/", "code": "livez"}`, 400, "reserved"},
		{"reserved code: policy, other case", `{"url": "https://example.com/", "code": "Login"}`, 400, "reserved"},
		{"generated-shape code", `{"url": "https://example.com/", "code": "abc123"}`, 400, "generated"},
		{"code of zeros", `{"url": "https://example.com/", "code": "000000"}`, 400, "generated"},
		{"code with slash", `{"url": "https://example.com/", "code": "a/b/c"}`, 400, "characters"},
		{"code too short", `{"url": "https://example.com/", "code": "ab"}`, 400, "characters"},
		{"code too long", `{"url": "https://example.com/", "code": "` + strings.Repeat("x", 33) + `"}`, 400, "characters"},
		{"code with unicode", `{"url": "https://example.com/", "code": "cafés"}`, 400, "characters"},
		{"bad redirect type", `{"url": "https://example.com/", "redirect_type": 303}`, 400, "redirect_type"},
		{"expiry in the past", `{"url": "https://example.com/", "expires_at": "2001-01-01T00:00:00Z"}`, 400, "future"},
		{"expiry not RFC 3339", `{"url": "https://example.com/", "expires_at": "tomorrow"}`, 400, "RFC 3339"},
		{"unknown namespace", `{"url": "https://example.com/", "namespace": "other"}`, 400, "namespace"},
		{"10 MB body", `{"url": "https://example.com/", "code": "` + strings.Repeat("x", 10<<20) + `"}`, 413, "larger than"},
		{"bad JSON", `{"url": "https://example.com/"`, 400, "malformed JSON"},
		{"two objects", `{"url": "https://example.com/"} {}`, 400, "after the object"},
		{"unknown field", `{"url": "https://example.com/", "owner": "me"}`, 400, "unknown field"},
		{"url not a string", `{"url": 5}`, 400, "malformed JSON"},
		{"no url", `{}`, 400, "url is required"},
		{"empty body", ``, 400, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/api/v1/links", key, []byte(tc.body), "Idempotency-Key", "k-"+strings.ReplaceAll(tc.name, " ", "-"))
			p := r.json(t)
			if r.status != tc.status || p["status"] != float64(tc.status) || !strings.Contains(fmt.Sprint(p["detail"]), tc.detail) || p["request_id"] == "" {
				t.Errorf("answered %d %v; want %d problem with detail containing %q", r.status, p, tc.status, tc.detail)
			}
		})
	}
	// The same hostile items inside a batch fail one by one.
	var items []string
	for _, tc := range cases {
		if tc.status == 400 && strings.HasPrefix(tc.body, `{"url": "`) && !strings.Contains(tc.body, `"owner"`) && !strings.Contains(tc.name, "JSON") && !strings.Contains(tc.name, "objects") && !strings.Contains(tc.name, "RFC") {
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
		}
	}
	if links, events := e.count(t, "links"), e.count(t, "outbox"); links != 0 || events != 0 {
		t.Fatalf("hostile input wrote %d links and %d outbox rows; want none", links, events)
	}
	// A batch of only refused items keeps its answer under its key, and
	// nothing else.
	if keys := e.count(t, "idempotency_keys"); keys != 1 {
		t.Fatalf("%d idempotency keys; want only the batch's", keys)
	}
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
	e, key := newEnvWithTenant(t)
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
	if links := e.count(t, "links"); links != 0 {
		t.Fatalf("a revoked key wrote %d links", links)
	}
}

func TestLifecycle(t *testing.T) {
	e, key := newEnvWithTenant(t)
	r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://xn--bcher-kva.example/ä?q=1", "code": "spring_sale", "expires_at": "2090-05-01T10:00:00.123456789+02:00"}`))
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
	for _, bad := range []string{`{}`, `{"status": "deleted"}`, `{"url": "javascript:alert(1)"}`, `{"redirect_type": 200}`, `{"expires_at": "2001-01-01T00:00:00Z"}`, `{"code": "x"}`} {
		if r := e.do(t, "PATCH", "/api/v1/links/spring_sale", key, []byte(bad)); r.status != 400 {
			t.Errorf("patch %s: %v; want 400", bad, r)
		}
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
	if links, events := e.count(t, "links"), e.count(t, "outbox"); links != 997 || events != 997 {
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
	for _, bad := range []string{`{"links": []}`, `{"links": [` + strings.Repeat(`{"url": "https://example.com/"},`, 1000) + `{"url": "https://example.com/"}]}`, `{"items": []}`, `[]`} {
		if r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(bad)); r.status != 400 {
			t.Errorf("batch %.40s: %v; want 400", bad, r)
		}
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
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/"}`), "Content-Type", "text/plain"); r.status != 415 {
		t.Errorf("text/plain body: %v; want 415", r)
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
