package api

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/postgres"
)

// offsetClock is a test's API clock: the real time moved by an offset the
// test sets, safe to read from the server's goroutines.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *offsetClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func withClock(c *offsetClock) envOption {
	return func(cfg *Config, _ *postgres.Store) { cfg.Now = c.now }
}

// TestEffectiveState: the API reports a link past its expiry as expired, as
// every edge answers it (410), in get, list, update and create answers, and
// the list filters on that state with a pagination that stays exact.
func TestEffectiveState(t *testing.T) {
	var clk offsetClock
	e := newEnv(t, withClock(&clk))
	key := e.tenant(t, "acme")
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	create := func(code, extra string) resp {
		t.Helper()
		r := e.do(t, "POST", "/api/v1/links", key, []byte(fmt.Sprintf(`{"url": "https://example.com/%s", "code": %q%s}`, code, code, extra)), "Idempotency-Key", "create-"+code)
		if r.status != 201 {
			t.Fatalf("create %s: %v", code, r)
		}
		return r
	}
	create("never", "")
	soonCreated := create("soon", `, "expires_at": "`+soon+`"`)
	if m := soonCreated.json(t); m["status"] != "active" {
		t.Fatalf("a fresh link with an expiry in an hour answers status %v; want active", m["status"])
	}
	create("soon-off", `, "expires_at": "`+soon+`"`)
	create("soon-gone", `, "expires_at": "`+soon+`"`)
	e.do(t, "PATCH", "/api/v1/links/soon-off", key, []byte(`{"status": "disabled"}`))
	e.do(t, "DELETE", "/api/v1/links/soon-gone", key, nil)

	list := func(q string) []string {
		t.Helper()
		r := e.do(t, "GET", "/api/v1/links"+q, key, nil)
		if r.status != 200 {
			t.Fatalf("list %s: %v", q, r)
		}
		var codes []string
		for _, l := range r.json(t)["links"].([]any) {
			m := l.(map[string]any)
			codes = append(codes, fmt.Sprintf("%s:%s", m["code"], m["status"]))
		}
		slices.Sort(codes)
		return codes
	}
	before := map[string][]string{
		"":                 {"never:active", "soon-off:disabled", "soon:active"},
		"?status=active":   {"never:active", "soon:active"},
		"?status=expired":  nil,
		"?status=disabled": {"soon-off:disabled"},
		"?status=deleted":  {"soon-gone:deleted"},
	}
	for q, want := range before {
		if got := list(q); !slices.Equal(got, want) {
			t.Errorf("before the expiry, list %q = %v; want %v", q, got, want)
		}
	}

	clk.advance(2 * time.Hour)
	if r := e.do(t, "GET", "/api/v1/links/soon", key, nil); r.status != 200 || r.json(t)["status"] != "expired" {
		t.Errorf("get after the expiry: %v; want status expired", r)
	}
	after := map[string][]string{
		"":                 {"never:active", "soon-off:disabled", "soon:expired"},
		"?status=active":   {"never:active"},
		"?status=expired":  {"soon:expired"},
		"?status=disabled": {"soon-off:disabled"},
		"?status=deleted":  {"soon-gone:deleted"},
	}
	for q, want := range after {
		if got := list(q); !slices.Equal(got, want) {
			t.Errorf("after the expiry, list %q = %v; want %v", q, got, want)
		}
	}
	// An update answers the state it leaves: still expired, until the
	// expiry is lifted.
	if r := e.do(t, "PATCH", "/api/v1/links/soon", key, []byte(`{"redirect_type": 301}`)); r.status != 200 || r.json(t)["status"] != "expired" {
		t.Errorf("patch of an expired link: %v; want status expired", r)
	}
	if r := e.do(t, "PATCH", "/api/v1/links/soon", key, []byte(`{"expires_at": null}`)); r.status != 200 || r.json(t)["status"] != "active" {
		t.Errorf("patch lifting the expiry: %v; want status active", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/soon-off", key, nil); r.json(t)["status"] != "disabled" {
		t.Errorf("disabled and past its expiry: %v; want status disabled", r)
	}
	// A create answers the state the link was created in, so its replay is
	// the original answer byte for byte, though the link has expired since.
	e.do(t, "PATCH", "/api/v1/links/soon", key, []byte(`{"expires_at": "`+soon+`"}`))
	if r := e.do(t, "GET", "/api/v1/links/soon", key, nil); r.json(t)["status"] != "expired" {
		t.Fatalf("get after the expiry was set back: %v; want status expired", r)
	}
	again := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/soon", "code": "soon", "expires_at": "`+soon+`"}`), "Idempotency-Key", "create-soon")
	if again.status != 201 || !bytes.Equal(again.body, soonCreated.body) {
		t.Errorf("replayed create answered %v; want the original %v", again, soonCreated)
	}
}

// TestListPaginationWithState pages through the links of one effective
// state: every link of that state once, none of another.
func TestListPaginationWithState(t *testing.T) {
	var clk offsetClock
	e := newEnv(t, withClock(&clk))
	key := e.tenant(t, "acme")
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var items []string
	want := map[string][]string{}
	for i := range 30 {
		code := fmt.Sprintf("link-%02d", i)
		if i%3 == 0 {
			items = append(items, fmt.Sprintf(`{"url": "https://example.com/%d", "code": %q, "expires_at": %q}`, i, code, soon))
			want["expired"] = append(want["expired"], code)
		} else {
			items = append(items, fmt.Sprintf(`{"url": "https://example.com/%d", "code": %q}`, i, code))
			want["active"] = append(want["active"], code)
		}
	}
	if r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [`+strings.Join(items, ",")+`]}`)); r.status != 200 || !strings.Contains(string(r.body), `"failed":0`) {
		t.Fatalf("batch: %v", r)
	}
	clk.advance(2 * time.Hour)
	for status, codes := range want {
		for _, limit := range []int{1, 3, 7, 200} {
			var got []string
			cursor := ""
			for page := 0; ; page++ {
				path := fmt.Sprintf("/api/v1/links?status=%s&limit=%d", status, limit)
				if cursor != "" {
					path += "&cursor=" + cursor
				}
				r := e.do(t, "GET", path, key, nil)
				if r.status != 200 {
					t.Fatalf("list %s: %v", path, r)
				}
				m := r.json(t)
				for _, l := range m["links"].([]any) {
					l := l.(map[string]any)
					if l["status"] != status {
						t.Errorf("list %s: link %v has status %v", path, l["code"], l["status"])
					}
					got = append(got, l["code"].(string))
				}
				if m["next_cursor"] == nil {
					break
				}
				cursor = m["next_cursor"].(string)
				if page > 30 {
					t.Fatalf("list %s does not end", path)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, codes) {
				t.Errorf("status=%s, %d a page: %v; want %v", status, limit, got, codes)
			}
		}
	}
}

// TestTimesAsRFC3339Allows: every form RFC 3339 allows is a time, stored
// to the microsecond, and read back in UTC.
func TestTimesAsRFC3339Allows(t *testing.T) {
	e, key := newEnvWithTenant(t)
	for i, tc := range []struct{ in, want string }{
		{"2090-01-02T03:04:05Z", "2090-01-02T03:04:05Z"},
		{"2090-01-02t03:04:05z", "2090-01-02T03:04:05Z"},
		{"2090-01-02T03:04:05.5+05:30", "2090-01-01T21:34:05.5Z"},
		{"2090-01-02T03:04:05.123456-00:00", "2090-01-02T03:04:05.123456Z"},
		{"2090-01-02T03:04:05.123456000Z", "2090-01-02T03:04:05.123456Z"},
		{"2090-12-31T23:59:60Z", "2091-01-01T00:00:00Z"},
		{"2090-12-31T15:59:60-08:00", "2091-01-01T00:00:00Z"},
	} {
		r := e.do(t, "POST", "/api/v1/links", key, []byte(fmt.Sprintf(`{"url": "https://example.com/", "expires_at": %q}`, tc.in)))
		if r.status != 201 || r.json(t)["expires_at"] != tc.want {
			t.Errorf("create with expires_at %s: %v; want expires_at %s", tc.in, r, tc.want)
			continue
		}
		code := r.json(t)["code"].(string)
		p := e.do(t, "PATCH", "/api/v1/links/"+code, key, []byte(fmt.Sprintf(`{"expires_at": %q}`, tc.in)))
		if p.status != 200 || p.json(t)["expires_at"] != tc.want {
			t.Errorf("patch with expires_at %s: %v; want expires_at %s", tc.in, p, tc.want)
		}
		if l := e.do(t, "GET", "/api/v1/links?created_after="+url.QueryEscape(strings.Replace(tc.in, "2090", "2000", 1)), key, nil); l.status != 200 || len(l.json(t)["links"].([]any)) != i+1 {
			t.Errorf("list created_after %s: %v; want %d links", tc.in, l, i+1)
		}
	}
	for _, bad := range []string{"2000-01-01T00:00:00.0000005Z", "2000-01-01 00:00:00Z", "2000-01-01T00:00:00", "2000-01-01"} {
		if r := e.do(t, "GET", "/api/v1/links?created_before="+url.QueryEscape(bad), key, nil); r.status != 400 || !strings.Contains(fmt.Sprint(r.json(t)["detail"]), "created_before") {
			t.Errorf("list created_before=%s: %v; want 400 naming created_before", bad, r)
		}
	}
}

// TestIdempotencyKeyIsPrintableASCII: a key may hold spaces (it is any
// printable ASCII), and works as any other.
func TestIdempotencyKeyIsPrintableASCII(t *testing.T) {
	e, key := newEnvWithTenant(t)
	body := []byte(`{"url": "https://example.com/"}`)
	for _, k := range []string{"order 42", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "~!@#$%^&*()_+`-={}[]|\\:;'<>?,./"} {
		first := e.do(t, "POST", "/api/v1/links", key, body, "Idempotency-Key", k)
		again := e.do(t, "POST", "/api/v1/links", key, body, "Idempotency-Key", k)
		if first.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.body, again.body) {
			t.Errorf("key %q: %v then %v; want 201 and its replay", k, first, again)
		}
	}
	if n := e.count(t, "links"); n != 3 {
		t.Errorf("%d links for three keys; want 3", n)
	}
}

// TestGzipBodies: a creator may compress a body with gzip.
func TestGzipBodies(t *testing.T) {
	e, key := newEnvWithTenant(t)
	r := e.do(t, "POST", "/api/v1/links", key, []byte(gzipped(t, `{"url": "https://example.com/zipped"}`)), "Content-Encoding", "gzip")
	if r.status != 201 || r.json(t)["url"] != "https://example.com/zipped" {
		t.Fatalf("gzip create: %v", r)
	}
	var items []string
	for i := range 1000 {
		items = append(items, fmt.Sprintf(`{"url": "https://example.com/%d?utm_source=newsletter&utm_medium=email&utm_campaign=spring"}`, i))
	}
	body := `{"links": [` + strings.Join(items, ",") + `]}`
	zipped := gzipped(t, body)
	r = e.do(t, "POST", "/api/v1/links/batch", key, []byte(zipped), "Content-Encoding", "GZIP")
	if r.status != 200 || !strings.Contains(string(r.body), `"created":1000`) {
		t.Fatalf("gzip batch of %d bytes (%d compressed): %.200v", len(body), len(zipped), r)
	}
	code := r.json(t)["results"].([]any)[0].(map[string]any)["link"].(map[string]any)["code"].(string)
	if r := e.do(t, "PATCH", "/api/v1/links/"+code, key, []byte(gzipped(t, `{"status": "disabled"}`)), "Content-Encoding", "x-gzip", "Content-Type", "application/merge-patch+json"); r.status != 200 || r.json(t)["status"] != "disabled" {
		t.Fatalf("gzip patch: %v", r)
	}
	if r := e.do(t, "PATCH", "/api/v1/links/"+code, key, []byte(`{"status": "active"}`), "Content-Encoding", "identity", "Content-Type", "application/json; charset=UTF-8"); r.status != 200 {
		t.Fatalf("identity patch: %v", r)
	}
	if n := e.count(t, "links"); n != 1001 {
		t.Fatalf("%d links; want 1001", n)
	}
	if r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(gzipped(t, body+strings.Repeat(" ", MaxBatchBodyBytes))), "Content-Encoding", "gzip"); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("gzip batch over the limit once decoded: %v; want 413", r)
	}
}
