package pgserver

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// startServer runs f on a fresh folder the postgres user can enter
// (t.TempDir's parent is private to the test's user) and stops the server
// and removes the folder when the test ends.
func startServer(t testing.TB, what string, f func(dir string) (*Server, error)) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-"+what+"-")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f(dir)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { _ = s.Stop(); _ = os.RemoveAll(dir) })
	return s
}

// A streaming standby sees the primary's writes, stops seeing them while its
// replay is paused, and, detached and then promoted, lacks exactly what the
// primary wrote after the detach: a lagging replica promoted over the
// writes it never received.
func TestReplicaPauseDetachPromote(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(what string, f func(dir string) (*Server, error)) *Server {
		t.Helper()
		return startServer(t, what, f)
	}
	primary := start("primary", func(dir string) (*Server, error) { return Start(ctx, Config{Dir: dir, Fast: true}) })
	query := func(s *Server, sql string) string {
		t.Helper()
		out, err := s.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	query(primary, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
	replica := start("replica", func(dir string) (*Server, error) { return primary.StartReplica(ctx, Config{Dir: dir, Fast: true}) })
	if err := replica.WaitReplayed(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if got := query(replica, "SELECT pg_is_in_recovery(), (SELECT string_agg(v::text, ',' ORDER BY v) FROM t)"); got != "t|1" {
		t.Fatalf("replica after catching up: %q, want t|1", got)
	}

	if err := replica.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	query(primary, "INSERT INTO t VALUES (2)")
	if got := query(replica, "SELECT string_agg(v::text, ',' ORDER BY v) FROM t"); got != "1" {
		t.Fatalf("paused replica sees %q, want 1", got)
	}
	if err := replica.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.WaitReplayed(ctx, primary); err != nil {
		t.Fatal(err)
	}

	if err := replica.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	query(primary, "INSERT INTO t VALUES (3)")
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	query(replica, "INSERT INTO t VALUES (4)")
	if got := query(replica, "SELECT string_agg(v::text, ',' ORDER BY v) FROM t"); got != "1,2,4" {
		t.Fatalf("promoted replica has %q, want 1,2,4 (3 was written after the detach)", got)
	}
}

// WaitReplayed covers commits the primary has not written yet: Fast runs
// with synchronous_commit=off, so a commit's record can sit in the WAL
// buffers after the client is told it committed, behind the primary's
// write position (pg_current_wal_lsn). A standby that only reached that
// position lacks the row, and a Detach right then loses it for good.
func TestWaitReplayedSeesAsynchronousCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary := startServer(t, "primary", func(dir string) (*Server, error) { return Start(ctx, Config{Dir: dir, Fast: true}) })
	if _, err := primary.Query(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	replica := startServer(t, "replica", func(dir string) (*Server, error) { return primary.StartReplica(ctx, Config{Dir: dir, Fast: true}) })
	for i := 1; i <= 20; i++ {
		if _, err := primary.Query(ctx, "INSERT INTO t VALUES ("+strconv.Itoa(i)+")"); err != nil {
			t.Fatal(err)
		}
		if err := replica.WaitReplayed(ctx, primary); err != nil {
			t.Fatal(err)
		}
		got, err := replica.Query(ctx, "SELECT coalesce(max(v), 0) FROM t")
		if err != nil {
			t.Fatal(err)
		}
		if got != strconv.Itoa(i) {
			t.Fatalf("after committing %d and WaitReplayed the replica's newest row is %s", i, got)
		}
	}
}
