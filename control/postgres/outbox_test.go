package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	st, pool := newStore(t)
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
			st, pool := newStore(t)
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
	st, pool := newStore(t)
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
