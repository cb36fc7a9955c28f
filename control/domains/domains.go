// Package domains is control's management of domains: the hosts a tenant's
// short links live on, each with its own codes, its own ID namespace and
// its own settings (root and not-found redirects, robots.txt, code mode and
// FF1 keys). It validates; the store writes each change with its change
// event, and a new domain with its allocator namespace, in one transaction.
package domains

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// Store keeps domains (control/postgres implements it).
type Store interface {
	// CreateDomain stores a new active domain for d.TenantID with its
	// allocator namespace and change event, assigning d.ID and d.Version;
	// a taken host answers link.ErrDomainTaken.
	CreateDomain(ctx context.Context, d link.Domain) (link.Domain, error)
	// UpdateDomain locks the domain with host (any when tenantID is 0,
	// else only the tenant's: another's answers link.ErrNotFound), lets
	// change modify it (its error rolls back and is returned), and writes
	// it with a new version and change event.
	UpdateDomain(ctx context.Context, tenantID int64, host string, change func(*link.Domain) error) (link.Domain, error)
	// DomainByHost returns the domain with that canonical host, whatever
	// its status, or an error wrapping link.ErrNotFound.
	DomainByHost(ctx context.Context, host string) (link.Domain, error)
	// Domains lists the tenant's domains, then the platform's (every
	// domain when tenantID is 0).
	Domains(ctx context.Context, tenantID int64) ([]link.Domain, error)
}

// Config configures a Service.
type Config struct {
	// Keys are the operator's code keys (--code-keys); a domain's FF1 key
	// must be one of them. Nil is none.
	Keys *ff1.Keys
	// DefaultKey is the key name new FF1 domains get when their input
	// names none (--domain-key); empty: such a create must name one.
	DefaultKey string
	// Targets is the policy root and not-found redirects must pass, the
	// one link targets pass.
	Targets links.TargetPolicy
	// OnChange, if set, is called with each domain as a create, update or
	// removal committed it (control tells its links service to forget
	// what it cached of the domain). It must not block.
	OnChange func(link.Domain)
}

// Service manages domains. It is safe for concurrent use.
type Service struct {
	store Store
	cfg   Config
}

// New returns a Service on store.
func New(store Store, cfg Config) *Service {
	if cfg.Keys == nil {
		cfg.Keys = &ff1.Keys{}
	}
	return &Service{store: store, cfg: cfg}
}

// Input is a new domain.
type Input struct {
	Host             string
	RootRedirect     string
	NotFoundRedirect string
	Robots           string
	// CodeMode is how generated codes are made; "" is link.CodesFF1.
	CodeMode link.CodeMode
	// KeyID names the FF1 key; "" is control's configured key name.
	KeyID string
}

// Patch is a change to a domain; nil fields are kept, "" clears a setting.
type Patch struct {
	RootRedirect     *string
	NotFoundRedirect *string
	Robots           *string
	// KeyID rotates the domain's FF1 key: the new name goes first in
	// KeyIDs, the old ones move behind it (at most link.MaxKeyIDs kept),
	// so edges still rule out codes made under them. Codes already made
	// stay what they are (they are stored); only new ones change.
	KeyID *string
}

// invalid is link.ErrInvalidInput with a reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", link.ErrInvalidInput, fmt.Sprintf(format, args...))
}

// unknown is what a host the tenant may not see answers, the same whether
// it exists or not.
func unknown(host string) error {
	return fmt.Errorf("%w: unknown domain %.80q", link.ErrNotFound, host)
}

// Create adds a domain owned by tenantID (a tenant: 0 is refused, the
// platform's domain is control's own). Invalid input is link.ErrInvalidInput
// saying why; a host another domain has (the platform's included) is
// link.ErrDomainTaken. Nothing is written on error.
func (s *Service) Create(ctx context.Context, tenantID int64, in Input) (link.Domain, error) {
	if tenantID == 0 {
		return link.Domain{}, invalid("a domain belongs to a tenant: name one")
	}
	host, err := canonical(in.Host)
	if err != nil {
		return link.Domain{}, err
	}
	d := link.Domain{Host: host, TenantID: tenantID, CodeMode: in.CodeMode, Status: link.DomainActive}
	if d.CodeMode == "" {
		d.CodeMode = link.CodesFF1
	}
	if !d.CodeMode.Valid() {
		return link.Domain{}, invalid("code_mode must be %s or %s, not %.40q", link.CodesFF1, link.CodesSequential, in.CodeMode)
	}
	switch {
	case d.CodeMode == link.CodesFF1:
		key := in.KeyID
		if key == "" {
			key = s.cfg.DefaultKey
		}
		if key == "" {
			return link.Domain{}, invalid("an ff1 domain needs a code key: name key_id, or configure control's --domain-key")
		}
		if err := s.checkKey(key, host); err != nil {
			return link.Domain{}, err
		}
		d.KeyIDs = []string{key}
	case in.KeyID != "":
		return link.Domain{}, invalid("key_id applies to ff1 domains only, not %s ones", d.CodeMode)
	}
	if d.RootRedirect, err = s.redirect("root_redirect", in.RootRedirect); err != nil {
		return link.Domain{}, err
	}
	if d.NotFoundRedirect, err = s.redirect("not_found_redirect", in.NotFoundRedirect); err != nil {
		return link.Domain{}, err
	}
	if err := checkRobots(in.Robots); err != nil {
		return link.Domain{}, err
	}
	d.Robots = in.Robots
	return s.changed(s.store.CreateDomain(ctx, d))
}

// changed passes a committed change to Config.OnChange.
func (s *Service) changed(d link.Domain, err error) (link.Domain, error) {
	if err == nil && s.cfg.OnChange != nil {
		s.cfg.OnChange(d)
	}
	return d, err
}

// Update changes a domain's settings. tenantID 0 is the operator and may
// change any domain, the platform's included (its redirects and robots; its
// codes stay sequential); a tenant only its own, and any other host answers
// link.ErrNotFound. A removed domain cannot be changed.
func (s *Service) Update(ctx context.Context, tenantID int64, host string, p Patch) (link.Domain, error) {
	if p.RootRedirect == nil && p.NotFoundRedirect == nil && p.Robots == nil && p.KeyID == nil {
		return link.Domain{}, invalid("nothing to change; send root_redirect, not_found_redirect, robots or key_id")
	}
	h, err := canonical(host)
	if err != nil {
		return link.Domain{}, err
	}
	var root, notFound string
	if p.RootRedirect != nil {
		if root, err = s.redirect("root_redirect", *p.RootRedirect); err != nil {
			return link.Domain{}, err
		}
	}
	if p.NotFoundRedirect != nil {
		if notFound, err = s.redirect("not_found_redirect", *p.NotFoundRedirect); err != nil {
			return link.Domain{}, err
		}
	}
	if p.Robots != nil {
		if err := checkRobots(*p.Robots); err != nil {
			return link.Domain{}, err
		}
	}
	d, err := s.store.UpdateDomain(ctx, tenantID, h, func(d *link.Domain) error {
		if d.Status != link.DomainActive {
			return invalid("domain %s was removed; it cannot be changed", d.Host)
		}
		if p.KeyID != nil {
			if d.CodeMode != link.CodesFF1 {
				return invalid("domain %s makes %s codes: only ff1 domains have keys", d.Host, d.CodeMode)
			}
			if err := s.checkKey(*p.KeyID, d.Host); err != nil {
				return err
			}
			d.KeyIDs = rotate(d.KeyIDs, *p.KeyID)
		}
		if p.RootRedirect != nil {
			d.RootRedirect = root
		}
		if p.NotFoundRedirect != nil {
			d.NotFoundRedirect = notFound
		}
		if p.Robots != nil {
			d.Robots = *p.Robots
		}
		return nil
	})
	if errors.Is(err, link.ErrNotFound) {
		return link.Domain{}, unknown(host)
	}
	return s.changed(d, err)
}

// rotate puts key first and keeps the others behind it, newest first, at
// most link.MaxKeyIDs in all.
func rotate(keys []string, key string) []string {
	out := append([]string{key}, slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == key })...)
	return out[:min(len(out), link.MaxKeyIDs)]
}

// Remove marks a domain removed: its links and its IDs stay (codes are
// never reused), its host answers 404 on edges, and no link is created on
// it any more. Removing a removed domain changes nothing. The platform's
// domain cannot be removed. Access is as for Update.
func (s *Service) Remove(ctx context.Context, tenantID int64, host string) (link.Domain, error) {
	h, err := canonical(host)
	if err != nil {
		return link.Domain{}, err
	}
	cur, err := s.Get(ctx, tenantID, h)
	if err != nil {
		return link.Domain{}, err
	}
	if cur.ID == link.DefaultDomain {
		return link.Domain{}, invalid("the platform's domain cannot be removed")
	}
	if cur.Status == link.DomainRemoved {
		return cur, nil
	}
	d, err := s.store.UpdateDomain(ctx, tenantID, h, func(d *link.Domain) error {
		d.Status = link.DomainRemoved
		return nil
	})
	if errors.Is(err, link.ErrNotFound) {
		return link.Domain{}, unknown(host)
	}
	return s.changed(d, err)
}

// List returns the tenant's domains (removed ones too), then the
// platform's; tenantID 0 lists every domain.
func (s *Service) List(ctx context.Context, tenantID int64) ([]link.Domain, error) {
	return s.store.Domains(ctx, tenantID)
}

// Get returns a domain the tenant may see: one of its own or the
// platform's (any for tenantID 0). Any other host answers link.ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID int64, host string) (link.Domain, error) {
	h, err := canonical(host)
	if err != nil {
		return link.Domain{}, err
	}
	d, err := s.store.DomainByHost(ctx, h)
	if errors.Is(err, link.ErrNotFound) || (err == nil && tenantID != 0 && d.ID != link.DefaultDomain && d.TenantID != tenantID) {
		return link.Domain{}, unknown(host)
	}
	return d, err
}

// canonical is host's canonical form, or link.ErrInvalidInput saying why.
func canonical(host string) (string, error) {
	h, err := link.CanonicalHost(host)
	if err != nil {
		return "", fmt.Errorf("%w: host %.80q: %w", link.ErrInvalidInput, host, err)
	}
	return h, nil
}

// checkKey accepts a key name the key file holds and whose permutation the
// host can have (the FF1 tweak refuses IPv6 literals). Errors name the
// key, never its bytes.
func (s *Service) checkKey(key, host string) error {
	if len(key) > link.MaxKeyIDLen || !s.cfg.Keys.Has(key) {
		return invalid("code key %.64q is not in control's key file (--code-keys)", key)
	}
	if _, err := s.cfg.Keys.Codes(key, host); err != nil {
		return invalid("domain %s cannot have ff1 codes (%v); use code_mode sequential", host, err)
	}
	return nil
}

// redirect normalizes a root or not-found redirect by the links' target
// policy; "" is none.
func (s *Service) redirect(field, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := links.NormalizeURL(raw, s.cfg.Targets)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", link.ErrInvalidInput, field, err)
	}
	return u, nil
}

// checkRobots accepts a robots.txt body of at most link.MaxRobotsLen bytes
// of UTF-8 text: no control characters but tabs and line ends.
func checkRobots(body string) error {
	if len(body) > link.MaxRobotsLen {
		return invalid("robots is at most %d bytes, not %d", link.MaxRobotsLen, len(body))
	}
	if !utf8.ValidString(body) {
		return invalid("robots is not valid UTF-8")
	}
	for i, r := range body {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return invalid("robots holds control character %U at byte %d", r, i)
		}
	}
	return nil
}
