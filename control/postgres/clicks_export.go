package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/statsquery"
)

// ExportTenantDays streams the clicks of every link of the tenant on every
// UTC day from first to last (inclusive) that has any, deleted links
// included, calling each once per row as PostgreSQL sends it: link by
// link in the order of their IDs, each link's days in order. Nothing is
// gathered in memory, so a tenant of 100,000 links over a year exports in
// constant memory; the connection is held until the last row (or the
// first error, each's included, which stops the query and is returned).
func (s *Store) ExportTenantDays(ctx context.Context, tenantID int64, first, last time.Time, each func(statsquery.ExportRow) error) error {
	// The tenant's links in id order, each link's days by the primary key
	// of link_clicks_daily (in day order): rows leave as they are found,
	// sorted only within a link (an incremental sort), never as a whole.
	// A read-only transaction holds the snapshot, and JIT is off (it
	// compiled this plan for longer than small exports take).
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
			return translate(err)
		}
		rows, err := tx.Query(ctx, `
SELECT coalesce(dm.host, ''), l.code, d.day, d.clicks, d.bot_clicks, d.visitors
FROM links l
CROSS JOIN LATERAL (
	SELECT day, clicks, bot_clicks, visitors FROM link_clicks_daily
	WHERE domain_id = l.domain_id AND code = l.code AND day BETWEEN $2 AND $3
	ORDER BY day
) d
LEFT JOIN domains dm ON dm.id = l.domain_id
WHERE l.tenant_id = $1
ORDER BY l.tenant_id, l.id, d.day`, tenantID, first, last)
		if err != nil {
			return translate(err)
		}
		defer rows.Close()
		var r statsquery.ExportRow
		for rows.Next() {
			if err := rows.Scan(&r.Host, &r.Code, &r.Day, &r.Clicks, &r.BotClicks, &r.Visitors); err != nil {
				return translate(err)
			}
			if err := each(r); err != nil {
				return fmt.Errorf("export tenant clicks: %w", err)
			}
		}
		return translate(rows.Err())
	})
}
