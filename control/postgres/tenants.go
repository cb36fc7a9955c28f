package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgelink/edgelink/shared/link"
)

// KeyPrefix starts every API key, so a leaked key is recognisable in logs and
// by secret scanners.
const KeyPrefix = "elk_"

// The bounds of a tenant's own limit, as the schema's checks hold them
// (schema/007_tenant_limits.sql).
const (
	MaxTenantRate  = 1_000_000 // requests per second
	MaxTenantBurst = 1_000_000 // requests
	maxTenantName  = 200       // characters
)

// Errors of tenants and keys. ErrNoTenant and ErrNoKey also match
// link.ErrNotFound.
var (
	ErrNoTenant     error = notFoundError("no such tenant")
	ErrNoKey        error = notFoundError("no such API key")
	ErrTenantExists       = errors.New("a tenant of that name exists already")
	ErrKeyRevoked         = errors.New("the API key was revoked already")
)

// notFoundError is a lookup's "not found" with a message naming what is
// missing (link.ErrNotFound says "link not found"); it still matches
// link.ErrNotFound for callers that test for that.
type notFoundError string

func (e notFoundError) Error() string      { return string(e) }
func (notFoundError) Is(target error) bool { return target == link.ErrNotFound }

// TenantLimits is a tenant's own request limit, the token bucket the API
// charges its requests to. A zero field is unset (NULL in the database):
// the server's default applies to it.
type TenantLimits struct {
	PerSecond float64 // requests per second, refilled continuously
	Burst     int     // requests at once
}

func (l TenantLimits) validate() error {
	if l.PerSecond != 0 && (math.IsNaN(l.PerSecond) || l.PerSecond < 0 || l.PerSecond > MaxTenantRate) {
		return fmt.Errorf("%w: rate must be above 0 and at most %d requests per second", link.ErrInvalidInput, MaxTenantRate)
	}
	if l.Burst < 0 || l.Burst > MaxTenantBurst {
		return fmt.Errorf("%w: burst must be 1 to %d requests", link.ErrInvalidInput, MaxTenantBurst)
	}
	return nil
}

// LimitChange changes a tenant's limits: a nil field is kept, a pointer to
// zero unsets that field (back to the server's default).
type LimitChange struct {
	PerSecond *float64
	Burst     *int
}

// Tenant is a tenant as operators list it.
type Tenant struct {
	ID         int64
	Name       string
	Limits     TenantLimits
	ActiveKeys int // keys not revoked
	CreatedAt  time.Time
}

// ValidTenantName refuses what cannot be a tenant's name: empty or over 200
// characters, not UTF-8, control characters, or white space at either end
// (a name is typed on command lines and shown in lists).
func ValidTenantName(name string) error {
	switch n := utf8.RuneCountInString(name); {
	case name == "":
		return fmt.Errorf("%w: a tenant name cannot be empty", link.ErrInvalidInput)
	case n > maxTenantName:
		return fmt.Errorf("%w: a tenant name is at most %d characters, not %d", link.ErrInvalidInput, maxTenantName, n)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: a tenant name must be UTF-8", link.ErrInvalidInput)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%w: a tenant name cannot start or end with white space", link.ErrInvalidInput)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("%w: a tenant name cannot contain control characters", link.ErrInvalidInput)
	}
	return nil
}

// CreateTenant adds a tenant with the server's default limits and returns
// its id. A name in use answers ErrTenantExists, an invalid one
// link.ErrInvalidInput.
func (s *Store) CreateTenant(ctx context.Context, name string) (int64, error) {
	if err := ValidTenantName(name); err != nil {
		return 0, err
	}
	return insertTenant(ctx, s.pool, name, TenantLimits{})
}

// CreateTenantWithKey adds a tenant named name, with the server's default
// limits, and issues its first API key: it returns the tenant's id and the
// key's secret, which is shown once.
func (s *Store) CreateTenantWithKey(ctx context.Context, name string) (id int64, secret string, err error) {
	return s.CreateTenantWithLimits(ctx, name, TenantLimits{})
}

// CreateTenantWithLimits adds a tenant with its own limits (zero fields
// take the server's default) and issues its first API key, in one
// transaction: on error there is neither. It returns the tenant's id and
// the key's secret, which is shown once. A name in use answers
// ErrTenantExists; an invalid name or limit link.ErrInvalidInput.
func (s *Store) CreateTenantWithLimits(ctx context.Context, name string, lim TenantLimits) (id int64, secret string, err error) {
	if err := ValidTenantName(name); err != nil {
		return 0, "", err
	}
	if err := lim.validate(); err != nil {
		return 0, "", err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if id, err = insertTenant(ctx, tx, name, lim); err != nil {
			return err
		}
		secret, err = insertKey(ctx, tx, id)
		return err
	})
	if err != nil {
		return 0, "", err
	}
	return id, secret, nil
}

// rowQuerier is what inserting a tenant needs: the pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func insertTenant(ctx context.Context, q rowQuerier, name string, lim TenantLimits) (int64, error) {
	var id int64
	err := q.QueryRow(ctx,
		`INSERT INTO tenants (name, rate_per_second, burst) VALUES ($1, nullif($2::float8, 0), nullif($3::int, 0)) RETURNING id`,
		name, lim.PerSecond, lim.Burst).Scan(&id)
	if err != nil {
		return 0, translateTenant(err)
	}
	return id, nil
}

// translateTenant is translate with the tenants table's own constraints:
// its unique name, and the checks that back ValidTenantName and the
// limits' bounds (reached only by a writer that skipped them).
func translateTenant(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505" && pgErr.ConstraintName == "tenants_name_key":
			return ErrTenantExists
		case pgErr.Code == "23514":
			return fmt.Errorf("%w: refused by the database's check %s", link.ErrInvalidInput, pgErr.ConstraintName)
		}
	}
	return translate(err)
}

// TenantByName finds a tenant's id; ErrNoTenant when there is none.
func (s *Store) TenantByName(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = $1`, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNoTenant
	}
	return id, translate(err)
}

// Tenants lists every tenant by name, with its own limits and how many
// keys it has that are not revoked.
func (s *Store) Tenants(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT t.id, t.name, coalesce(t.rate_per_second, 0), coalesce(t.burst, 0), t.created_at, count(k.id)
		FROM tenants t LEFT JOIN api_keys k ON k.tenant_id = t.id AND k.revoked_at IS NULL
		GROUP BY t.id
		ORDER BY t.name`)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Tenant, error) {
		var t Tenant
		err := row.Scan(&t.ID, &t.Name, &t.Limits.PerSecond, &t.Limits.Burst, &t.CreatedAt, &t.ActiveKeys)
		return t, err
	})
	return out, translate(err)
}

// SetTenantLimits changes the named tenant's own limits and returns them as
// they now are (zero fields: the server's default). Every control instance
// applies them from its next request of that tenant on. ErrNoTenant when
// there is no such tenant; an invalid limit is link.ErrInvalidInput and
// changes nothing.
func (s *Store) SetTenantLimits(ctx context.Context, name string, c LimitChange) (TenantLimits, error) {
	var want TenantLimits
	if c.PerSecond != nil {
		want.PerSecond = *c.PerSecond
	}
	if c.Burst != nil {
		want.Burst = *c.Burst
	}
	if err := want.validate(); err != nil {
		return TenantLimits{}, err
	}
	var got TenantLimits
	err := s.pool.QueryRow(ctx, `
		UPDATE tenants SET
			rate_per_second = CASE WHEN $2 THEN nullif($3::float8, 0) ELSE rate_per_second END,
			burst           = CASE WHEN $4 THEN nullif($5::int, 0) ELSE burst END
		WHERE name = $1
		RETURNING coalesce(rate_per_second, 0), coalesce(burst, 0)`,
		name, c.PerSecond != nil, want.PerSecond, c.Burst != nil, want.Burst).Scan(&got.PerSecond, &got.Burst)
	if errors.Is(err, pgx.ErrNoRows) {
		return TenantLimits{}, ErrNoTenant
	}
	if err != nil {
		return TenantLimits{}, translateTenant(err)
	}
	return got, nil
}

// CreateAPIKey issues a new key for a tenant. The secret is returned once and
// only its digest is stored.
func (s *Store) CreateAPIKey(ctx context.Context, tenantID int64) (secret string, err error) {
	return insertKey(ctx, s.pool, tenantID)
}

// execer is what inserting a key needs: the pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertKey(ctx context.Context, q execer, tenantID int64) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	secret := KeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(secret))
	_, err := q.Exec(ctx,
		`INSERT INTO api_keys (tenant_id, key_hash, prefix) VALUES ($1, $2, $3)`,
		tenantID, sum[:], secret[:len(KeyPrefix)+6])
	if err != nil {
		return "", fmt.Errorf("create API key: %w", translate(err))
	}
	return secret, nil
}

// RevokeAPIKey revokes a key, effective on the key's next request. A key
// that was never issued answers ErrNoKey; one revoked before, ErrKeyRevoked
// (with when).
func (s *Store) RevokeAPIKey(ctx context.Context, secret string) error {
	sum := sha256.Sum256([]byte(secret))
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL`, sum[:])
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var at time.Time
	err = s.pool.QueryRow(ctx, `SELECT revoked_at FROM api_keys WHERE key_hash = $1`, sum[:]).Scan(&at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNoKey
	case err != nil:
		return translate(err)
	}
	return fmt.Errorf("%w (at %s)", ErrKeyRevoked, at.UTC().Format(time.RFC3339))
}

// Authenticate resolves an API key to its tenant and the tenant's own
// limits (zero where it has none: the server's default applies), in one
// read on every call, so a revocation or a new limit is in force from the
// key's next request on. Unknown and revoked keys both answer
// link.ErrUnauthorized.
func (s *Store) Authenticate(ctx context.Context, secret string) (tenant int64, perSecond float64, burst int, err error) {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 100 {
		return 0, 0, 0, link.ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	err = s.pool.QueryRow(ctx, `
		SELECT k.tenant_id, coalesce(t.rate_per_second, 0), coalesce(t.burst, 0)
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
		WHERE k.key_hash = $1 AND k.revoked_at IS NULL`, sum[:]).Scan(&tenant, &perSecond, &burst)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, 0, link.ErrUnauthorized
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("authenticate: %w", translate(err))
	}
	return tenant, perSecond, burst, nil
}

// TenantByKey is Authenticate without the limits.
func (s *Store) TenantByKey(ctx context.Context, secret string) (int64, error) {
	id, _, _, err := s.Authenticate(ctx, secret)
	return id, err
}
