package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	js     jetstream.JetStream
	tenant int64
	nextID uint64
}

// newEnv is a fresh database and NATS server. The tests on it count the
// link events they make, so the platform domain's outbox row that the
// migrations write is removed first (TestRelayPublishesDomains publishes
// it).
func newEnv(t *testing.T) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	if _, err := pool.Exec(context.Background(), `DELETE FROM outbox WHERE kind = 'domain'`); err != nil {
		t.Fatal(err)
	}
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	return &env{pool: pool, store: st, js: js, tenant: tenant}
}

func (e *env) create(t *testing.T) uint64 {
	t.Helper()
	e.nextID++
	l := &link.Link{ID: e.nextID, Code: fmt.Sprintf("c%05d", e.nextID), TenantID: e.tenant, Namespace: "default",
		URL: "https://example.com/", URLOriginal: "https://example.com/", RedirectType: 302}
	if err := e.store.CreateLink(context.Background(), l, true); err != nil {
		t.Fatal(err)
	}
	return l.Version
}

// runRelay runs a relay until the returned stop is called (or the test ends).
func (e *env) runRelay(t *testing.T) (*outbox.Relay, func()) {
	t.Helper()
	r := outbox.New(e.store, e.js, outbox.Config{PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return r, func() { cancel(); <-done }
}

func (e *env) waitVersions(t *testing.T, want []uint64) []linkevent.Event {
	t.Helper()
	var evs []linkevent.Event
	// Past the bound the versions it has are checked as they are.
	_ = poll.Wait(context.Background(), "every version on the stream", 30*time.Second, func() bool {
		evs = natstest.ChangeEvents(t, e.js)
		return len(evs) >= len(want)
	})
	got := make([]uint64, len(evs))
	for i, ev := range evs {
		got[i] = ev.Version
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream versions %v, want %v", got, want)
	}
	var prev uint64
	for _, ev := range evs {
		if ev.Prev != prev {
			t.Fatalf("event %d has prev %d, want %d", ev.Version, ev.Prev, prev)
		}
		prev = ev.Version
	}
	return evs
}

// waitIdle waits until the relay has marked every outbox row it published
// and no other backend holds a transaction id: then no transaction of the
// relay's (its marks, its gap ceilings) or of anyone else's can complete
// above one the test starts next.
func (e *env) waitIdle(t *testing.T) {
	t.Helper()
	poll.Until(t, "the relay to be idle", 30*time.Second, func() bool {
		var idle bool
		err := e.pool.QueryRow(context.Background(), `
			SELECT NOT EXISTS (SELECT 1 FROM outbox WHERE version >= (SELECT next_version FROM outbox_published))
			   AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
			                   WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid())`).Scan(&idle)
		return err == nil && idle
	})
}

// TestHoleHeldByRunningTransaction: a version taken by a transaction that is
// still running is never skipped; a rolled-back one is, once provably dead.
func TestHoleHeldByRunningTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v1 := e.create(t)

	// A transaction takes the next version the way every mutation does (xid
	// first) and stays open.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var held int64
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint * 0 + nextval('change_version_seq')`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
		VALUES (999, 'held-1', $1, 'custom', 'https://held/', 'https://held/', $2)`, e.tenant, held); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox (version, kind, code, url, redirect_type, status)
		VALUES ($1, 'link', 'held-1', 'https://held/', 302, 'active')`, held); err != nil {
		t.Fatal(err)
	}
	v3 := e.create(t)

	r, _ := e.runRelay(t)
	e.waitVersions(t, []uint64{v1})
	poll.Until(t, "the relay to wait on the hole", 30*time.Second, func() bool { return r.Stats().GapWaits > 0 })
	if evs := natstest.ChangeEvents(t, e.js); len(evs) != 1 {
		t.Fatalf("relay published past a version a running transaction holds: %d events", len(evs))
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitVersions(t, []uint64{v1, uint64(held), v3})

	// A version whose transaction rolls back is skipped, and counted.
	tx2, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lost int64
	if err := tx2.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint * 0 + nextval('change_version_seq')`).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	v5 := e.create(t)
	if err := tx2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitVersions(t, []uint64{v1, uint64(held), v3, v5})
	if s := r.Stats(); s.Skipped != 1 {
		t.Fatalf("skipped %d versions, want 1 (version %d)", s.Skipped, lost)
	}
}

// TestHoleHeldAboveSnapshotXmax: transaction A takes its xid before B, B
// takes its version before A, and A commits first. A snapshot taken then has
// xmax = A+1, so B (running, xid above every completed one) is neither in
// its in-progress list nor below its xmax: waiting on that list alone
// skipped B's version as rolled back, and B's committed change never
// reached the stream (gate/outage's repeated hard-kill test saw it).
func TestHoleHeldAboveSnapshotXmax(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v1 := e.create(t)
	// The relay is idle when the case arises, as under a lull in load: no
	// transaction of its own completes between A's commit and its read.
	r, _ := e.runRelay(t)
	e.waitVersions(t, []uint64{v1})
	e.waitIdle(t)

	begin := func() pgx.Tx {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	insert := func(tx pgx.Tx, code string) uint64 {
		var v int64
		if err := tx.QueryRow(ctx, `SELECT nextval('change_version_seq')`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (version, kind, code, url, redirect_type, status)
			VALUES ($1, 'link', $2, 'https://held/', 302, 'active')`, v, code); err != nil {
			t.Fatal(err)
		}
		return uint64(v)
	}
	// The case needs b's xid above the xmax of a snapshot taken right after
	// a commits. A transaction completing above b meanwhile (the relay's
	// own, or one of the machine's) puts b into every new snapshot's
	// in-progress list instead, the easier case: roll back and set it up
	// again (the relay then skips that hole, as it must).
	published := []uint64{v1}
	var b pgx.Tx
	var vb, va, gapWaits, skipped uint64
	for attempt := 1; ; attempt++ {
		// Counted before a commits: the relay may meet the hole at once.
		gapWaits, skipped = r.Stats().GapWaits, r.Stats().Skipped
		a, bb := begin(), begin() // a's xid < b's
		vb = insert(bb, fmt.Sprintf("held-b%d", attempt))
		va = insert(a, fmt.Sprintf("held-a%d", attempt)) // vb < va
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var inXip bool
		if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) x
			WHERE pg_xact_status(x) = 'in progress')`).Scan(&inXip); err != nil {
			t.Fatal(err)
		}
		if !inXip {
			t.Logf("b above the snapshot's xmax on attempt %d", attempt)
			b = bb
			break
		}
		if attempt == 20 {
			t.Fatal("setup: in 20 attempts b was always in a fresh snapshot's in-progress list; the case needs it above xmax")
		}
		if err := bb.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		published = append(published, va)
		e.waitVersions(t, published)
		e.waitIdle(t)
	}

	poll.Until(t, "the relay to wait on the hole", 30*time.Second, func() bool { return r.Stats().GapWaits > gapWaits })
	// Many rechecks, however slow the machine: none may give up on vb.
	rechecks := r.Stats().GapRechecks
	poll.Until(t, "50 rechecks of the hole", 30*time.Second, func() bool { return r.Stats().GapRechecks >= rechecks+50 })
	if evs := natstest.ChangeEvents(t, e.js); len(evs) != len(published) || r.Stats().Skipped != skipped {
		t.Fatalf("relay went past version %d that a running transaction holds: %d events (want %d), %d skipped (want %d)",
			vb, len(evs), len(published), r.Stats().Skipped, skipped)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitVersions(t, append(published, vb, va))
}

// TestCrashBetweenPublishAndMark: a relay that published but never marked is
// followed by one that publishes each change exactly once.
func TestCrashBetweenPublishAndMark(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var want []uint64
	for range 20 {
		want = append(want, e.create(t))
	}
	_, stop := e.runRelay(t)
	e.waitVersions(t, want)
	stop()
	// As if the relay died after publishing and before marking.
	if _, err := e.pool.Exec(ctx, `UPDATE outbox_published SET next_version = 1`); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		want = append(want, e.create(t))
	}
	// Purge the de-duplication window's help: resuming must rely on the
	// stream's last event, not on JetStream remembering message ids.
	r, _ := e.runRelay(t)
	evs := e.waitVersions(t, want)
	if len(evs) != 25 {
		t.Fatalf("%d events on the stream, want 25", len(evs))
	}
	poll.Until(t, "marks to catch up", 30*time.Second, func() bool {
		var n int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE version >= (SELECT next_version FROM outbox_published)`).Scan(&n)
		return n == 0
	})
	if s := r.Stats(); s.Published != 5 {
		t.Fatalf("second relay published %d events, want 5", s.Published)
	}
}

// TestOneActiveRelay: two relays on one outbox publish each change once.
func TestOneActiveRelay(t *testing.T) {
	e := newEnv(t)
	e.runRelay(t)
	e.runRelay(t)
	var want []uint64
	for range 30 {
		want = append(want, e.create(t))
	}
	e.waitVersions(t, want)
}

// TestMessagesAreRuns: a backlog goes out as messages of consecutive
// events, bounded by count and by bytes, each with the de-duplication id
// of its first version and its last version in the header, the run
// chaining across messages.
func TestMessagesAreRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    outbox.Config
		counts []int // events per message
	}{
		{"by count", outbox.Config{MessageEvents: 10}, []int{10, 10, 5}},
		{"by bytes", outbox.Config{MessageBytes: 200}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var want []uint64
			for range 25 {
				want = append(want, e.create(t))
			}
			tc.cfg.PollInterval = 50 * time.Millisecond
			r := outbox.New(e.store, e.js, tc.cfg)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			e.waitVersions(t, want)
			var counts []int
			for _, m := range natstest.ChangeMessages(t, e.js) {
				first, last := m.Events[0].Version, m.Events[len(m.Events)-1].Version
				if m.MsgID != linkevent.MsgID(first) || m.Version != last {
					t.Errorf("message %d (versions %d to %d): id %q, version header %d; want %q, %d", m.Seq, first, last, m.MsgID, m.Version, linkevent.MsgID(first), last)
				}
				if tc.cfg.MessageBytes > 0 && m.Bytes > tc.cfg.MessageBytes && len(m.Events) > 1 {
					t.Errorf("message %d is %d bytes, past the %d-byte bound", m.Seq, m.Bytes, tc.cfg.MessageBytes)
				}
				counts = append(counts, len(m.Events))
			}
			if tc.counts != nil && fmt.Sprint(counts) != fmt.Sprint(tc.counts) {
				t.Errorf("events per message %v, want %v", counts, tc.counts)
			}
			if len(counts) < 2 {
				t.Errorf("events per message %v: the bound cut no message", counts)
			}
			if s := r.Stats(); s.Published != 25 {
				t.Errorf("published %d events, want 25", s.Published)
			}
		})
	}
}

// stuckMarks is the authority with marks that wait until released.
type stuckMarks struct {
	*postgres.Store
	release chan struct{}
	calls   atomic.Int32
}

func (s *stuckMarks) MarkPublished(ctx context.Context, next uint64) error {
	s.calls.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.MarkPublished(ctx, next)
}

// TestMarksOffThePublishPath: publishing never waits for a mark; marks
// land once the database takes them, at the newest position.
func TestMarksOffThePublishPath(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := &stuckMarks{Store: e.store, release: make(chan struct{})}
	var want []uint64
	for range 10 {
		want = append(want, e.create(t))
	}
	r := outbox.New(st, e.js, outbox.Config{PollInterval: 50 * time.Millisecond, Batch: 3})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.waitVersions(t, want)
	for range 10 {
		want = append(want, e.create(t))
	}
	e.waitVersions(t, want)
	if st.calls.Load() == 0 {
		t.Fatal("the relay never asked for a mark")
	}
	if s := r.Stats(); s.Marked != 0 {
		t.Fatalf("marked %d while every mark is stuck", s.Marked)
	}
	close(st.release)
	last := want[len(want)-1]
	poll.Until(t, "marks to catch up", 30*time.Second, func() bool {
		var next int64
		return r.Stats().Marked == last+1 &&
			e.pool.QueryRow(ctx, `SELECT next_version FROM outbox_published`).Scan(&next) == nil && uint64(next) == last+1
	})
}

// TestReadAheadWaitsOnHoles: pages read ahead, while the acks of the page
// before are awaited, settle their holes as any read does: a version a
// running transaction holds is waited for at a page boundary, and one that
// rolled back is skipped once provably dead.
func TestReadAheadWaitsOnHoles(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var want []uint64
	for range 8 { // two full pages
		want = append(want, e.create(t))
	}
	hold := func() (pgx.Tx, uint64) {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		var v int64
		if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint * 0 + nextval('change_version_seq')`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (version, kind, code, url, redirect_type, status)
			VALUES ($1, 'link', $2, 'https://held/', 302, 'active')`, v, fmt.Sprintf("held-%d", v)); err != nil {
			t.Fatal(err)
		}
		return tx, uint64(v)
	}
	held, vHeld := hold() // the first version of the third page
	lost, vLost := hold()
	var after []uint64
	for range 6 {
		after = append(after, e.create(t))
	}
	r := outbox.New(e.store, e.js, outbox.Config{PollInterval: 50 * time.Millisecond, Batch: 4})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.waitVersions(t, want)
	poll.Until(t, "the relay to wait on the hole", 30*time.Second, func() bool { return r.Stats().GapWaits > 0 })
	if s := r.Stats(); s.ReadAheads == 0 {
		t.Fatalf("no page was read ahead: %+v", s)
	}
	if evs := natstest.ChangeEvents(t, e.js); len(evs) != len(want) {
		t.Fatalf("relay published past version %d that a running transaction holds: %d events, want %d", vHeld, len(evs), len(want))
	}
	if err := lost.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitVersions(t, append(append(want, vHeld), after...))
	if s := r.Stats(); s.Skipped != 1 {
		t.Fatalf("skipped %d versions, want 1 (version %d)", s.Skipped, vLost)
	}
}
