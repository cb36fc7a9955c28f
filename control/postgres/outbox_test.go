package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// insertOutbox writes link rows with versions from to to, straight into the
// outbox.
func insertOutbox(t *testing.T, pool *pgxpool.Pool, from, to int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO outbox (version, kind, code, url, redirect_type, status)
		SELECT g, 'link', 'code-' || g, 'https://example.com/', 302, 'active' FROM generate_series($1::bigint, $2::bigint) g`,
		from, to); err != nil {
		t.Fatal(err)
	}
}

// newEmptyOutbox is a store on a fresh database whose outbox holds nothing:
// without the platform domain's row that the migrations write (its
// publishing is TestReadOutboxDomains's), for tests that count rows.
func newEmptyOutbox(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	st, pool := newStore(t)
	if _, err := pool.Exec(context.Background(), `DELETE FROM outbox`); err != nil {
		t.Fatal(err)
	}
	return st, pool
}

func minOutbox(t *testing.T, st *Store) string {
	t.Helper()
	v, ok, err := st.MinOutboxVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "none"
	}
	return fmt.Sprint(v)
}

// TestMarkPublishedIsAPosition: a mark moves one position forward only,
// MinOutboxVersion is the first row at or after it, and marking rewrites
// no outbox row (the rows keep the tuple their writer made).
func TestMarkPublishedIsAPosition(t *testing.T) {
	st, pool := newEmptyOutbox(t)
	ctx := context.Background()
	if got := minOutbox(t, st); got != "none" {
		t.Fatalf("empty outbox: MinOutboxVersion %s, want none", got)
	}
	insertOutbox(t, pool, 3, 9)
	tuples := func() string {
		var s string
		if err := pool.QueryRow(ctx, `SELECT string_agg(version || ':' || xmin::text || ctid::text, ',' ORDER BY version) FROM outbox`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := tuples()
	for _, step := range []struct {
		mark uint64
		want string
	}{
		{0, "3"}, // nothing marked yet
		{5, "5"},
		{4, "5"}, // a late, older mark changes nothing
		{9, "9"},
		{10, "none"},
		{12, "none"},
	} {
		if step.mark > 0 {
			if err := st.MarkPublished(ctx, step.mark); err != nil {
				t.Fatal(err)
			}
		}
		if got := minOutbox(t, st); got != step.want {
			t.Fatalf("after marking %d: MinOutboxVersion %s, want %s", step.mark, got, step.want)
		}
	}
	if after := tuples(); after != before {
		t.Fatalf("marking rewrote outbox rows:\nbefore %s\nafter  %s", before, after)
	}
	var next int64
	if err := pool.QueryRow(ctx, `SELECT next_version FROM outbox_published`).Scan(&next); err != nil || next != 12 {
		t.Fatalf("position %d (%v), want 12", next, err)
	}
}

// TestMigration009CarriesMarks: the position migration starts from the
// marks the rows had, and its down migration gives them back.
func TestMigration009CarriesMarks(t *testing.T) {
	sql, err := os.ReadFile("../../schema/009_outbox_position.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, down, ok := strings.Cut(string(sql), "---- create above / drop below ----")
	if !ok {
		t.Fatal("009 has no down section")
	}
	for _, tc := range []struct {
		name      string
		rows      int // versions 1 to rows
		published int // the first published ones
		want      int64
	}{
		{"some published", 10, 6, 7},
		{"all published", 10, 10, 11},
		{"none published", 10, 0, 1},
		{"empty outbox", 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, pool := newEmptyOutbox(t)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, down); err != nil {
				t.Fatalf("down: %v", err)
			}
			insertOutbox(t, pool, 1, tc.rows)
			if _, err := pool.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE version <= $1`, tc.published); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, up); err != nil {
				t.Fatalf("up: %v", err)
			}
			var next int64
			if err := pool.QueryRow(ctx, `SELECT next_version FROM outbox_published`).Scan(&next); err != nil || next != tc.want {
				t.Fatalf("position %d (%v), want %d", next, err, tc.want)
			}
			want := "none"
			if tc.published < tc.rows {
				want = fmt.Sprint(tc.published + 1)
			}
			if got := minOutbox(t, st); got != want {
				t.Fatalf("MinOutboxVersion %s, want %s", got, want)
			}
			// Down again: the rows below the position are published.
			if _, err := pool.Exec(ctx, down); err != nil {
				t.Fatalf("down: %v", err)
			}
			var unpublished int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&unpublished); err != nil || unpublished != int64(tc.rows-tc.published) {
				t.Fatalf("after down: %d unpublished (%v), want %d", unpublished, err, tc.rows-tc.published)
			}
		})
	}
}

// TestPurgePublishedKeepsWhatIsNotPublished: only rows below the published
// position and older than the cutoff go, oldest first, at most limit.
func TestPurgePublishedKeepsWhatIsNotPublished(t *testing.T) {
	st, pool := newEmptyOutbox(t)
	ctx := context.Background()
	insertOutbox(t, pool, 1, 10)
	if _, err := pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '2 days' WHERE version <> 3`); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPublished(ctx, 7); err != nil {
		t.Fatal(err)
	}
	left := func() string {
		var s string
		if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(version::text, ',' ORDER BY version), '') FROM outbox`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	cutoff := time.Now().Add(-24 * time.Hour)
	for _, step := range []struct {
		limit, deleted int
		left           string
	}{
		{2, 2, "3,4,5,6,7,8,9,10"}, // 1 and 2: oldest first
		{10, 3, "3,7,8,9,10"},      // 4, 5, 6; 3 is too young, 7 on are unpublished
		{10, 0, "3,7,8,9,10"},      // nothing more
	} {
		n, err := st.PurgePublished(ctx, cutoff, step.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := left(); n != step.deleted || got != step.left {
			t.Fatalf("limit %d: deleted %d, left %s; want %d, %s", step.limit, n, got, step.deleted, step.left)
		}
	}
}

// TestReadOutboxDomains: link rows are events on their domains (none: the
// platform's), domain rows carry their configuration as of the row's
// version, and a row that cannot become an event ends the page before it,
// then fails the read that starts at it, naming it.
func TestReadOutboxDomains(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The migration wrote the platform's domain row; this test starts after it.
	var first int64
	if err := pool.QueryRow(ctx, `SELECT min(version) FROM outbox WHERE kind = 'domain' AND domain_id = 0`).Scan(&first); err != nil {
		t.Fatalf("the migration's domain row: %v", err)
	}
	conf := `{"id": 3, "host": "go.acme.com", "tenant_id": 7, "root_redirect": "https://acme.com/", "code_mode": "ff1",
		"key_ids": ["k2026", "k2025"], "status": "active", "version": 1}`
	exec(`INSERT INTO outbox (version, kind, domain_id, domain_conf) VALUES (100, 'domain', 3, $1)`, conf)
	exec(`INSERT INTO outbox (version, kind, domain_id, code, url, redirect_type, status) VALUES
		(101, 'link', 3, 'spring', 'https://acme.com/3', 302, 'active'),
		(102, 'link', 0, 'spring', 'https://platform.example/', 302, 'active'),
		(103, 'link', NULL, 'before', 'https://platform.example/b', 301, 'active')`)
	exec(`INSERT INTO outbox (version, kind, domain_id, domain_conf) VALUES (104, 'domain', 4, '{"id": 3, "host": "x.example"}')`)
	exec(`INSERT INTO outbox (version, kind, domain_id, code, url, redirect_type, status) VALUES (105, 'link', 3, 'later', 'https://acme.com/l', 302, 'active')`)

	page, err := st.ReadOutbox(ctx, uint64(first), 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []linkevent.Event{
		{Version: uint64(first), Kind: linkevent.KindDomain, Conf: &link.Domain{Host: "platform.invalid", CodeMode: link.CodesSequential,
			Status: link.DomainActive, Version: uint64(first)}},
		{Version: 100, Kind: linkevent.KindDomain, Domain: 3, Conf: &link.Domain{ID: 3, Host: "go.acme.com", TenantID: 7,
			RootRedirect: "https://acme.com/", CodeMode: link.CodesFF1, KeyIDs: []string{"k2026", "k2025"}, Status: link.DomainActive, Version: 100}},
		{Version: 101, Kind: linkevent.KindLink, Domain: 3, Code: "spring", URL: "https://acme.com/3", RedirectType: 302, Status: link.Active},
		{Version: 102, Kind: linkevent.KindLink, Code: "spring", URL: "https://platform.example/", RedirectType: 302, Status: link.Active},
		{Version: 103, Kind: linkevent.KindLink, Code: "before", URL: "https://platform.example/b", RedirectType: 301, Status: link.Active},
	}
	if diff := cmp.Diff(want, page.Events); diff != "" {
		t.Fatalf("page up to the bad row (-want +got):\n%s", diff)
	}
	// Every event of it is one the stream takes.
	var b linkevent.Batch
	for i := range page.Events {
		e := page.Events[i]
		if i > 0 {
			e.Prev = page.Events[i-1].Version
		}
		if err := b.Add(&e); err != nil {
			t.Fatalf("event %d does not batch: %v", e.Version, err)
		}
	}
	if page, err := st.ReadOutbox(ctx, 104, 100); err == nil || !strings.Contains(err.Error(), "outbox row 104") {
		t.Fatalf("ReadOutbox from the bad row = %d events, %v; want an error naming row 104", len(page.Events), err)
	}
}
