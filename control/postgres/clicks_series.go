package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/link"
)

// TenantTopLinks implements statsquery.Reader: the tenant's links with the
// most clicks (bots included) over the UTC days first to last, most first
// (of equals, by domain and code), at most limit, deleted links included
// (their clicks are history).
//
// The rollups keep no tenant per link and day, so this joins the range's
// rows of link_clicks_daily with the tenant's links, and the planner picks
// the cheaper side by the statistics: the range's rows by their day index
// (schema 011) when they are few, or the tenant's links, each probed by
// the rollup's primary key, when those are. Either way it reads every
// clicked link-day of the range or every link of the tenant: at 100,000
// links that is far past a page's budget, so a tenant-wide top-N kept by
// the roller would be the lasting answer (docs/api.md says so). JIT is off:
// PostgreSQL compiled these plans at a cost above the query's own.
func (s *Store) TenantTopLinks(ctx context.Context, tenantID int64, first, last time.Time, limit int) ([]statsquery.LinkClicks, error) {
	var out []statsquery.LinkClicks
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// A hash of the (domain, code) groups fits in memory: the default
		// work_mem sorted them on disk.
		if _, err := tx.Exec(ctx, `SET LOCAL jit = off; SET LOCAL work_mem = '32MB'`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
SELECT t.domain_id, coalesce(dm.host, ''), t.code, l.status, t.clicks, t.bots FROM (
	SELECT d.domain_id, d.code, sum(d.clicks)::bigint AS clicks, sum(d.bot_clicks)::bigint AS bots
	FROM link_clicks_daily d
	JOIN links l ON l.domain_id = d.domain_id AND l.code = d.code
	WHERE l.tenant_id = $1 AND d.day BETWEEN $2 AND $3
	GROUP BY d.domain_id, d.code
	HAVING sum(d.clicks) > 0
	ORDER BY 3 DESC, 1, 2
	LIMIT $4
) t
JOIN links l ON l.domain_id = t.domain_id AND l.code = t.code
LEFT JOIN domains dm ON dm.id = t.domain_id
ORDER BY t.clicks DESC, t.domain_id, t.code`, tenantID, first, last, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (statsquery.LinkClicks, error) {
			var (
				lc           statsquery.LinkClicks
				domain       int32
				status       string
				clicks, bots int64
			)
			err := r.Scan(&domain, &lc.Host, &lc.Code, &status, &clicks, &bots)
			lc.Domain, lc.Status = link.DomainID(domain), link.Status(status)
			lc.Human, lc.Bot = clicks-bots, bots
			return lc, err
		})
		return err
	})
	return out, translate(err)
}

// LiveLinks implements statsquery.Reader: the tenant's active links now,
// from the counter kept with every change of a link (schema 004).
func (s *Store) LiveLinks(ctx context.Context, tenantID int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM live_link_counts WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n, translate(err)
}
