package security

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// testNoOpenRedirectThroughHostileTargets: targets built to smuggle
// another destination, a script or a header past the validator are
// refused at create; those that are legitimate but unusual are stored in
// one normalized form, and the edge's Location is exactly that form.
//
// Decisions, and why:
//   - Only http and https, in any case, with "//" and a host: javascript:,
//     data:, vbscript: and file: run code or read the visitor's disk;
//     scheme-relative (//evil.com) and backslash forms (\\evil.com,
//     https:\\evil.com) are read differently by browsers and parsers.
//   - Userinfo is refused (https://trusted.com@evil.com): a reader sees
//     trusted.com, the browser goes to evil.com.
//   - International hosts are stored as punycode (bücher → xn--bcher-kva),
//     so the creator's answer shows the host the browser resolves, and
//     fullwidth or ideographic look-alikes fold onto the ASCII host before
//     the blocked list is checked.
//   - A '#@trusted.com' or '?@trusted.com' tail is fine: the host is
//     evil.com and the stored URL says so; that is the creator's choice.
//   - Hosts longer than DNS allows, bad ports, zones and raw whitespace or
//     control characters are refused; percent-encoded CR/LF in the path
//     stays encoded and cannot split a header.
func testNoOpenRedirectThroughHostileTargets(t *testing.T, s *env) {
	_, key := s.tenant(t, "acme")
	cases := []struct {
		name, url string
		// wantHost is the host of the stored URL; "" means refused.
		wantHost string
		wantURL  string // the exact stored URL, when it matters
	}{
		{"javascript", "javascript:alert(1)", "", ""},
		{"javascript, mixed case", "JaVaScRiPt:alert(document.cookie)", "", ""},
		{"javascript with a host", "javascript://example.com/%0Aalert(1)", "", ""},
		{"data", "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "", ""},
		{"vbscript", "vbscript:msgbox(1)", "", ""},
		{"file", "file:///etc/passwd", "", ""},
		{"scheme-relative", "//evil.com/x", "", ""},
		{"backslashes", `\\evil.com`, "", ""},
		{"https backslashes", `https:\\evil.com`, "", ""},
		{"https slash backslash", `https:/\evil.com`, "", ""},
		{"https without slashes", "https:evil.com", "", ""},
		{"https, no host", "https:///evil.com", "", ""},
		{"CR LF header injection", "https://example.com/\r\nSet-Cookie: a=b", "", ""},
		{"bare LF", "https://example.com/\nLocation: https://evil.com", "", ""},
		{"NUL", "https://example.com/\x00", "", ""},
		{"DEL", "https://example.com/\x7f", "", ""},
		{"tab in host", "https://exa\tmple.com/", "", ""},
		{"leading space", " https://example.com/", "", ""},
		{"space in path", "https://example.com/a b", "", ""},
		{"userinfo", "https://trusted.com@evil.com/", "", ""},
		{"userinfo with password", "https://trusted.com:443@evil.com/", "", ""},
		{"encoded at sign in host", "https://trusted.com%40evil.com/", "", ""},
		{"backslash before at", `https://evil.com\@trusted.com`, "", ""},
		{"blocked", "https://evil.example/", "", ""},
		{"blocked subdomain, trailing dot", "https://WWW.Evil.Example./x", "", ""},
		{"blocked, fullwidth", "https://ｅｖｉｌ.example/", "", ""},
		{"blocked, ideographic dot", "https://evil。example/", "", ""},
		{"host over 253 bytes", "https://" + strings.Repeat("a.", 130) + "com/", "", ""},
		{"label over 63 bytes", "https://" + strings.Repeat("a", 64) + ".com/", "", ""},
		{"port out of range", "https://example.com:99999/", "", ""},
		{"IPv6 zone", "https://[fe80::1%25eth0]/", "", ""},
		{"not IPv6 in brackets", "https://[evil.com]/", "", ""},
		{"invalid UTF-8 host", "https://\xff.com/", "", ""},

		{"fragment at sign", "https://evil.com#@trusted.com", "evil.com", "https://evil.com/#@trusted.com"},
		{"query at sign", "https://evil.com?@trusted.com", "evil.com", "https://evil.com/?@trusted.com"},
		{"encoded CR LF in path", "https://example.com/%0d%0aSet-Cookie:%20a=b", "example.com", "https://example.com/%0d%0aSet-Cookie:%20a=b"},
		{"next parameter", "https://example.com/login?next=//evil.com", "example.com", "https://example.com/login?next=//evil.com"},
		{"IDN", "https://Bücher.example/straße", "xn--bcher-kva.example", ""},
		{"homograph", "https://аpple.com/", "xn--pple-43d.com", ""},
		{"upper case and default port", "HTTPS://Example.COM:443", "example.com", "https://example.com/"},
		{"suffix of a blocked name is not blocked", "https://notevil.example/", "notevil.example", "https://notevil.example/"},
		{"IPv6", "http://[2001:DB8::1]:8080/x", "2001:db8::1", "http://[2001:db8::1]:8080/x"},
	}
	stored := map[string]string{} // code -> url
	for _, tc := range cases {
		body, _ := json.Marshal(map[string]string{"url": tc.url})
		a := s.call(t, "POST", "/api/v1/links", key, string(body))
		if tc.wantHost == "" {
			if a.status != http.StatusBadRequest || a.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s: create %q answered %v; want a 400 problem", tc.name, tc.url, a)
			}
			continue
		}
		if a.status != http.StatusCreated {
			t.Errorf("%s: create %q answered %v; want 201", tc.name, tc.url, a)
			continue
		}
		m := a.json(t)
		got := m["url"].(string)
		u, err := url.Parse(got)
		if err != nil || u.Hostname() != tc.wantHost || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
			t.Errorf("%s: %q stored as %q (host %q); want host %q", tc.name, tc.url, got, u.Hostname(), tc.wantHost)
		}
		if tc.wantURL != "" && got != tc.wantURL {
			t.Errorf("%s: %q stored as %q; want %q", tc.name, tc.url, got, tc.wantURL)
		}
		stored[m["code"].(string)] = got
	}
	if n := len(s.listAll(t, key)); n != len(stored) {
		t.Errorf("%d links exist; want only the %d accepted", n, len(stored))
	}
	for code, want := range stored {
		a := s.follow(t, "/"+code)
		if a.status != http.StatusFound || a.header.Get("Location") != want || len(a.header.Values("Location")) != 1 {
			t.Errorf("GET /%s: %d Location %q; want 302 exactly %q", code, a.status, a.header.Values("Location"), want)
		}
		if a.header.Get("Set-Cookie") != "" {
			t.Errorf("GET /%s set a cookie: %q", code, a.header.Get("Set-Cookie"))
		}
	}
}

// testNoOpenRedirectThroughCraftedPaths: whatever request-target reaches
// the edge, a redirect's Location is a stored link's URL, for the code the
// path names; nothing from the request ends up in it.
func testNoOpenRedirectThroughCraftedPaths(t *testing.T, s *env) {
	_, key := s.tenant(t, "acme")
	code, target := s.create(t, key, `{"url": "https://shop.example.com/spring", "code": "promo-2026"}`)
	if a := s.follow(t, "/"+code); a.status != http.StatusFound || a.header.Get("Location") != target {
		t.Fatalf("GET /%s: %v Location %q; want 302 %q", code, a, a.header.Get("Location"), target)
	}
	for _, tc := range []struct {
		target string
		// want302: the path names the link (after the server's own
		// decoding and dot-segment removal); otherwise a 404.
		want302 bool
	}{
		{"/promo-2026", true},
		{"/promo-2026?next=//evil.com", true},
		{"/promo-2026?url=https://evil.com&redirect=https://evil.com", true},
		{"/%70romo-2026", true},
		{"/x/../promo-2026", true},
		// Absolute-form names the host (RFC 9112 3.2.2: it wins over
		// Host), and evil.com is no domain's.
		{"http://evil.com/promo-2026", false},
		{"http://127.0.0.1/promo-2026", true},
		{"//evil.com", false},
		{"///evil.com", false},
		{"/%2F%2Fevil.com", false},
		{"/%2f%2fevil.com/", false},
		{`/\evil.com`, false},
		{"/%5C%5Cevil.com", false},
		{"/promo-2026/", false},
		{"//promo-2026", true}, // fasthttp folds repeated slashes
		{"/promo-2026/../evil", false},
		{"/promo-2026%2F..%2Fevil", false},
		{"/promo-2026%0D%0ALocation:%20https://evil.com", false},
		{"/promo-2026%00", false},
		{"/https://evil.com", false},
		{"/https:%2F%2Fevil.com", false},
		{"/evil.com", false},
		{"/PROMO-2026", false}, // codes are case-sensitive
	} {
		a := raw(t, s.edgeAddr, "GET "+tc.target+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		loc := a.header.Values("Location")
		switch {
		case tc.want302 && (a.status != http.StatusFound || len(loc) != 1 || loc[0] != target):
			t.Errorf("GET %s: %d Location %q; want 302 %q", tc.target, a.status, loc, target)
		case !tc.want302 && (a.status != http.StatusNotFound || len(loc) != 0):
			t.Errorf("GET %s: %d Location %q; want 404 without Location", tc.target, a.status, loc)
		}
	}
}

// listAll returns every link of the key's tenant, deleted ones included.
func (s *env) listAll(t *testing.T, key string) []any {
	t.Helper()
	var all []any
	for _, st := range []string{"active", "disabled", "deleted"} {
		a := s.call(t, "GET", "/api/v1/links?limit=200&status="+st, key, "")
		if a.status != http.StatusOK {
			t.Fatalf("list %s: %v", st, a)
		}
		all = append(all, a.json(t)["links"].([]any)...)
	}
	return all
}
