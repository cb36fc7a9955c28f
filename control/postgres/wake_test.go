package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// listener is a connection listening on the relay's channel.
type listener struct {
	t    *testing.T
	conn *pgxpool.Conn
}

func listen(t *testing.T, pool *pgxpool.Pool) *listener {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(context.Background(), `LISTEN outbox`); err != nil {
		t.Fatal(err)
	}
	return &listener{t: t, conn: conn}
}

// woken waits for a notification, as long as d allows: d bounds a test that
// would otherwise hang, it asserts nothing about speed.
func (l *listener) woken(d time.Duration) bool {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := l.conn.Conn().WaitForNotification(ctx)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		l.t.Fatal(err)
	}
	return err == nil
}

// quiet reports that no notification is pending: it asks the server a
// round trip, which delivers any notification sent before it.
func (l *listener) quiet() bool {
	l.t.Helper()
	if _, err := l.conn.Exec(context.Background(), `SELECT 1`); err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // only what has arrived already
	_, err := l.conn.Conn().WaitForNotification(ctx)
	return err != nil
}

// drain takes every notification delivered so far.
func (l *listener) drain() {
	for !l.quiet() {
	}
}

// TestLinkWritesWakeTheRelay: every way a link change is written wakes the
// relay's LISTEN after it commits (schema 013 took the wake out of the
// writing transaction), a segment change still wakes it from its trigger,
// and a link row written straight into the outbox no longer does.
func TestLinkWritesWakeTheRelay(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t, pool)
	const bound = time.Minute // a hang guard, not a timing assertion
	id := uint64(5000)
	newLinks := func(n int) []links.NewLink {
		ls := make([]links.NewLink, n)
		for i := range ls {
			id++
			code, _ := base62.Encode(id)
			ls[i] = links.NewLink{Link: &link.Link{ID: id, Code: code, TenantID: tenant, Namespace: "default",
				URL: "https://example.com/", URLOriginal: "https://example.com/", RedirectType: 302}}
		}
		return ls
	}

	insertOutbox(t, pool, 1_000_001, 1_000_003) // versions the sequence will not reach here
	if !l.quiet() {
		t.Fatal("a link row written straight into the outbox notified: the 001 trigger is still there")
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (version, kind, namespace, seg_start, seg_end, seg_state)
		VALUES (1000004, 'segment', 'default', 1, 100, 'leased')`); err != nil {
		t.Fatal(err)
	}
	if !l.woken(bound) {
		t.Fatal("a segment change did not wake the relay")
	}
	l.drain()

	steps := []struct {
		name  string
		write func() error
	}{
		{"CreateLink", func() error {
			ls := newLinks(1)
			return st.CreateLink(ctx, ls[0].Link, false)
		}},
		{"Autocommit InsertLinks", func() error {
			_, err := st.Autocommit().InsertLinks(ctx, newLinks(10))
			return err
		}},
		{"WriteTx InsertLinks", func() error {
			return st.WriteTx(ctx, func(tx links.Tx) error {
				_, err := tx.InsertLinks(ctx, newLinks(10))
				return err
			})
		}},
		{"UpdateLink", func() error {
			code, _ := base62.Encode(id)
			_, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, code, links.Change{SetStatus: true, Status: link.Disabled})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !l.woken(bound) {
			t.Fatalf("%s committed a link change and the relay was not woken", s.name)
		}
		l.drain()
	}

	// A transaction that fails writes nothing and wakes nobody.
	boom := errors.New("boom")
	if err := st.WriteTx(ctx, func(tx links.Tx) error {
		if _, err := tx.InsertLinks(ctx, newLinks(3)); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("WriteTx: %v, want boom", err)
	}
	// Any wake still on its way from the steps above has arrived once a
	// wake asked for now has: ask for one and drain up to it.
	st.waker.wake()
	if !l.woken(bound) {
		t.Fatal("a wake asked for directly did not arrive")
	}
	l.drain()
	for st.waker.state.Load() != 0 {
		time.Sleep(time.Millisecond) // the wake's goroutine ending, not timing
	}
	if !l.quiet() {
		t.Fatal("a rolled-back transaction woke the relay")
	}
}

// TestWakesFoldButNeverStop: wakes asked for from many goroutines at once
// fold into few notifications, and the last of them comes after the last
// wake asked for.
func TestWakesFoldButNeverStop(t *testing.T) {
	_, pool := newStore(t)
	l := listen(t, pool)
	w := &waker{pool: pool}
	for round := range 20 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(w.wake)
		}
		wg.Wait()
		if !l.woken(time.Minute) {
			t.Fatalf("round %d: 16 wakes, no notification", round)
		}
		for w.state.Load() != 0 {
			time.Sleep(time.Millisecond)
		}
		l.drain()
	}
}
