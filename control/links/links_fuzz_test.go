package links

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/privateaddr"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// hostileURLs seed FuzzNormalizeURL: the tricks people use to turn a
// shortener into an open redirect or a header injection.
var hostileURLs = []string{
	"https://example.com/hello?utm_source=x#frag",
	"HTTPS://Example.COM:443/a/../b/./c?q=%2F%2Fevil",
	"http://example.com:80",
	"https://example.com:8443/x",
	"javascript:alert(1)",
	"JavaScript://example.com/%0Aalert(1)",
	"data:text/html;base64,PHNjcmlwdD4=",
	"vbscript:msgbox(1)",
	"file:///etc/passwd",
	"//evil.com",
	"\\\\evil.com",
	"https:\\\\evil.com",
	"https:/\\evil.com",
	"https:evil.com",
	"https:///evil.com",
	"https://example.com/\r\nSet-Cookie: a=b",
	"https://example.com/%0d%0aSet-Cookie:%20a=b",
	"https://trusted.com@evil.com/",
	"https://trusted.com:pass@evil.com/",
	"https://trusted.com%40evil.com/",
	"https://evil.com#@trusted.com",
	"https://evil.com?@trusted.com",
	"https://evil.com\\@trusted.com",
	"https://evil.com%2F@trusted.com",
	"https://evil.com%2f.trusted.com/",
	"https://trusted.com.evil.com/",
	" https://example.com/",
	"https://example.com/ x",
	"https://exa\tmple.com/",
	"https://example.com/\x7f",
	"https://bücher.example/straße",
	"https://xn--bcher-kva.example/",
	"https://ｅｖｉｌ.com/",
	"https://evil。com/",
	"https://evil.example/",
	"https://WWW.Evil.Example./x",
	"https://xn--evil-.example/",
	"https://[::1]:8080/x",
	"https://[fe80::1%25eth0]/",
	"https://[evil.com]/",
	"https://127.0.0.1/",
	"https://0x7f.1/",
	"https://" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + ".com/",
	"https://" + strings.Repeat("a.", 200) + "com/",
	"https://example.com/" + strings.Repeat("%", 10),
	"https://example.com/%zz",
	"https://example.com/%E2%82%AC?x=%E2%82%AC",
	"https://example.com/€",
	"https://example.com:/x",
	"https://example.com:99999/x",
	"https://example.com:0x50/",
	"https://:443/",
	"http://example.com?",
	"http://example.com#",
	"http://example.com/;jsessionid=1",
	"https://example.com/\xff\xfe",
	"https://example.com/\ufffd",
	"https://example.com/a%2Fb|c",
	"https://example.com/a/%2e%2e/b",
	"http://%65vil.example/",
	"http://2130706433/",
	"http://0177.0.0.1/",
	"http://example.123/",
	"http://[::ffff:127.0.0.1]/",
	"http://localhost./",
	"http://foo.localhost/",
	"http://169.254.169.254/latest/meta-data/",
}

// fuzzPolicy is the policy FuzzNormalizeURL runs with: two blocked
// domains, private targets refused.
var fuzzPolicy = TargetPolicy{Blocked: []string{"evil.example", "xn--bcher-kva.example"}}

// FuzzNormalizeURL: whatever NormalizeURL accepts is a URL a browser sends
// to the host the validator checked, and nothing else.
// TestNormalizeURLAgainstWHATWG holds it to a browser's parser on a
// corpus; this holds what needs no browser on any input.
//
//   - Normalizing is idempotent: the stored URL re-validates to itself, so
//     an edit that sends it back is not refused or changed.
//   - The scheme is http or https, in lower case, with "//" and a host.
//   - Only printable ASCII survives, and no space or backslash (the edge
//     writes the URL into a Location header verbatim).
//   - The host a browser would take (everything between "://" and the
//     first '/', '?' or '#') is the host Go's parser reports, carries no
//     userinfo, is not blocked and not private.
//   - Where Go's parser reads a plain name in the input, the stored host
//     is that name lower-cased and IDNA-encoded: normalization never moves
//     the destination.
func FuzzNormalizeURL(f *testing.F) {
	for _, s := range hostileURLs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := NormalizeURL(raw, fuzzPolicy)
		if err != nil {
			return
		}
		again, err := NormalizeURL(out, fuzzPolicy)
		if err != nil || again != out {
			t.Fatalf("NormalizeURL(%q) = %q, which normalizes to %q, %v; want itself", raw, out, again, err)
		}
		if len(out) > MaxURLLength {
			t.Fatalf("NormalizeURL(%q) is %d bytes", raw, len(out))
		}
		for i := 0; i < len(out); i++ {
			if c := out[i]; c < 0x21 || c >= 0x7f || c == '\\' {
				t.Fatalf("NormalizeURL(%q) = %q keeps byte 0x%02x at %d", raw, out, c, i)
			}
		}
		rest, ok := strings.CutPrefix(out, "https://")
		if !ok {
			rest, ok = strings.CutPrefix(out, "http://")
		}
		if !ok {
			t.Fatalf("NormalizeURL(%q) = %q; want an http:// or https:// prefix", raw, out)
		}
		browserHost := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			browserHost = rest[:i]
		}
		if strings.Contains(browserHost, "@") {
			t.Fatalf("NormalizeURL(%q) = %q carries userinfo %q", raw, out, browserHost)
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("NormalizeURL(%q) = %q does not parse: %v", raw, out, err)
		}
		if u.Host != browserHost || u.User != nil || u.Opaque != "" {
			t.Fatalf("NormalizeURL(%q) = %q: parser host %q, browser host %q", raw, out, u.Host, browserHost)
		}
		hostname := u.Hostname()
		if ip, err := netip.ParseAddr(hostname); err == nil {
			if why := privateaddr.Reason(ip); why != "" {
				t.Fatalf("NormalizeURL(%q) = %q: host %s is %s", raw, out, hostname, why)
			}
		} else if strings.Contains(hostname, ":") {
			t.Fatalf("NormalizeURL(%q) = %q: bracketed host %q is not an IPv6 address: %v", raw, out, hostname, err)
		} else {
			name := strings.TrimSuffix(hostname, ".")
			if name == "" || hostname != strings.ToLower(hostname) || isBlocked(name, fuzzPolicy.Blocked) {
				t.Fatalf("NormalizeURL(%q) = %q: host %q empty, not lower case or blocked", raw, out, hostname)
			}
			if why := privateReason(host{name: name}); why != "" {
				t.Fatalf("NormalizeURL(%q) = %q: host %s is %s", raw, out, hostname, why)
			}
		}
		// The destination is the one the creator named.
		in, err := url.Parse(raw)
		if err != nil {
			return // Go refuses what browsers take, like http://%65vil.com
		}
		inHost := in.Hostname()
		if strings.ContainsAny(inHost, ":%") || endsInNumber(inHost) {
			return // IPv6 and IPv4 forms are compared to a browser's by the corpus
		}
		if a, err := idnaProfile.ToASCII(inHost); err == nil {
			inHost = a
		}
		if !strings.EqualFold(strings.TrimSuffix(inHost, "."), strings.TrimSuffix(hostname, ".")) {
			t.Fatalf("NormalizeURL(%q) = %q moved the host from %q to %q", raw, out, in.Hostname(), hostname)
		}
	})
}

// FuzzCustomCode: a custom code is accepted only if the edge would look
// it up as a code (link.ValidCodeSyntax), it lies outside the generated
// space (6 base62 characters, which the allocator owns), and no case
// variant of it is reserved (routes of control and edge, policy words).
func FuzzCustomCode(f *testing.F) {
	for _, s := range []string{"spring-sale", "api", "API", "livez", "Readyz", "metrics", "robots.txt",
		"favicon.ico", "Login", "well-known", ".well-known", "abc123", "000000", "zzzzzz", "abc12-", "a/b", "ab",
		"cafés", "admin\x00", "ADMIN", "status", "x_y_z", strings.Repeat("x", 33)} {
		f.Add(s)
	}
	controlRoutes := []string{"api", "livez", "readyz"}
	svc := New(nil, nil, Config{Reserved: controlRoutes})
	reserved := Reserved(controlRoutes)
	f.Fuzz(func(t *testing.T, code string) {
		err := svc.validateCustomCode(code)
		if err != nil {
			return
		}
		if !link.ValidCodeSyntax(code) {
			t.Fatalf("custom code %q accepted, but the edge never looks it up", code)
		}
		if len(code) == base62.Length {
			if _, err := base62.Digits(code); err == nil {
				t.Fatalf("custom code %q accepted inside the generated space", code)
			}
		}
		for r := range reserved {
			if strings.EqualFold(r, code) {
				t.Fatalf("custom code %q accepted, but %q is reserved", code, r)
			}
		}
	})
}

// FuzzPlainHost: for every host plainHost answers, the full path through
// percent-decoding and IDNA (idnaHost) answers the same, without error.
func FuzzPlainHost(f *testing.F) {
	for _, s := range []string{"example.com", "Shop.Example.COM", "a_b.example", "-a-.example.", "xn--bcher-kva.example",
		"XN--a.b", "axn--b.c", "a..b", ".a", "x", "0x7f.1", "127.0.0.1", "a.xn--", "xN-.b", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := plainHost(s)
		if !ok {
			return
		}
		want, err := idnaHost(s)
		if err != nil || got != want {
			t.Fatalf("plainHost(%q) = %q; idnaHost answers %q, %v", s, got, want, err)
		}
	})
}
