package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
)

// KeyPrefix starts every API key, so a leaked key is recognisable in logs and
// by secret scanners.
const KeyPrefix = "elk_"

// CreateTenant adds a tenant and returns its id.
func (s *Store) CreateTenant(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ($1) RETURNING id`, name).Scan(&id)
	return id, translate(err)
}

// CreateTenantWithKey adds a tenant named name and issues its first API
// key: it returns the tenant's id and the key's secret, which is shown once.
func (s *Store) CreateTenantWithKey(ctx context.Context, name string) (id int64, secret string, err error) {
	if id, err = s.CreateTenant(ctx, name); err != nil {
		return 0, "", fmt.Errorf("create tenant: %w", err)
	}
	if secret, err = s.CreateAPIKey(ctx, id); err != nil {
		return 0, "", fmt.Errorf("create API key: %w", err)
	}
	return id, secret, nil
}

// TenantByName finds a tenant's id.
func (s *Store) TenantByName(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = $1`, name).Scan(&id)
	return id, translate(err)
}

// CreateAPIKey issues a new key for a tenant. The secret is returned once and
// only its digest is stored.
func (s *Store) CreateAPIKey(ctx context.Context, tenantID int64) (secret string, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	secret = KeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(secret))
	_, err = s.pool.Exec(ctx,
		`INSERT INTO api_keys (tenant_id, key_hash, prefix) VALUES ($1, $2, $3)`,
		tenantID, sum[:], secret[:len(KeyPrefix)+6])
	if err != nil {
		return "", translate(err)
	}
	return secret, nil
}

// RevokeAPIKey revokes a key, effective on the key's next request.
func (s *Store) RevokeAPIKey(ctx context.Context, secret string) error {
	sum := sha256.Sum256([]byte(secret))
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL`, sum[:])
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return link.ErrNotFound
	}
	return nil
}

// TenantByKey authenticates an API key, returning its tenant. Unknown and
// revoked keys both answer ErrUnauthorized. Each call reads the database, so
// a revocation takes effect on the very next request.
func (s *Store) TenantByKey(ctx context.Context, secret string) (int64, error) {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 100 {
		return 0, link.ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	var id int64
	err := s.pool.QueryRow(ctx,
		`SELECT tenant_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`, sum[:]).Scan(&id)
	if err = translate(err); err == link.ErrNotFound {
		return 0, link.ErrUnauthorized
	} else if err != nil {
		return 0, fmt.Errorf("authenticate: %w", err)
	}
	return id, nil
}
