package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/webhooks"
)

// ClaimOutbox implements webhooks.OutboxStore. SKIP LOCKED lets several
// publishers share the outbox; the rows stay locked, so no other publisher
// takes them, until this transaction deletes them or rolls back.
func (s *Store) ClaimOutbox(ctx context.Context, limit int, publish func([]webhooks.OutboxEvent) error) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT seq, event_id, tenant_id, type, occurred_at, data FROM webhook_outbox
			ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (webhooks.OutboxEvent, error) {
			var (
				e  webhooks.OutboxEvent
				id [16]byte
				t  string
			)
			err := r.Scan(&e.Seq, &id, &e.TenantID, &t, &e.OccurredAt, &e.Data)
			e.ID, e.Type = webhooks.EventID(id), webhooks.EventType(t)
			return e, err
		})
		if err != nil || len(evs) == 0 {
			return err
		}
		if err := publish(evs); err != nil {
			return err
		}
		seqs := make([]int64, len(evs))
		for i, e := range evs {
			seqs[i] = e.Seq
		}
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_outbox WHERE seq = ANY ($1)`, seqs); err != nil {
			return err
		}
		n = len(evs)
		return nil
	})
	return n, translate(err)
}

// OutboxBacklog implements webhooks.OutboxStore.
func (s *Store) OutboxBacklog(ctx context.Context) (int64, time.Time, error) {
	var (
		n      int64
		oldest pgtype.Timestamptz
	)
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(occurred_at) FROM webhook_outbox`).Scan(&n, &oldest)
	return n, oldest.Time, translate(err)
}

// closeWindowSQL takes every gathered click, locking the rows in key order
// (the order the click roller upserts them in, so neither waits for the
// other in a cycle), and writes one clicks.aggregated event per tenant:
// its totals, and its top $3 links. A roller transaction that commits
// after this statement began keeps its clicks for the next window.
const closeWindowSQL = `
WITH locked AS MATERIALIZED (
	SELECT tenant_id, domain_id, code FROM webhook_click_counts
	ORDER BY tenant_id, domain_id, code FOR UPDATE
), taken AS (
	DELETE FROM webhook_click_counts c USING locked k
	WHERE c.tenant_id = k.tenant_id AND c.domain_id = k.domain_id AND c.code = k.code
	RETURNING c.tenant_id, c.domain_id, c.code, c.clicks, c.bot_clicks
), ranked AS (
	SELECT t.*, row_number() OVER (PARTITION BY t.tenant_id ORDER BY t.clicks DESC, t.domain_id, t.code) AS rank
	FROM taken t
), per_tenant AS (
	SELECT r.tenant_id, sum(r.clicks) AS clicks, sum(r.bot_clicks) AS bot_clicks, count(*) AS links,
		coalesce(jsonb_agg(jsonb_build_object('domain_id', r.domain_id, 'domain', d.host, 'code', r.code,
			'clicks', r.clicks, 'bot_clicks', r.bot_clicks) ORDER BY r.rank) FILTER (WHERE r.rank <= $3), '[]'::jsonb) AS top
	FROM ranked r LEFT JOIN domains d ON d.id = r.domain_id
	GROUP BY r.tenant_id
)
INSERT INTO webhook_outbox (tenant_id, type, occurred_at, data)
SELECT tenant_id, 'clicks.aggregated', $2::timestamptz, jsonb_build_object('period_start', $1::timestamptz, 'period_end', $2::timestamptz,
	'clicks', clicks, 'bot_clicks', bot_clicks, 'links', links, 'top', top)
FROM per_tenant ORDER BY tenant_id`

// CloseClickWindow implements webhooks.ClickStore. The window's row is
// locked first: of two instances closing the same window, the second finds
// it closed.
func (s *Store) CloseClickWindow(ctx context.Context, end time.Time, top int) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var start time.Time
		if err := tx.QueryRow(ctx, `SELECT period_end FROM webhook_click_window FOR UPDATE`).Scan(&start); err != nil {
			return err
		}
		if !start.Before(end) {
			return nil
		}
		tag, err := tx.Exec(ctx, closeWindowSQL, start, end, top)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, `UPDATE webhook_click_window SET period_end = $1`, end)
		return err
	})
	return n, translate(err)
}
