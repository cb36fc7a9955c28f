package links

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
)

// ShortURLs makes links' short URLs, the one rule the API, the console and
// the QR codes share. On the platform's domain a short URL is exactly
// --public-url + "/" + code, as before domains; on another domain it is
// the code on the domain's host with --public-url's scheme and port, since
// every edge serves every domain on the same listeners.
type ShortURLs struct {
	Public string // --public-url without its trailing '/'
	Scheme string // "https://"
	Port   string // ":8081", or "" for the scheme's own
	// Host is --public-url's host, canonical: the platform domain's host
	// (control writes it into domain 0 at start).
	Host string
}

// NewShortURLs reads --public-url. An empty one gives short URLs that are
// paths ("/code") on the platform's domain (tests); one that is not an
// absolute URL is an error.
func NewShortURLs(public string) (ShortURLs, error) {
	u := ShortURLs{Public: strings.TrimRight(public, "/"), Scheme: "https://"}
	if u.Public == "" {
		return u, nil
	}
	p, err := url.Parse(u.Public)
	if err != nil || p.Scheme == "" || p.Host == "" {
		return u, fmt.Errorf("public url %q is not an absolute URL", public)
	}
	u.Scheme = p.Scheme + "://"
	if port := p.Port(); port != "" {
		u.Port = ":" + port
	}
	if u.Host, err = link.CanonicalHost(p.Host); err != nil {
		u.Host = p.Hostname()
	}
	return u, nil
}

// HostOf is the host of the domain a link is on: host itself, or the
// platform's for link.DefaultDomain.
func (u ShortURLs) HostOf(d link.DomainID, host string) string {
	if d == link.DefaultDomain {
		return u.Host
	}
	return host
}

// Of is the short URL of code on domain d, whose host is host.
func (u ShortURLs) Of(d link.DomainID, host, code string) string {
	if d == link.DefaultDomain {
		return u.Public + "/" + code
	}
	return u.Scheme + Bracketed(host) + u.Port + "/" + code
}

// Bracketed is host as a URL writes it: an IPv6 literal in brackets.
func Bracketed(host string) string {
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]"
	}
	return host
}
