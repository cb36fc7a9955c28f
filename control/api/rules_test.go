package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/shared/passhash"
)

func wireOf(t *testing.T, r resp) apiwire.Link {
	t.Helper()
	var l apiwire.Link
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("%v is not a link: %v", r, err)
	}
	return l
}

func ptrTo[T any](v T) *T { return &v }

// TestLinkExtras: rules, a password and a click limit go in with a create,
// come back normalized (never the password), are read back by GET and the
// list, and a patch replaces and clears each on its own. The stored hash
// is argon2id and verifies the password; nothing the API stores for a
// replay holds the password or its hash.
func TestLinkExtras(t *testing.T) {
	e, key := newEnvWithTenant(t)
	const password = "correct horse battery"
	body := `{"url": "https://example.com/app", "max_clicks": 1000, "password": "` + password + `", "rules": [
		{"url": "HTTPS://Apps.Apple.com/app/id1", "device": ["iOS"]},
		{"url": "https://example.com/eu", "country": ["fr", "DE"], "language": ["DE", "fr"], "device": ["desktop", "android"]},
		{"url": "https://example.com/qr", "query": [{"param": "ref", "equals": "qr code"}, {"param": "beta"}]}
	]}`
	r := e.do(t, "POST", "/api/v1/links", key, []byte(body), "Idempotency-Key", "extras-1")
	if r.status != http.StatusCreated {
		t.Fatalf("create: %v", r)
	}
	want := []apiwire.Rule{
		{URL: "https://apps.apple.com/app/id1", Device: []string{"ios"}},
		{URL: "https://example.com/eu", Device: []string{"android", "desktop"}, Country: []string{"DE", "FR"}, Language: []string{"de", "fr"}},
		{URL: "https://example.com/qr", Query: []apiwire.QueryCondition{{Param: "ref", Equals: ptrTo("qr code")}, {Param: "beta"}}},
	}
	created := wireOf(t, r)
	if diff := cmp.Diff(want, created.Rules); diff != "" {
		t.Errorf("created rules (-want +got):\n%s", diff)
	}
	if !created.PasswordProtected || created.MaxClicks == nil || *created.MaxClicks != 1000 {
		t.Errorf("created: protected %v, max_clicks %v", created.PasswordProtected, created.MaxClicks)
	}
	if strings.Contains(string(r.body), password) || strings.Contains(string(r.body), "argon2") {
		t.Fatalf("the answer holds the password or its hash: %s", r.body)
	}
	// The same request again is the same answer; other rules with the key
	// are another request.
	if again := e.do(t, "POST", "/api/v1/links", key, []byte(body), "Idempotency-Key", "extras-1"); again.status != http.StatusCreated ||
		string(again.body) != string(r.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %v (replayed %q)", again, again.header.Get("Idempotent-Replayed"))
	}
	other := strings.Replace(body, `"fr", "DE"`, `"fr", "IT"`, 1)
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(other), "Idempotency-Key", "extras-1"); r.status != http.StatusConflict {
		t.Errorf("the key with other rules: %v; want 409", r)
	}

	var hash string
	if err := e.pool.QueryRow(context.Background(), `SELECT password_hash FROM links WHERE code = $1`, created.Code).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if ok, err := passhash.Verify(hash, []byte(password)); !ok || err != nil {
		t.Fatalf("the stored hash %q does not verify the password: %v, %v", hash, ok, err)
	}
	var leaks int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE convert_from(response, 'UTF8') LIKE '%' || $1 || '%' OR convert_from(response, 'UTF8') LIKE '%argon2id%'`,
		password).Scan(&leaks); err != nil {
		t.Fatal(err)
	}
	if leaks != 0 {
		t.Error("a stored answer holds the password or its hash")
	}

	got := wireOf(t, e.do(t, "GET", "/api/v1/links/"+created.Code, key, nil))
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("GET differs from the create's answer (-create +get):\n%s", diff)
	}
	var page apiwire.Link
	list := e.do(t, "GET", "/api/v1/links", key, nil)
	var lp struct{ Links []apiwire.Link }
	if err := json.Unmarshal(list.body, &lp); err != nil || len(lp.Links) != 1 {
		t.Fatalf("list: %v", list)
	}
	page = lp.Links[0]
	if diff := cmp.Diff(created, page); diff != "" {
		t.Errorf("the list differs from the create's answer (-create +list):\n%s", diff)
	}

	patch := func(body string) apiwire.Link {
		t.Helper()
		r := e.do(t, "PATCH", "/api/v1/links/"+created.Code, key, []byte(body))
		if r.status != http.StatusOK {
			t.Fatalf("PATCH %s: %v", body, r)
		}
		return wireOf(t, r)
	}
	l := patch(`{"rules": [{"url": "https://example.com/de", "country": ["de"]}]}`)
	if len(l.Rules) != 1 || l.Rules[0].Country[0] != "DE" || !l.PasswordProtected || *l.MaxClicks != 1000 {
		t.Errorf("after replacing the rules: %+v", l)
	}
	patch(`{"password": "another secret"}`)
	if err := e.pool.QueryRow(context.Background(), `SELECT password_hash FROM links WHERE code = $1`, created.Code).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if ok, _ := passhash.Verify(hash, []byte("another secret")); !ok {
		t.Error("the new password does not verify")
	}
	l = patch(`{"max_clicks": null}`)
	if l.MaxClicks != nil || !l.PasswordProtected || len(l.Rules) != 1 {
		t.Errorf("after clearing the limit: %+v", l)
	}
	l = patch(`{"password": null, "rules": []}`)
	if l.PasswordProtected || len(l.Rules) != 0 || l.Rules == nil {
		t.Errorf("after clearing password and rules: %+v", l)
	}
	l = patch(`{"rules": [{"url": "https://example.com/a", "device": ["android"]}], "max_clicks": 3}`)
	if len(l.Rules) != 1 || *l.MaxClicks != 3 {
		t.Errorf("after setting rules and a limit: %+v", l)
	}
	l = patch(`{"rules": null}`)
	if len(l.Rules) != 0 || *l.MaxClicks != 3 {
		t.Errorf("after rules null: %+v", l)
	}
	// A plain link answers empty rules, no password, no limit.
	r = e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/plain"}`))
	if p := wireOf(t, r); r.status != http.StatusCreated || p.Rules == nil || len(p.Rules) != 0 || p.PasswordProtected || p.MaxClicks != nil ||
		!strings.Contains(string(r.body), `"rules":[],"password_protected":false,"max_clicks":null`) {
		t.Errorf("a plain link: %v", r)
	}
}

// TestLinkExtrasRefused: malformed, oversized and hostile rules, passwords
// and limits are refused with problem+json naming the rule and the field,
// and write nothing.
func TestLinkExtrasRefused(t *testing.T) {
	e, key := newEnvWithTenant(t)
	rule := func(r string) string { return `{"url": "https://example.com/", "rules": [` + r + `]}` }
	manyRules := strings.Repeat(`{"url": "https://example.com/", "device": ["ios"]},`, 10_000)
	for _, tc := range []struct {
		name, body string
		status     int
		detail     string
	}{
		{"javascript target", rule(`{"url": "javascript:alert(1)", "device": ["ios"]}`), 400, "rules[0].url: scheme must be http or https"},
		{"CRLF target", rule(`{"url": "https://example.com/\r\nSet-Cookie: a=b", "device": ["ios"]}`), 400, "rules[0].url: "},
		{"data target", rule(`{"url": "data:text/html;base64,PHNjcmlwdD4=", "device": ["ios"]}`), 400, "rules[0].url: "},
		{"blocked target", rule(`{"url": "https://a.evil.example/", "device": ["ios"]}`), 400, "rules[0].url: "},
		{"no target", rule(`{"device": ["ios"]}`), 400, "rules[0].url: is required"},
		{"no condition", rule(`{"url": "https://example.com/x"}`), 400, "rules[0]: a rule needs at least one condition"},
		{"unknown device", rule(`{"url": "https://example.com/x"}, {"url": "https://example.com/x", "device": ["ios", "tv"]}`), 400, `rules[1].device[1]: unknown device "tv"`},
		{"device as a string", rule(`{"url": "https://example.com/x", "device": "ios"}`), 400, "rules[0].device must be an array, not a string"},
		{"null device", rule(`{"url": "https://example.com/x", "device": [null]}`), 400, "rules[0].device[0] must be a string, not null"},
		{"UK", rule(`{"url": "https://example.com/x", "country": ["uk"]}`), 400, "the United Kingdom is GB"},
		{"non-ASCII language", rule(`{"url": "https://example.com/x", "language": ["日本"]}`), 400, "rules[0].language[0]:"},
		{"language tag", rule(`{"url": "https://example.com/x", "language": ["en-US"]}`), 400, "rules[0].language[0]:"},
		{"unknown rule field", rule(`{"url": "https://example.com/x", "devices": ["ios"]}`), 400, `unknown field "devices" in rules[0]`},
		{"duplicate key", rule(`{"url": "https://example.com/x", "url": "https://example.com/y", "device": ["ios"]}`), 400, `duplicate field "url" in rules[0]`},
		{"query without name", rule(`{"url": "https://example.com/x", "query": [{"equals": "1"}]}`), 400, "rules[0].query[0].param: is required"},
		{"CRLF query name", rule(`{"url": "https://example.com/x", "query": [{"param": "a\r\nb"}]}`), 400, "rules[0].query[0].param: holds the control character"},
		{"17 rules", `{"url": "https://example.com/", "rules": [` + strings.TrimSuffix(strings.Repeat(`{"url": "https://example.com/", "device": ["ios"]},`, 17), ",") + `]}`, 400, "17 rules, at most 16"},
		{"10k rules", `{"url": "https://example.com/", "rules": [` + strings.TrimSuffix(manyRules, ",") + `]}`, 413, "larger than"},
		{"rules not an array", `{"url": "https://example.com/", "rules": {"url": "x"}}`, 400, "rules must be an array"},
		{"short password", `{"url": "https://example.com/", "password": "12345"}`, 400, "at least 6 characters"},
		{"empty password", `{"url": "https://example.com/", "password": ""}`, 400, "password is empty"},
		{"null password", `{"url": "https://example.com/", "password": null}`, 400, "password must be a string, not null"},
		{"password with NUL", `{"url": "https://example.com/", "password": "abc\u0000def"}`, 400, "control character"},
		{"long password", `{"url": "https://example.com/", "password": "` + strings.Repeat("p", 129) + `"}`, 400, "at most 128 bytes"},
		{"zero limit", `{"url": "https://example.com/", "max_clicks": 0}`, 400, "max_clicks must be at least 1"},
		{"negative limit", `{"url": "https://example.com/", "max_clicks": -5}`, 400, "max_clicks must be at least 1"},
		{"limit past 2^53", `{"url": "https://example.com/", "max_clicks": 9007199254740992}`, 400, "max_clicks must be 1 to 9007199254740991"},
		{"fractional limit", `{"url": "https://example.com/", "max_clicks": 1.5}`, 400, "max_clicks must be an integer"},
		{"limit as a string", `{"url": "https://example.com/", "max_clicks": "10"}`, 400, "max_clicks must be an integer, not a string"},
	} {
		r := e.do(t, "POST", "/api/v1/links", key, []byte(tc.body))
		if r.status != tc.status {
			t.Errorf("%s: %v; want %d", tc.name, r, tc.status)
			continue
		}
		var p apiwire.Problem
		if err := json.Unmarshal(r.body, &p); err != nil || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: detail %q does not say %q", tc.name, p.Detail, tc.detail)
		}
		if strings.Contains(p.Detail, "abc") || strings.Contains(p.Detail, "12345") {
			t.Errorf("%s: the detail %q holds the password", tc.name, p.Detail)
		}
	}
	if n := e.count(t, linkEvents); n != 0 {
		t.Errorf("%d link events after refused creates; want none", n)
	}
	// Patches, on a link that exists.
	r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/p", "max_clicks": 5}`))
	code := wireOf(t, r).Code
	for _, tc := range []struct{ body, detail string }{
		{`{"password": ""}`, "send null to remove the password"},
		{`{"max_clicks": 0}`, "send null to remove the limit"},
		{`{"rules": [{"url": "javascript:x", "device": ["ios"]}]}`, "rules[0].url:"},
		{`{"rules": {}}`, "rules must be an array or null"},
		{`{"rules": [{"url": "https://example.com/x", "language": ["zz"]}]}`, `rules[0].language[0]: "zz" is not an ISO 639-1`},
	} {
		r := e.do(t, "PATCH", "/api/v1/links/"+code, key, []byte(tc.body))
		var p apiwire.Problem
		if err := json.Unmarshal(r.body, &p); r.status != http.StatusBadRequest || err != nil || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("PATCH %s: %v; want 400 saying %q", tc.body, r, tc.detail)
		}
	}
	if got := wireOf(t, e.do(t, "GET", "/api/v1/links/"+code, key, nil)); got.MaxClicks == nil || *got.MaxClicks != 5 || got.Version != wireOf(t, r).Version {
		t.Errorf("refused patches changed the link: %+v", got)
	}
}

// TestBatchExtras: a batch carries rules, passwords and limits per item;
// an item's bad rule fails that item alone, naming it; a batch of more
// than MaxBatchPasswords passwords is refused whole.
func TestBatchExtras(t *testing.T) {
	e, key := newEnvWithTenant(t)
	body := `{"links": [
		{"url": "https://example.com/1", "rules": [{"url": "https://example.com/ios", "device": ["ios"]}], "max_clicks": 7},
		{"url": "https://example.com/2", "rules": [{"url": "ftp://example.com/", "device": ["ios"]}]},
		{"url": "https://example.com/3", "password": "batch secret"}
	]}`
	r := e.do(t, "POST", "/api/v1/links/batch", key, []byte(body))
	var a struct {
		Created, Failed int
		Results         []apiwire.BatchResult
	}
	if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK {
		t.Fatalf("batch: %v", r)
	}
	if a.Created != 2 || a.Failed != 1 || a.Results[1].Error == nil || !strings.Contains(a.Results[1].Error.Detail, "rules[0].url:") {
		t.Fatalf("batch results: %+v", a)
	}
	if l := a.Results[0].Link; len(l.Rules) != 1 || *l.MaxClicks != 7 || l.PasswordProtected {
		t.Errorf("item 0: %+v", l)
	}
	if l := a.Results[2].Link; !l.PasswordProtected || len(l.Rules) != 0 {
		t.Errorf("item 2: %+v", l)
	}
	// Rules over the bound in one item of a batch (whose body may be
	// larger than a create's): that item fails, naming the count.
	many := `{"url": "https://example.com/m", "rules": [` + strings.TrimSuffix(strings.Repeat(`{"url": "https://example.com/", "device": ["ios"]},`, 10_000), ",") + `]}`
	r = e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [`+many+`, {"url": "https://example.com/ok"}]}`))
	if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK || a.Created != 1 || !strings.Contains(a.Results[0].Error.Detail, "10000 rules, at most 16") {
		t.Errorf("a batch item of 10,000 rules: %v", r)
	}
	var items []string
	for i := range 101 {
		items = append(items, fmt.Sprintf(`{"url": "https://example.com/%d", "password": "pw-%06d"}`, i, i))
	}
	r = e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [`+strings.Join(items, ",")+`]}`))
	var p apiwire.Problem
	if err := json.Unmarshal(r.body, &p); r.status != http.StatusBadRequest || err != nil || !strings.Contains(p.Detail, "101 links set a password, at most 100") {
		t.Errorf("a batch of 101 passwords: %v", r)
	}
}
