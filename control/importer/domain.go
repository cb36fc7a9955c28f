package importer

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/shared/link"
)

// bitlyHosts are Bitly's own short domains: a link on one of them has no
// domain of the tenant's.
var bitlyHosts = map[string]bool{"bit.ly": true, "j.mp": true, "bitly.com": true}

// bitlyDomain is the branded domain of a Bitly short link
// ("https://acme.co/abc" gives "acme.co"), "" for one of Bitly's own.
func bitlyDomain(short string) string {
	h := hostOfShortURL(short)
	if bitlyHosts[strings.ToLower(h)] {
		return ""
	}
	return h
}

// hostOfShortURL is the host of a short link: "https://bit.ly/abc" and
// "bit.ly/abc" give "bit.ly"; a bare code gives "".
func hostOfShortURL(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	i := strings.IndexByte(s, '/')
	if i < 0 {
		if strings.Contains(s, ".") {
			return s // a bare host
		}
		return ""
	}
	return s[:i]
}

// codeFromShortURL takes the code out of a short link: "https://bit.ly/abc",
// "bit.ly/abc" and "abc" all give "abc". A path with more segments is kept
// whole (it is not a code this system can hold; the import re-codes it).
func codeFromShortURL(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	} else if strings.Contains(s, ".") {
		return "" // a bare host: no code
	}
	return strings.TrimRight(s, "/")
}

// defaultDomains canonicalizes Options.DefaultDomains.
func defaultDomains(hosts []string) (map[string]bool, error) {
	m := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		c, err := link.CanonicalHost(strings.TrimSpace(h))
		if err != nil {
			return nil, fmt.Errorf("import: default domain %q: %w", h, err)
		}
		m[c] = true
	}
	return m, nil
}

// domain is the domain a row's link goes on: "" for the platform's, else
// the canonical host; reason says why a row's domain cannot be one. A row
// naming no domain of its own goes on Options.Domain.
func (u *uploader) domain(raw string) (host, reason string) {
	raw = strings.TrimSpace(raw)
	if raw == "" || strings.EqualFold(raw, "DEFAULT") {
		return u.home, ""
	}
	h, err := link.CanonicalHost(raw)
	if err != nil {
		return "", fmt.Sprintf("domain %q is not a host name", truncate(raw, 80))
	}
	if u.defaults[h] {
		return u.home, ""
	}
	return h, ""
}

// lookup reads the tenant's link of code on domain.
func (u *uploader) lookup(ctx context.Context, domain, code string) (*apiclient.Link, error) {
	return u.client.Lookup(ctx, domain, code)
}

// refusal is why the API refused a row: its problem, and for a row on a
// domain the API does not know (404: the tenant has no such domain),
// what to do about it.
func (u *uploader) refusal(it item, p *apiclient.Problem) string {
	if p != nil && p.Status == http.StatusNotFound && it.domain != "" {
		return fmt.Sprintf("domain %q is not one of this tenant's domains (add it first, or import it as the platform's as the export's default domain): %s",
			it.domain, problemDetail(p))
	}
	return problemDetail(p)
}
