// Package links is control's write path: it validates a creator's request,
// takes an ID, turns it into a code and stores the link with its change
// event, idempotently when the creator sends a key.
package links

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// IDSource hands out link IDs that are never handed out again.
//
// Done must be called exactly once for every ID NextID returned, after the
// last write that could commit it has ended, saying whether a link with it
// committed: the allocator seals a segment (so edges may answer misses in it
// without asking the authority) only when every ID it handed out is done.
//
// NextID hands out an ID of domain d, in link.IDRange(d) (the domain's
// allocator namespace, link.NamespaceOf).
type IDSource interface {
	NextID(ctx context.Context, d link.DomainID) (uint64, error)
	Done(id uint64, committed bool)
}

// Config tunes the service; zero values take the defaults.
type Config struct {
	// BlockedDomains are target domains refused with their subdomains,
	// lower-case ASCII (punycode).
	BlockedDomains []string
	// AllowPrivateTargets accepts targets on loopback, private, link-local
	// and other non-public addresses and names (see NormalizeURL); only a
	// shortener serving one intranet sets it.
	AllowPrivateTargets bool
	// Reserved are control's own route segments and an operator's extra
	// codes; the edge's routes and the policy file are added to them.
	Reserved []string
	// Writers bounds the shared create transactions in flight at once
	// (default 2); keep it below the pool size less the relay's connection,
	// so reads and authentication still find connections.
	Writers int
	// MaxCoalesce bounds the creates one shared transaction carries
	// (default 500).
	MaxCoalesce int
	// Hashers bounds the passwords hashed at once (default
	// DefaultHashers), each taking PasswordParams.Memory while it runs.
	Hashers int
	// PasswordParams are the argon2id parameters new password hashes are
	// made with (default passhash.Default); hashes keep their own, so
	// changing them leaves every stored password working.
	PasswordParams passhash.Params
	// Keys are the operator's code keys (--code-keys): FF1 domains'
	// generated codes are made with them. Nil is no keys, so no link can
	// be created on an FF1 domain.
	Keys *ff1.Keys
	// DomainTTL is how long a domain read from the store is trusted
	// (default DefaultDomainTTL).
	DomainTTL time.Duration
	Now       func() time.Time
	Log       *slog.Logger
}

// Service creates, reads and changes links. It is safe for concurrent use.
type Service struct {
	store    Store
	ids      IDSource
	cfg      Config
	reserved map[string]bool
	co       *coalescer
	domains  *domainCache
	hashers  chan struct{} // a token per password being hashed

	wasted, reservedSkips atomic.Uint64
}

// New returns a Service. It starts no goroutines: shared create
// transactions run on the goroutines of the callers waiting for them.
func New(store Store, ids IDSource, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 2
	}
	if cfg.MaxCoalesce <= 0 {
		cfg.MaxCoalesce = 500
	}
	if cfg.DomainTTL <= 0 {
		cfg.DomainTTL = DefaultDomainTTL
	}
	if cfg.Hashers <= 0 {
		cfg.Hashers = DefaultHashers
	}
	if cfg.PasswordParams == (passhash.Params{}) {
		cfg.PasswordParams = passhash.Default
	}
	s := &Service{store: store, ids: ids, cfg: cfg, reserved: Reserved(cfg.Reserved),
		domains: newDomainCache(store, cfg.Keys, cfg.DomainTTL, cfg.Now), hashers: make(chan struct{}, cfg.Hashers)}
	s.co = newCoalescer(s.writeCreates, cfg.Writers, cfg.MaxCoalesce)
	return s
}

// Stats are the service's counters.
type Stats struct {
	// WastedIDs counts IDs taken for generated codes that a custom link
	// already held, ReservedSkips those whose code is a reserved word:
	// skipped, never handed out again.
	WastedIDs, ReservedSkips uint64
	// SharedTx counts create transactions and Coalesced the creates they
	// carried.
	SharedTx, Coalesced uint64
}

// Stats returns the counters so far.
func (s *Service) Stats() Stats {
	return Stats{WastedIDs: s.wasted.Load(), ReservedSkips: s.reservedSkips.Load(), SharedTx: s.co.txs.Load(), Coalesced: s.co.items.Load()}
}

// CreateRequest is what a creator asks for.
type CreateRequest struct {
	// Domain is the host the link's short URL is on: one of the tenant's
	// active domains, or "" for the platform's.
	Domain       string
	URL          string
	Code         string // custom code; empty for a generated one
	ExpiresAt    time.Time
	RedirectType link.RedirectType // 0 for the default
	Namespace    string
	// Title is the creator's name for the link (MaxTitleLen characters,
	// one line); empty for none.
	Title string
	// Tags are the link's tags, normalized on the way in (NormalizeTags);
	// at most MaxTags.
	Tags []string
	// Rules are the link's routing rules as sent (docs/rules.md):
	// countries and languages in any case and order, each target a URL
	// as URL is; they are normalized as the link's target is. At most
	// link.MaxRules.
	Rules []link.Rule
	// Password, when set, protects the link (passhash.CheckPassword). It
	// is hashed (argon2id) and never kept, nor logged.
	Password string
	// MaxClicks is how many counted clicks the link redirects for; 0 for
	// no limit.
	MaxClicks int64
	// IdempotencyKey, if set, makes the create idempotent for the tenant.
	IdempotencyKey string
	// Rejected, in a batch, is why the transport could not read this item;
	// the batch answers it as the item's error.
	Rejected error
}

// Created is a create's answer.
type Created struct {
	Link *Link
	// Replayed reports that an earlier request with the same idempotency
	// key created the link and this is its original answer.
	Replayed bool
}

// maxGeneratedTries bounds how many generated codes a create skips because a
// custom link already holds them.
const maxGeneratedTries = 8

// Create validates req and stores a new active link for tenantID on
// req.Domain, in a transaction it may share with concurrent creates. Invalid
// input answers an error wrapping link.ErrInvalidInput or
// link.ErrInvalidURL, a domain the tenant may not use link.ErrNotFound, a
// custom code taken on that domain link.ErrCodeTaken, a reused idempotency
// key with another request link.ErrIdempotencyConflict; nothing is written
// in those cases.
func (s *Service) Create(ctx context.Context, tenantID int64, req CreateRequest) (Created, error) {
	l, err := s.validate(req)
	if err != nil {
		return Created{}, err
	}
	d, err := s.domainFor(ctx, tenantID, req.Domain, true)
	if err != nil {
		return Created{}, err
	}
	l.TenantID, l.DomainID, l.Domain = tenantID, d.ID, d.Host
	// Last of the checks: a password costs a hash.
	if l.Extras, err = s.extras(ctx, &req); err != nil {
		return Created{}, err
	}
	l.PasswordProtected = l.Extras.PasswordHash != ""
	it := &item{link: l, domain: d, custom: req.Code != "", key: req.IdempotencyKey}
	if it.key != "" {
		it.hash = requestHash("link", l, req.Code)
	}
	return s.co.do(ctx, it)
}

// Get returns one of the tenant's links on domain (a host; "" for the
// platform's), deleted ones included.
func (s *Service) Get(ctx context.Context, tenantID int64, domain, code string) (*Link, error) {
	d, err := s.domainFor(ctx, tenantID, domain, false)
	if err != nil {
		return nil, err
	}
	if !link.ValidCodeSyntax(code) {
		return nil, link.ErrNotFound
	}
	return s.store.GetLink(ctx, tenantID, d.ID, code)
}

// Expired is the state of an active link past its expires_at. It is never
// stored (expiry is evaluated at read time, by no sweeper), but it is what
// every edge answers such a link with (410), so it is what readers are told.
const Expired link.Status = "expired"

// LimitReached is the state of an active link whose counted clicks have
// reached its click limit (docs/click-limits.md). Like Expired it is never
// stored as a status: the count is, and edges answer such a link 410.
const LimitReached link.Status = "limit_reached"

// State is l's effective state at now: its stored status, except that an
// active link whose expiry has come is Expired, and one whose counted
// clicks reached its limit is LimitReached (expiry first). A disabled or
// deleted link stays so whatever its expiry or clicks: re-enabling it is
// what would show them.
func State(l *link.Link, now time.Time) link.Status {
	switch {
	case l.Status != link.Active:
	case l.Expired(now):
		return Expired
	case l.Extras.MaxClicks > 0 && l.Extras.ClicksCounted >= l.Extras.MaxClicks:
		return LimitReached
	}
	return l.Status
}

// MaxPage bounds a list page.
const MaxPage = 200

// List returns a page of the tenant's links, newest ID first (SortID), and
// the cursor of the next page (0 when this is the last): on q.Domain, or on
// every domain when it is "". q.Status filters on the effective state (see
// State) at q.Now, the service's clock when zero. Other orders are
// ListPage's.
func (s *Service) List(ctx context.Context, tenantID int64, q ListRequest) ([]*Link, uint64, error) {
	if q.Sort != SortID {
		return nil, 0, fmt.Errorf("%w: List lists by ID; ListPage takes other orders", link.ErrInvalidInput)
	}
	ls, more, err := s.list(ctx, tenantID, q)
	if err != nil || !more {
		return ls, 0, err
	}
	return ls, ls[len(ls)-1].ID, nil
}

// list checks q's filters and reads up to q.Limit links, and whether more
// follow.
func (s *Service) list(ctx context.Context, tenantID int64, q ListRequest) ([]*Link, bool, error) {
	var only *link.DomainID
	if q.Domain != "" {
		d, err := s.domainFor(ctx, tenantID, q.Domain, false)
		if err != nil {
			return nil, false, err
		}
		only = &d.ID
	}
	if q.Limit <= 0 || q.Limit > MaxPage {
		return nil, false, fmt.Errorf("%w: limit must be 1 to %d", link.ErrInvalidInput, MaxPage)
	}
	if q.Status != "" && q.Status != Expired && q.Status != LimitReached && !q.Status.Valid() {
		return nil, false, fmt.Errorf("%w: status must be active, expired, limit_reached, disabled or deleted", link.ErrInvalidInput)
	}
	if q.Now.IsZero() {
		q.Now = s.cfg.Now()
	}
	if q.TagMode != "" && q.TagMode != TagsAny && q.TagMode != TagsAll {
		return nil, false, fmt.Errorf("%w: tag_mode must be any or all", link.ErrInvalidInput)
	}
	if q.TagMode == "" {
		q.TagMode = TagsAny
	}
	// A filter may name more tags than a link holds: any of 20 of them is
	// a fair question, all of 21 never matches, but neither is worth a
	// query of more than MaxTags tags.
	tags, err := NormalizeTags(q.Tags, MaxTags)
	if err != nil {
		return nil, false, fmt.Errorf("tag filter: %w", err)
	}
	q.Tags = tags
	if err := checkSearch(q.Search); err != nil {
		return nil, false, err
	}
	want := q.Limit
	q.Limit++ // one more tells whether another page exists
	ls, err := s.store.ListLinks(ctx, tenantID, only, q)
	if err != nil {
		return nil, false, err
	}
	if len(ls) > want {
		return ls[:want], true, nil
	}
	return ls, false, nil
}

// Update is a change to a link; nil fields are kept.
type Update struct {
	URL          *string
	RedirectType *link.RedirectType
	// ExpiresAt set to a zero time clears the expiry.
	ExpiresAt *time.Time
	Status    *link.Status // active or disabled
	// Title set to "" removes the title.
	Title *string
	// Rules replace the link's rules; an empty list removes them.
	Rules *[]link.Rule
	// Password set to "" removes the password; another value replaces it.
	Password *string
	// MaxClicks set to 0 removes the click limit.
	MaxClicks *int64
	// Tags, when set, become the link's tags, exactly (an empty list
	// removes them all), in the same transaction as the fields above: an
	// edit is saved whole or not at all. Tags are no part of a link's
	// version (edges never see them), so tags alone write no version.
	Tags *[]string
}

// Update changes one of the tenant's links and returns its new state, with
// a new version and change event (unless only its tags change), all in one
// transaction: nothing is written on any error. Unknown and other tenants'
// codes answer link.ErrNotFound, deleted links link.ErrDeleted.
func (s *Service) Update(ctx context.Context, tenantID int64, domain, code string, u Update) (*Link, error) {
	d, err := s.domainFor(ctx, tenantID, domain, false)
	if err != nil {
		return nil, err
	}
	if !link.ValidCodeSyntax(code) {
		return nil, link.ErrNotFound
	}
	var c Change
	if u.Tags != nil {
		tags, err := NormalizeTags(*u.Tags, MaxTags)
		if err != nil {
			return nil, err
		}
		c.SetTags, c.Tags = true, tags
		if u == (Update{Tags: u.Tags}) {
			return s.store.UpdateLink(ctx, tenantID, d.ID, code, c)
		}
	}
	if u.URL == nil && u.RedirectType == nil && u.ExpiresAt == nil && u.Status == nil && u.Title == nil &&
		u.Rules == nil && u.Password == nil && u.MaxClicks == nil {
		return nil, fmt.Errorf("%w: nothing to change; send url, redirect_type, expires_at, status, title, rules, password or max_clicks", link.ErrInvalidInput)
	}
	if u.Title != nil {
		if err := checkTitle(*u.Title); err != nil {
			return nil, err
		}
		c.SetTitle, c.Title = true, *u.Title
	}
	if u.URL != nil {
		norm, err := s.normalizeURL(*u.URL)
		if err != nil {
			return nil, err
		}
		c.SetURL, c.URL, c.URLOriginal = true, norm, *u.URL
	}
	if u.RedirectType != nil {
		if !u.RedirectType.Valid() {
			return nil, fmt.Errorf("%w: redirect_type must be 301, 302, 307 or 308", link.ErrInvalidInput)
		}
		c.SetRedirect, c.RedirectType = true, *u.RedirectType
	}
	if u.ExpiresAt != nil {
		if !u.ExpiresAt.IsZero() && !u.ExpiresAt.After(s.cfg.Now()) {
			return nil, fmt.Errorf("%w: expires_at must be in the future (or null to never expire)", link.ErrInvalidInput)
		}
		c.SetExpiry, c.ExpiresAt = true, *u.ExpiresAt
	}
	if u.Status != nil {
		if *u.Status != link.Active && *u.Status != link.Disabled {
			return nil, fmt.Errorf("%w: status must be active or disabled; DELETE removes a link", link.ErrInvalidInput)
		}
		c.SetStatus, c.Status = true, *u.Status
	}
	// Last of the checks: a password costs a hash.
	if err := s.updateExtras(ctx, &u, &c); err != nil {
		return nil, err
	}
	return s.store.UpdateLink(ctx, tenantID, d.ID, code, c)
}

// Delete tombstones one of the tenant's links: it stops redirecting and its
// code is never handed out again. Deleting a deleted link changes nothing
// and answers link.ErrDeleted.
func (s *Service) Delete(ctx context.Context, tenantID int64, domain, code string) (*Link, error) {
	d, err := s.domainFor(ctx, tenantID, domain, false)
	if err != nil {
		return nil, err
	}
	if !link.ValidCodeSyntax(code) {
		return nil, link.ErrNotFound
	}
	return s.store.UpdateLink(ctx, tenantID, d.ID, code, Change{SetStatus: true, Status: link.Deleted})
}

func (s *Service) validate(req CreateRequest) (*Link, error) {
	if req.Rejected != nil {
		return nil, req.Rejected
	}
	norm, err := s.normalizeURL(req.URL)
	if err != nil {
		return nil, err
	}
	// The authority keeps microseconds: truncate here so the answer, the
	// stored link and a replay's hash all agree; and in UTC, as a replay
	// decodes it.
	l := &Link{Link: link.Link{URL: norm, URLOriginal: req.URL, RedirectType: req.RedirectType, ExpiresAt: req.ExpiresAt.Truncate(time.Microsecond).UTC(), Namespace: req.Namespace}}
	if err := checkTitle(req.Title); err != nil {
		return nil, err
	}
	if l.Tags, err = NormalizeTags(req.Tags, MaxTags); err != nil {
		return nil, err
	}
	l.Title = req.Title
	if l.RedirectType == 0 {
		l.RedirectType = link.DefaultRedirect
	}
	if !l.RedirectType.Valid() {
		return nil, fmt.Errorf("%w: redirect_type must be 301, 302, 307 or 308", link.ErrInvalidInput)
	}
	if !l.ExpiresAt.IsZero() && !l.ExpiresAt.After(s.cfg.Now()) {
		return nil, fmt.Errorf("%w: expires_at must be in the future", link.ErrInvalidInput)
	}
	if l.Namespace == "" {
		l.Namespace = "default"
	}
	if l.Namespace != "default" {
		return nil, fmt.Errorf("%w: unknown namespace %q", link.ErrInvalidInput, l.Namespace)
	}
	if req.Code != "" {
		if err := s.validateCustomCode(req.Code); err != nil {
			return nil, err
		}
		l.Code = req.Code
	}
	if len(req.IdempotencyKey) > 255 {
		return nil, fmt.Errorf("%w: Idempotency-Key is longer than 255 bytes", link.ErrInvalidInput)
	}
	return l, nil
}

// validateCustomCode keeps custom codes off the servers' own paths and out
// of the generated space: a 6 character base62 code belongs to the
// allocator, so an edge can answer a miss in a sealed segment without asking
// the authority. Reserved words are checked first, whatever their length
// or characters: "api" is refused for what it is, not for being short.
func (s *Service) validateCustomCode(code string) error {
	if s.reserved[lowerASCII(code)] {
		return fmt.Errorf("%w: code %q is reserved (a path the service serves itself, or a reserved word); choose another", link.ErrInvalidInput, code)
	}
	if !link.ValidCodeSyntax(code) {
		return fmt.Errorf("%w: code must be %d to %d characters of 0-9, A-Z, a-z, '-' or '_'", link.ErrInvalidInput, link.MinCodeLen, link.MaxCodeLen)
	}
	if len(code) == base62.Length && (base62.Valid(code) || code == "000000") {
		return fmt.Errorf("%w: 6-character codes of only letters and digits are reserved for generated links; use another length or add '-' or '_'", link.ErrInvalidInput)
	}
	return nil
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
