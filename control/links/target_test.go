package links

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

// whatwgCorpus is testdata/whatwg/hrefs.json: what Node's WHATWG URL
// parser made of each input in inputs.json (see generate.mjs there).
type whatwgCorpus struct {
	Generator string `json:"generator"`
	Entries   []struct {
		Input string `json:"input"`
		// Href is the browser's parse of Input; nil when it refuses it.
		Href *string `json:"href"`
		// Reparsed is the browser's parse of Href.
		Reparsed *string `json:"reparsed"`
	} `json:"entries"`
}

func readWHATWGCorpus(t *testing.T) whatwgCorpus {
	t.Helper()
	var c whatwgCorpus
	b, err := os.ReadFile("testdata/whatwg/hrefs.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("hrefs.json: %v", err)
	}
	var inputs []string
	if b, err = os.ReadFile("testdata/whatwg/inputs.json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &inputs); err != nil {
		t.Fatalf("inputs.json: %v", err)
	}
	var got []string
	for _, e := range c.Entries {
		got = append(got, e.Input)
	}
	if !slices.Equal(got, inputs) {
		t.Fatalf("hrefs.json is not made from inputs.json: run node control/links/testdata/whatwg/generate.mjs")
	}
	return c
}

// TestNormalizeURLAgainstWHATWG: for every URL of the corpus (ordinary
// ones and attackers' tricks), NormalizeURL either refuses it, or stores
// exactly the href a browser makes of the creator's input. So (a) a
// browser parsing the stored URL lands where the input would have taken it
// (the corpus says the href parses to itself), and (b) the stored URL
// normalizes to itself.
func TestNormalizeURLAgainstWHATWG(t *testing.T) {
	c := readWHATWGCorpus(t)
	accepted := 0
	for _, e := range c.Entries {
		out, err := NormalizeURL(e.Input, TargetPolicy{AllowPrivate: true})
		if err != nil {
			if !errors.Is(err, link.ErrInvalidURL) {
				t.Errorf("NormalizeURL(%q) = %v; want an error wrapping link.ErrInvalidURL", e.Input, err)
			}
			continue
		}
		accepted++
		switch {
		case e.Href == nil:
			t.Errorf("NormalizeURL(%q) = %q; a browser refuses the input (%s)", e.Input, out, c.Generator)
		case out != *e.Href:
			t.Errorf("NormalizeURL(%q) = %q; a browser makes it %q (%s)", e.Input, out, *e.Href, c.Generator)
		case e.Reparsed == nil || *e.Reparsed != *e.Href:
			t.Errorf("corpus: the href %q of %q parses to %v, not itself", *e.Href, e.Input, e.Reparsed)
		}
		if again, err := NormalizeURL(out, TargetPolicy{AllowPrivate: true}); err != nil || again != out {
			t.Errorf("NormalizeURL(%q) = %q, which normalizes to %q, %v; want itself", e.Input, out, again, err)
		}
	}
	// Refusing everything would pass the loop: most of the corpus is
	// ordinary, and a browser takes it.
	if accepted < len(c.Entries)/2 {
		t.Errorf("NormalizeURL accepted %d of %d corpus URLs; want most", accepted, len(c.Entries))
	}
}

// TestNormalizeURL: the stored form of ordinary and unusual targets, and
// the reason given for refusing the rest.
func TestNormalizeURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		// wantErr is part of the error's message; "" means accepted.
		wantErr string
	}{
		{in: "HTTPS://Example.COM:443", want: "https://example.com/"},
		{in: "https://example.com/a/../b/./c", want: "https://example.com/b/c"},
		{in: "https://example.com/a%2Fb|c", want: "https://example.com/a%2Fb|c"},
		// Not in the corpus: Node 20 leaves these dot segments (see
		// testdata/whatwg/generate.mjs); the URL Standard resolves them.
		{in: "https://example.com/a/.b/../c", want: "https://example.com/a/c"},
		{in: "https://example.com/.well-known/x/./y/%2E%2e/z", want: "https://example.com/.well-known/x/z"},
		{in: "https://example.com/?q=€#€", want: "https://example.com/?q=%E2%82%AC#%E2%82%AC"},
		{in: "https://example.com#", want: "https://example.com/#"},
		{in: "https://Example.com./x", want: "https://example.com./x"},
		{in: "https://bücher.example/straße", want: "https://xn--bcher-kva.example/stra%C3%9Fe"},
		{in: "https://straße.de/", want: "https://xn--strae-oqa.de/"},
		{in: "http://%65vil.com/", want: "http://evil.com/"},
		{in: "http://0x8.0x8.0x8.0x8/", want: "http://8.8.8.8/"},
		{in: "http://134744072:8080/", want: "http://8.8.8.8:8080/"},
		{in: "http://[2001:DB8:0:0:1:0:0:1]/", want: "http://[2001:db8::1:0:0:1]/"},
		{in: "http://[::ffff:8.8.8.8]/", want: "http://[::ffff:808:808]/"},
		{in: "https://under_score.example/", want: "https://under_score.example/"},
		{in: "https://example.com:0443/", want: "https://example.com/"},
		{in: "https://example.com:/x", want: "https://example.com/x"},

		{in: "", wantErr: "required"},
		{in: "https://example.com/\xff\xfe", wantErr: "not valid UTF-8"},
		{in: "https://example.com/\ufffd\ufffd", wantErr: "U+FFFD"},
		{in: "https://example.com/?q=\ufffd", wantErr: "U+FFFD"},
		{in: "https://\xff.com/", wantErr: "not valid UTF-8"},
		{in: "http://%ff.com/", wantErr: "not UTF-8"},
		{in: "http://xn--locaühost-/", wantErr: "not punycode"},
		{in: "http://10.xn--/", wantErr: "not punycode"},
		{in: "http://xn--evİl-.example/", wantErr: "not punycode"},
		{in: "https://exa\tmple.com/", wantErr: "control character 0x09"},
		{in: "https://example.com/a b", wantErr: "spaces must be percent-encoded"},
		{in: `https://a.com\@b.com`, wantErr: "backslash"},
		{in: "https://a.com@b.com", wantErr: "credentials"},
		{in: "https://a.com%40b.com/", wantErr: "not a valid domain name"},
		{in: "javascript:alert(1)", wantErr: "scheme must be http or https"},
		{in: "https:evil.com", wantErr: "absolute"},
		{in: "https:///evil.com", wantErr: "absolute"},
		{in: "//evil.com", wantErr: "absolute"},
		{in: "https://:443/", wantErr: "no host"},
		{in: "https://example.com:0/", wantErr: "port"},
		{in: "https://example.com:65536/", wantErr: "port"},
		{in: "https://example.com/%zz", wantErr: "does not start an escape"},
		{in: "https://example.com/?q=%", wantErr: "does not start an escape"},
		{in: "http://example.123/", wantErr: "ends in a number"},
		{in: "http://8.8.8.08/", wantErr: "ends in a number"},
		{in: "http://4294967296/", wantErr: "ends in a number"},
		{in: "https://[fe80::1%25eth0]/", wantErr: "zone"},
		{in: "https://[evil.com]/", wantErr: "not a valid IPv6 address"},
		{in: "https://a*b.example/", wantErr: "not a valid domain name"},
		{in: "https://example..com/", wantErr: "empty label"},
		{in: "https://" + strings.Repeat("a", 64) + ".com/", wantErr: "longer than DNS allows"},
		{in: "https://" + strings.Repeat("a.", 127) + "com/", wantErr: "longer than DNS allows"},
		{in: "https://example.com/" + strings.Repeat("x", MaxURLLength), wantErr: "bytes, more than"},
		{in: "https://example.com/" + strings.Repeat("é", MaxURLLength/2-20), wantErr: "normalized url is more than"},
		{in: "https://evil.example/", wantErr: "the domain evil.example is blocked"},
		{in: "https://WWW.Evil.Example./x", wantErr: "the domain www.evil.example is blocked"},
		{in: "https://ｅｖｉｌ。example/", wantErr: "the domain evil.example is blocked"},
		{in: "http://%65vil.example/", wantErr: "the domain evil.example is blocked"},
		{in: "http://0x5db8d822/", wantErr: "the address 93.184.216.34 is blocked"},
	} {
		got, err := NormalizeURL(tc.in, TargetPolicy{Blocked: []string{"evil.example", "93.184.216.34"}})
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !errors.Is(err, link.ErrInvalidURL) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("NormalizeURL(%q) = %q, %v; want an invalid url error saying %q", tc.in, got, err, tc.wantErr)
		}
	}
}

// TestNormalizeURLRefusesPrivateTargets: a target that leads into the
// visitor's own machine or network, however a browser is made to read it
// there, is refused unless the policy allows private targets; then it is
// stored like any other.
func TestNormalizeURLRefusesPrivateTargets(t *testing.T) {
	for _, tc := range []struct {
		in, want, why string
	}{
		{"http://127.0.0.1/", "http://127.0.0.1/", "loopback"},
		{"http://0x7f.1/", "http://127.0.0.1/", "0x7f.1, which browsers read as 127.0.0.1, is a loopback"},
		{"http://2130706433/", "http://127.0.0.1/", "loopback"},
		{"http://0177.0.0.1/", "http://127.0.0.1/", "loopback"},
		{"http://127.1:8080/x", "http://127.0.0.1:8080/x", "loopback"},
		{"http://１２７.０.０.１/", "http://127.0.0.1/", "loopback"},
		{"http://%31%32%37.0.0.1/", "http://127.0.0.1/", "loopback"},
		{"http://0/", "http://0.0.0.0/", "0.0.0.0/8"},
		{"http://0.0.0.0:8080/", "http://0.0.0.0:8080/", "0.0.0.0/8"},
		{"http://10.1.2.3/", "http://10.1.2.3/", "private"},
		{"http://172.16.0.1/", "http://172.16.0.1/", "private"},
		{"http://172.31.255.255/", "http://172.31.255.255/", "private"},
		{"http://192.168.1.1/", "http://192.168.1.1/", "private"},
		{"http://3232235777/", "http://192.168.1.1/", "private"},
		{"http://100.64.0.1/", "http://100.64.0.1/", "carrier-grade NAT"},
		{"http://100.100.100.200/", "http://100.100.100.200/", "carrier-grade NAT"},
		{"http://169.254.169.254/latest/meta-data/", "http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://0xa9.0xfe.0xa9.0xfe/", "http://169.254.169.254/", "link-local"},
		{"http://224.0.0.1/", "http://224.0.0.1/", "multicast"},
		{"http://192.0.0.170/", "http://192.0.0.170/", "IETF protocol"},
		{"http://198.18.0.1/", "http://198.18.0.1/", "benchmarking"},
		{"http://255.255.255.255/", "http://255.255.255.255/", "broadcast"},
		{"http://[::1]/", "http://[::1]/", "loopback"},
		{"http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/", "loopback"},
		{"http://[::]/", "http://[::]/", "unspecified"},
		{"http://[fc00::1]/", "http://[fc00::1]/", "unique local"},
		{"http://[fd00:ec2::254]/", "http://[fd00:ec2::254]/", "unique local"},
		{"http://[fe80::1]/", "http://[fe80::1]/", "link-local"},
		{"http://[ff02::1]/", "http://[ff02::1]/", "multicast"},
		{"http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "IPv6 form of 127.0.0.1, a loopback"},
		{"http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/", "IPv6 form of 169.254.169.254"},
		{"http://[::ffff:10.0.0.1]/", "http://[::ffff:a00:1]/", "private"},
		{"http://[::127.0.0.1]/", "http://[::7f00:1]/", "loopback"},
		{"http://[64:ff9b::7f00:1]/", "http://[64:ff9b::7f00:1]/", "loopback"},
		{"http://[2002:c0a8:101::]/", "http://[2002:c0a8:101::]/", "IPv6 form of 192.168.1.1"},
		{"http://localhost/", "http://localhost/", "own machine"},
		{"http://LOCALHOST:8080/", "http://localhost:8080/", "own machine"},
		{"http://localhost./", "http://localhost./", "own machine"},
		{"http://api.localhost/", "http://api.localhost/", "own machine"},
		{"http://ｌｏｃａｌｈｏｓｔ/", "http://localhost/", "own machine"},
		{"http://local%68ost/", "http://localhost/", "own machine"},
		{"http://router.local/", "http://router.local/", "own network"},
		{"http://printer.home.arpa/", "http://printer.home.arpa/", "own network"},
		{"http://db.internal/", "http://db.internal/", "own network"},
		{"http://intranet/", "http://intranet/", "single-label"},
	} {
		_, err := NormalizeURL(tc.in, TargetPolicy{})
		if err == nil || !errors.Is(err, link.ErrInvalidURL) || !strings.Contains(err.Error(), tc.why) ||
			!strings.Contains(err.Error(), "does not allow private targets") {
			t.Errorf("NormalizeURL(%q) = %v; want it refused as %q", tc.in, err, tc.why)
		}
		got, err := NormalizeURL(tc.in, TargetPolicy{AllowPrivate: true})
		if err != nil || got != tc.want {
			t.Errorf("NormalizeURL(%q), private allowed = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"http://8.8.8.8/", "http://172.32.0.1/", "http://172.15.255.255/", "http://100.128.0.1/",
		"http://[2001:4860:4860::8888]/", "http://[::ffff:8.8.8.8]/", "http://[64:ff9b::808:808]/",
		"http://localhost.example.com/", "http://notlocalhost.example/", "http://127.0.0.1.nip.io/",
		"https://example.com/?next=http://127.0.0.1/",
	} {
		if _, err := NormalizeURL(in, TargetPolicy{}); err != nil {
			t.Errorf("NormalizeURL(%q) = %v; want it accepted (public)", in, err)
		}
	}
}
