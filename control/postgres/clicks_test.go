package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// seedClickLinks writes n active links of a new tenant straight into the
// table (the triggers under test see them like any create).
func seedClickLinks(t *testing.T, pool *pgxpool.Pool, tenant string, first, n int) int64 {
	t.Helper()
	ctx := context.Background()
	st := New(pool)
	id, err := st.TenantByName(ctx, tenant)
	if err != nil {
		if id, err = st.CreateTenant(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	_, err = pool.Exec(ctx, `
INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
SELECT i, 'c-' || i, $1, 'custom', 'https://example.com/', 'https://example.com/', nextval('change_version_seq')
FROM generate_series($2::bigint, $3::bigint) i`, id, first, first+n-1)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func liveLinks(t *testing.T, st *Store, tenant int64) int64 {
	t.Helper()
	_, live, err := st.TenantClicks(context.Background(), tenant, time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return live
}

func TestLiveLinkCounterFollowsEveryMutation(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	a := seedClickLinks(t, pool, "a", 1, 100)
	b := seedClickLinks(t, pool, "b", 101, 5)
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE links SET status = 'disabled' WHERE id BETWEEN 1 AND 10`)
	exec(`UPDATE links SET status = 'deleted' WHERE id BETWEEN 5 AND 20`) // 6 disabled and 10 active ones
	exec(`UPDATE links SET status = 'active' WHERE id = 1`)
	exec(`UPDATE links SET url = 'https://example.com/x' WHERE id BETWEEN 50 AND 60`) // no status change
	exec(`DELETE FROM links WHERE id IN (100, 101)`)
	if got, want := liveLinks(t, st, a), int64(100-20+1-1); got != want {
		t.Errorf("tenant a: %d live links counted; want %d", got, want)
	}
	if got := liveLinks(t, st, b); got != 4 {
		t.Errorf("tenant b: %d live links counted; want 4", got)
	}
	// Concurrent creates on many connections: the striped rows keep up.
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := pool.Exec(ctx, `
INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
SELECT i, 'c-' || i, $1, 'custom', 'u', 'u', nextval('change_version_seq') FROM generate_series($2::bigint, $2::bigint + 49) i`,
				b, 1000+i*50)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := liveLinks(t, st, b); got != 404 {
		t.Errorf("tenant b after concurrent creates: %d; want 404", got)
	}
	drifts, err := st.ReconcileLiveLinks(ctx)
	if err != nil || len(drifts) != 0 {
		t.Fatalf("reconcile after triggers only: %v, %v; want no drift", drifts, err)
	}
}

// TestLiveCountsFollowAnUpdateOfManyLinks: one UPDATE of 40,000 links of
// two tenants, some changing status and most not, leaves each tenant's
// count exact. Schema 022 counts it without joining the statement's old
// and new rows, which the planner, without statistics on them, could join
// in a nested loop: quadratic in the rows updated (over 24 minutes for
// 100,000 in bench/console's loader), so this test would not end.
func TestLiveCountsFollowAnUpdateOfManyLinks(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	a := seedClickLinks(t, pool, "a", 1, 30_000)
	b := seedClickLinks(t, pool, "b", 30_001, 10_000)
	if _, err := pool.Exec(ctx, `UPDATE links SET status = 'disabled' WHERE id % 7 = 0 AND id <= 30000`); err != nil {
		t.Fatal(err)
	}
	// Every link at once: tenant a's disabled ones come back, one in
	// three of tenant b's goes, the rest only change their target.
	if _, err := pool.Exec(ctx, `UPDATE links SET url = url || '?v=2',
		status = CASE WHEN id > 30000 AND id % 3 = 0 THEN 'deleted' ELSE 'active' END`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant int64
		want   int64
	}{{a, 30_000}, {b, 10_000 - 10_000/3}} {
		if got := liveLinks(t, st, c.tenant); got != c.want {
			t.Errorf("tenant %d: %d live links counted; want %d", c.tenant, got, c.want)
		}
	}
	if drifts, err := st.ReconcileLiveLinks(ctx); err != nil || len(drifts) != 0 {
		t.Fatalf("reconcile: %v, %v; want no drift", drifts, err)
	}
}

func TestReconcileFixesDrift(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	a := seedClickLinks(t, pool, "a", 1, 30)
	// Drift the way a bug or a hand-written fix would: counter rows off,
	// and a tenant whose rows the counter never saw.
	if _, err := pool.Exec(ctx, `UPDATE live_link_counts SET n = n + 7 WHERE tenant_id = $1`, a); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE links DISABLE TRIGGER live_link_counts_insert`); err != nil {
		t.Fatal(err)
	}
	c := seedClickLinks(t, pool, "c", 100, 3)
	if _, err := pool.Exec(ctx, `ALTER TABLE links ENABLE TRIGGER live_link_counts_insert`); err != nil {
		t.Fatal(err)
	}
	drifts, err := st.ReconcileLiveLinks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64][2]int64{}
	for _, d := range drifts {
		want[d.TenantID] = [2]int64{d.Counted, d.Actual}
	}
	if len(drifts) != 2 || want[a] != [2]int64{37, 30} || want[c] != [2]int64{0, 3} {
		t.Fatalf("drifts %+v; want a 37→30 and c 0→3", drifts)
	}
	if liveLinks(t, st, a) != 30 || liveLinks(t, st, c) != 3 {
		t.Fatalf("after reconcile: a %d, c %d; want 30 and 3", liveLinks(t, st, a), liveLinks(t, st, c))
	}
	if again, err := st.ReconcileLiveLinks(ctx); err != nil || len(again) != 0 {
		t.Fatalf("second reconcile: %v, %v; want none", again, err)
	}
}

func TestApplyClicksOnceAtAPosition(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	tenant := seedClickLinks(t, pool, "a", 1, 2)
	day := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	var h clicks.Histogram
	h[clicks.Bucket(1000)] = 9
	h[clicks.Bucket(50000)] = 1
	r := &clickroll.Rollup{
		Stream: clicks.Stream, Prev: 0, Last: 7, Lost: 2,
		Links:     []clickroll.LinkDay{{Code: "c-1", Day: day, Clicks: 10, BotClicks: 3}, {Code: "nope", Day: day, Clicks: 4}},
		Breakdown: []clickroll.BreakdownDay{{Code: "c-1", Day: day, Dimension: "referrer", Value: "t.co", Clicks: 10, BotClicks: 3}},
		Sources:   []clickroll.SourceReport{{Edge: "e1", Boot: "b1", Offered: 20, Dropped: 2, Applied: 14}},
		Latency:   []clickroll.LatencyBucket{{Day: day, Bucket: clicks.Bucket(1000), Count: 9}, {Day: day, Bucket: clicks.Bucket(50000), Count: 1}},
	}
	if err := st.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	// A redelivered rollup built on the old position applies nothing.
	if err := st.ApplyClicks(ctx, r); !errors.Is(err, clickroll.ErrPositionMoved) {
		t.Fatalf("second apply at the same position: %v; want clickroll.ErrPositionMoved", err)
	}
	if pos, err := st.ClickPosition(ctx, clicks.Stream); err != nil || pos != 7 {
		t.Fatalf("position %d, %v; want 7", pos, err)
	}
	days, br, err := st.LinkClicks(ctx, link.DefaultDomain, "c-1", day, day, 10)
	if err != nil || len(days) != 1 || days[0].Clicks != 10 || days[0].BotClicks != 3 || len(br) != 1 || br[0].Value != "t.co" {
		t.Fatalf("link clicks %+v %+v %v", days, br, err)
	}
	tdays, _, err := st.TenantClicks(ctx, tenant, day, day)
	if err != nil || len(tdays) != 1 || tdays[0].Clicks != 10 {
		t.Fatalf("tenant clicks %+v %v", tdays, err)
	}
	hists, err := st.RedirectLatency(ctx, day, day)
	if err != nil || hists[day] == nil || *hists[day] != h {
		t.Fatalf("latency %v %v", hists, err)
	}
	p, err := st.ClickPipelineStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Offered 20 = 14 applied + 2 dropped + 4 unaccounted; the counter is
	// every click applied, unknown codes included.
	if want := (clickstats.Pipeline{RedirectsTotal: 14, EdgeDropped: 2, Unaccounted: 4, LostMsgs: 2, Position: 7}); p != want {
		t.Fatalf("pipeline %+v; want %+v", p, want)
	}
	var unknown int64
	if err := pool.QueryRow(ctx, `SELECT unknown_clicks FROM clicks_daily WHERE day = $1`, day).Scan(&unknown); err != nil || unknown != 4 {
		t.Fatalf("unknown clicks %d, %v; want 4", unknown, err)
	}
}

// TestApplyClicksReadsLinksByIndex: a rollup of thousands of links reads
// each link's row by its index and never scans the links table, however
// many links there are (a scan per transaction cost more than the rollup
// itself at a million links); its rows are all written.
func TestApplyClicksReadsLinksByIndex(t *testing.T) {
	_, pool := newStore(t)
	ctx := context.Background()
	seedClickLinks(t, pool, "a", 1, 50_000)
	if _, err := pool.Exec(ctx, `ANALYZE links`); err != nil {
		t.Fatal(err)
	}
	// One connection, so the statistics flushed after the apply are the
	// apply's own.
	cfg := pool.Config()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	// Index scans of links other than links_limited, which holds the
	// links with a click limit (none here): the limit's trigger (schema
	// 021) probes it once per statement, whatever the links clicked.
	scans := func() (seq, idx int64) {
		t.Helper()
		if _, err := one.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := one.QueryRow(ctx, `SELECT seq_scan, coalesce(idx_scan, 0) - (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'links_limited')
			FROM pg_stat_user_tables WHERE relname = 'links'`).Scan(&seq, &idx); err != nil {
			t.Fatal(err)
		}
		return seq, idx
	}
	day := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1}
	for i := 1; i <= 10_000; i += 2 {
		code := fmt.Sprintf("c-%d", i)
		r.Links = append(r.Links, clickroll.LinkDay{Code: code, Day: day, Clicks: 3, BotClicks: 1})
		for _, dv := range [][2]string{{"referrer", "t.co"}, {"device", "mobile"}, {"status", "302"}, {"edge", "e1"}} {
			r.Breakdown = append(r.Breakdown, clickroll.BreakdownDay{Code: code, Day: day, Dimension: dv[0], Value: dv[1], Clicks: 3, BotClicks: 1})
		}
	}
	seq0, idx0 := scans()
	if err := New(one).ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	seq1, idx1 := scans()
	if seq1 != seq0 || idx1 == idx0 {
		t.Fatalf("applying 5,000 links' clicks scanned links %d times and used its index %d times; want no scan", seq1-seq0, idx1-idx0)
	}
	var n, dims int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT sum(clicks) FROM link_clicks_daily), (SELECT sum(clicks) FROM link_click_breakdown_daily)`).Scan(&n, &dims); err != nil {
		t.Fatal(err)
	}
	if n != 15_000 || dims != 4*15_000 {
		t.Fatalf("rolled up %d clicks, %d in breakdowns; want 15000 and 60000", n, dims)
	}
	// It told the caller every tenant it looked up; given them, the next
	// rollup of the same links looks nothing up.
	var tenant int64
	if err := pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'a'`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	for _, l := range r.Links {
		if l.Tenant != tenant {
			t.Fatalf("link %s: tenant %d after the apply; want %d", l.Code, l.Tenant, tenant)
		}
	}
	r.Prev, r.Last = 1, 2
	if err := New(one).ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	if seq2, idx2 := scans(); seq2 != seq1 || idx2 != idx1 {
		t.Fatalf("a rollup of links with known tenants read links %d times (%d scans); want none", idx2-idx1, seq2-seq1)
	}
}

// TestApplyClicksTrustsAndReportsTenants: a link row with its tenant is
// counted for that tenant; one without is looked up and its tenant set on
// the row; a code the authority does not have stays 0 and counts as
// unknown.
func TestApplyClicksTrustsAndReportsTenants(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	a := seedClickLinks(t, pool, "a", 1, 2)
	day := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1, Links: []clickroll.LinkDay{
		{Code: "c-1", Day: day, Clicks: 2, Tenant: a}, {Code: "c-2", Day: day, Clicks: 3}, {Code: "nope", Day: day, Clicks: 4}}}
	if err := st.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := []int64{r.Links[0].Tenant, r.Links[1].Tenant, r.Links[2].Tenant}; !slices.Equal(got, []int64{a, a, 0}) {
		t.Fatalf("tenants after the apply %v; want [%d %d 0]", got, a, a)
	}
	days, _, err := st.TenantClicks(ctx, a, day, day)
	if err != nil || len(days) != 1 || days[0].Clicks != 5 {
		t.Fatalf("tenant clicks %+v, %v; want 5", days, err)
	}
	var unknown int64
	if err := pool.QueryRow(ctx, `SELECT unknown_clicks FROM clicks_daily WHERE day = $1`, day).Scan(&unknown); err != nil || unknown != 4 {
		t.Fatalf("unknown clicks %d, %v; want 4", unknown, err)
	}
}

// seedDomain adds domain d of tenant, and n links on it with the codes
// c-1 … c-n (the codes seedClickLinks gives the platform's domain), IDs in
// the domain's range.
func seedDomain(t *testing.T, pool *pgxpool.Pool, d link.DomainID, host string, tenant int64, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO domains (id, host, tenant_id, code_mode, version)
VALUES ($1, $2, $3, 'sequential', nextval('change_version_seq'))`, int32(d), host, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO links (id, domain_id, code, tenant_id, code_source, url_original, url, version)
SELECT $1::bigint + i, $2, 'c-' || i, $3, 'custom', 'https://example.com/', 'https://example.com/', nextval('change_version_seq')
FROM generate_series(1, $4::bigint) i`, int64(link.IDBase(d)), int32(d), tenant, n); err != nil {
		t.Fatal(err)
	}
}

// TestApplyClicksByDomain: codes are unique per domain only, so the same
// code on two domains is two links: their clicks roll up apart (day rows,
// breakdowns, each its own tenant's), a rollup of one never reads in the
// other, and a code one domain lacks counts as unknown there even though
// another domain has it.
func TestApplyClicksByDomain(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	a := seedClickLinks(t, pool, "a", 1, 2) // c-1, c-2 on the platform's domain
	bt, err := st.CreateTenant(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	seedDomain(t, pool, 1, "go.b.test", bt, 1) // c-1 on go.b.test, tenant b's
	day := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1,
		Links: []clickroll.LinkDay{
			{Code: "c-1", Day: day, Clicks: 10, BotClicks: 1},
			{Domain: 1, Code: "c-1", Day: day, Clicks: 3},
			{Domain: 1, Code: "c-2", Day: day, Clicks: 4}, // c-2 is only the platform's
		},
		Breakdown: []clickroll.BreakdownDay{
			{Code: "c-1", Day: day, Dimension: "referrer", Value: "t.co", Clicks: 10, BotClicks: 1},
			{Code: "c-1", Day: day, Dimension: "device", Value: "mobile", Clicks: 10, BotClicks: 1},
			{Domain: 1, Code: "c-1", Day: day, Dimension: "referrer", Value: "news.example", Clicks: 3},
			{Domain: 1, Code: "c-1", Day: day, Dimension: "device", Value: "desktop", Clicks: 3},
			{Domain: 1, Code: "c-2", Day: day, Dimension: "referrer", Value: "x.test", Clicks: 4},
		},
	}
	if err := st.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := []int64{r.Links[0].Tenant, r.Links[1].Tenant, r.Links[2].Tenant}; !slices.Equal(got, []int64{a, bt, 0}) {
		t.Fatalf("tenants after the apply %v; want [%d %d 0]", got, a, bt)
	}
	for _, tt := range []struct {
		d                link.DomainID
		clicks, bots     int64
		referrer, device string
	}{{0, 10, 1, "t.co", "mobile"}, {1, 3, 0, "news.example", "desktop"}} {
		days, br, err := st.LinkClicks(ctx, tt.d, "c-1", day, day, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(days) != 1 || days[0].Clicks != tt.clicks || days[0].BotClicks != tt.bots {
			t.Errorf("domain %d: c-1 days %+v; want %d clicks, %d bots", tt.d, days, tt.clicks, tt.bots)
		}
		want := []clickstats.Breakdown{{Dimension: "device", Value: tt.device, Clicks: tt.clicks, BotClicks: tt.bots},
			{Dimension: "referrer", Value: tt.referrer, Clicks: tt.clicks, BotClicks: tt.bots}}
		if !slices.Equal(br, want) {
			t.Errorf("domain %d: c-1 breakdown %+v; want %+v", tt.d, br, want)
		}
	}
	if days, br, err := st.LinkClicks(ctx, 1, "c-2", day, day, 10); err != nil || len(days) != 0 || len(br) != 0 {
		t.Errorf("c-2 on domain 1, which has no such link: %+v %+v %v; want nothing", days, br, err)
	}
	if days, _, err := st.LinkClicks(ctx, 0, "c-2", day, day, 10); err != nil || len(days) != 0 {
		t.Errorf("c-2 on the platform's domain got clicks of domain 1's c-2: %+v %v", days, err)
	}
	for _, tt := range []struct {
		tenant, want int64
	}{{a, 10}, {bt, 3}} {
		days, _, err := st.TenantClicks(ctx, tt.tenant, day, day)
		if err != nil || len(days) != 1 || days[0].Clicks != tt.want {
			t.Errorf("tenant %d clicks %+v, %v; want %d", tt.tenant, days, err, tt.want)
		}
	}
	var unknown int64
	if err := pool.QueryRow(ctx, `SELECT unknown_clicks FROM clicks_daily WHERE day = $1`, day).Scan(&unknown); err != nil || unknown != 4 {
		t.Fatalf("unknown clicks %d, %v; want 4 (domain 1's c-2)", unknown, err)
	}
	// A second rollup adds to each link's own rows.
	r = &clickroll.Rollup{Stream: clicks.Stream, Prev: 1, Last: 2, Links: []clickroll.LinkDay{
		{Domain: 1, Code: "c-1", Day: day, Clicks: 2, Tenant: bt}, {Code: "c-1", Day: day, Clicks: 1, Tenant: a}}}
	if err := st.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	var rows int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM link_clicks_daily WHERE code = 'c-1'`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d day rows of c-1, %v; want 2 (one a domain)", rows, err)
	}
	for d, want := range []int64{11, 5} {
		days, _, err := st.LinkClicks(ctx, link.DomainID(d), "c-1", day, day, 10)
		if err != nil || len(days) != 1 || days[0].Clicks != want {
			t.Errorf("domain %d: c-1 after two rollups %+v, %v; want %d", d, days, err, want)
		}
	}
}

// TestClickColumnsMigration: schema 010 moves the device, status and
// no-referrer rows counted before it into columns of link_clicks_daily and
// loses nothing:
// link_click_breakdown_daily reads row for row what the table held, and
// the migration's down part puts the rows back.
func TestClickColumnsMigration(t *testing.T) {
	_, pool := newStore(t)
	ctx := context.Background()
	b, err := os.ReadFile("../../schema/010_click_columns.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, down, ok := strings.Cut(string(b), "---- create above / drop below ----")
	if !ok {
		t.Fatal("010 has no down part")
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// The tables as schema 010 found them: click dimensions (017) and
	// domains (015) taken out first, since 010's down part knows the keys
	// and columns of before.
	b15, err := os.ReadFile("../../schema/015_domains.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, down15, ok := strings.Cut(string(b15), "---- create above / drop below ----")
	if !ok {
		t.Fatal("015 has no down part")
	}
	b17, err := os.ReadFile("../../schema/017_click_dimensions.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, down17, ok := strings.Cut(string(b17), "---- create above / drop below ----")
	if !ok {
		t.Fatal("017 has no down part")
	}
	exec(down17)
	exec(down15)
	exec(down)
	exec(`INSERT INTO link_clicks_daily (code, day, clicks, bot_clicks) VALUES
	('a', '2030-01-01', 10, 2), ('a', '2030-01-02', 1, 0), ('b', '2030-01-01', 5, 5)`)
	exec(`INSERT INTO link_click_breakdown_daily (code, day, dimension, value, clicks, bot_clicks) VALUES
	('a', '2030-01-01', 'device', 'mobile', 7, 1), ('a', '2030-01-01', 'device', 'desktop', 3, 1),
	('a', '2030-01-01', 'status', '302', 9, 2), ('a', '2030-01-01', 'status', '0', 1, 0),
	('a', '2030-01-01', 'referrer', 't.co', 10, 2), ('a', '2030-01-01', 'edge', 'fra-1', 10, 2),
	('a', '2030-01-02', 'device', 'tv', 1, 0), ('a', '2030-01-02', 'status', '399', 1, 0),
	('b', '2030-01-01', 'device', 'unknown', 5, 5), ('b', '2030-01-01', 'status', '308', 5, 5), ('b', '2030-01-01', 'referrer', '', 5, 5),
	('c', '2030-01-01', 'device', 'tablet', 2, 0)`) // c: a breakdown without its day row
	rows := func() string {
		t.Helper()
		r, err := pool.Query(ctx, `SELECT code, day::text, dimension, value, clicks, bot_clicks FROM link_click_breakdown_daily ORDER BY 1, 2, 3, 4`)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for r.Next() {
			var code, day, dim, val string
			var n, bots int64
			if err := r.Scan(&code, &day, &dim, &val, &n, &bots); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %s %s=%s %d/%d", code, day, dim, val, n, bots))
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		return strings.Join(out, "\n")
	}
	sum := func(sql string) (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before, clicks := rows(), sum(`SELECT sum(clicks) FROM link_clicks_daily`)
	exec(up)
	if got := rows(); got != before {
		t.Fatalf("after 010 the breakdowns read\n%s\nwant\n%s", got, before)
	}
	if got := sum(`SELECT count(*) FROM link_click_values_daily`); got != 4 {
		t.Errorf("%d rows left in link_click_values_daily; want 4 (referrer t.co, edge, statuses 0 and 399)", got)
	}
	if got := sum(`SELECT sum(clicks) FROM link_clicks_daily`); got != clicks {
		t.Errorf("link_clicks_daily holds %d clicks after 010; want %d", got, clicks)
	}
	exec(down)
	if got := rows(); got != before {
		t.Fatalf("after 010's down part the breakdowns read\n%s\nwant\n%s", got, before)
	}
}
