// Package links is control's write path: it validates a creator's request,
// takes an ID, turns it into a code and stores the link with its change
// event.
package links

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// IDSource hands out link IDs that are never handed out again.
type IDSource interface {
	NextID(ctx context.Context) (uint64, error)
}

// Store is the authority the service writes to.
type Store interface {
	CreateLink(ctx context.Context, l *link.Link, custom bool) error
	GetLink(ctx context.Context, tenantID int64, code string) (*link.Link, error)
}

// Config tunes the service.
type Config struct {
	// BlockedDomains are target domains refused with their subdomains,
	// lower-case ASCII (punycode).
	BlockedDomains []string
	// Reserved are codes that custom links may not take: the first path
	// segments both servers route, plus a policy list.
	Reserved []string
	Now      func() time.Time
	Log      *slog.Logger
}

// Service creates and reads links. It is safe for concurrent use.
type Service struct {
	store    Store
	ids      IDSource
	cfg      Config
	reserved map[string]bool
}

// New returns a Service.
func New(store Store, ids IDSource, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	reserved := make(map[string]bool, len(cfg.Reserved))
	for _, r := range cfg.Reserved {
		reserved[strings.ToLower(r)] = true
	}
	return &Service{store: store, ids: ids, cfg: cfg, reserved: reserved}
}

// CreateRequest is what a creator asks for.
type CreateRequest struct {
	URL          string
	Code         string // custom code; empty for a generated one
	ExpiresAt    time.Time
	RedirectType link.RedirectType // 0 for the default
	Namespace    string
}

// maxGeneratedTries bounds how many generated codes a create skips because a
// custom link already holds them.
const maxGeneratedTries = 8

// Create validates req and stores a new active link for tenantID. Invalid
// input answers an error wrapping link.ErrInvalidInput or link.ErrInvalidURL,
// a taken custom code link.ErrCodeTaken; nothing is written in those cases.
func (s *Service) Create(ctx context.Context, tenantID int64, req CreateRequest) (*link.Link, error) {
	l, err := s.validate(req)
	if err != nil {
		return nil, err
	}
	l.TenantID = tenantID
	if req.Code != "" {
		id, err := s.ids.NextID(ctx)
		if err != nil {
			return nil, fmt.Errorf("allocate id: %w", err)
		}
		l.ID, l.Code = id, req.Code
		if err := s.store.CreateLink(ctx, l, true); err != nil {
			return nil, err
		}
		return l, nil
	}
	for range maxGeneratedTries {
		id, err := s.ids.NextID(ctx)
		if err != nil {
			return nil, fmt.Errorf("allocate id: %w", err)
		}
		code, err := base62.Encode(id)
		if err != nil {
			return nil, fmt.Errorf("allocate id: %w", err)
		}
		l.ID, l.Code = id, code
		err = s.store.CreateLink(ctx, l, false)
		if errors.Is(err, link.ErrCodeTaken) {
			// Custom codes never take the generated shape (see
			// validateCustomCode), so this only happens to codes imported
			// from elsewhere; the ID is wasted, never reused.
			s.cfg.Log.Warn("generated code already taken; skipping id", "id", id)
			continue
		}
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: no free generated code after %d tries", link.ErrUnavailable, maxGeneratedTries)
}

// Get returns one of the tenant's links.
func (s *Service) Get(ctx context.Context, tenantID int64, code string) (*link.Link, error) {
	if !link.ValidCodeSyntax(code) {
		return nil, link.ErrNotFound
	}
	return s.store.GetLink(ctx, tenantID, code)
}

func (s *Service) validate(req CreateRequest) (*link.Link, error) {
	norm, err := NormalizeURL(req.URL, s.cfg.BlockedDomains)
	if err != nil {
		return nil, err
	}
	l := &link.Link{URL: norm, URLOriginal: req.URL, RedirectType: req.RedirectType, ExpiresAt: req.ExpiresAt, Namespace: req.Namespace}
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
	}
	return l, nil
}

// validateCustomCode keeps custom codes out of the generated space: a 6
// character base62 code belongs to the allocator, so an edge can answer a
// miss in a sealed segment without asking the authority.
func (s *Service) validateCustomCode(code string) error {
	if !link.ValidCodeSyntax(code) {
		return fmt.Errorf("%w: code must be %d to %d characters of 0-9, A-Z, a-z, '-' or '_'", link.ErrInvalidInput, link.MinCodeLen, link.MaxCodeLen)
	}
	if len(code) == base62.Length && base62.Valid(code) || code == "000000" {
		return fmt.Errorf("%w: 6-character codes of only letters and digits are reserved for generated links; use another length or add '-' or '_'", link.ErrInvalidInput)
	}
	if s.reserved[strings.ToLower(code)] {
		return fmt.Errorf("%w: code %q is reserved", link.ErrInvalidInput, code)
	}
	return nil
}
