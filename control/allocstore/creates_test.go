package allocstore

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/internal/pgtest"
)

var errRollback = errors.New("roll back")

// linkWriter inserts links at the creation times a test gives, as the
// create path's INSERT does (so the links trigger counts them).
type linkWriter struct {
	t      *testing.T
	pool   *pgxpool.Pool
	tenant int64
	next   int64
}

func newLinkWriter(t *testing.T, pool *pgxpool.Pool) *linkWriter {
	t.Helper()
	w := &linkWriter{t: t, pool: pool, next: 1}
	if err := pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&w.tenant); err != nil {
		t.Fatal(err)
	}
	return w
}

// insert writes n links of namespace created at at, in one statement on q
// (the pool, or a transaction).
func (w *linkWriter) insert(q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, namespace string, n int, at time.Time) {
	w.t.Helper()
	_, err := q.Exec(context.Background(), `
		INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url, version, created_at)
		SELECT i, 'c' || i, $1, 'generated', $2, 'https://example.com/', 'https://example.com/', nextval('change_version_seq'), $5
		FROM generate_series($3::bigint, $4::bigint) AS i`, w.tenant, namespace, w.next, w.next+int64(n)-1, at)
	if err != nil {
		w.t.Fatalf("insert %d links at %v: %v", n, at, err)
	}
	w.next += int64(n)
}

// TestCreateRates: with a known number of committed creates placed in
// time, the create counts, rates, time left and peak are exactly what
// they must be; leases, rolled-back creates, another namespace's creates
// and minutes outside the windows count for nothing.
func TestCreateRates(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 10, 30, 0, time.UTC) // 30 s into the minute
	pool := pgtest.Pool(t)
	s := New(pool, WithClock(func() time.Time { return now }))
	if err := s.EnsureNamespace(ctx, idalloc.Namespace{Name: "default", Start: 1, End: 1_000_001, Step: 100_000}); err != nil {
		t.Fatal(err)
	}
	allocLease(t, s, "default", "ctl-1") // 100,000 IDs leased: not a create
	w := newLinkWriter(t, pool)
	at := func(hhmmss string) time.Time {
		t.Helper()
		c, err := time.Parse("2006-01-02 15:04:05", "2026-03-01 "+hhmmss)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// An old minute on the slot 12:05 takes, 8 days earlier: the ring's
	// next minute there replaces it rather than adding to it.
	w.insert(pool, "default", 7, at("12:05:10").Add(-8*24*time.Hour))
	w.insert(pool, "default", 3, at("12:10:10")) // this minute: in both windows
	w.insert(pool, "default", 1, at("12:05:00")) // the 5-minute window's first minute
	w.insert(pool, "default", 1, at("12:05:59")) // a second statement in that minute
	w.insert(pool, "default", 4, at("12:04:59")) // the hour's only
	w.insert(pool, "default", 5, at("11:10:00")) // the hour's first minute
	w.insert(pool, "default", 6, at("11:09:59")) // before the hour
	w.insert(pool, "legacy", 50, at("12:09:00")) // another namespace
	// The peak, in three statements on two connections (two stripes
	// perhaps): 90 creates in one minute two days ago.
	peak := at("08:00:00").Add(-48 * time.Hour)
	w.insert(pool, "default", 40, peak.Add(5*time.Second))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.insert(conn, "default", 30, peak.Add(20*time.Second))
	conn.Release()
	w.insert(pool, "default", 20, peak.Add(59*time.Second))
	w.insert(pool, "default", 500, now.Add(-7*24*time.Hour-time.Minute)) // busier, but before the peak's window
	// A create that rolled back counts for nothing.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		w.insert(tx, "default", 1000, at("12:10:00"))
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}

	const remaining = 1_000_001 - 100_001
	want5m := idalloc.CreateCount{Creates: 5, Window: 5*time.Minute + 30*time.Second}
	wantHour := idalloc.CreateCount{Creates: 14, Window: time.Hour + 30*time.Second}
	wantRate := 5.0 / 330 // the busier: 5 in 330 s against 14 in 3,630 s
	c, err := s.Capacity(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if c.Last5m != want5m || c.LastHour != wantHour || c.Rate != wantRate || c.Remaining != remaining ||
		c.DaysLeft != remaining/wantRate/86400 {
		t.Errorf("capacity: last 5m %+v, last hour %+v, rate %v, remaining %d, days left %v;\nwant %+v, %+v, %v, %d, %v",
			c.Last5m, c.LastHour, c.Rate, c.Remaining, c.DaysLeft, want5m, wantHour, wantRate, remaining, remaining/wantRate/86400)
	}

	st, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := st.Namespaces[0]
	if d.Namespace != "default" || d.Last5m != want5m || d.LastHour != wantHour || d.Rate != wantRate ||
		d.TimeLeft != time.Duration(remaining/wantRate*float64(time.Second)) {
		t.Errorf("status: last 5m %+v, last hour %+v, rate %v, time left %v; want %+v, %+v, %v, %v",
			d.Last5m, d.LastHour, d.Rate, d.TimeLeft, want5m, wantHour, wantRate, time.Duration(remaining/wantRate*float64(time.Second)))
	}
	if !d.PeakMinute.Equal(peak) || d.PeakCreates != 90 || d.PeakRate != 1.5 ||
		d.TimeLeftAtPeak != time.Duration(remaining/1.5*float64(time.Second)) {
		t.Errorf("status peak: %d creates in %v (%v/s), time left %v; want 90 in %v (1.5/s), %v",
			d.PeakCreates, d.PeakMinute, d.PeakRate, d.TimeLeftAtPeak, peak, time.Duration(remaining/1.5*float64(time.Second)))
	}
	// Leases follow the database's clock (the lease was just now).
	if d.LeasedLastHour != 100_000 || d.LeaseRate != 100_000.0/3600 {
		t.Errorf("leases: %d in the last hour at %v/s; want 100,000 at %v/s", d.LeasedLastHour, d.LeaseRate, 100_000.0/3600)
	}
	if len(st.Namespaces) != 1 {
		t.Errorf("namespaces %+v; want default only (links of an unknown namespace make none)", st.Namespaces)
	}

	// An hour later, quiet: the 5-minute window is empty and the hour's
	// holds only what came since.
	now = now.Add(time.Hour)
	if c, err = s.Capacity(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if c.Last5m.Creates != 0 || c.LastHour.Creates != 3 || c.Rate != 3.0/3630 {
		t.Errorf("an hour later: last 5m %+v, last hour %+v, rate %v; want 0, 3 (this minute's), %v", c.Last5m, c.LastHour, c.Rate, 3.0/3630)
	}
	// Eight days later nothing is recent and no peak is in the window.
	now = now.Add(8 * 24 * time.Hour)
	if st, err = s.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if d := st.Namespaces[0]; d.Rate != 0 || d.TimeLeft != 0 || !d.PeakMinute.IsZero() || d.TimeLeftAtPeak != 0 || !math.IsInf(d.DaysLeft, 1) {
		t.Errorf("eight quiet days later: rate %v, time left %v, peak %v, at peak %v, days left %v; want no estimate",
			d.Rate, d.TimeLeft, d.PeakMinute, d.TimeLeftAtPeak, d.DaysLeft)
	}
}
