package links_test

import (
	"testing"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// TestShortURLs: the platform domain's short URL is the public URL and
// the code, exactly; another domain's is its host with the public URL's
// scheme and port.
func TestShortURLs(t *testing.T) {
	for _, tc := range []struct {
		public string
		id     link.DomainID
		host   string
		want   string
	}{
		{"https://sho.rt", 0, "sho.rt", "https://sho.rt/abc"},
		{"https://sho.rt/", 0, "platform.invalid", "https://sho.rt/abc"},
		{"http://127.0.0.1:8081/s", 0, "127.0.0.1", "http://127.0.0.1:8081/s/abc"},
		{"https://sho.rt", 3, "go.acme.com", "https://go.acme.com/abc"},
		{"http://127.0.0.1:8081", 3, "go.acme.test", "http://go.acme.test:8081/abc"},
		{"https://sho.rt:8443/s", 7, "xn--bcher-kva.example", "https://xn--bcher-kva.example:8443/abc"},
		{"http://[::1]:8081", 2, "::1", "http://[::1]:8081/abc"},
	} {
		u, err := links.NewShortURLs(tc.public)
		if err != nil {
			t.Fatalf("%s: %v", tc.public, err)
		}
		if got := u.Of(tc.id, tc.host, "abc"); got != tc.want {
			t.Errorf("public %s, domain %d %s: %s; want %s", tc.public, tc.id, tc.host, got, tc.want)
		}
	}
	if _, err := links.NewShortURLs("sho.rt"); err == nil {
		t.Error("a public URL without a scheme was taken")
	}
	u, err := links.NewShortURLs("https://SHO.rt.:8443")
	if err != nil || u.Host != "sho.rt" || u.HostOf(0, "") != "sho.rt" || u.HostOf(3, "go.acme.com") != "go.acme.com" {
		t.Errorf("the platform's host from a public URL in another spelling: %+v %v", u, err)
	}
	if empty, err := links.NewShortURLs(""); err != nil || empty.Of(0, "", "abc") != "/abc" {
		t.Errorf("no public URL: %+v %v", empty, err)
	}
}
