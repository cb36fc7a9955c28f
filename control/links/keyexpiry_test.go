package links_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/logbuf"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
)

// backdate makes tenant's key age old, as if it had been claimed that long
// ago.
func backdate(t *testing.T, pool *pgxpool.Pool, tenant int64, key string, age time.Duration) {
	t.Helper()
	tag, err := pool.Exec(context.Background(),
		`UPDATE idempotency_keys SET created_at = now() - make_interval(secs => $3) WHERE tenant_id = $1 AND idem_key = $2`,
		tenant, key, age.Seconds())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("backdate key %q: %v, %d rows", key, err, tag.RowsAffected())
	}
}

// TestIdempotencyKeyExpiresOnRead: a key answers its retries for 24 hours
// by default; past that (not purged yet, only old) a retry is a new create
// with a new code, and a different request with it is no conflict. The
// new create holds the key from then on. Single and batch creates alike.
func TestIdempotencyKeyExpiresOnRead(t *testing.T) {
	ctx := context.Background()
	ids := &counterIDs{}
	svc, _, pool, tenant := setup(t, ids, links.Config{})
	t.Cleanup(func() { checkDone(t, ids, pool) })
	create := func(url string) links.Created {
		t.Helper()
		c, err := svc.Create(ctx, tenant, links.CreateRequest{URL: url, IdempotencyKey: "k1"})
		if err != nil {
			t.Fatalf("create %s with key k1: %v", url, err)
		}
		return c
	}

	first := create("https://example.com/a")
	backdate(t, pool, tenant, "k1", 23*time.Hour+59*time.Minute)
	if again := create("https://example.com/a"); !again.Replayed || again.Link.Code != first.Link.Code {
		t.Fatalf("retry at 23h59m: replayed %v code %s; want the original %s replayed", again.Replayed, again.Link.Code, first.Link.Code)
	}
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{URL: "https://example.com/other", IdempotencyKey: "k1"}); !errors.Is(err, link.ErrIdempotencyConflict) {
		t.Fatalf("another request with a live key: %v; want a conflict", err)
	}

	backdate(t, pool, tenant, "k1", 24*time.Hour+time.Second)
	late := create("https://example.com/a")
	if late.Replayed || late.Link.Code == first.Link.Code {
		t.Fatalf("retry after 24h: replayed %v code %s; want a new create, not %s", late.Replayed, late.Link.Code, first.Link.Code)
	}
	if again := create("https://example.com/a"); !again.Replayed || again.Link.Code != late.Link.Code {
		t.Fatalf("retry after the new create: replayed %v code %s; want %s replayed", again.Replayed, again.Link.Code, late.Link.Code)
	}
	backdate(t, pool, tenant, "k1", 48*time.Hour)
	if other := create("https://example.com/other"); other.Replayed || other.Link.URL != "https://example.com/other" {
		t.Fatalf("another request with an expired key: %+v; want a new create of it", other)
	}
	if n := count(t, pool, "links"); n != 3 {
		t.Errorf("%d links; want 3 (the first, the late retry, the other request)", n)
	}

	reqs := []links.CreateRequest{{URL: "https://example.com/b1"}, {URL: "https://example.com/b2"}}
	batch, err := svc.CreateBatch(ctx, tenant, "b1", reqs)
	if err != nil {
		t.Fatal(err)
	}
	backdate(t, pool, tenant, "b1", 25*time.Hour)
	lateBatch, err := svc.CreateBatch(ctx, tenant, "b1", reqs)
	if err != nil {
		t.Fatal(err)
	}
	if lateBatch.Replayed || lateBatch.Items[0].Link.Code == batch.Items[0].Link.Code {
		t.Fatalf("batch retried after 24h: replayed %v; want new links", lateBatch.Replayed)
	}
	if again, err := svc.CreateBatch(ctx, tenant, "b1", reqs); err != nil || !again.Replayed ||
		again.Items[1].Link.Code != lateBatch.Items[1].Link.Code {
		t.Fatalf("batch retried after its new create: %+v, %v; want it replayed", again, err)
	}
}

// TestIdempotencyTTLOption: the store's time to live is what decides.
func TestIdempotencyTTLOption(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	st := postgres.New(pool, postgres.WithIdempotencyTTL(time.Hour))
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ids := &counterIDs{}
	svc := links.New(st, ids, links.Config{})
	t.Cleanup(func() { checkDone(t, ids, pool) })
	req := links.CreateRequest{URL: "https://example.com/", IdempotencyKey: "k"}
	first, err := svc.Create(ctx, tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	backdate(t, pool, tenant, "k", 59*time.Minute)
	if c, err := svc.Create(ctx, tenant, req); err != nil || !c.Replayed || c.Link.Code != first.Link.Code {
		t.Fatalf("retry at 59m with a 1h TTL: %+v, %v; want a replay", c, err)
	}
	backdate(t, pool, tenant, "k", 61*time.Minute)
	if c, err := svc.Create(ctx, tenant, req); err != nil || c.Replayed || c.Link.Code == first.Link.Code {
		t.Fatalf("retry at 61m with a 1h TTL: %+v, %v; want a new create", c, err)
	}
}

func TestCheckKeyTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl time.Duration
		ok  bool
	}{{0, false}, {-time.Hour, false}, {time.Second, true}, {24 * time.Hour, true}, {links.MaxKeyTTL, true},
		{links.MaxKeyTTL + time.Second, false}, {365 * 24 * time.Hour, false}} {
		if err := links.CheckKeyTTL(tc.ttl); (err == nil) != tc.ok {
			t.Errorf("CheckKeyTTL(%v) = %v; want ok %v", tc.ttl, err, tc.ok)
		}
	}
}

// seedKeys writes n keys of tenant named prefix-i, aged age, in one statement.
func seedKeys(t *testing.T, pool *pgxpool.Pool, tenant int64, prefix string, n int, age time.Duration) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO idempotency_keys (tenant_id, idem_key, request_hash, response, created_at)
		SELECT $1, $2 || '-' || i, sha256(i::text::bytea), '{}'::bytea, now() - make_interval(secs => $4)
		FROM generate_series(1, $3) AS i`, tenant, prefix, n, age.Seconds())
	if err != nil {
		t.Fatal(err)
	}
}

func keyCount(t *testing.T, pool *pgxpool.Pool, prefix string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE idem_key LIKE $1 || '-%'`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeExpiredKeysInBatches: one statement deletes at most its limit,
// oldest first, and never a key still alive.
func TestPurgeExpiredKeysInBatches(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	seedKeys(t, pool, tenant, "old", 250, 72*time.Hour)
	seedKeys(t, pool, tenant, "expired", 50, 24*time.Hour+time.Minute)
	seedKeys(t, pool, tenant, "fresh", 40, 23*time.Hour)
	var got []int
	for {
		n, err := st.PurgeExpiredKeys(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if len(got) == 2 {
			if old, exp := keyCount(t, pool, "old"), keyCount(t, pool, "expired"); old != 50 || exp != 50 {
				t.Errorf("after two batches of 100: %d old and %d just expired keys left; want 50 and 50 (oldest first)", old, exp)
			}
		}
		if n < 100 {
			break
		}
	}
	if fmt.Sprint(got) != "[100 100 100 0]" {
		t.Errorf("batches deleted %v; want [100 100 100 0]", got)
	}
	if old, exp, fresh := keyCount(t, pool, "old"), keyCount(t, pool, "expired"), keyCount(t, pool, "fresh"); old != 0 || exp != 0 || fresh != 40 {
		t.Errorf("left old %d, expired %d, fresh %d; want 0, 0, 40", old, exp, fresh)
	}
}

// TestKeyPurgesAtOnce: two purges (two control instances) on one table
// delete every expired key exactly once between them, with no error, and
// leave the live ones; a retry taking an expired key over while they run
// keeps its new claim.
func TestKeyPurgesAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := pgtest.Pool(t)
	st1 := postgres.New(pool)
	tenant, err := st1.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	const expired = 5000
	seedKeys(t, pool, tenant, "exp", expired, 30*time.Hour)
	seedKeys(t, pool, tenant, "live", 100, time.Hour)

	// The second instance has a pool of its own, as another process would.
	pool2, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool2.Close)
	st2 := postgres.New(pool2)
	logs := &failLog{}
	var purges []*links.KeyPurge
	var wg sync.WaitGroup
	for _, st := range []*postgres.Store{st1, st2} {
		p := links.NewKeyPurge(st, links.KeyPurgeConfig{Batch: 50, Pause: time.Millisecond, Every: 5 * time.Millisecond, Log: logs.logger()})
		purges = append(purges, p)
		wg.Add(1)
		go func() { defer wg.Done(); p.Run(ctx) }()
	}
	// A retry with an expired key while the purges run: it takes the key
	// over (or finds it purged), and either way keeps it.
	ids := &counterIDs{}
	svc := links.New(st1, ids, links.Config{})
	c, err := svc.Create(ctx, tenant, links.CreateRequest{URL: "https://example.com/", IdempotencyKey: "exp-4999"})
	if err != nil || c.Replayed {
		t.Fatalf("retry with an expired key: %+v, %v; want a new create", c, err)
	}
	poll.Until(t, "every expired key purged", time.Minute, func() bool { return keyCount(t, pool, "exp") == 1 })
	poll.Until(t, "the purges counted what they deleted", 10*time.Second, func() bool {
		return purges[0].Purged()+purges[1].Purged() >= expired-1
	})
	cancel()
	wg.Wait()
	total := purges[0].Purged() + purges[1].Purged()
	if total != expired-1 && total != expired {
		// expired-1 when the retry took its key over before any purge
		// reached it, expired when a purge deleted it first.
		t.Errorf("purges deleted %d + %d = %d keys; want %d or %d", purges[0].Purged(), purges[1].Purged(), total, expired-1, expired)
	}
	if n := keyCount(t, pool, "live"); n != 100 {
		t.Errorf("%d of 100 live keys left", n)
	}
	if again, err := svc.Create(context.Background(), tenant, links.CreateRequest{URL: "https://example.com/", IdempotencyKey: "exp-4999"}); err != nil ||
		!again.Replayed || again.Link.Code != c.Link.Code {
		t.Errorf("the retried key after the purges: %+v, %v; want its new create replayed", again, err)
	}
	if logs.failed() {
		t.Errorf("a purge failed: %s", logs.String())
	}
	checkDone(t, ids, pool)
}

// failLog collects what loggers built by logger write at warning or above.
type failLog struct{ logbuf.Buffer }

func (l *failLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (l *failLog) failed() bool { return l.String() != "" }
