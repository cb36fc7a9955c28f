package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
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
// Its cost is PostgreSQL's, per row written: a link's device, status,
// browser and OS counts, its clicks without a referrer or a country and
// its day's visitors are columns of its day row (schemas 010 and 017), not
// rows of their own; rows go in sorted by key, so consecutive upserts land
// on the same index and heap pages; a link's authority row is read only
// when the caller did not pass its tenant (an index lookup, never a scan of
// links); every table is written by one statement, and two more read and
// write what only Go can merge: the visitors' sketches (read first) and
// the dimensions that outgrew TopValues (bounded after, see boundValues).
func (s *Store) ApplyClicks(ctx context.Context, r *clickroll.Rollup) error {
	n := r.TopValues
	if n <= 0 {
		n = clickroll.DefaultTopValues
	}
	links := withBreakdownLinks(r)
	var found map[int]linkFound
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The arrays of a large rollup are materialised: in memory, not in
		// temporary files. And its statement is planned as costly, which
		// would have PostgreSQL compile it with LLVM every time: half the
		// transaction's CPU went to that, for a statement that runs once.
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'; SET LOCAL jit = off`); err != nil {
			return err
		}
		// Every table is reached by its key: a scan of one is never the
		// plan, but a table just created, emptied or grown since its
		// statistics looks cheap to scan, and a scan per (link, day,
		// dimension) counted made the first rollup on an empty table cost
		// seconds of CPU (bench/clickroll).
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
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
		var err error
		if found, err = lookupLinks(ctx, tx, links); err != nil {
			return fmt.Errorf("look links up: %w", err)
		}
		b := newClickBatch(&clickroll.Rollup{Links: links, Breakdown: r.Breakdown, Hours: r.Hours}, found)
		if err := b.mergeVisitors(ctx, tx); err != nil {
			return err
		}
		over, err := b.apply(ctx, tx, n)
		if err != nil {
			return err
		}
		if err := b.boundValues(ctx, tx, over, n); err != nil {
			return err
		}
		if err := applySources(ctx, tx, r.Sources); err != nil {
			return err
		}
		if err := applyLatency(ctx, tx, r.Latency); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE click_positions SET last_seq = $2, lost_msgs = lost_msgs + $3, updated_at = now() WHERE stream = $1`,
			r.Stream, int64(r.Last), int64(r.Lost))
		return err
	})
	if errors.Is(err, clickroll.ErrPositionMoved) {
		return err
	}
	if err != nil {
		return translate(err)
	}
	for i, f := range found {
		if i < len(r.Links) {
			r.Links[i].Tenant, r.Links[i].UTM = f.tenant, f.utm
		}
	}
	return nil
}

// withBreakdownLinks is r's link rows, and an empty one for each link and
// day that has breakdown or hour rows but no link row (so its tenant is
// looked up like the others'): r's rows first, in order.
func withBreakdownLinks(r *clickroll.Rollup) []clickroll.LinkDay {
	type key struct {
		d    link.DomainID
		code string
		day  int32
	}
	have := make(map[key]bool, len(r.Links))
	for _, l := range r.Links {
		have[key{l.Domain, l.Code, epochDay(l.Day)}] = true
	}
	out := r.Links
	add := func(d link.DomainID, code string, day int32) {
		if k := (key{d, code, day}); !have[k] {
			have[k] = true
			if len(out) == len(r.Links) {
				out = slices.Clone(r.Links)
			}
			out = append(out, clickroll.LinkDay{Domain: d, Code: code, Day: dayDate(day)})
		}
	}
	for _, b := range r.Breakdown {
		add(b.Domain, b.Code, epochDay(b.Day))
	}
	for _, h := range r.Hours {
		add(h.Domain, h.Code, epochDay(h.Hour))
	}
	return out
}

// lookupLinks reads the tenant and the target's UTM of every link whose
// tenant the rollup does not give, by index (a LATERAL with LIMIT: never
// flattened into a join a large rollup would have planned as a scan of
// links). It returns them by index in links; links the authority does not
// have are absent.
func lookupLinks(ctx context.Context, tx pgx.Tx, links []clickroll.LinkDay) (map[int]linkFound, error) {
	type key struct {
		d    link.DomainID
		code string
	}
	idx := map[key][]int{}
	var domains []int32
	var codes []string
	for i, l := range links {
		if l.Tenant != 0 {
			continue
		}
		k := key{l.Domain, l.Code}
		if idx[k] == nil {
			domains, codes = append(domains, int32(l.Domain)), append(codes, l.Code)
		}
		idx[k] = append(idx[k], i)
	}
	if len(codes) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
SELECT u.domain_id, u.code, l.tenant_id, l.url
FROM unnest($1::int[], $2::text[]) AS u (domain_id, code)
CROSS JOIN LATERAL (SELECT tenant_id, url FROM links l WHERE l.domain_id = u.domain_id AND l.code = u.code LIMIT 1) l`, domains, codes)
	if err != nil {
		return nil, err
	}
	found := map[int]linkFound{}
	var d int32
	var code, url string
	var tenant int64
	_, err = pgx.ForEachRow(rows, []any{&d, &code, &tenant, &url}, func() error {
		f := linkFound{tenant: tenant, utm: clickroll.UTMOf(url)}
		for _, i := range idx[key{link.DomainID(d), code}] {
			found[i] = f
		}
		return nil
	})
	return found, err
}

// applyClicksSQL writes a rollup's rows in one statement: per link and day
// (with the column values and visitors), per tenant and day, per day, per
// link and hour, per tenant and hour, the redirects counter, and the value
// rows of links and tenants whose dimensions have room for them. It
// returns the (link or tenant, day, dimension) groups that may now hold
// more than $N values: the values it inserted, and the rows the group had
// before (counted up to $N), are more than $N. A row the upsert inserted
// has no xmax; one it updated has ours (the conflict's lock, carried to
// the new version). That is PostgreSQL's behaviour, not its promise, but
// it can only err one way: a row taken for inserted that was not costs a
// count, and an inserted row is always taken for one.
var applyClicksSQL = func() string {
	var params, names, zeroed, sets []string
	for i, c := range clickColumns {
		for j, col := range []string{c.column, c.column + "_bots"} {
			params = append(params, fmt.Sprintf("$%d::int[]", 8+2*i+j))
			names = append(names, col)
			zeroed = append(zeroed, "coalesce(x."+col+", 0) AS "+col)
			sets = append(sets, col+" = t."+col+" + excluded."+col)
		}
	}
	p := 8 + len(params) // the next parameter
	next := func(types ...string) string {
		var out []string
		for _, t := range types {
			out = append(out, fmt.Sprintf("$%d::%s", p, t))
			p++
		}
		return strings.Join(out, ", ")
	}
	tenantDays := next("bigint[]", "int[]", "bigint[]", "bigint[]", "bigint[]", "bytea[]")
	perDay := next("int[]", "bigint[]", "bigint[]", "bigint[]")
	total := next("bigint")
	linkHours := next("int[]", "text[]", "timestamptz[]", "bigint[]", "bigint[]")
	tenantHours := next("bigint[]", "timestamptz[]", "bigint[]", "bigint[]")
	linkValues := next("int[]", "int[]", "text[]", "int[]", "int[]")
	dims := next("text[]")
	tenantValues := next("bigint[]", "int[]", "text[]", "text[]", "bigint[]", "bigint[]")
	top := next("bigint")
	return `
WITH u AS MATERIALIZED (
	-- A column no row of the rollup counts in comes as NULL (cheaper to
	-- send than its zeros) and unnests as NULLs.
	SELECT x.domain_id, x.code, x.d, x.clicks, x.bots, x.visitors, x.sketch, x.ord, date '1970-01-01' + x.d AS day, ` + strings.Join(zeroed, ", ") + `
	FROM unnest($1::int[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bytea[], ` + strings.Join(params, ", ") + `)
		WITH ORDINALITY AS x (domain_id, code, d, clicks, bots, visitors, sketch, ` + strings.Join(names, ", ") + `, ord)
), per_link AS (
	INSERT INTO link_clicks_daily AS t (domain_id, code, day, clicks, bot_clicks, visitors, visitors_sketch, ` + strings.Join(names, ", ") + `)
	SELECT domain_id, code, day, clicks, bots, visitors, sketch, ` + strings.Join(names, ", ") + ` FROM u
	ON CONFLICT (domain_id, code, day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks,
		visitors = CASE WHEN excluded.visitors_sketch IS NULL THEN t.visitors ELSE excluded.visitors END,
		visitors_sketch = coalesce(excluded.visitors_sketch, t.visitors_sketch),
		` + strings.Join(sets, ", ") + `
	RETURNING domain_id, code, day, clicks
), new_days AS (
	-- The link days this statement inserted: a stored row has the clicks
	-- of every rollup before, so one the upsert returns with this
	-- rollup's count (of at least one click) did not exist.
	SELECT p.domain_id, p.code, p.day FROM per_link p JOIN u ON u.domain_id = p.domain_id AND u.code = p.code AND u.day = p.day
	WHERE p.clicks = u.clicks AND u.clicks > 0
), per_tenant AS (
	INSERT INTO tenant_clicks_daily AS t (tenant_id, day, clicks, bot_clicks, visitors, visitors_sketch)
	SELECT tenant_id, date '1970-01-01' + d, clicks, bots, visitors, sketch
	FROM unnest(` + tenantDays + `) AS x (tenant_id, d, clicks, bots, visitors, sketch)
	ON CONFLICT (tenant_id, day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks,
		visitors = CASE WHEN excluded.visitors_sketch IS NULL THEN t.visitors ELSE excluded.visitors END,
		visitors_sketch = coalesce(excluded.visitors_sketch, t.visitors_sketch)
), per_day AS (
	INSERT INTO clicks_daily AS t (day, clicks, bot_clicks, unknown_clicks)
	SELECT date '1970-01-01' + d, clicks, bots, unknown FROM unnest(` + perDay + `) AS x (d, clicks, bots, unknown)
	ON CONFLICT (day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks,
		unknown_clicks = t.unknown_clicks + excluded.unknown_clicks
), total AS (
	UPDATE counters SET value = value + ` + total + ` WHERE name = 'redirects_total'
), link_hours AS (
	INSERT INTO link_clicks_hourly AS t (domain_id, code, hour, clicks, bot_clicks)
	SELECT * FROM unnest(` + linkHours + `)
	ON CONFLICT (domain_id, code, hour) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks
), tenant_hours AS (
	INSERT INTO tenant_clicks_hourly AS t (tenant_id, hour, clicks, bot_clicks)
	SELECT * FROM unnest(` + tenantHours + `)
	ON CONFLICT (tenant_id, hour) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks
), link_values AS (
	INSERT INTO link_click_values_daily AS t (domain_id, code, day, dimension, value, clicks, bot_clicks)
	SELECT u.domain_id, u.code, u.day, (` + dims + `)[b.dim], b.val, b.clicks, b.bots
	FROM unnest(` + linkValues + `) AS b (link, dim, val, clicks, bots) JOIN u ON u.ord = b.link
	ON CONFLICT (domain_id, code, day, dimension, value) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks
	RETURNING domain_id, code, day, dimension, xmax = '0'::xid AS fresh
), link_grown AS (
	-- A link's day that is new has no values yet: its groups have room
	-- for all of theirs (at most $N, or they were not sent).
	SELECT v.domain_id, v.code, v.day, v.dimension, count(*) AS n FROM link_values v
	WHERE v.fresh AND NOT EXISTS (SELECT FROM new_days d WHERE d.domain_id = v.domain_id AND d.code = v.code AND d.day = v.day)
	GROUP BY 1, 2, 3, 4
), tenant_values AS (
	INSERT INTO tenant_click_values_daily AS t (tenant_id, day, dimension, value, clicks, bot_clicks)
	SELECT tenant_id, date '1970-01-01' + d, dim, val, clicks, bots FROM unnest(` + tenantValues + `) AS b (tenant_id, d, dim, val, clicks, bots)
	ON CONFLICT (tenant_id, day, dimension, value) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks
	RETURNING tenant_id, day, dimension, xmax = '0'::xid AS fresh
), tenant_grown AS (
	SELECT tenant_id, day, dimension, count(*) AS n FROM tenant_values WHERE fresh GROUP BY 1, 2, 3
)
SELECT g.domain_id, g.code, 0::bigint, g.day - date '1970-01-01', g.dimension FROM link_grown g
WHERE g.n + (SELECT count(*) FROM (SELECT FROM link_click_values_daily t
	WHERE t.domain_id = g.domain_id AND t.code = g.code AND t.day = g.day AND t.dimension = g.dimension LIMIT ` + top + `) c) > ` + top + `
UNION ALL
SELECT 0, '', g.tenant_id, g.day - date '1970-01-01', g.dimension FROM tenant_grown g
WHERE g.n + (SELECT count(*) FROM (SELECT FROM tenant_click_values_daily t
	WHERE t.tenant_id = g.tenant_id AND t.day = g.day AND t.dimension = g.dimension LIMIT ` + top + `) c) > ` + top
}()

// dimNames are the dimensions of value rows, as applyClicksSQL takes them
// (by index, 1-based).
var (
	dimNames = clickstats.Dimensions
	dimIndex = func() map[string]int32 {
		m := map[string]int32{}
		for i, d := range dimNames {
			m[d] = int32(i + 1)
		}
		return m
	}()
)

var errCountTooLarge = errors.New("a rollup counts more than 2^31 clicks for one row: apply smaller rollups (clickroll Config.Batch)")

// int32s is xs as int4s, or nil if one does not fit.
func int32s(xs []int64) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		if x > math.MaxInt32 || x < math.MinInt32 {
			return nil
		}
		out[i] = int32(x)
	}
	return out
}

// apply writes the batch (applyClicksSQL) and returns the value groups to
// bound: those it says outgrew n, and those that came with more than n
// values (never written by it).
func (b *clickBatch) apply(ctx context.Context, tx pgx.Tx, n int) ([]valueGroup, error) {
	lv, over := valueRows(&b.linkValues, n)
	tv, tover := valueRows(&b.tenantValues, n)
	over = append(over, tover...)
	args := []any{b.domains, b.codes, b.days, b.clicks, b.bots, b.visitors, b.sketches}
	for _, c := range b.cols {
		if !slices.ContainsFunc(c, func(n int64) bool { return n != 0 }) {
			args = append(args, []int32(nil)) // NULL: no zeros to send
			continue
		}
		c32 := int32s(c)
		if c32 == nil {
			return nil, errCountTooLarge
		}
		args = append(args, c32)
	}
	var td struct {
		tenants                []int64
		days                   []int32
		clicks, bots, visitors []int64
		sketches               [][]byte
	}
	for _, k := range slices.SortedFunc(maps.Keys(b.tenantDays), func(a, c tenantDay) int {
		return cmp.Or(cmp.Compare(a.tenant, c.tenant), cmp.Compare(a.day, c.day))
	}) {
		r := b.tenantDays[k]
		td.tenants, td.days = append(td.tenants, k.tenant), append(td.days, k.day)
		td.clicks, td.bots = append(td.clicks, r.Clicks), append(td.bots, r.Bots)
		td.visitors, td.sketches = append(td.visitors, r.visits), append(td.sketches, r.encoded)
	}
	args = append(args, td.tenants, td.days, td.clicks, td.bots, td.visitors, td.sketches)
	var pd struct {
		days                  []int32
		clicks, bots, unknown []int64
	}
	for _, d := range slices.Sorted(maps.Keys(b.perDay)) {
		c := b.perDay[d]
		pd.days, pd.clicks, pd.bots, pd.unknown = append(pd.days, d), append(pd.clicks, c[0]), append(pd.bots, c[1]), append(pd.unknown, c[2])
	}
	args = append(args, pd.days, pd.clicks, pd.bots, pd.unknown, b.total)
	var lh struct {
		domains      []int32
		codes        []string
		hours        []time.Time
		clicks, bots []int64
	}
	for _, h := range b.linkHours {
		lh.domains, lh.codes, lh.hours = append(lh.domains, int32(h.Domain)), append(lh.codes, h.Code), append(lh.hours, h.Hour)
		lh.clicks, lh.bots = append(lh.clicks, h.Clicks), append(lh.bots, h.BotClicks)
	}
	args = append(args, lh.domains, lh.codes, lh.hours, lh.clicks, lh.bots)
	var th struct {
		tenants      []int64
		hours        []time.Time
		clicks, bots []int64
	}
	for _, k := range slices.SortedFunc(maps.Keys(b.tenantHours), func(a, c tenantHour) int {
		return cmp.Or(cmp.Compare(a.tenant, c.tenant), cmp.Compare(a.hour, c.hour))
	}) {
		c := b.tenantHours[k]
		th.tenants, th.hours = append(th.tenants, k.tenant), append(th.hours, time.Unix(k.hour, 0).UTC())
		th.clicks, th.bots = append(th.clicks, c.Clicks), append(th.bots, c.Bots)
	}
	args = append(args, th.tenants, th.hours, th.clicks, th.bots)
	// Per link row and dimension, sent small: the link row's ordinal, the
	// dimension's index in dimNames, counts as int4 (a rollup's counts
	// are far below 2^31: checked).
	dk := make([]int32, len(lv.dims))
	for i, d := range lv.dims {
		dk[i] = dimIndex[d]
	}
	vc, vb := int32s(lv.valClicks), int32s(lv.valBots)
	if vc == nil && len(lv.valClicks) > 0 || vb == nil && len(lv.valBots) > 0 {
		return nil, errCountTooLarge
	}
	args = append(args, lv.links, dk, lv.vals, vc, vb, dimNames)
	args = append(args, tv.tenants, tv.days, tv.dims, tv.vals, tv.valClicks, tv.valBots, int64(n))
	rows, err := tx.Query(ctx, applyClicksSQL, args...)
	if err != nil {
		return nil, err
	}
	var (
		d      int32
		code   string
		tenant int64
		day    int32
		dim    string
	)
	_, err = pgx.ForEachRow(rows, []any{&d, &code, &tenant, &day, &dim}, func() error {
		g := valueGroup{tenant: tenant, day: day, dim: dim}
		if tenant == 0 {
			g.link = b.ordOf[linkKey{link.DomainID(d), code, day}]
		}
		over = append(over, g)
		return nil
	})
	return over, err
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
