package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The document is held to the rules a linter run by hand holds it to
// (docs/api.md: redocly's recommended set), so it stays lint clean without
// Node on the machine, and to the server it describes.

func TestOpenAPIDocumentRules(t *testing.T) {
	for _, p := range docProblems(OpenAPI()) {
		t.Error(p)
	}
}

// docProblems loads and validates raw with kin-openapi and returns every
// breach of the rules the linter enforces and we rely on: servers, a
// licence, explicit security on every operation (an empty list for the
// public ones), a 4xx answer and a summary on every operation, unique
// operationIds, local $refs that resolve, and no unused component.
func docProblems(raw []byte) []string {
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return []string{fmt.Sprintf("parse: %v", err)}
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// References first, on the raw tree: the loader stops at the first
	// that does not resolve, and says less about it.
	refs := map[string]bool{}
	walkRefs(tree, func(ref string) {
		refs[ref] = true
		target, ok := strings.CutPrefix(ref, "#")
		if !ok {
			add("$ref %q is not local to the document", ref)
			return
		}
		if _, ok := pointer(tree, target); !ok {
			add("$ref %q resolves to nothing", ref)
		}
	})
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		add("load: %v", err)
		return problems
	}
	if err := doc.Validate(context.Background()); err != nil {
		add("not a valid OpenAPI 3 document: %v", err)
	}

	if len(doc.Servers) == 0 {
		add("no servers: clients and tools cannot tell where the API is")
	}
	for _, s := range doc.Servers {
		u := s.URL
		for name, v := range s.Variables {
			u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			add("server %q with its defaults is %q, not an absolute http(s) URL", s.URL, u)
		}
	}
	if l := doc.Info.License; l == nil || l.Name == "" || l.URL == "" {
		add("info.license needs a name and a url")
	}

	schemes := doc.Components.SecuritySchemes
	usedSchemes := map[string]bool{}
	ids := map[string]string{}
	for _, path := range doc.Paths.InMatchingOrder() {
		rawItem, _ := dig(tree, "paths", path).(map[string]any)
		for method, op := range doc.Paths.Value(path).Operations() {
			name := method + " " + path
			if op.OperationID == "" {
				add("%s has no operationId", name)
			} else if other, dup := ids[op.OperationID]; dup {
				add("operationId %q is used by %s and %s", op.OperationID, other, name)
			} else {
				ids[op.OperationID] = name
			}
			if op.Summary == "" {
				add("%s has no summary", name)
			}
			// The raw document, not the model: kin-openapi reads an absent
			// list and an empty one alike, and only the empty one says
			// "public" on purpose.
			rawOp, _ := dig(rawItem, strings.ToLower(method)).(map[string]any)
			if _, explicit := rawOp["security"]; !explicit {
				add("%s has no security: list its schemes, or [] when it is public", name)
			}
			if op.Security != nil {
				for _, req := range *op.Security {
					for scheme := range req {
						usedSchemes[scheme] = true
						if schemes[scheme] == nil {
							add("%s asks for security scheme %q, which components does not define", name, scheme)
						}
					}
				}
			}
			if !slices.ContainsFunc(slices.Collect(maps.Keys(op.Responses.Map())), is4xx) {
				add("%s documents no 4xx answer", name)
			}
		}
	}

	components, _ := tree["components"].(map[string]any)
	for kind, entries := range components {
		for name := range entries.(map[string]any) {
			used := refs["#/components/"+kind+"/"+name]
			if kind == "securitySchemes" {
				used = usedSchemes[name]
			}
			if !used {
				add("components.%s.%s is never used", kind, name)
			}
		}
	}
	slices.Sort(problems)
	return problems
}

func is4xx(status string) bool {
	if status == "4XX" {
		return true
	}
	n, err := strconv.Atoi(status)
	return err == nil && n >= 400 && n < 500
}

// dig follows keys down nested JSON objects; a missing key gives nil.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// pointer resolves a JSON pointer (RFC 6901) in tree.
func pointer(tree any, ptr string) (any, bool) {
	if ptr == "" {
		return tree, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	v := tree
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// walkRefs calls f with every "$ref" string in v.
func walkRefs(v any, f func(string)) {
	switch c := v.(type) {
	case map[string]any:
		for k, e := range c {
			if s, ok := e.(string); ok && k == "$ref" {
				f(s)
				continue
			}
			walkRefs(e, f)
		}
	case []any:
		for _, e := range c {
			walkRefs(e, f)
		}
	}
}

// A document that breaks each rule is caught: the checks above can fail.
func TestDocProblemsCatchBreaches(t *testing.T) {
	good := func() map[string]any {
		var m map[string]any
		if err := json.Unmarshal(OpenAPI(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	livez := func(m map[string]any) map[string]any { return dig(m, "paths", "/livez", "get").(map[string]any) }
	for _, tc := range []struct {
		breach string
		change func(m map[string]any)
		want   string
	}{
		{"no servers", func(m map[string]any) { delete(m, "servers") }, "no servers"},
		{"no licence", func(m map[string]any) { delete(m["info"].(map[string]any), "license") }, "info.license"},
		{"no security", func(m map[string]any) { delete(livez(m), "security") }, "GET /livez has no security"},
		{"no 4xx", func(m map[string]any) { delete(livez(m)["responses"].(map[string]any), "4XX") }, "GET /livez documents no 4xx"},
		{"duplicate operationId", func(m map[string]any) { livez(m)["operationId"] = "readyz" }, `operationId "readyz" is used by`},
		{"dangling $ref", func(m map[string]any) {
			livez(m)["responses"].(map[string]any)["503"] = map[string]any{"$ref": "#/components/responses/Nowhere"}
		}, `"#/components/responses/Nowhere" resolves to nothing`},
	} {
		t.Run(tc.breach, func(t *testing.T) {
			m := good()
			tc.change(m)
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			problems := docProblems(raw)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("with %s: problems %q; want one with %q", tc.breach, problems, tc.want)
			}
		})
	}
}

// TestDocumentMatchesRouter: every route the server serves is documented,
// and every documented operation is served by the route it names. The
// server's own mux decides, on a request with the path parameters filled
// in, so a route shadowed by another or left to the 404 and 405 answers
// fails too.
func TestDocumentMatchesRouter(t *testing.T) {
	doc := loadDoc(t)
	s := New(nil, nil, Config{})
	documented := map[string]bool{}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			op := method + " " + path
			documented[op] = true
			concrete := param.ReplaceAllString(path, "Ab12Cd")
			if _, pattern := s.mux.Handler(httptest.NewRequest(method, concrete, nil)); pattern != op {
				t.Errorf("openapi.json documents %s, but the server routes %s %s to %q", op, method, concrete, pattern)
			}
		}
	}
	for _, r := range routeTable {
		if !documented[r.method+" "+r.path] {
			t.Errorf("%s %s is served but not in openapi.json", r.method, r.path)
		}
	}
}

// The 4XX that the public operations (the probes, metrics and this
// document) declare is what the HTTP server answers before any handler
// runs: 431 for headers over its limit, 400 for a malformed request. Each
// such answer matches the document.
func TestServerRefusalsAreDocumented(t *testing.T) {
	doc := loadDoc(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	check := &env{route: router}
	srv := httptest.NewUnstartedServer(New(nil, nil, Config{}))
	srv.Config.MaxHeaderBytes = 16 << 10 // as control's server
	srv.Start()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	var public []string
	for path, item := range doc.Paths.Map() {
		if op := item.Get; op != nil && op.Security != nil && len(*op.Security) == 0 {
			public = append(public, path)
		}
	}
	slices.Sort(public)
	if want := []string{"/api/v1/openapi.json", "/livez", "/metrics", "/readyz", "/startupz"}; !slices.Equal(public, want) {
		t.Errorf("public operations: %v; want %v", public, want)
	}
	for _, path := range public {
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Padding", strings.Repeat("p", 32<<10))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s with 32 KiB of headers: %v", path, err)
		}
		got := answer(t, res)
		if got.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("GET %s with 32 KiB of headers: %v; want 431", path, got)
		}
		if err := check.validate(req, got); err != nil {
			t.Errorf("GET %s answered %v, which the document does not allow: %v", path, got, err)
		}

		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nthis line has no colon\r\n\r\n", path, addr)
		res, err = http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Fatalf("GET %s with a malformed header: %v", path, err)
		}
		got = answer(t, res)
		conn.Close()
		if got.status != http.StatusBadRequest {
			t.Errorf("GET %s with a malformed header: %v; want 400", path, got)
		}
		if err := check.validate(req, got); err != nil {
			t.Errorf("GET %s answered %v, which the document does not allow: %v", path, got, err)
		}
	}
}

func answer(t *testing.T, res *http.Response) resp {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}
