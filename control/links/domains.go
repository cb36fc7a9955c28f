package links

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// DomainStore is how the service finds the domains links live on.
type DomainStore interface {
	// DomainByHost returns the domain whose canonical host is host,
	// whatever its status; an error wrapping link.ErrNotFound when none.
	DomainByHost(ctx context.Context, host string) (link.Domain, error)
	// DomainByID returns domain id, whatever its status; an error wrapping
	// link.ErrNotFound when none.
	DomainByID(ctx context.Context, id link.DomainID) (link.Domain, error)
}

// DefaultDomainTTL is how long the service trusts a domain it read: a
// change made by another control instance (a removal, a key rotation) is
// seen within it. A domain it has not read yet (created a moment ago,
// anywhere) is read at once.
const DefaultDomainTTL = time.Second

// domainCache holds the domains the service read, by host, and the code
// permutations of FF1 domains, by (domain, key). It is safe for concurrent
// use.
type domainCache struct {
	store DomainStore
	keys  *ff1.Keys
	ttl   time.Duration
	now   func() time.Time

	mu     sync.Mutex
	byHost map[string]cachedDomain
	codes  map[codesKey]*ff1.Codes
}

type cachedDomain struct {
	d  link.Domain
	at time.Time
}

type codesKey struct {
	id   link.DomainID
	key  string
	host string
}

func newDomainCache(store DomainStore, keys *ff1.Keys, ttl time.Duration, now func() time.Time) *domainCache {
	if keys == nil {
		keys = &ff1.Keys{}
	}
	return &domainCache{store: store, keys: keys, ttl: ttl, now: now, byHost: map[string]cachedDomain{}, codes: map[codesKey]*ff1.Codes{}}
}

// platformKey is the cache's key of the platform domain, which "" names.
const platformKey = ""

// lookup returns the domain host names ("" the platform's), read from the
// store unless read within the TTL.
func (c *domainCache) lookup(ctx context.Context, host string) (link.Domain, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.byHost[host]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.d, nil
	}
	var (
		d   link.Domain
		err error
	)
	if host == platformKey {
		d, err = c.store.DomainByID(ctx, link.DefaultDomain)
	} else {
		d, err = c.store.DomainByHost(ctx, host)
	}
	if err != nil {
		return link.Domain{}, err
	}
	c.mu.Lock()
	c.byHost[host] = cachedDomain{d: d, at: now}
	c.mu.Unlock()
	return d, nil
}

// forget drops what the cache holds of host, so the next use reads it.
func (c *domainCache) forget(host string) {
	c.mu.Lock()
	delete(c.byHost, host)
	c.mu.Unlock()
}

// ForgetDomain makes the service read the domain with canonical host (""
// for the platform's) afresh on its next use: control calls it after
// changing a domain, so its own creates see a removal or a new key at once
// (another instance's within Config.DomainTTL).
func (s *Service) ForgetDomain(host string) {
	s.domains.forget(host)
	if host != platformKey {
		// The platform's domain may be named by its host too.
		s.domains.forget(platformKey)
	}
}

// codesOf is the permutation of d's current key, made once per (domain,
// key).
func (c *domainCache) codesOf(d link.Domain) (*ff1.Codes, error) {
	if len(d.KeyIDs) == 0 {
		return nil, fmt.Errorf("%w: domain %s uses ff1 codes but names no key", link.ErrUnavailable, d.Host)
	}
	k := codesKey{d.ID, d.KeyIDs[0], d.Host}
	c.mu.Lock()
	codes := c.codes[k]
	c.mu.Unlock()
	if codes != nil {
		return codes, nil
	}
	codes, err := c.keys.Codes(k.key, d.Host)
	if err != nil {
		if errors.Is(err, ff1.ErrNoKey) {
			// Another instance (or the CLI) gave the domain a key this
			// one's --code-keys lacks: nothing can be created there here.
			return nil, fmt.Errorf("%w: code key %q of domain %s is not in this control's key file", link.ErrUnavailable, k.key, d.Host)
		}
		return nil, fmt.Errorf("domain %s: %w", d.Host, err)
	}
	c.mu.Lock()
	c.codes[k] = codes
	c.mu.Unlock()
	return codes, nil
}

// errUnknownDomain is what a host the tenant may not use answers: the same
// whether it does not exist or is another tenant's, so nothing leaks.
func errUnknownDomain(host string) error {
	return fmt.Errorf("%w: unknown domain %q", link.ErrNotFound, host)
}

// domainFor resolves host ("" for the platform's) to a domain the tenant
// may use: one of its own or the platform's. Removed domains resolve only
// when active is false (their links can still be read and changed, but
// nothing is created on them).
func (s *Service) domainFor(ctx context.Context, tenantID int64, host string, active bool) (link.Domain, error) {
	key := platformKey
	if host != "" {
		h, err := link.CanonicalHost(host)
		if err != nil {
			return link.Domain{}, fmt.Errorf("%w: domain %.80q: %w", link.ErrInvalidInput, host, err)
		}
		key = h
	}
	d, err := s.domains.lookup(ctx, key)
	if errors.Is(err, link.ErrNotFound) {
		return link.Domain{}, errUnknownDomain(host)
	}
	if err != nil {
		return link.Domain{}, fmt.Errorf("domain %.80q: %w", host, err)
	}
	if d.ID != link.DefaultDomain && d.TenantID != tenantID {
		return link.Domain{}, errUnknownDomain(host)
	}
	if active && d.Status != link.DomainActive {
		return link.Domain{}, fmt.Errorf("%w: domain %s was removed; no links are created on it", link.ErrInvalidInput, d.Host)
	}
	return d, nil
}

// codeOf is the generated code of id on d: the base62 of its local part on
// a sequential domain, its FF1 code under the domain's current key on an
// FF1 domain.
func (s *Service) codeOf(d link.Domain, id uint64) (string, error) {
	dom, local := link.SplitID(id)
	if dom != d.ID || local == 0 {
		// The ID source must hand out d's IDs only.
		return "", fmt.Errorf("id %d is not an id of domain %d", id, d.ID)
	}
	if d.CodeMode != link.CodesFF1 {
		return base62.Encode(local)
	}
	codes, err := s.domains.codesOf(d)
	if err != nil {
		return "", err
	}
	c, err := codes.Encode(local)
	if err != nil {
		return "", err
	}
	return string(c[:]), nil
}
