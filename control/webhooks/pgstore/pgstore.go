// Package pgstore keeps webhook endpoints, the events waiting for the
// WEBHOOKS stream and the delivery log in PostgreSQL (schema 018). It is
// the only place webhook SQL is written and pgx errors are translated.
package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/shared/link"
)

// Store is the webhooks' authority. Safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool (the primary).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// translate maps driver errors: no row is webhooks.ErrNotFound, a lost or
// refused connection link.ErrUnavailable (the API's 503).
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return webhooks.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P03" || pgErr.Code == "53300" {
			return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	if pgconn.Timeout(err) || errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
	}
	return err
}

// eventUUID is an event id's uuid ("evt_" and 32 hex digits); ok is false
// for anything else.
func eventUUID(id string) ([16]byte, bool) {
	var u [16]byte
	rest, ok := strings.CutPrefix(id, "evt_")
	if !ok || len(rest) != 32 {
		return u, false
	}
	if _, err := hex.Decode(u[:], []byte(rest)); err != nil {
		return u, false
	}
	return u, true
}

// ValidEventID reports whether id is an event id's shape.
func ValidEventID(id string) bool { _, ok := eventUUID(id); return ok }

const endpointColumns = `id, tenant_id, url, description, event_types, secret, prev_secret, prev_secret_expires_at,
	enabled, disabled_reason, disabled_at, generation, resume_from, failing_since, last_failure_at,
	consecutive_failures, last_success_at, created_at, updated_at`

func scanEndpoint(row pgx.Row) (*webhooks.Endpoint, error) {
	var (
		e                                                   webhooks.Endpoint
		reason                                              pgtype.Text
		prevExp, disabledAt, failing, lastFail, lastSuccess pgtype.Timestamptz
	)
	err := row.Scan(&e.ID, &e.TenantID, &e.URL, &e.Description, &e.EventTypes, &e.Secret, &e.PrevSecret, &prevExp,
		&e.Enabled, &reason, &disabledAt, &e.Generation, &e.ResumeFrom, &failing, &lastFail,
		&e.ConsecutiveFailures, &lastSuccess, &e.CreatedAt, &e.UpdatedAt)
	if err != nil {
		return nil, err
	}
	e.DisabledReason = reason.String
	for _, t := range []struct {
		src pgtype.Timestamptz
		dst *time.Time
	}{{prevExp, &e.PrevExpiresAt}, {disabledAt, &e.DisabledAt}, {failing, &e.FailingSince}, {lastFail, &e.LastFailureAt}, {lastSuccess, &e.LastSuccessAt}} {
		if t.src.Valid {
			*t.dst = t.src.Time
		}
	}
	return &e, nil
}

func collectEndpoints(rows pgx.Rows) ([]*webhooks.Endpoint, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*webhooks.Endpoint, error) { return scanEndpoint(r) })
}

// CreateEndpoint implements webhooks.EndpointStore. The tenant's row is
// locked while its endpoints are counted, so two creates cannot both take
// the last place.
func (s *Store) CreateEndpoint(ctx context.Context, e *webhooks.Endpoint, max int) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = t.id)
			FROM tenants t WHERE t.id = $1 FOR UPDATE OF t`, e.TenantID).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return fmt.Errorf("%w: the tenant has %d, the most allowed", webhooks.ErrTooMany, n)
		}
		_, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (id, tenant_id, url, description, event_types, secret,
			resume_from, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7)`,
			e.ID, e.TenantID, e.URL, e.Description, e.EventTypes, e.Secret, e.CreatedAt)
		return err
	})
	if errors.Is(err, webhooks.ErrTooMany) {
		return err
	}
	return translate(err)
}

// Endpoint implements webhooks.EndpointStore.
func (s *Store) Endpoint(ctx context.Context, tenant int64, id string) (*webhooks.Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2`, id, tenant))
	return e, translate(err)
}

// Endpoints implements webhooks.EndpointStore.
func (s *Store) Endpoints(ctx context.Context, tenant int64) ([]*webhooks.Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`, tenant)
	if err != nil {
		return nil, translate(err)
	}
	out, err := collectEndpoints(rows)
	return out, translate(err)
}

// UpdateEndpoint implements webhooks.EndpointStore.
func (s *Store) UpdateEndpoint(ctx context.Context, tenant int64, id string, p webhooks.Patch, now time.Time) (*webhooks.Endpoint, error) {
	var types []string
	if p.EventTypes != nil {
		types = p.EventTypes
	}
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET
			url = coalesce($3, url), description = coalesce($4, description),
			event_types = coalesce($5, event_types), updated_at = $6
		WHERE id = $1 AND tenant_id = $2 RETURNING `+endpointColumns, id, tenant, p.URL, p.Description, types, now))
	return e, translate(err)
}

// DeleteEndpoint implements webhooks.EndpointStore.
func (s *Store) DeleteEndpoint(ctx context.Context, tenant int64, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2`, id, tenant)
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return webhooks.ErrNotFound
	}
	return nil
}

// RotateSecret implements webhooks.EndpointStore.
func (s *Store) RotateSecret(ctx context.Context, tenant int64, id string, secret []byte, prevUntil, now time.Time) (*webhooks.Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET
			prev_secret = CASE WHEN $4::timestamptz > $5::timestamptz THEN secret END,
			prev_secret_expires_at = CASE WHEN $4::timestamptz > $5::timestamptz THEN $4::timestamptz END,
			secret = $3, updated_at = $5::timestamptz
		WHERE id = $1 AND tenant_id = $2 RETURNING `+endpointColumns, id, tenant, secret, prevUntil, now))
	return e, translate(err)
}

// SetEnabled implements webhooks.EndpointStore.
func (s *Store) SetEnabled(ctx context.Context, tenant int64, id string, enabled bool, reason string, now time.Time) (*webhooks.Endpoint, error) {
	var row pgx.Row
	if enabled {
		row = s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET enabled = true, disabled_reason = NULL, disabled_at = NULL,
				generation = generation + 1, resume_from = $3, failing_since = NULL, last_failure_at = NULL,
				consecutive_failures = 0, updated_at = $3
			WHERE id = $1 AND tenant_id = $2 AND NOT enabled RETURNING `+endpointColumns, id, tenant, now)
	} else {
		row = s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET enabled = false, disabled_reason = $3, disabled_at = $4, updated_at = $4
			WHERE id = $1 AND tenant_id = $2 AND enabled RETURNING `+endpointColumns, id, tenant, reason, now)
	}
	e, err := scanEndpoint(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Endpoint(ctx, tenant, id) // already so, or not there
	}
	return e, translate(err)
}

// Deliveries implements webhooks.EndpointStore.
func (s *Store) Deliveries(ctx context.Context, tenant int64, id string, q webhooks.DeliveryQuery) ([]webhooks.Delivery, error) {
	if _, err := s.Endpoint(ctx, tenant, id); err != nil {
		return nil, err
	}
	before := q.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	var event pgtype.UUID
	if q.EventID != "" {
		u, ok := eventUUID(q.EventID)
		if !ok {
			return nil, fmt.Errorf("%w: event_id %.60q is not an event id (evt_ and 32 hex digits)", link.ErrInvalidInput, q.EventID)
		}
		event = pgtype.UUID{Bytes: u, Valid: true}
	}
	rows, err := s.pool.Query(ctx, `SELECT id, event_id, event_type, attempt, outcome, status_code, latency_ms, error,
			response_body, next_attempt_at, attempted_at
		FROM webhook_deliveries
		WHERE endpoint_id = $1 AND id < $2 AND ($3::uuid IS NULL OR event_id = $3) AND ($4 = '' OR outcome = $4)
		ORDER BY id DESC LIMIT $5`, id, before, event, q.Outcome, q.Limit)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (webhooks.Delivery, error) {
		var (
			d         webhooks.Delivery
			ev        [16]byte
			outcome   string
			status    pgtype.Int4
			latency   int32
			msg, body pgtype.Text
			next      pgtype.Timestamptz
		)
		if err := r.Scan(&d.ID, &ev, &d.EventType, &d.Attempt, &outcome, &status, &latency, &msg, &body, &next, &d.AttemptedAt); err != nil {
			return d, err
		}
		d.EndpointID, d.EventID, d.Succeeded = id, webhooks.EventID(ev), outcome == "succeeded"
		d.StatusCode, d.Latency = int(status.Int32), time.Duration(latency)*time.Millisecond
		d.Error, d.ResponseBody = msg.String, body.String
		if next.Valid {
			d.NextAttemptAt = next.Time
		}
		return d, nil
	})
	return out, translate(err)
}
