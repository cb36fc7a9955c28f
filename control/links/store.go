package links

import (
	"context"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// Store is the authority the service writes to and reads from.
type Store interface {
	DomainStore
	// WriteTx runs fn in a transaction on the primary and commits if fn
	// returns nil. Nothing fn wrote survives an error.
	WriteTx(ctx context.Context, fn func(Tx) error) error
	// Autocommit is a Tx whose every call is a transaction of its own.
	// Each call is still atomic (one statement), so it suits writes that
	// need no other statement to commit with them, such as InsertLinks
	// without idempotency keys, at a third of the round trips.
	Autocommit() Tx
	// GetLink reads one of a tenant's links on domain d. Another tenant's
	// code, or one on another domain, answers link.ErrNotFound, exactly as
	// an unknown code does.
	GetLink(ctx context.Context, tenantID int64, d link.DomainID, code string) (*Link, error)
	// ListLinks returns up to q.Limit of the tenant's links matching q, in
	// order q.Sort from its cursor (q.Before for SortID, q.After for the
	// others): on domain *d, or on every domain when d is nil (q.Domain is
	// not read).
	ListLinks(ctx context.Context, tenantID int64, d *link.DomainID, q ListRequest) ([]*Link, error)
	// UpdateLink applies c to one of the tenant's links on domain d, in one
	// transaction, with a new version and change event (none when c
	// changes only tags), and returns the new state. An
	// unknown code, or another tenant's, answers link.ErrNotFound; a
	// deleted link link.ErrDeleted, and nothing is written in either case.
	UpdateLink(ctx context.Context, tenantID int64, d link.DomainID, code string, c Change) (*Link, error)
	// TagLinks applies c, whose tags are normalized, to the tenant's links
	// on domain d in c.Codes, all or nothing (see Service.TagLinks), and
	// returns them in c.Codes' order (c.Domain is not read).
	TagLinks(ctx context.Context, tenantID int64, d link.DomainID, c TagChange) ([]*Link, error)
}

// Tx is one write transaction of the create path: the coalescer runs many
// creators' links through one, the batch endpoint a whole batch. Its methods
// never fail on a single item (a taken code or key is an answer, not an
// error), so one item cannot roll back the others. It is not safe for
// concurrent use.
type Tx interface {
	// ClaimKeys records keys that no committed transaction holds yet, or
	// whose hold has expired (older than the store's key time to live: it
	// is taken over, its old answer dropped), and reports, per key,
	// whether this transaction now holds it. A key that a concurrent
	// transaction is inserting makes this wait until that one ends: then
	// the key is claimed here if it rolled back and not if it committed.
	// Keys must be distinct.
	ClaimKeys(ctx context.Context, keys []IdemKey) ([]bool, error)
	// StoredResponses reads committed keys, typically those ClaimKeys did
	// not claim. A key that was not found, or has expired, is missing from
	// the map.
	StoredResponses(ctx context.Context, keys []IdemKeyID) (map[IdemKeyID]StoredResponse, error)
	// FinishKeys stores each claimed key's response, or gives the key up
	// when its response is nil (the request failed and wrote nothing, so a
	// retry with the key must run again).
	FinishKeys(ctx context.Context, keys []IdemKeyID, responses [][]byte) error
	// InsertLinks inserts links with their change events and reports, per
	// link, whether it was inserted; an inserted link has its Version,
	// Status and timestamps filled in. A link not inserted had its code on
	// its domain (or its ID) taken, possibly by another link of the same
	// call. (domain, code) pairs must be distinct.
	InsertLinks(ctx context.Context, ls []NewLink) ([]bool, error)
}

// IdemKey is a tenant's idempotency key and the hash of the request it came
// with.
type IdemKey struct {
	TenantID int64
	Key      string
	Hash     []byte
}

// IdemKeyID names an idempotency key.
type IdemKeyID struct {
	TenantID int64
	Key      string
}

// StoredResponse is what a committed idempotency key holds.
type StoredResponse struct {
	Hash     []byte
	Response []byte
}

// NewLink is a link to insert. Link's ID, Code, TenantID, Namespace, URL,
// URLOriginal, RedirectType, ExpiresAt and Extras are inputs, and so are Domain
// (the ID is in its range), Title (empty: none) and Tags (normalized),
// which go in with the link or not at all.
type NewLink struct {
	Link   *link.Link
	Domain link.DomainID
	Custom bool
	Title  string
	Tags   []string
}

// ListRequest selects a page of a tenant's links, in order Sort (newest
// ID first by default).
type ListRequest struct {
	// Domain, when set, keeps links on that host; "" lists every domain.
	Domain string
	// Sort is the order; SortID (the zero value) pages by Before, every
	// other order by After.
	Sort Sort
	// Before is SortID's cursor: only links with a smaller ID; 0 for the
	// first page.
	Before uint64
	// After is the other orders' cursor: only links after it in order
	// Sort; zero for the first page.
	After Cursor
	// Status filters by effective state (see State): active (and not
	// expired), Expired, disabled or deleted; empty means all but deleted.
	Status link.Status
	// Now is the instant expiry is judged at.
	Now           time.Time
	Namespace     string    // empty: any
	CreatedAfter  time.Time // zero: unbounded
	CreatedBefore time.Time // zero: unbounded
	// Tags, when set, keeps links carrying any of them (TagMode TagsAny,
	// the default) or all of them (TagsAll).
	Tags    []string
	TagMode TagMode
	// Search, when set, keeps links whose code starts with it, whose
	// target's host is it or a subdomain of it, or whose title holds it in
	// any case.
	Search string
	Limit  int
}

// TagMode is how a list's tag filter combines its tags.
type TagMode string

// Tag modes.
const (
	TagsAny TagMode = "any"
	TagsAll TagMode = "all"
)

// Change is what an update sets; fields whose Set flag is false are kept.
type Change struct {
	SetURL       bool
	URL          string // normalized
	URLOriginal  string
	SetRedirect  bool
	RedirectType link.RedirectType
	SetExpiry    bool
	ExpiresAt    time.Time // zero clears the expiry
	SetStatus    bool
	Status       link.Status
	SetTitle     bool
	Title        string // "" removes the title
	SetRules     bool
	Rules        []link.Rule // normalized (Service.Update checked them); nil removes them
	SetPassword  bool
	PasswordHash string // passhash's encoding; "" removes the password
	SetMaxClicks bool
	MaxClicks    int64 // 0 removes the limit
	// SetTags replaces the link's tags with Tags (normalized, at most
	// MaxTags; none removes them all) in the same transaction as the
	// rest; a change of tags alone takes no version.
	SetTags bool
	Tags    []string
}
