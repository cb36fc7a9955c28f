package linkevent

import (
	"errors"
	"fmt"

	"github.com/edgelink/edgelink/shared/link"
)

// MaxRedirectLen bounds a domain's root and not-found redirects (the
// domains table holds at most as much).
const MaxRedirectLen = 2048

// validateDomain checks a domain event's configuration. Its errors may name
// the domain's host (an operator's setting, not a link's) but never a
// redirect: a target is a URL, and logs carry none.
func validateDomain(e *Event) error {
	c := e.Conf
	if c == nil {
		return errors.New("domain event without a configuration")
	}
	if c.ID > link.MaxDomainID || (e.Domain != 0 && e.Domain != c.ID) {
		return fmt.Errorf("domain %d in an event of domain %d", c.ID, e.Domain)
	}
	if c.Version != 0 && c.Version != e.Version {
		return fmt.Errorf("domain %d: configuration version %d in an event of another version", c.ID, c.Version)
	}
	if h, err := link.CanonicalHost(c.Host); err != nil || h != c.Host {
		return fmt.Errorf("domain %d: host %q is not canonical", c.ID, c.Host)
	}
	if c.TenantID < 0 {
		return fmt.Errorf("domain %d: tenant %d", c.ID, c.TenantID)
	}
	if c.Status != link.DomainActive && c.Status != link.DomainRemoved {
		return fmt.Errorf("domain %d: status %q", c.ID, c.Status)
	}
	if !c.CodeMode.Valid() {
		return fmt.Errorf("domain %d: code mode %q", c.ID, c.CodeMode)
	}
	if c.CodeMode == link.CodesFF1 && len(c.KeyIDs) == 0 {
		return fmt.Errorf("domain %d: ff1 codes without a key id", c.ID)
	}
	if len(c.KeyIDs) > link.MaxKeyIDs {
		return fmt.Errorf("domain %d: %d key ids, at most %d", c.ID, len(c.KeyIDs), link.MaxKeyIDs)
	}
	for i, k := range c.KeyIDs {
		if !validKeyID(k) {
			return fmt.Errorf("domain %d: key id %d of %d bytes is not a key name", c.ID, i, len(k))
		}
		for _, earlier := range c.KeyIDs[:i] {
			if earlier == k {
				return fmt.Errorf("domain %d: key id %d given twice", c.ID, i)
			}
		}
	}
	if len(c.Robots) > link.MaxRobotsLen {
		return fmt.Errorf("domain %d: robots.txt of %d bytes, at most %d", c.ID, len(c.Robots), link.MaxRobotsLen)
	}
	for _, r := range [...]struct{ name, url string }{{"root", c.RootRedirect}, {"not-found", c.NotFoundRedirect}} {
		if !validRedirect(r.url) {
			return fmt.Errorf("domain %d: %s redirect of %d bytes is not a URL an edge can send", c.ID, r.name, len(r.url))
		}
	}
	return nil
}

// validKeyID is the key name syntax of shared/ff1's key files: a letter or
// digit, then letters, digits, '.', '_' or '-', at most link.MaxKeyIDLen
// in all.
func validKeyID(k string) bool {
	if k == "" || len(k) > link.MaxKeyIDLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= '0' && c <= '9', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// validRedirect: empty (no redirect), or an http(s) URL an edge can put in
// a Location header as it is: control normalized it, so it holds no space
// or control character, which would split or corrupt the header.
func validRedirect(u string) bool {
	if u == "" {
		return true
	}
	if len(u) > MaxRedirectLen || !(hasPrefixFold(u, "http://") || hasPrefixFold(u, "https://")) {
		return false
	}
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] == 0x7f {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}
