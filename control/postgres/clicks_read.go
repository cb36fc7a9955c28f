package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// unpivotSQL is the VALUES list that turns the column values of a day row
// d into (dimension, value, clicks, bot_clicks) rows, as the view
// link_click_breakdown_daily does.
var unpivotSQL = func() string {
	var vals []string
	for _, c := range clickColumns {
		vals = append(vals, fmt.Sprintf("('%s', '%s', d.%s, d.%s_bots)", c.dim, c.value, c.column, c.column))
	}
	return strings.Join(vals, ", ")
}()

// linkBreakdownSQL reads one link's clicks per dimension value over a range
// of days ($1 domain, $2 code, $3 and $4 the days, $5 the values per
// dimension), largest first: from the value rows and the column values of
// its day rows (schema 010), as the view link_click_breakdown_daily
// unpivots them, but read from the tables, which carry the domain (schema
// 015) where the view does not.
var linkBreakdownSQL = `
SELECT dimension, value, clicks, bot_clicks FROM (
	SELECT dimension, value, sum(clicks)::bigint AS clicks, sum(bot_clicks)::bigint AS bot_clicks,
		row_number() OVER (PARTITION BY dimension ORDER BY sum(clicks) DESC, value) AS rank
	FROM (
		SELECT dimension, value, clicks, bot_clicks FROM link_click_values_daily
		WHERE domain_id = $1 AND code = $2 AND day BETWEEN $3 AND $4
		UNION ALL
		SELECT v.dimension, v.value, v.clicks, v.bot_clicks
		FROM link_clicks_daily d
		CROSS JOIN LATERAL (VALUES ` + unpivotSQL + `) AS v (dimension, value, clicks, bot_clicks)
		WHERE d.domain_id = $1 AND d.code = $2 AND d.day BETWEEN $3 AND $4 AND v.clicks <> 0
	) b
	GROUP BY dimension, value
) r WHERE rank <= $5 ORDER BY dimension, rank`

// LinkClicks returns the clicks of code on domain d per day from from to to
// (inclusive UTC days; days without clicks are absent) and per dimension
// value, largest first, at most perDimension values per dimension, of the
// values kept (no Other rows: LinkBreakdown has them). The same code on
// another domain is another link, never counted here. The caller checks
// that the link is the tenant's.
func (s *Store) LinkClicks(ctx context.Context, d link.DomainID, code string, from, to time.Time, perDimension int) ([]clickstats.Day, []clickstats.Breakdown, error) {
	days, err := s.LinkDays(ctx, d, code, from, to)
	if err != nil {
		return nil, nil, err
	}
	rows, err := s.pool.Query(ctx, linkBreakdownSQL, int32(d), code, from, to, perDimension)
	if err != nil {
		return nil, nil, translate(err)
	}
	br, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (clickstats.Breakdown, error) {
		var b clickstats.Breakdown
		return b, r.Scan(&b.Dimension, &b.Value, &b.Clicks, &b.BotClicks)
	})
	return days, br, translate(err)
}

func scanDay(r pgx.CollectableRow) (clickstats.Day, error) {
	var d clickstats.Day
	return d, r.Scan(&d.Day, &d.Clicks, &d.BotClicks, &d.Visitors)
}

// TenantClicks returns the tenant's clicks per day from from to to
// (inclusive; days without clicks are absent; TenantDays) and its live
// links now.
func (s *Store) TenantClicks(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Day, int64, error) {
	days, err := s.TenantDays(ctx, tenantID, from, to)
	if err != nil {
		return nil, 0, err
	}
	var live int64
	err = s.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM live_link_counts WHERE tenant_id = $1`, tenantID).Scan(&live)
	return days, live, translate(err)
}

// RedirectLatency returns the merged service-time histogram of each day
// from from to to that has one.
func (s *Store) RedirectLatency(ctx context.Context, from, to time.Time) (map[time.Time]*clicks.Histogram, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, bucket, count FROM redirect_latency_daily WHERE day BETWEEN $1 AND $2`, from, to)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := make(map[time.Time]*clicks.Histogram)
	for rows.Next() {
		var (
			day    time.Time
			bucket int32
			count  int64
		)
		if err := rows.Scan(&day, &bucket, &count); err != nil {
			return nil, translate(err)
		}
		if bucket < 0 || int(bucket) >= clicks.Buckets {
			continue
		}
		h := out[day]
		if h == nil {
			h = new(clicks.Histogram)
			out[day] = h
		}
		h[bucket] += uint64(count)
	}
	return out, translate(rows.Err())
}

// ClickPipelineStats returns the pipeline's completeness numbers.
func (s *Store) ClickPipelineStats(ctx context.Context) (clickstats.Pipeline, error) {
	var p clickstats.Pipeline
	err := s.pool.QueryRow(ctx, `
SELECT (SELECT value FROM counters WHERE name = 'redirects_total'),
	coalesce((SELECT sum(dropped) FROM click_sources), 0)::bigint,
	coalesce((SELECT sum(greatest(offered - dropped - applied, 0)) FROM click_sources), 0)::bigint,
	coalesce((SELECT sum(lost_msgs) FROM click_positions), 0)::bigint,
	coalesce((SELECT max(last_seq) FROM click_positions), 0)::bigint`).
		Scan(&p.RedirectsTotal, &p.EdgeDropped, &p.Unaccounted, &p.LostMsgs, &p.Position)
	return p, translate(err)
}

// LinkDays returns the clicks and unique visitors of code on domain d per
// UTC day from from to to (inclusive; days without clicks are absent).
func (s *Store) LinkDays(ctx context.Context, d link.DomainID, code string, from, to time.Time) ([]clickstats.Day, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, clicks, bot_clicks, visitors FROM link_clicks_daily
		WHERE domain_id = $1 AND code = $2 AND day BETWEEN $3 AND $4 ORDER BY day`, int32(d), code, from, to)
	if err != nil {
		return nil, translate(err)
	}
	days, err := pgx.CollectRows(rows, scanDay)
	return days, translate(err)
}

// TenantDays returns the clicks and unique visitors (over all its links: a
// visitor of two links counts once) of the tenant per UTC day from from to
// to (inclusive; days without clicks are absent).
func (s *Store) TenantDays(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Day, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, clicks, bot_clicks, visitors FROM tenant_clicks_daily
		WHERE tenant_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day`, tenantID, from, to)
	if err != nil {
		return nil, translate(err)
	}
	days, err := pgx.CollectRows(rows, scanDay)
	return days, translate(err)
}

func scanHour(r pgx.CollectableRow) (clickstats.Hour, error) {
	var h clickstats.Hour
	err := r.Scan(&h.Hour, &h.Clicks, &h.BotClicks)
	h.Hour = h.Hour.UTC()
	return h, err
}

// LinkHours returns the clicks of code on domain d per UTC hour from from
// (inclusive) to to (exclusive); hours without clicks are absent, and so
// are hours past the roller's retention (--click-hours-retention): the
// caller knows where that starts.
func (s *Store) LinkHours(ctx context.Context, d link.DomainID, code string, from, to time.Time) ([]clickstats.Hour, error) {
	rows, err := s.pool.Query(ctx, `SELECT hour, clicks, bot_clicks FROM link_clicks_hourly
		WHERE domain_id = $1 AND code = $2 AND hour >= $3 AND hour < $4 ORDER BY hour`, int32(d), code, from, to)
	if err != nil {
		return nil, translate(err)
	}
	hours, err := pgx.CollectRows(rows, scanHour)
	return hours, translate(err)
}

// TenantHours returns the tenant's clicks per UTC hour, as LinkHours.
func (s *Store) TenantHours(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Hour, error) {
	rows, err := s.pool.Query(ctx, `SELECT hour, clicks, bot_clicks FROM tenant_clicks_hourly
		WHERE tenant_id = $1 AND hour >= $2 AND hour < $3 ORDER BY hour`, tenantID, from, to)
	if err != nil {
		return nil, translate(err)
	}
	hours, err := pgx.CollectRows(rows, scanHour)
	return hours, translate(err)
}

// breakdownSQL reads a breakdown from src, a query of (day, dimension,
// value, other, clicks, bot_clicks) rows over the days asked, whose own
// parameters are the first p-1: $p the dimensions (NULL: all), $p+1 the
// values per dimension, $p+2 whether per day. Values past the cut join
// the Other row.
func breakdownSQL(src string, p int) string {
	src = strings.ReplaceAll(src, "%", "%%")
	return fmt.Sprintf(`
WITH src AS (`+src+`), g AS (
	SELECT CASE WHEN $%[3]d THEN day END AS day, dimension, value, other, sum(clicks)::bigint AS clicks, sum(bot_clicks)::bigint AS bots
	FROM src WHERE $%[1]d::text[] IS NULL OR dimension = ANY ($%[1]d::text[])
	GROUP BY 1, 2, 3, 4
), r AS (
	SELECT g.*, other OR row_number() OVER (PARTITION BY day, dimension ORDER BY other, clicks DESC, value) > $%[2]d AS rest FROM g
)
SELECT day, dimension, CASE WHEN rest THEN '' ELSE value END AS value, rest, sum(clicks)::bigint AS clicks, sum(bots)::bigint
FROM r GROUP BY 1, 2, 3, 4
HAVING sum(clicks) <> 0
ORDER BY day NULLS FIRST, dimension, rest, clicks DESC, value`, p, p+1, p+2)
}

var linkBreakdownRangeSQL = breakdownSQL(`
	SELECT day, dimension, value, false AS other, clicks, bot_clicks FROM link_click_values_daily
	WHERE domain_id = $1 AND code = $2 AND day BETWEEN $3 AND $4
	UNION ALL
	SELECT d.day, v.dimension, v.value, false, v.clicks, v.bot_clicks
	FROM link_clicks_daily d
	CROSS JOIN LATERAL (VALUES `+unpivotSQL+`) AS v (dimension, value, clicks, bot_clicks)
	WHERE d.domain_id = $1 AND d.code = $2 AND d.day BETWEEN $3 AND $4 AND v.clicks <> 0
	UNION ALL
	SELECT day, dimension, '', true, clicks, bot_clicks FROM link_click_other_daily
	WHERE domain_id = $1 AND code = $2 AND day BETWEEN $3 AND $4`, 5)

var tenantBreakdownSQL = breakdownSQL(`
	SELECT day, dimension, value, false AS other, clicks, bot_clicks FROM tenant_click_values_daily
	WHERE tenant_id = $1 AND day BETWEEN $2 AND $3
	UNION ALL
	SELECT day, dimension, '', true, clicks, bot_clicks FROM tenant_click_other_daily
	WHERE tenant_id = $1 AND day BETWEEN $2 AND $3`, 4)

// LinkBreakdown returns the clicks of code on domain d per dimension value
// over q's days (or per day), each dimension's values largest first (of
// equals, by value), at most q.Top of them, and then its Other row: the
// values the rollup did not keep and those past q.Top. A dimension's rows
// sum to its clicks (clickstats.Breakdown).
func (s *Store) LinkBreakdown(ctx context.Context, d link.DomainID, code string, q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error) {
	return s.breakdown(ctx, linkBreakdownRangeSQL, q, int32(d), code)
}

// TenantBreakdown returns the tenant's clicks per dimension value over all
// its links, as LinkBreakdown (no status or edge dimension).
func (s *Store) TenantBreakdown(ctx context.Context, tenantID int64, q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error) {
	return s.breakdown(ctx, tenantBreakdownSQL, q, tenantID)
}

func (s *Store) breakdown(ctx context.Context, sql string, q clickstats.BreakdownQuery, keys ...any) ([]clickstats.Breakdown, error) {
	if q.Top < 0 {
		return nil, fmt.Errorf("breakdown: top %d is negative", q.Top)
	}
	rows, err := s.pool.Query(ctx, sql, append(keys, q.From, q.To, q.Dimensions, q.Top, q.PerDay)...)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (clickstats.Breakdown, error) {
		var b clickstats.Breakdown
		var day *time.Time
		err := r.Scan(&day, &b.Dimension, &b.Value, &b.Other, &b.Clicks, &b.BotClicks)
		if day != nil {
			b.Day = *day
		}
		return b, err
	})
	return out, translate(err)
}

// PruneClickHours implements clickroll.Store: it deletes up to limit rows
// of link_clicks_hourly and up to limit of tenant_clicks_hourly whose hour
// is before before, in one short statement (the block range index on hour
// finds them), and returns how many.
func (s *Store) PruneClickHours(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
WITH l AS (
	DELETE FROM link_clicks_hourly WHERE ctid = ANY (ARRAY(SELECT ctid FROM link_clicks_hourly WHERE hour < $1 LIMIT $2)) RETURNING 1
), t AS (
	DELETE FROM tenant_clicks_hourly WHERE ctid = ANY (ARRAY(SELECT ctid FROM tenant_clicks_hourly WHERE hour < $1 LIMIT $2)) RETURNING 1
)
SELECT (SELECT count(*) FROM l) + (SELECT count(*) FROM t)`, before, limit).Scan(&n)
	return n, translate(err)
}
