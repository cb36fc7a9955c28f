package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// hotLinks writes links h-first … h-last of one tenant on domain 0
// straight into the table, link i created i seconds after base, with the
// given status.
func hotLinks(t *testing.T, pool *pgxpool.Pool, first, last int, base time.Time, status string) {
	t.Helper()
	hotLinksOn(t, pool, link.DefaultDomain, first, last, base, status)
}

// hotLinksOn is hotLinks on domain d, which must exist (hotDomain).
func hotLinksOn(t *testing.T, pool *pgxpool.Pool, d link.DomainID, first, last int, base time.Time, status string) {
	t.Helper()
	ctx := context.Background()
	st := New(pool)
	tenant, err := st.TenantByName(ctx, "hot")
	if err != nil {
		if tenant, err = st.CreateTenant(ctx, "hot"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = pool.Exec(ctx, `
INSERT INTO links (id, domain_id, code, tenant_id, code_source, url_original, url, status, version, created_at)
SELECT $6::bigint + i, $7, 'h-' || i, $1, 'custom', 'https://example.com/', 'https://example.com/', $4,
       nextval('change_version_seq'), $5::timestamptz + i * interval '1 second'
FROM generate_series($2::bigint, $3::bigint) i`, tenant, first, last, status, base, int64(link.IDBase(d)), int32(d))
	if err != nil {
		t.Fatal(err)
	}
}

// hotDomain adds domain d (tenant hot's, sequential) straight into the
// table.
func hotDomain(t *testing.T, pool *pgxpool.Pool, d link.DomainID, host string) {
	t.Helper()
	ctx := context.Background()
	st := New(pool)
	tenant, err := st.TenantByName(ctx, "hot")
	if err != nil {
		if tenant, err = st.CreateTenant(ctx, "hot"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = pool.Exec(ctx, `
INSERT INTO domains (id, host, tenant_id, code_mode, version) VALUES ($1, $2, $3, 'sequential', nextval('change_version_seq'))`,
		int32(d), host, tenant)
	if err != nil {
		t.Fatal(err)
	}
}

// clicksOn writes link h-i's clicks of one day on domain 0.
func clicksOn(t *testing.T, pool *pgxpool.Pool, i int, day time.Time, n int) {
	t.Helper()
	clicksOnDomain(t, pool, link.DefaultDomain, i, day, n)
}

func clicksOnDomain(t *testing.T, pool *pgxpool.Pool, d link.DomainID, i int, day time.Time, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO link_clicks_daily (domain_id, code, day, clicks, bot_clicks) VALUES ($1, $2, $3, $4, 0)`,
		int32(d), fmt.Sprintf("h-%d", i), day, n)
	if err != nil {
		t.Fatal(err)
	}
}

// codes are the keys of links h-id on domain 0.
func codes(ids ...int) []snapshot.Key {
	out := make([]snapshot.Key, len(ids))
	for i, id := range ids {
		out[i] = snapshot.Key{Domain: link.DefaultDomain, Code: fmt.Sprintf("h-%d", id)}
	}
	return out
}

// TestHottestRanksRecentClicksThenNewest: links clicked in the window come
// first by their clicks there (a tie to the later day), clicks before the
// window count for nothing, and the rest of the budget is the newest
// active links never clicked in the window.
func TestHottestRanksRecentClicksThenNewest(t *testing.T) {
	_, pool := newStore(t)
	now := time.Date(2030, 3, 10, 15, 0, 0, 0, time.UTC)
	today := time.Date(2030, 3, 10, 0, 0, 0, 0, time.UTC)
	base := now.Add(-30 * 24 * time.Hour)
	hotLinks(t, pool, 1, 10, base, "active")
	hotLinks(t, pool, 11, 12, base, "disabled") // newest, never clicked: never filled in
	clicksOn(t, pool, 3, today, 5)
	clicksOn(t, pool, 3, today.AddDate(0, 0, -6), 5)    // first day of the 7: 10 in all
	clicksOn(t, pool, 7, today.AddDate(0, 0, -2), 10)   // 10, but two days earlier than h-3's last
	clicksOn(t, pool, 1, today.AddDate(0, 0, -7), 1000) // before the window
	clicksOn(t, pool, 5, today.AddDate(0, 0, -1), 2)
	clicksOn(t, pool, 11, today, 1) // disabled, but clicked: kept (its 410 is hot)

	hot := New(pool).Hotness(7, func() time.Time { return now })
	for _, tt := range []struct {
		n    int
		want []snapshot.Key
	}{
		{0, nil},
		{1, codes(3)},
		{3, codes(3, 7, 5)},
		{4, codes(3, 7, 5, 11)},
		{6, codes(3, 7, 5, 11, 10, 9)},
		{100, codes(3, 7, 5, 11, 10, 9, 8, 6, 4, 2, 1)},
	} {
		got, err := hot.Hottest(context.Background(), tt.n)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Hottest(%d) (-want +got):\n%s", tt.n, diff)
		}
	}
	// The window follows the clock: a day later h-3's first day is out.
	later := New(pool).Hotness(7, func() time.Time { return now.AddDate(0, 0, 1) })
	got, err := later.Hottest(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(codes(7, 3, 5), got); diff != "" {
		t.Errorf("Hottest(3) a day later (-want +got):\n%s", diff)
	}
}

// TestHottestRanksByDomainAndCode: a code is ranked per domain: the same
// code on two domains is two links, each with its own clicks, and a link
// clicked on one domain does not keep the other domain's link out of the
// newest ones.
func TestHottestRanksByDomainAndCode(t *testing.T) {
	_, pool := newStore(t)
	now := time.Date(2030, 3, 10, 15, 0, 0, 0, time.UTC)
	today := time.Date(2030, 3, 10, 0, 0, 0, 0, time.UTC)
	base := now.Add(-30 * 24 * time.Hour)
	hotDomain(t, pool, 1, "go.hot.example")
	hotLinks(t, pool, 1, 3, base, "active")
	hotLinksOn(t, pool, 1, 1, 3, base.Add(time.Hour), "active") // newer than domain 0's
	clicksOnDomain(t, pool, 1, 2, today, 50)
	clicksOn(t, pool, 1, today, 10)
	clicksOn(t, pool, 2, today, 1)
	got, err := New(pool).Hotness(7, func() time.Time { return now }).Hottest(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	key := func(d link.DomainID, code string) snapshot.Key { return snapshot.Key{Domain: d, Code: code} }
	want := []snapshot.Key{key(1, "h-2"), key(0, "h-1"), key(0, "h-2"), key(1, "h-3"), key(1, "h-1"), key(0, "h-3")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Hottest(10) (-want +got):\n%s", diff)
	}
}

// TestHottestReadsByIndex: ranking reads neither every link nor every day
// of clicks ever rolled up (schema 011's indexes), whatever the planner
// thinks of a sequential scan's price.
func TestHottestReadsByIndex(t *testing.T) {
	_, pool := newStore(t)
	ctx := context.Background()
	now := time.Date(2030, 3, 10, 15, 0, 0, 0, time.UTC)
	hotLinks(t, pool, 1, 50_000, now.Add(-100*24*time.Hour), "active")
	// 90 days of history for 3,000 links, a few clicks a day.
	_, err := pool.Exec(ctx, `
INSERT INTO link_clicks_daily (domain_id, code, day, clicks, bot_clicks)
SELECT 0, 'h-' || i, date '2030-03-10' - d, 1 + (i * d) % 7, 0
FROM generate_series(1, 3000) i, generate_series(0, 89) d`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE links; ANALYZE link_clicks_daily`); err != nil {
		t.Fatal(err)
	}
	cfg := pool.Config()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	seqScans := func() map[string]int64 {
		t.Helper()
		if _, err := one.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		rows, err := one.Query(ctx, `SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname IN ('links', 'link_clicks_daily')`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			m[name] = n
		}
		return m
	}
	before := seqScans()
	got, err := New(one).Hotness(7, func() time.Time { return now }).Hottest(ctx, 3500)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3500 {
		t.Fatalf("Hottest(3500) returned %d codes", len(got))
	}
	if got[3000] != (snapshot.Key{Code: "h-50000"}) {
		t.Errorf("first link after the 3,000 clicked: %v; want the newest link, h-50000", got[3000])
	}
	after := seqScans()
	for _, table := range []string{"links", "link_clicks_daily"} {
		if after[table] != before[table] {
			t.Errorf("ranking scanned %s %d times; want it read by index", table, after[table]-before[table])
		}
	}
}
