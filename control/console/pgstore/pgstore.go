// Package pgstore is the creator console's own queries on the authority
// pool: its sessions (schema/014_console_sessions.sql) and the tenant's API
// keys as the console lists and revokes them. Like control/allocstore, it
// is one of the few places in control that sees pgx errors; it translates
// them into console's errors and shared/link's.
package pgstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/shared/link"
)

// keyPrefix starts every API key (control/postgres.KeyPrefix): anything
// else is refused before a digest is computed.
const keyPrefix = "elk_"

var (
	_ console.Sessions = (*Store)(nil)
	_ console.Keys     = (*Store)(nil)
)

// Store runs the console's queries on a pool. It is safe for concurrent
// use.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

func digest(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// OpenSession implements console.Sessions: it resolves key, a live API
// key, and stores a new session of its tenant, in one statement.
func (s *Store) OpenSession(ctx context.Context, key string, now, expires time.Time) (console.Session, string, error) {
	if !strings.HasPrefix(key, keyPrefix) || len(key) > 100 {
		return console.Session{}, "", link.ErrUnauthorized
	}
	token, err := randomToken()
	if err != nil {
		return console.Session{}, "", fmt.Errorf("session token: %w", err)
	}
	csrf, err := randomToken()
	if err != nil {
		return console.Session{}, "", fmt.Errorf("csrf token: %w", err)
	}
	sess := console.Session{CSRF: csrf, Role: console.RoleOwner, ExpiresAt: expires, LastSeen: now}
	err = s.pool.QueryRow(ctx, `
		INSERT INTO console_sessions (token_hash, tenant_id, key_id, csrf_token, created_at, last_seen_at, expires_at)
		SELECT $2, k.tenant_id, k.id, $3, $4, $4, $5
		FROM api_keys k WHERE k.key_hash = $1 AND k.revoked_at IS NULL
		RETURNING tenant_id, key_id`,
		digest(key), digest(token), csrf, now, expires).Scan(&sess.TenantID, &sess.KeyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return console.Session{}, "", link.ErrUnauthorized
	}
	if err != nil {
		return console.Session{}, "", fmt.Errorf("open session: %w", translate(err))
	}
	return sess, token, nil
}

// Session implements console.Sessions: the session of token, read with
// its key, so a revoked key's sessions end on their next request.
func (s *Store) Session(ctx context.Context, token string, now time.Time, idle time.Duration) (console.Session, error) {
	if token == "" || len(token) > 100 {
		return console.Session{}, console.ErrNoSession
	}
	var sess console.Session
	err := s.pool.QueryRow(ctx, `
		SELECT s.tenant_id, s.key_id, s.csrf_token, s.role, s.expires_at, s.last_seen_at
		FROM console_sessions s JOIN api_keys k ON k.id = s.key_id
		WHERE s.token_hash = $1 AND k.revoked_at IS NULL AND s.expires_at > $2 AND s.last_seen_at > $3`,
		digest(token), now, now.Add(-idle)).Scan(&sess.TenantID, &sess.KeyID, &sess.CSRF, &sess.Role, &sess.ExpiresAt, &sess.LastSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		return console.Session{}, console.ErrNoSession
	}
	if err != nil {
		return console.Session{}, fmt.Errorf("read session: %w", translate(err))
	}
	return sess, nil
}

// TouchSession implements console.Sessions.
func (s *Store) TouchSession(ctx context.Context, token string, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE console_sessions SET last_seen_at = $2 WHERE token_hash = $1 AND last_seen_at < $2`, digest(token), now)
	if err != nil {
		return fmt.Errorf("touch session: %w", translate(err))
	}
	return nil
}

// CloseSession implements console.Sessions.
func (s *Store) CloseSession(ctx context.Context, token string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE token_hash = $1`, digest(token)); err != nil {
		return fmt.Errorf("close session: %w", translate(err))
	}
	return nil
}

// PurgeSessions implements console.Sessions: it deletes sessions that
// ended before now (by either bound) or whose key was revoked, and reports
// how many.
func (s *Store) PurgeSessions(ctx context.Context, now time.Time, idle time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM console_sessions s
		WHERE s.expires_at <= $1 OR s.last_seen_at <= $2
		   OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = s.key_id AND k.revoked_at IS NOT NULL)`,
		now, now.Add(-idle))
	if err != nil {
		return 0, fmt.Errorf("purge sessions: %w", translate(err))
	}
	return tag.RowsAffected(), nil
}

// Keys implements console.Keys: the tenant's keys, newest first, revoked
// ones included.
func (s *Store) Keys(ctx context.Context, tenant int64) ([]console.Key, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, prefix, created_at, revoked_at FROM api_keys WHERE tenant_id = $1 ORDER BY id DESC LIMIT 1000`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (console.Key, error) {
		var k console.Key
		var revoked *time.Time
		err := row.Scan(&k.ID, &k.Prefix, &k.CreatedAt, &revoked)
		if revoked != nil {
			k.RevokedAt = *revoked
		}
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	return out, nil
}

// CreateKey implements console.Keys. Its digest and prefix are stored as
// control/postgres stores them, so the API accepts the key.
func (s *Store) CreateKey(ctx context.Context, tenant int64) (string, error) {
	raw, err := randomToken()
	if err != nil {
		return "", fmt.Errorf("create key: %w", err)
	}
	secret := keyPrefix + raw
	_, err = s.pool.Exec(ctx, `INSERT INTO api_keys (tenant_id, key_hash, prefix) VALUES ($1, $2, $3)`,
		tenant, digest(secret), secret[:len(keyPrefix)+6])
	if err != nil {
		return "", fmt.Errorf("create key: %w", translate(err))
	}
	return secret, nil
}

// RevokeKey implements console.Keys: another tenant's key, or one that
// does not exist, is link.ErrNotFound; one revoked already changes nothing.
// The key's sessions go with it, in the same transaction.
func (s *Store) RevokeKey(ctx context.Context, tenant, id int64, now time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found bool
		err := tx.QueryRow(ctx, `
			UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3) WHERE id = $1 AND tenant_id = $2 RETURNING true`,
			id, tenant, now).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return link.ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM console_sessions WHERE key_id = $1`, id)
		return err
	})
	if errors.Is(err, link.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("revoke key: %w", translate(err))
	}
	return nil
}

// translate maps driver errors the console can act on to domain errors.
func translate(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P03" || pgErr.Code == "53300" {
			return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
		}
		return err
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
	}
	return err
}
