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
// (their clicks are history). It reads each of the tenant's links' days by
// the primary key of link_clicks_daily (the tenant's links by
// links_tenant_id), so its cost grows with the tenant's links, never with
// other tenants'.
func (s *Store) TenantTopLinks(ctx context.Context, tenantID int64, first, last time.Time, limit int) ([]statsquery.LinkClicks, error) {
	rows, err := s.pool.Query(ctx, `
SELECT l.domain_id, coalesce(dm.host, ''), l.code, l.status, c.clicks, c.bots
FROM links l
CROSS JOIN LATERAL (
	SELECT sum(d.clicks)::bigint AS clicks, sum(d.bot_clicks)::bigint AS bots FROM link_clicks_daily d
	WHERE d.domain_id = l.domain_id AND d.code = l.code AND d.day BETWEEN $2 AND $3
) c
LEFT JOIN domains dm ON dm.id = l.domain_id
WHERE l.tenant_id = $1 AND c.clicks > 0
ORDER BY c.clicks DESC, l.domain_id, l.code
LIMIT $4`, tenantID, first, last, limit)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (statsquery.LinkClicks, error) {
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
	return out, translate(err)
}

// LiveLinks implements statsquery.Reader: the tenant's active links now,
// from the counter kept with every change of a link (schema 004).
func (s *Store) LiveLinks(ctx context.Context, tenantID int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM live_link_counts WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n, translate(err)
}
