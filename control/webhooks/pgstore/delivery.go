package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/webhooks"
)

// EnabledEndpoints implements webhooks.DeliveryStore.
func (s *Store) EnabledEndpoints(ctx context.Context) ([]*webhooks.Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE enabled ORDER BY id`)
	if err != nil {
		return nil, translate(err)
	}
	out, err := collectEndpoints(rows)
	return out, translate(err)
}

// DeliveryTarget implements webhooks.DeliveryStore: one read of the
// endpoint and a probe of the unique index of succeeded deliveries.
func (s *Store) DeliveryTarget(ctx context.Context, id, eventID string) (*webhooks.Endpoint, bool, error) {
	u, ok := eventUUID(eventID)
	if !ok {
		return nil, false, fmt.Errorf("event id %.60q is not an event id", eventID)
	}
	var done bool
	row := s.pool.QueryRow(ctx, `SELECT `+endpointColumns+`,
			EXISTS (SELECT FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.event_id = $2 AND d.outcome = 'succeeded')
		FROM webhook_endpoints e WHERE e.id = $1`, id, pgtype.UUID{Bytes: u, Valid: true})
	e, err := scanEndpoint(endpointAnd{row, &done})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, translate(err)
	}
	return e, done, nil
}

// endpointAnd scans an endpoint's columns and one more.
type endpointAnd struct {
	row  pgx.Row
	more any
}

func (r endpointAnd) Scan(dest ...any) error { return r.row.Scan(append(dest, r.more)...) }

// RecordAttempt implements webhooks.DeliveryStore. The endpoint's row is
// locked first, so attempts of one endpoint move its run of failures one
// at a time.
func (s *Store) RecordAttempt(ctx context.Context, d *webhooks.Delivery, policy webhooks.DisablePolicy) (disabled, duplicate bool, err error) {
	u, ok := eventUUID(d.EventID)
	if !ok {
		return false, false, fmt.Errorf("event id %.60q is not an event id", d.EventID)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			enabled     bool
			since, last pgtype.Timestamptz
			failures    int
		)
		err := tx.QueryRow(ctx, `SELECT enabled, failing_since, last_failure_at, consecutive_failures
			FROM webhook_endpoints WHERE id = $1 FOR UPDATE`, d.EndpointID).Scan(&enabled, &since, &last, &failures)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted meanwhile: nothing to log it in
		}
		if err != nil {
			return err
		}
		outcome := "failed"
		if d.Succeeded {
			outcome = "succeeded"
		}
		var status pgtype.Int4
		if d.StatusCode != 0 {
			status = pgtype.Int4{Int32: int32(d.StatusCode), Valid: true}
		}
		var next pgtype.Timestamptz
		if !d.NextAttemptAt.IsZero() {
			next = pgtype.Timestamptz{Time: d.NextAttemptAt, Valid: true}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, attempt, outcome,
				status_code, latency_ms, error, response_body, next_attempt_at, attempted_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), $10, $11)
			ON CONFLICT (endpoint_id, event_id) WHERE outcome = 'succeeded' DO NOTHING`,
			d.EndpointID, pgtype.UUID{Bytes: u, Valid: true}, d.EventType, d.Attempt, outcome, status,
			int32(min(d.Latency.Milliseconds(), 1<<31-1)), d.Error, d.ResponseBody, next, d.AttemptedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			duplicate = true
			return nil
		}
		if d.Succeeded {
			_, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = NULL, last_failure_at = NULL,
				consecutive_failures = 0, last_success_at = $2 WHERE id = $1`, d.EndpointID, d.AttemptedAt)
			return err
		}
		st := webhooks.Streak{Failures: failures}
		if since.Valid {
			st.Since = since.Time
		}
		if last.Valid {
			st.Last = last.Time
		}
		st, off := policy.Fail(st, d.AttemptedAt)
		disabled = off && enabled
		_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = $2, last_failure_at = $3, consecutive_failures = $4,
				enabled = enabled AND NOT $5, disabled_at = CASE WHEN $5 AND enabled THEN $3 ELSE disabled_at END,
				disabled_reason = CASE WHEN $5 AND enabled THEN $6 ELSE disabled_reason END,
				updated_at = CASE WHEN $5 AND enabled THEN $3 ELSE updated_at END
			WHERE id = $1`, d.EndpointID, st.Since, st.Last, st.Failures, disabled,
			fmt.Sprintf("every attempt failed from %s to %s (%d attempts); the last: %s",
				st.Since.UTC().Format(time.RFC3339), st.Last.UTC().Format(time.RFC3339), st.Failures, limitText(d.Error, 200)))
		return err
	})
	if err != nil {
		return false, false, translate(err)
	}
	return disabled, duplicate, nil
}

func limitText(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// PurgeDeliveries implements webhooks.DeliveryStore, oldest first.
func (s *Store) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
		SELECT id FROM webhook_deliveries WHERE attempted_at < $1 ORDER BY attempted_at LIMIT $2)`, before, limit)
	if err != nil {
		return 0, translate(err)
	}
	return int(tag.RowsAffected()), nil
}
