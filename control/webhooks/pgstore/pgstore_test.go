package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/control/webhooks/pgstore"
	"github.com/edgelink/edgelink/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type fixture struct {
	pool    *pgxpool.Pool
	st      *pgstore.Store
	tenants []int64
}

// newFixture is a database with tenants, a link per (tenant, code) in
// codes, and for the first tenant an endpoint subscribed to types.
func newFixture(t testing.TB, codes int, types ...string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{pool: pgtest.Pool(t)}
	f.st = pgstore.New(f.pool)
	for i := range 2 {
		var id int64
		if err := f.pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ($1) RETURNING id`, fmt.Sprint("t", i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		f.tenants = append(f.tenants, id)
		for c := range codes {
			if _, err := f.pool.Exec(ctx, `INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
				VALUES ($1, $2, $3, 'custom', 'https://e.example/', 'https://e.example/', nextval('change_version_seq'))`,
				1000*(i+1)+c, fmt.Sprintf("t%dc%03d", i, c), id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(types) > 0 {
		e := &webhooks.Endpoint{ID: "ep_000000000000000000000001", TenantID: f.tenants[0], URL: "https://h.example/", EventTypes: types,
			Secret: make([]byte, 32), CreatedAt: time.Now()}
		if err := f.st.CreateEndpoint(ctx, e, 10); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// click adds clicks to a link's day row as the click roller does: an
// upsert that adds.
func (f *fixture) click(t testing.TB, tenant, code int, day time.Time, clicks, bots int64) {
	t.Helper()
	_, err := f.pool.Exec(context.Background(), `INSERT INTO link_clicks_daily AS d (domain_id, code, day, clicks, bot_clicks)
		VALUES (0, $1, $2, $3, $4)
		ON CONFLICT (domain_id, code, day) DO UPDATE SET clicks = d.clicks + excluded.clicks, bot_clicks = d.bot_clicks + excluded.bot_clicks`,
		fmt.Sprintf("t%dc%03d", tenant, code), day, clicks, bots)
	if err != nil {
		t.Fatal(err)
	}
}

type clickEvent struct {
	Tenant int64
	Data   struct {
		PeriodStart, PeriodEnd time.Time
		Clicks, BotClicks      int64
		Links                  int64
		Top                    []struct {
			Code              string
			Clicks, BotClicks int64
		}
	}
}

// takeEvents publishes nothing: it reads and removes the outbox's events.
func (f *fixture) takeEvents(t testing.TB) []webhooks.OutboxEvent {
	t.Helper()
	var out []webhooks.OutboxEvent
	if _, err := f.st.ClaimOutbox(context.Background(), 10_000, func(evs []webhooks.OutboxEvent) error {
		out = append(out, evs...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeClicks(t testing.TB, e webhooks.OutboxEvent) clickEvent {
	t.Helper()
	var raw struct {
		PeriodStart time.Time `json:"period_start"`
		PeriodEnd   time.Time `json:"period_end"`
		Clicks      int64     `json:"clicks"`
		BotClicks   int64     `json:"bot_clicks"`
		Links       int64     `json:"links"`
		Top         []struct {
			Code      string `json:"code"`
			Clicks    int64  `json:"clicks"`
			BotClicks int64  `json:"bot_clicks"`
		} `json:"top"`
	}
	if err := json.Unmarshal(e.Data, &raw); err != nil {
		t.Fatal(err)
	}
	var c clickEvent
	c.Tenant = e.TenantID
	c.Data.PeriodStart, c.Data.PeriodEnd, c.Data.Clicks, c.Data.BotClicks, c.Data.Links = raw.PeriodStart, raw.PeriodEnd, raw.Clicks, raw.BotClicks, raw.Links
	for _, x := range raw.Top {
		c.Data.Top = append(c.Data.Top, struct {
			Code              string
			Clicks, BotClicks int64
		}{x.Code, x.Clicks, x.BotClicks})
	}
	return c
}

// Clicks reach webhook_click_counts from the rollup table's inserts and
// updates, only for subscribed tenants, and a window makes one event per
// tenant with its top links, most clicked first.
func TestClickWindow(t *testing.T) {
	f := newFixture(t, 5, "clicks.aggregated")
	ctx := context.Background()
	day := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for c := range 5 {
		f.click(t, 0, c, day, int64(10*(c+1)), int64(c))
		f.click(t, 1, c, day, 7, 1) // not subscribed
	}
	f.click(t, 0, 4, day, 5, 0)                  // an update of a row: +5
	f.click(t, 0, 0, day.AddDate(0, 0, 1), 1, 0) // another day of a link: the link's sum
	if _, err := f.pool.Exec(ctx, `UPDATE link_clicks_daily SET bot_clicks = bot_clicks WHERE code = 't0c001'`); err != nil {
		t.Fatal(err) // an update that adds nothing gathers nothing
	}
	end := time.Now().Truncate(time.Minute).Add(time.Minute)
	n, err := f.st.CloseClickWindow(ctx, end, 3)
	if err != nil || n != 1 {
		t.Fatalf("close: %d events, %v; want 1", n, err)
	}
	if n, err := f.st.CloseClickWindow(ctx, end, 3); err != nil || n != 0 {
		t.Errorf("closing the same window again: %d events, %v; want none", n, err)
	}
	evs := f.takeEvents(t)
	if len(evs) != 1 || evs[0].Type != webhooks.ClicksAggregated || evs[0].TenantID != f.tenants[0] {
		t.Fatalf("events %+v; want one clicks.aggregated of the subscribed tenant", evs)
	}
	c := decodeClicks(t, evs[0])
	// 10+20+30+40+50 + 5 + 1 clicks; bots 0+1+2+3+4.
	if c.Data.Clicks != 156 || c.Data.BotClicks != 10 || c.Data.Links != 5 || !c.Data.PeriodEnd.Equal(end) {
		t.Errorf("event %+v; want 156 clicks, 10 bots, 5 links, ending %v", c.Data, end)
	}
	want := []string{"t0c004", "t0c003", "t0c002"}
	if len(c.Data.Top) != 3 || c.Data.Top[0].Code != want[0] || c.Data.Top[0].Clicks != 55 || c.Data.Top[2].Code != want[2] {
		t.Errorf("top %+v; want %v, most first, t0c004 with 55", c.Data.Top, want)
	}
	if n := f.count(t, "webhook_click_counts"); n != 0 {
		t.Errorf("%d gathered rows after the window closed; want none", n)
	}
	// The next window starts where this one ended; no clicks, no event.
	if n, err := f.st.CloseClickWindow(ctx, end.Add(time.Minute), 3); err != nil || n != 0 {
		t.Errorf("an empty window: %d events, %v", n, err)
	}
}

func (f *fixture) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Rollup transactions and window closes running at once: every click is
// in exactly one event, whatever the interleaving (the windows take rows
// other transactions are updating, and rows they insert after).
func TestClickWindowsExactlyOnceUnderConcurrency(t *testing.T) {
	f := newFixture(t, 20, "clicks.aggregated")
	ctx := context.Background()
	day := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const writers, rounds = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				// A roller transaction: several links in key order.
				tx, err := f.pool.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				for c := (w + i) % 5; c < 20; c += 5 {
					if _, err := tx.Exec(ctx, `INSERT INTO link_clicks_daily AS d (domain_id, code, day, clicks, bot_clicks)
						VALUES (0, $1, $2, 1, 0)
						ON CONFLICT (domain_id, code, day) DO UPDATE SET clicks = d.clicks + 1`, fmt.Sprintf("t0c%03d", c), day); err != nil {
						t.Error(err)
						_ = tx.Rollback(ctx)
						return
					}
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	end := time.Now().Truncate(time.Minute)
	stop := make(chan struct{})
	var closer sync.WaitGroup
	closer.Go(func() {
		for k := 1; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.st.CloseClickWindow(ctx, end.Add(time.Duration(k)*time.Minute), 100); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	closer.Wait()
	if _, err := f.st.CloseClickWindow(ctx, end.Add(24*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	var total int64
	evs := f.takeEvents(t)
	for _, e := range evs {
		total += decodeClicks(t, e).Data.Clicks
	}
	if want := int64(writers * rounds * 4); total != want {
		t.Errorf("%d clicks in %d events; want %d: each click once", total, len(evs), want)
	}
	if len(evs) < 2 {
		t.Errorf("%d events: the windows never ran beside the writers", len(evs))
	}
}

// Link changes make their events in their own transactions: a rolled back
// change makes none, and only subscribed tenants get them.
func TestLinkEventsFollowTransactions(t *testing.T) {
	f := newFixture(t, 1, "link.updated")
	ctx := context.Background()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE links SET url = 'https://x.example/', version = nextval('change_version_seq')`); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	if n := f.count(t, "webhook_outbox"); n != 0 {
		t.Fatalf("%d events after a rollback; want none", n)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE links SET url = 'https://y.example/', version = nextval('change_version_seq')`); err != nil {
		t.Fatal(err)
	}
	evs := f.takeEvents(t)
	if len(evs) != 1 || evs[0].TenantID != f.tenants[0] || evs[0].Type != webhooks.LinkUpdated {
		t.Fatalf("events %+v; want one link.updated, the subscribed tenant's", evs)
	}
	// An update that takes no new version is no change.
	if _, err := f.pool.Exec(ctx, `UPDATE links SET url = url`); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, "webhook_outbox"); n != 0 {
		t.Errorf("%d events for an update without a version", n)
	}
}
