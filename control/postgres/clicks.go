package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// Advisory locks of the click roller (one active consumer) and of the
// live-link reconcile (one at a time, so two controls starting together
// do not both correct the same drift).
const (
	clickRollerLockKey int64 = 0x65646765_6c6e6b35 // "edgelnk5"
	reconcileLockKey   int64 = 0x65646765_6c6e6b36 // "edgelnk6"
)

// ClickPosition implements clickroll.Store.
func (s *Store) ClickPosition(ctx context.Context, stream string) (uint64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM click_positions WHERE stream = $1`, stream).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uint64(seq), translate(err)
}

// ApplyClicks implements clickroll.Store. Rollups are keyed by (domain,
// code) (schema 015), and a link's tenant is looked up by both: clicks on
// a (domain, code) the links table does not have are counted in
// clicks_daily.unknown_clicks only, even when another domain has the code.
//
// Its cost is PostgreSQL's, per row written: a link's device and status
// counts and its clicks without a referrer are columns of its day row
// (schema 010), not rows of their own;
// rows go in sorted by key, so consecutive upserts land on the same index
// and heap pages; a link's
// authority row is read only when the caller did not pass its tenant (an
// index lookup, never a scan of links); breakdown rows join their link's
// row in memory.
func (s *Store) ApplyClicks(ctx context.Context, r *clickroll.Rollup) error {
	rows := clickRows(r)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The arrays of a large rollup are materialised: in memory, not in
		// temporary files. And its statement is planned as costly, which
		// would have PostgreSQL compile it with LLVM every time: half the
		// transaction's CPU went to that, for a statement that runs once.
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'; SET LOCAL jit = off`); err != nil {
			return err
		}
		// The commit does not wait for its WAL to reach the disk (tens of
		// megabytes for a large rollup, most of them full-page images): a
		// crash that loses it loses the position with the rollups, and the
		// next roller applies those messages again from the stream, which
		// keeps them whether acknowledged or not.
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO click_positions (stream, last_seq) VALUES ($1, 0) ON CONFLICT DO NOTHING`, r.Stream); err != nil {
			return err
		}
		// The row lock serialises rollers, and the compare makes the
		// apply a compare-and-swap on the position.
		var cur int64
		if err := tx.QueryRow(ctx, `SELECT last_seq FROM click_positions WHERE stream = $1 FOR UPDATE`, r.Stream).Scan(&cur); err != nil {
			return err
		}
		if uint64(cur) != r.Prev {
			return fmt.Errorf("%w: stored %d, rollup after %d", clickroll.ErrPositionMoved, cur, r.Prev)
		}
		if err := rows.apply(ctx, tx, r); err != nil {
			return err
		}
		if err := applySources(ctx, tx, r.Sources); err != nil {
			return err
		}
		if err := applyLatency(ctx, tx, r.Latency); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE click_positions SET last_seq = $2, lost_msgs = lost_msgs + $3, updated_at = now() WHERE stream = $1`,
			r.Stream, int64(r.Last), int64(r.Lost))
		return err
	})
	if errors.Is(err, clickroll.ErrPositionMoved) {
		return err
	}
	return translate(err)
}

// clickColumns are the dimension values counted in columns of
// link_clicks_daily (schema 010) rather than in rows of
// link_click_values_daily: the device classes, the redirect statuses and
// no referrer.
// Value i is counted in column clickColumns[i].column, its bots in
// column_bots.
var clickColumns = []struct{ dim, value, column string }{
	{"device", "unknown", "device_unknown"}, {"device", "desktop", "device_desktop"}, {"device", "mobile", "device_mobile"},
	{"device", "tablet", "device_tablet"}, {"device", "tv", "device_tv"},
	{"status", "301", "status_301"}, {"status", "302", "status_302"}, {"status", "307", "status_307"}, {"status", "308", "status_308"},
	{"referrer", "", "referrer_none"},
}

// clickColumn is the index in clickColumns of a dimension value, or -1.
func clickColumn(dim, value string) int {
	for i, c := range clickColumns {
		if c.value == value && c.dim == dim {
			return i
		}
	}
	return -1
}

// clickArrays are a rollup's rows as the columns of one statement: the
// link rows sorted by (domain, code, day), with the counts of the column values;
// the other breakdown rows in the order of their links, each naming its
// link row by ordinal (1-based) rather than by code and day.
type clickArrays struct {
	domains      []int32
	codes        []string
	days         []int32 // days since 1970-01-01
	clicks, bots []int64
	cols         [][]int64 // per clickColumns entry i: clicks at 2i, bots at 2i+1
	tenants      []int64   // 0: look the link up
	rollup       []int     // link ordinal - 1 → index in the rollup's Links (-1: added here)

	link               []int32
	dims, vals         []string
	valClicks, valBots []int64
}

func epochDay(t time.Time) int32 { return int32(t.Unix() / 86400) }

func clickRows(r *clickroll.Rollup) *clickArrays {
	order := make([]int, len(r.Links))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &r.Links[i], &r.Links[j]
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), strings.Compare(a.Code, b.Code), a.Day.Compare(b.Day))
	})
	type linkKey struct {
		domain link.DomainID
		code   string
		day    int32
	}
	ord := make(map[linkKey]int32, len(order))
	a := &clickArrays{cols: make([][]int64, 2*len(clickColumns))}
	addLink := func(i int, domain link.DomainID, code string, day int32, clicks, bots, tenant int64) int32 {
		a.domains = append(a.domains, int32(domain))
		a.codes, a.days = append(a.codes, code), append(a.days, day)
		a.clicks, a.bots, a.tenants = append(a.clicks, clicks), append(a.bots, bots), append(a.tenants, tenant)
		for c := range a.cols {
			a.cols[c] = append(a.cols[c], 0)
		}
		a.rollup = append(a.rollup, i)
		n := int32(len(a.codes))
		ord[linkKey{domain, code, day}] = n
		return n
	}
	for _, i := range order {
		l := &r.Links[i]
		addLink(i, l.Domain, l.Code, epochDay(l.Day), l.Clicks, l.BotClicks, l.Tenant)
	}
	// Column values go to their link's row; the other breakdown rows are
	// grouped by their link's ordinal (a counting sort: stable, linear),
	// which is key order for the link rows.
	rowLink := make([]int32, len(r.Breakdown))
	perLink := make([]int32, len(a.codes)+2)
	for i, b := range r.Breakdown {
		day := epochDay(b.Day)
		n, ok := ord[linkKey{b.Domain, b.Code, day}]
		if !ok {
			// A breakdown without its link's row: the link row adds nothing.
			n = addLink(-1, b.Domain, b.Code, day, 0, 0, 0)
			perLink = append(perLink, 0)
		}
		if c := clickColumn(b.Dimension, b.Value); c >= 0 {
			a.cols[2*c][n-1] += b.Clicks
			a.cols[2*c+1][n-1] += b.BotClicks
			continue // rowLink[i] stays 0: no row
		}
		rowLink[i] = n
		perLink[n+1]++
	}
	for i := 2; i < len(perLink); i++ {
		perLink[i] += perLink[i-1]
	}
	m := int(perLink[len(perLink)-1])
	a.link, a.dims, a.vals = make([]int32, m), make([]string, m), make([]string, m)
	a.valClicks, a.valBots = make([]int64, m), make([]int64, m)
	for i, b := range r.Breakdown {
		n := rowLink[i]
		if n == 0 {
			continue
		}
		j := perLink[n]
		perLink[n]++
		a.link[j], a.dims[j], a.vals[j], a.valClicks[j], a.valBots[j] = n, b.Dimension, b.Value, b.Clicks, b.BotClicks
	}
	return a
}

// applyClicksSQL writes a rollup's rows in one statement: per link and day
// (with the column values), per tenant and day, per day, per link, day and
// other dimension value, and the redirects counter; it returns the tenants
// it looked up.
var applyClicksSQL = func() string {
	var params, names, sets []string
	for i, c := range clickColumns {
		for j, col := range []string{c.column, c.column + "_bots"} {
			params = append(params, fmt.Sprintf("$%d::bigint[]", 7+2*i+j))
			names = append(names, col)
			sets = append(sets, col+" = t."+col+" + excluded."+col)
		}
	}
	v := 7 + len(params) // the value rows' parameters
	return `
WITH u AS MATERIALIZED (
	-- A scalar subquery per link the caller did not know: an index
	-- lookup each (links_domain_code), where a join would be planned as a
	-- scan of every link for a large rollup.
	SELECT u.*, date '1970-01-01' + u.d AS day,
		coalesce(nullif(u.known, 0), (SELECT l.tenant_id FROM links l WHERE l.domain_id = u.domain_id AND l.code = u.code)) AS tenant_id
	FROM unnest($1::int[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], ` + strings.Join(params, ", ") + `)
		WITH ORDINALITY AS u (domain_id, code, d, clicks, bots, known, ` + strings.Join(names, ", ") + `, ord)
), per_link AS (
	INSERT INTO link_clicks_daily AS t (domain_id, code, day, clicks, bot_clicks, ` + strings.Join(names, ", ") + `)
	SELECT domain_id, code, day, clicks, bots, ` + strings.Join(names, ", ") + ` FROM u WHERE tenant_id IS NOT NULL
	ON CONFLICT (domain_id, code, day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks,
		` + strings.Join(sets, ", ") + `
), per_tenant AS (
	INSERT INTO tenant_clicks_daily AS t (tenant_id, day, clicks, bot_clicks)
	SELECT tenant_id, day, sum(clicks), sum(bots) FROM u WHERE tenant_id IS NOT NULL GROUP BY tenant_id, day
	ON CONFLICT (tenant_id, day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks
), per_day AS (
	INSERT INTO clicks_daily AS t (day, clicks, bot_clicks, unknown_clicks)
	SELECT day, sum(clicks), sum(bots), coalesce(sum(clicks) FILTER (WHERE tenant_id IS NULL), 0) FROM u GROUP BY day
	ON CONFLICT (day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks,
		unknown_clicks = t.unknown_clicks + excluded.unknown_clicks
), per_value AS (
	INSERT INTO link_click_values_daily AS t (domain_id, code, day, dimension, value, clicks, bot_clicks)
	SELECT u.domain_id, u.code, u.day, b.dim, b.val, b.clicks, b.bots
	FROM unnest(` + fmt.Sprintf("$%d::int[], $%d::text[], $%d::text[], $%d::bigint[], $%d::bigint[]", v, v+1, v+2, v+3, v+4) + `) AS b (link, dim, val, clicks, bots)
	JOIN u ON u.ord = b.link
	WHERE u.tenant_id IS NOT NULL
	ON CONFLICT (domain_id, code, day, dimension, value) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks
), total AS (
	UPDATE counters SET value = value + (SELECT coalesce(sum(clicks), 0) FROM u) WHERE name = 'redirects_total'
)
SELECT ord, tenant_id FROM u WHERE known = 0 AND tenant_id IS NOT NULL`
}()

// apply writes the rows (applyClicksSQL) and sets the Tenant of the
// rollup's link rows it looked up.
func (a *clickArrays) apply(ctx context.Context, tx pgx.Tx, r *clickroll.Rollup) error {
	if len(a.codes) == 0 {
		return nil
	}
	args := []any{a.domains, a.codes, a.days, a.clicks, a.bots, a.tenants}
	for _, c := range a.cols {
		args = append(args, c)
	}
	rows, err := tx.Query(ctx, applyClicksSQL, append(args, a.link, a.dims, a.vals, a.valClicks, a.valBots)...)
	if err != nil {
		return err
	}
	found := map[int]int64{}
	var ord, tenant int64
	if _, err := pgx.ForEachRow(rows, []any{&ord, &tenant}, func() error {
		if i := a.rollup[ord-1]; i >= 0 {
			found[i] = tenant
		}
		return nil
	}); err != nil {
		return err
	}
	// Set only once the statement succeeded; the commit may still fail,
	// which leaves the tenants true but the rollup unapplied.
	for i, t := range found {
		r.Links[i].Tenant = t
	}
	return nil
}

func applySources(ctx context.Context, tx pgx.Tx, rows []clickroll.SourceReport) error {
	if len(rows) == 0 {
		return nil
	}
	edges, boots := make([]string, len(rows)), make([]string, len(rows))
	offered, dropped, applied := make([]int64, len(rows)), make([]int64, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		edges[i], boots[i], offered[i], dropped[i], applied[i] = r.Edge, r.Boot, int64(r.Offered), int64(r.Dropped), r.Applied
	}
	_, err := tx.Exec(ctx, `
INSERT INTO click_sources AS t (edge, boot, offered, dropped, applied)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
ON CONFLICT (edge, boot) DO UPDATE SET offered = greatest(t.offered, excluded.offered),
	dropped = greatest(t.dropped, excluded.dropped), applied = t.applied + excluded.applied, last_seen = now()`,
		edges, boots, offered, dropped, applied)
	return err
}

func applyLatency(ctx context.Context, tx pgx.Tx, rows []clickroll.LatencyBucket) error {
	if len(rows) == 0 {
		return nil
	}
	days, buckets, counts := make([]time.Time, len(rows)), make([]int32, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		days[i], buckets[i], counts[i] = r.Day, int32(r.Bucket), r.Count
	}
	_, err := tx.Exec(ctx, `
INSERT INTO redirect_latency_daily AS t (day, bucket, count)
SELECT * FROM unnest($1::date[], $2::int[], $3::bigint[])
ON CONFLICT (day, bucket) DO UPDATE SET count = t.count + excluded.count`,
		days, buckets, counts)
	return err
}

// clickRollerSession is a dedicated connection holding the click roller's
// advisory lock.
type clickRollerSession struct{ lockSession }

// AcquireClickRoller implements clickroll.Store on a dedicated connection.
func (s *Store) AcquireClickRoller(ctx context.Context) (clickroll.Session, error) {
	l, err := s.lock(ctx, clickRollerLockKey, clickroll.ErrBusy)
	if err != nil {
		return nil, err
	}
	return &clickRollerSession{l}, nil
}

// Alive implements clickroll.Session: it checks the session's connection,
// and with it the lock.
func (c *clickRollerSession) Alive(ctx context.Context) error {
	if _, err := c.conn.Exec(ctx, `SELECT 1`); err != nil {
		return fmt.Errorf("click roller session lost: %w", err)
	}
	return nil
}

// LiveLinkDrift is a tenant whose live-link counter disagreed with its rows.
type LiveLinkDrift struct {
	TenantID        int64
	Counted, Actual int64
}

// ReconcileLiveLinks compares every tenant's live-link counter with a count
// of its active links, both read in one snapshot, and corrects the
// counter by the difference. The correction is a delta, so links written
// while it runs stay counted by their own triggers; writers are never
// blocked. It returns the drifts it corrected.
func (s *Store) ReconcileLiveLinks(ctx context.Context) ([]LiveLinkDrift, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, translate(err)
	}
	// The session lock spans the read and the fix: a second control
	// starting now waits and then reads a snapshot that has the fix.
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, reconcileLockKey); err != nil {
		return nil, translate(err)
	}
	var drifts []LiveLinkDrift
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT coalesce(c.tenant_id, a.tenant_id), coalesce(c.n, 0), coalesce(a.n, 0)
FROM (SELECT tenant_id, sum(n)::bigint AS n FROM live_link_counts GROUP BY tenant_id) c
FULL JOIN (SELECT tenant_id, count(*) AS n FROM links WHERE status = 'active' GROUP BY tenant_id) a
	ON a.tenant_id = c.tenant_id
WHERE coalesce(c.n, 0) <> coalesce(a.n, 0)`)
		if err != nil {
			return err
		}
		drifts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (LiveLinkDrift, error) {
			var d LiveLinkDrift
			return d, r.Scan(&d.TenantID, &d.Counted, &d.Actual)
		})
		return err
	})
	if err != nil {
		return nil, translate(err)
	}
	for _, d := range drifts {
		if _, err := conn.Exec(ctx, `
INSERT INTO live_link_counts AS c (tenant_id, stripe, n) VALUES ($1, 0, $2)
ON CONFLICT (tenant_id, stripe) DO UPDATE SET n = c.n + excluded.n`, d.TenantID, d.Actual-d.Counted); err != nil {
			return nil, translate(err)
		}
	}
	return drifts, nil
}

// linkBreakdownSQL reads one link's clicks per dimension value over a range
// of days ($1 domain, $2 code, $3 and $4 the days, $5 the values per
// dimension), largest first: from the value rows and the column values of
// its day rows (schema 010), as the view link_click_breakdown_daily
// unpivots them, but read from the tables, which carry the domain (schema
// 015) where the view does not.
var linkBreakdownSQL = func() string {
	var vals []string
	for _, c := range clickColumns {
		vals = append(vals, fmt.Sprintf("('%s', '%s', d.%s, d.%s_bots)", c.dim, c.value, c.column, c.column))
	}
	return `
SELECT dimension, value, clicks, bot_clicks FROM (
	SELECT dimension, value, sum(clicks)::bigint AS clicks, sum(bot_clicks)::bigint AS bot_clicks,
		row_number() OVER (PARTITION BY dimension ORDER BY sum(clicks) DESC, value) AS rank
	FROM (
		SELECT dimension, value, clicks, bot_clicks FROM link_click_values_daily
		WHERE domain_id = $1 AND code = $2 AND day BETWEEN $3 AND $4
		UNION ALL
		SELECT v.dimension, v.value, v.clicks, v.bot_clicks
		FROM link_clicks_daily d
		CROSS JOIN LATERAL (VALUES ` + strings.Join(vals, ", ") + `) AS v (dimension, value, clicks, bot_clicks)
		WHERE d.domain_id = $1 AND d.code = $2 AND d.day BETWEEN $3 AND $4 AND v.clicks <> 0
	) b
	GROUP BY dimension, value
) r WHERE rank <= $5 ORDER BY dimension, rank`
}()

// LinkClicks returns the clicks of code on domain d per day from from to to
// (inclusive UTC days; days without clicks are absent) and per dimension
// value, largest first, at most perDimension values per dimension. The
// same code on another domain is another link, never counted here. The
// caller checks that the link is the tenant's.
func (s *Store) LinkClicks(ctx context.Context, d link.DomainID, code string, from, to time.Time, perDimension int) ([]clickstats.Day, []clickstats.Breakdown, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, clicks, bot_clicks FROM link_clicks_daily
		WHERE domain_id = $1 AND code = $2 AND day BETWEEN $3 AND $4 ORDER BY day`, int32(d), code, from, to)
	if err != nil {
		return nil, nil, translate(err)
	}
	days, err := pgx.CollectRows(rows, scanDay)
	if err != nil {
		return nil, nil, translate(err)
	}
	rows, err = s.pool.Query(ctx, linkBreakdownSQL, int32(d), code, from, to, perDimension)
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
	return d, r.Scan(&d.Day, &d.Clicks, &d.BotClicks)
}

// TenantClicks returns the tenant's clicks per day from from to to
// (inclusive; days without clicks are absent) and its live links now.
func (s *Store) TenantClicks(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Day, int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, clicks, bot_clicks FROM tenant_clicks_daily
		WHERE tenant_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day`, tenantID, from, to)
	if err != nil {
		return nil, 0, translate(err)
	}
	days, err := pgx.CollectRows(rows, scanDay)
	if err != nil {
		return nil, 0, translate(err)
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
