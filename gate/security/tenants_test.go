package security

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/api"
)

// operation is one documented operation of the control API.
type operation struct {
	method, path string
	authed       bool // needs a bearer key
	hasBody      bool
}

func (o operation) String() string { return o.method + " " + o.path }

// operations reads every operation from the OpenAPI document control
// serves (api's own test keeps the document and the route table equal),
// so an endpoint added later is covered here without editing this file.
func operations(t *testing.T) []operation {
	t.Helper()
	var doc struct {
		Security []map[string][]string `json:"security"`
		Paths    map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var ops []operation
	for path, item := range doc.Paths {
		for method, raw := range item {
			m := strings.ToUpper(method)
			if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, m) {
				continue // parameters, summary, …
			}
			var op struct {
				Security    *[]map[string][]string `json:"security"`
				RequestBody json.RawMessage        `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			sec := doc.Security
			if op.Security != nil {
				sec = *op.Security
			}
			ops = append(ops, operation{method: m, path: path, authed: len(sec) > 0, hasBody: len(op.RequestBody) > 0})
		}
	}
	// Deletes last, so the other operations still find the link.
	slices.SortFunc(ops, func(a, b operation) int {
		if (a.method == "DELETE") != (b.method == "DELETE") {
			if a.method == "DELETE" {
				return 1
			}
			return -1
		}
		return strings.Compare(a.String(), b.String())
	})
	return ops
}

// request fills op's path parameters ({code} with code, any other with
// "1") and gives it a body that would succeed for the link's owner.
func (o operation) request(code string) (path, body string) {
	path = o.path
	for {
		i := strings.IndexByte(path, '{')
		j := strings.IndexByte(path, '}')
		if i < 0 || j < i {
			break
		}
		v := "1"
		if path[i:j+1] == "{code}" {
			v = code
		}
		path = path[:i] + v + path[j+1:]
	}
	if o.hasBody {
		switch o.String() {
		case "POST /api/v1/links":
			body = `{"url": "https://bob.example/mine"}`
		case "POST /api/v1/links/batch":
			body = `{"links": [{"url": "https://bob.example/batch"}]}`
		case "PATCH /api/v1/links/{code}":
			body = `{"url": "https://bob.example/hijacked", "status": "disabled"}`
		default:
			body = `{}`
		}
	}
	return path, body
}

// testTenantIsolationOnEveryEndpoint: tenant B's key, on every documented
// operation, never reads or changes tenant A's link: an operation on A's
// code answers exactly what it answers for a code that does not exist
// (404, not 403: existence is not leaked), no answer to B carries A's
// code or URL, and A's link is unchanged afterwards. A then runs the same
// operations on its own code and they succeed, so the 404s were about
// tenancy and not a broken request.
func testTenantIsolationOnEveryEndpoint(t *testing.T, s *env) {
	_, alice := s.tenant(t, "alice")
	_, bob := s.tenant(t, "bob")
	const secretURL = "https://alice-private.example/launch-plan"
	code, _ := s.create(t, alice, `{"url": "`+secretURL+`", "code": "alice-launch"}`, "Idempotency-Key", "alice-key-1")
	if a := s.follow(t, "/"+code); a.status != http.StatusFound { // a click for the stats
		t.Fatalf("GET /%s: %v", code, a)
	}
	before := s.call(t, "GET", "/api/v1/links/"+code, alice, "").json(t)

	ops := operations(t)
	var codeOps int
	for _, op := range ops {
		if !op.authed {
			continue
		}
		path, body := op.request(code)
		got := s.call(t, op.method, path, bob, body)
		if strings.Contains(string(got.body), code) || strings.Contains(string(got.body), "alice-private") {
			t.Errorf("bob %s: answer carries alice's link: %v", op, got)
		}
		if !strings.Contains(op.path, "{code}") {
			if got.status == http.StatusUnauthorized || got.status == http.StatusForbidden {
				t.Errorf("bob %s: %v; bob's key is valid for his own tenant", op, got)
			}
			continue
		}
		codeOps++
		unknownPath, _ := op.request("no-such-link-9")
		unknown := s.call(t, op.method, unknownPath, bob, body)
		if got.status != http.StatusNotFound || unknown.status != http.StatusNotFound ||
			got.json(t)["detail"] != unknown.json(t)["detail"] {
			t.Errorf("bob %s on alice's code: %v; on an unknown code: %v; want the same 404", op, got, unknown)
		}
	}
	if codeOps < 4 {
		t.Fatalf("only %d documented operations take a {code}: %v", codeOps, ops)
	}
	// Bob's idempotency key space is his own too.
	if a := s.call(t, "POST", "/api/v1/links", bob, `{"url": "https://bob.example/k"}`, "Idempotency-Key", "alice-key-1"); a.status != http.StatusCreated ||
		a.header.Get("Idempotent-Replayed") != "" || strings.Contains(string(a.body), code) {
		t.Errorf("bob reuses alice's idempotency key: %v; want his own new link", a)
	}

	after := s.call(t, "GET", "/api/v1/links/"+code, alice, "").json(t)
	for _, f := range []string{"url", "status", "version", "redirect_type", "expires_at"} {
		if after[f] != before[f] {
			t.Errorf("alice's link %s changed: %v, was %v", f, after[f], before[f])
		}
	}
	if a := s.follow(t, "/"+code); a.status != http.StatusFound || a.header.Get("Location") != secretURL {
		t.Errorf("alice's link on the edge after bob's attempts: %v Location %q", a, a.header.Get("Location"))
	}
	for _, op := range ops {
		if !op.authed || !strings.Contains(op.path, "{code}") {
			continue
		}
		path, body := op.request(code)
		if a := s.call(t, op.method, path, alice, body); a.status < 200 || a.status > 299 {
			t.Errorf("alice %s on her own code: %v; want success", op, a)
		}
	}
}

// testRevokedKeyFailsOnEveryEndpoint: a key that worked on every
// documented authenticated operation answers 401 on the very next request
// to each once it is revoked, writes nothing, and the tenant's other key
// keeps working.
func testRevokedKeyFailsOnEveryEndpoint(t *testing.T, s *env) {
	tenant, keep := s.tenant(t, "acme")
	code, _ := s.create(t, keep, `{"url": "https://example.com/revoke", "code": "revoke-me"}`)
	doomed := s.key(t, tenant)
	ops := operations(t)
	for _, op := range ops {
		if !op.authed || op.method == "DELETE" {
			continue
		}
		path, body := op.request(code)
		if a := s.call(t, op.method, path, doomed, body); a.status == http.StatusUnauthorized {
			t.Fatalf("%s with a fresh key: %v", op, a)
		}
	}
	linksBefore := len(s.listAll(t, keep))
	before := s.call(t, "GET", "/api/v1/links/"+code, keep, "").json(t)
	if err := s.pg.Store().RevokeAPIKey(t.Context(), doomed); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		path, body := op.request(code)
		a := s.call(t, op.method, path, doomed, body)
		switch {
		case !op.authed && a.status == http.StatusUnauthorized:
			t.Errorf("%s is documented as open but refused a revoked key: %v", op, a)
		case op.authed && (a.status != http.StatusUnauthorized || a.header.Get("WWW-Authenticate") == "" ||
			a.header.Get("Content-Type") != "application/problem+json"):
			t.Errorf("revoked key %s: %v; want a 401 problem with WWW-Authenticate", op, a)
		}
	}
	if n := len(s.listAll(t, keep)); n != linksBefore {
		t.Errorf("%d links after the revoked key's requests; want %d", n, linksBefore)
	}
	l := s.call(t, "GET", "/api/v1/links/"+code, keep, "").json(t)
	if l["version"] != before["version"] || l["status"] != before["status"] || l["url"] != before["url"] {
		t.Errorf("the revoked key changed the link: %v, was %v", l, before)
	}
}
