package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

var d2 = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

// setURL gives link code of the default domain the target url.
func setURL(t *testing.T, pool *pgxpool.Pool, code, url string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE links SET url = $2 WHERE domain_id = 0 AND code = $1`, code, url); err != nil {
		t.Fatal(err)
	}
}

func sketchOf(vals ...uint64) *hll.Sketch {
	var s hll.Sketch
	for _, v := range vals {
		s.Add(v)
	}
	return &s
}

// TestApplyClicksEveryDimension: a rollup's browser, OS, country, UTM,
// hours and visitors land where the read methods find them, for the link
// and for its tenant; the UTM comes from the link's target, looked up with
// its tenant and reported to the caller.
func TestApplyClicksEveryDimension(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	tenant := seedClickLinks(t, pool, "a", 1, 2)
	setURL(t, pool, "c-1", "https://example.com/p?utm_source=news&utm_medium=email&utm_campaign=spring")
	h := func(hour int) time.Time { return d2.Add(time.Duration(hour) * time.Hour) }
	bd := func(code, dim, val string, n, bots int64) clickroll.BreakdownDay {
		return clickroll.BreakdownDay{Code: code, Day: d2, Dimension: dim, Value: val, Clicks: n, BotClicks: bots}
	}
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1,
		Links: []clickroll.LinkDay{
			{Code: "c-1", Day: d2, Clicks: 10, BotClicks: 2, OwnClicks: 9, OwnBots: 2, Visitors: sketchOf(1, 2, 3, 4)},
			{Code: "c-2", Day: d2, Clicks: 4, OwnClicks: 4, Visitors: sketchOf(3, 4, 5)},
		},
		Breakdown: []clickroll.BreakdownDay{
			bd("c-1", "browser", "chrome", 6, 1), bd("c-1", "browser", "safari", 4, 1),
			bd("c-1", "os", "android", 7, 2), bd("c-1", "os", "ios", 3, 0),
			bd("c-1", "country", "US", 5, 1), bd("c-1", "country", "DE", 3, 0), bd("c-1", "country", "", 2, 1),
			bd("c-1", "device", "mobile", 10, 2), bd("c-1", "referrer", "t.co", 6, 0), bd("c-1", "referrer", "", 4, 2),
			bd("c-2", "browser", "chrome", 4, 0), bd("c-2", "country", "US", 4, 0), bd("c-2", "referrer", "t.co", 4, 0),
		},
		Hours: []clickroll.LinkHour{{Code: "c-1", Hour: h(9), Clicks: 7, BotClicks: 2}, {Code: "c-1", Hour: h(10), Clicks: 3},
			{Code: "c-2", Hour: h(10), Clicks: 4}},
	}
	if err := st.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	if want := (clickroll.UTM{Source: "news", Medium: "email", Campaign: "spring"}); r.Links[0].UTM != want || r.Links[0].Tenant != tenant {
		t.Fatalf("c-1 after the apply: tenant %d, UTM %+v; want %d, %+v", r.Links[0].Tenant, r.Links[0].UTM, tenant, want)
	}
	days, err := st.LinkDays(ctx, link.DefaultDomain, "c-1", d2, d2)
	if err != nil || len(days) != 1 || days[0] != (clickstats.Day{Day: d2, Clicks: 10, BotClicks: 2, Visitors: 4}) {
		t.Fatalf("c-1 days %+v, %v; want 10 clicks, 2 bots, 4 visitors", days, err)
	}
	tdays, err := st.TenantDays(ctx, tenant, d2, d2)
	if err != nil || len(tdays) != 1 || tdays[0] != (clickstats.Day{Day: d2, Clicks: 14, BotClicks: 2, Visitors: 5}) {
		t.Fatalf("tenant days %+v, %v; want 14 clicks, 2 bots, 5 visitors (3 and 4 on both links)", tdays, err)
	}
	hours, err := st.LinkHours(ctx, link.DefaultDomain, "c-1", h(0), h(24))
	if want := []clickstats.Hour{{Hour: h(9), Clicks: 7, BotClicks: 2}, {Hour: h(10), Clicks: 3}}; err != nil || !slices.Equal(hours, want) {
		t.Fatalf("c-1 hours %+v, %v; want %+v", hours, err, want)
	}
	if hours, err := st.LinkHours(ctx, link.DefaultDomain, "c-1", h(10), h(10)); err != nil || len(hours) != 0 {
		t.Fatalf("an empty range of hours: %+v, %v", hours, err)
	}
	thours, err := st.TenantHours(ctx, tenant, h(0), h(24))
	if want := []clickstats.Hour{{Hour: h(9), Clicks: 7, BotClicks: 2}, {Hour: h(10), Clicks: 7}}; err != nil || !slices.Equal(thours, want) {
		t.Fatalf("tenant hours %+v, %v; want %+v", thours, err, want)
	}
	q := clickstats.BreakdownQuery{From: d2, To: d2, Top: 10, Dimensions: []string{"browser", "os", "country", "utm_source", "utm_medium", "utm_campaign", "referrer"}}
	br, err := st.LinkBreakdown(ctx, link.DefaultDomain, "c-1", q)
	if err != nil {
		t.Fatal(err)
	}
	b := func(dim, val string, n, bots int64) clickstats.Breakdown {
		return clickstats.Breakdown{Dimension: dim, Value: val, Clicks: n, BotClicks: bots}
	}
	want := []clickstats.Breakdown{b("browser", "chrome", 6, 1), b("browser", "safari", 4, 1),
		b("country", "US", 5, 1), b("country", "DE", 3, 0), b("country", "", 2, 1),
		b("os", "android", 7, 2), b("os", "ios", 3, 0),
		b("referrer", "t.co", 6, 0), b("referrer", "", 4, 2),
		b("utm_campaign", "spring", 9, 2), b("utm_medium", "email", 9, 2), b("utm_source", "news", 9, 2)}
	if d := cmp.Diff(want, br); d != "" {
		t.Errorf("c-1 breakdown (-want +got):\n%s", d)
	}
	tbr, err := st.TenantBreakdown(ctx, tenant, q)
	if err != nil {
		t.Fatal(err)
	}
	want = []clickstats.Breakdown{b("browser", "chrome", 10, 1), b("browser", "safari", 4, 1),
		b("country", "US", 9, 1), b("country", "DE", 3, 0), b("country", "", 2, 1),
		b("os", "android", 7, 2), b("os", "ios", 3, 0),
		b("referrer", "t.co", 10, 0), b("referrer", "", 4, 2),
		b("utm_campaign", "spring", 9, 2), b("utm_medium", "email", 9, 2), b("utm_source", "news", 9, 2)}
	if d := cmp.Diff(want, tbr); d != "" {
		t.Errorf("tenant breakdown (-want +got):\n%s", d)
	}
	// A cut of one value per dimension sums the rest as other; per day.
	q.Top, q.PerDay, q.Dimensions = 1, true, []string{"country"}
	br, err = st.LinkBreakdown(ctx, link.DefaultDomain, "c-1", q)
	if want := []clickstats.Breakdown{{Day: d2, Dimension: "country", Value: "US", Clicks: 5, BotClicks: 1},
		{Day: d2, Dimension: "country", Other: true, Clicks: 5, BotClicks: 1}}; err != nil || !slices.Equal(br, want) {
		t.Errorf("c-1 countries, top 1, per day: %+v, %v; want %+v", br, err, want)
	}
	// Visitors merge with what is stored: 4 and 6 are new to c-1, 1 is not.
	r2 := &clickroll.Rollup{Stream: clicks.Stream, Prev: 1, Last: 2, Links: []clickroll.LinkDay{
		{Code: "c-1", Day: d2, Clicks: 3, OwnClicks: 3, Tenant: tenant, Visitors: sketchOf(1, 5, 6)}}}
	if err := st.ApplyClicks(ctx, r2); err != nil {
		t.Fatal(err)
	}
	days, _ = st.LinkDays(ctx, link.DefaultDomain, "c-1", d2, d2)
	tdays, _ = st.TenantDays(ctx, tenant, d2, d2)
	if days[0].Visitors != 6 || tdays[0].Visitors != 6 {
		t.Fatalf("after a second rollup: c-1 %d visitors, the tenant %d; want 6 and 6", days[0].Visitors, tdays[0].Visitors)
	}
	// The caller's UTM is trusted with its tenant: the link's own target
	// was not read again (it has none now, the rollup says otherwise).
	br, _ = st.LinkBreakdown(ctx, link.DefaultDomain, "c-1", clickstats.BreakdownQuery{From: d2, To: d2, Top: 5, Dimensions: []string{"utm_source"}})
	if want := []clickstats.Breakdown{b("utm_source", "news", 9, 2)}; !slices.Equal(br, want) {
		t.Errorf("utm_source after a rollup with no UTM: %+v; want %+v", br, want)
	}
}

// valueRows reads every value row and other row of a dimension of a
// link's day, and of its tenant's.
func dimRows(t *testing.T, pool *pgxpool.Pool, table, where string, args ...any) map[string][2]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT value, clicks, bot_clicks FROM `+table+` WHERE `+where, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][2]int64{}
	for rows.Next() {
		var v string
		var c, b int64
		if err := rows.Scan(&v, &c, &b); err != nil {
			t.Fatal(err)
		}
		out[v] = [2]int64{c, b}
	}
	return out
}

// TestTopValuesBoundEveryTable: rollups bringing hundreds of referrer
// hosts to one link's day keep at most N rows for it and for its tenant,
// the rest in other, every click accounted for; a rollup with more than N
// values at once, and one that overflows a group by a few, both; the two
// databases that applied the same rollups hold the same rows.
func TestTopValuesBoundEveryTable(t *testing.T) {
	const n = 5
	var got [2]string
	for db := range 2 {
		st, pool := newStore(t)
		ctx := context.Background()
		tenant := seedClickLinks(t, pool, "a", 1, 2)
		r := rand.New(rand.NewPCG(1, 2))
		var total, bots int64
		for i := range 30 {
			roll := &clickroll.Rollup{Stream: clicks.Stream, Prev: uint64(i), Last: uint64(i + 1), TopValues: n}
			var sum, sumBots int64
			hosts := 1 + r.IntN(3)
			if i == 10 {
				hosts = 40 // more than N at once
			}
			for h := range hosts {
				host := fmt.Sprintf("h%d.example", r.IntN(60))
				if h == 0 {
					host = "steady.example" // in every rollup
				}
				if slices.ContainsFunc(roll.Breakdown, func(b clickroll.BreakdownDay) bool { return b.Value == host }) {
					continue
				}
				c, b := int64(1+r.IntN(4)), int64(r.IntN(2))
				roll.Breakdown = append(roll.Breakdown, clickroll.BreakdownDay{Code: "c-1", Day: d2, Dimension: "referrer", Value: host, Clicks: c, BotClicks: b})
				sum, sumBots = sum+c, sumBots+b
			}
			roll.Links = []clickroll.LinkDay{{Code: "c-1", Day: d2, Clicks: sum, BotClicks: sumBots}}
			if err := st.ApplyClicks(ctx, roll); err != nil {
				t.Fatal(err)
			}
			total, bots = total+sum, bots+sumBots
			for _, tbl := range []struct{ values, other, where string }{
				{"link_click_values_daily", "link_click_other_daily", "domain_id = 0 AND code = 'c-1' AND dimension = 'referrer'"},
				{"tenant_click_values_daily", "tenant_click_other_daily", fmt.Sprintf("tenant_id = %d AND dimension = 'referrer'", tenant)},
			} {
				vals := dimRows(t, pool, tbl.values, tbl.where)
				other := dimRows(t, pool, tbl.other+" CROSS JOIN LATERAL (SELECT '' AS value) v", tbl.where)
				if len(vals) > n || len(other) > 1 {
					t.Fatalf("rollup %d: %s has %d values and %d other rows; want at most %d and 1", i, tbl.values, len(vals), len(other), n)
				}
				var c, b int64
				for _, x := range vals {
					c, b = c+x[0], b+x[1]
				}
				c, b = c+other[""][0], b+other[""][1]
				if c != total || b != bots {
					t.Fatalf("rollup %d: %s and other sum to %d clicks (%d bots); %d (%d) applied", i, tbl.values, c, b, total, bots)
				}
			}
		}
		// The steady referrer, in every rollup, is kept.
		br, err := st.LinkBreakdown(ctx, link.DefaultDomain, "c-1", clickstats.BreakdownQuery{From: d2, To: d2, Top: 100, Dimensions: []string{"referrer"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(br, func(b clickstats.Breakdown) bool { return b.Value == "steady.example" }) {
			t.Errorf("steady.example is not kept: %+v", br)
		}
		var sum int64
		for _, b := range br {
			sum += b.Clicks
		}
		if sum != total || len(br) != n+1 || !br[n].Other {
			t.Errorf("breakdown %+v sums to %d; want %d values and other summing to %d", br, sum, n, total)
		}
		got[db] = fmt.Sprint(dimRows(t, pool, "link_click_values_daily", "true"), dimRows(t, pool, "link_click_other_daily CROSS JOIN LATERAL (SELECT encode(candidates, 'hex') AS value) v", "true"),
			dimRows(t, pool, "tenant_click_values_daily", "true"))
	}
	if got[0] != got[1] {
		t.Fatalf("the same rollups gave two databases different rows:\n%s\n%s", got[0], got[1])
	}
}

// TestPruneClickHours: hours before the mark go, a batch at a time, from
// both hourly tables; later ones stay.
func TestPruneClickHours(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	seedClickLinks(t, pool, "a", 1, 3)
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 1}
	for i := range 3 {
		code := fmt.Sprint("c-", i+1)
		r.Links = append(r.Links, clickroll.LinkDay{Code: code, Day: d2, Clicks: 24})
		for h := range 24 {
			r.Hours = append(r.Hours, clickroll.LinkHour{Code: code, Hour: d2.Add(time.Duration(h) * time.Hour), Clicks: 1})
		}
	}
	if err := st.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	mark := d2.Add(10 * time.Hour) // 10 hours of 3 links and their tenant go: 40 rows
	var deleted int64
	for {
		n, err := st.PruneClickHours(ctx, mark, 7)
		if err != nil {
			t.Fatal(err)
		}
		if n > 14 {
			t.Fatalf("a batch of 7 deleted %d rows", n)
		}
		if n == 0 {
			break
		}
		deleted += n
	}
	if deleted != 40 {
		t.Fatalf("deleted %d rows; want 40", deleted)
	}
	hours, err := st.LinkHours(ctx, link.DefaultDomain, "c-1", d2, d2.Add(24*time.Hour))
	if err != nil || len(hours) != 14 || !hours[0].Hour.Equal(mark) {
		t.Fatalf("hours left %+v, %v; want the 14 from %v", hours, err, mark)
	}
}

// TestClickDimensionsMigration: 017 comes off and goes on again over the
// rows it added (its down part drops them), and its view reads what it
// read before.
func TestClickDimensionsMigration(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	seedClickLinks(t, pool, "a", 1, 1)
	if err := st.ApplyClicks(ctx, &clickroll.Rollup{Stream: clicks.Stream, Last: 1,
		Links: []clickroll.LinkDay{{Code: "c-1", Day: d2, Clicks: 3, OwnClicks: 3, Visitors: sketchOf(1)}},
		Breakdown: []clickroll.BreakdownDay{{Code: "c-1", Day: d2, Dimension: "device", Value: "mobile", Clicks: 3},
			{Code: "c-1", Day: d2, Dimension: "browser", Value: "chrome", Clicks: 3}, {Code: "c-1", Day: d2, Dimension: "country", Value: "FR", Clicks: 3}},
		Hours: []clickroll.LinkHour{{Code: "c-1", Hour: d2, Clicks: 3}}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../schema/017_click_dimensions.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, down, _ := strings.Cut(string(b), "---- create above / drop below ----")
	view := func() string {
		return fmt.Sprint(dimRows(t, pool, "link_click_breakdown_daily CROSS JOIN LATERAL (SELECT dimension || '=' || value AS v) x", "true"))
	}
	if got := view(); !strings.Contains(got, "chrome") || !strings.Contains(got, "FR") {
		t.Fatalf("the view misses the new dimensions: %s", got)
	}
	for _, sql := range []string{down, up, down, up} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var clicksLeft int64
	if err := pool.QueryRow(ctx, `SELECT sum(clicks) FROM link_click_breakdown_daily WHERE dimension = 'device'`).Scan(&clicksLeft); err != nil || clicksLeft != 3 {
		t.Fatalf("device clicks after down and up: %d, %v; want 3", clicksLeft, err)
	}
}
