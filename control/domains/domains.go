// Package domains is control's management of domains: the hosts a tenant's
// short links live on, each with its own codes, its own ID namespace and
// its own settings (root and not-found redirects, robots.txt, code mode).
package domains

import (
	"context"
	"errors"

	"github.com/edgelink/edgelink/shared/link"
)

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
	// KeyIDs, the old ones move behind it (at most link.MaxKeyIDs kept).
	KeyID *string
}

// Service manages domains. It is safe for concurrent use.
type Service struct{}

var errNotYet = errors.New("domains: not implemented yet")

// Create adds a domain owned by tenantID (which must be a tenant, not 0).
func (s *Service) Create(ctx context.Context, tenantID int64, in Input) (link.Domain, error) {
	return link.Domain{}, errNotYet
}

// Update changes a domain; tenantID 0 is the operator and may change any.
func (s *Service) Update(ctx context.Context, tenantID int64, host string, p Patch) (link.Domain, error) {
	return link.Domain{}, errNotYet
}

// Remove marks a domain removed: its links stay, its host answers 404.
func (s *Service) Remove(ctx context.Context, tenantID int64, host string) (link.Domain, error) {
	return link.Domain{}, errNotYet
}

// List returns the tenant's domains, then the platform's; 0 lists all.
func (s *Service) List(ctx context.Context, tenantID int64) ([]link.Domain, error) {
	return nil, errNotYet
}

// Get returns one domain the tenant may see.
func (s *Service) Get(ctx context.Context, tenantID int64, host string) (link.Domain, error) {
	return link.Domain{}, errNotYet
}
