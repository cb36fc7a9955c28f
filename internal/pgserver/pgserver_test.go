package pgserver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// psql runs a query through the machine's psql so this package's test needs no
// driver.
func psql(t *testing.T, s *Server, query string) string {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "psql"), "-X", "-A", "-t", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "-U", "postgres", "-d", "postgres", "-c", query).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", query, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestStartKillRestartKeepsData(t *testing.T) {
	dir, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s, err := Start(ctx, Config{Dir: dir, Fast: false})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })

	psql(t, s, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := psql(t, s, "SELECT v FROM kept"); got != "42" {
		t.Fatalf("after kill and restart: got %q, want 42", got)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	// A second Start on the same folder reuses the cluster.
	s2, err := Start(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Stop() })
	if got := psql(t, s2, "SELECT v FROM kept"); got != "42" {
		t.Fatalf("after a new Start: got %q, want 42", got)
	}
}

// A server whose port another postgres holds fails to start with
// errPortTaken, and is not taken for the server already there (which
// answers on that port); given no port it picks a free one.
func TestStartOnATakenPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := startServer(t, "first", func(dir string) (*Server, error) { return Start(ctx, Config{Dir: dir, Fast: true}) })

	dir, err := os.MkdirTemp("", "pgserver-second-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	second, _, err := prepare(Config{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.initdb(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	if err := second.startOn(ctx, first.Port()); !errors.Is(err, errPortTaken) {
		t.Fatalf("start on port %d, which the first server holds: %v; want errPortTaken", first.Port(), err)
	}
	if err := second.start(ctx); err != nil {
		t.Fatal(err)
	}
	if second.Port() == first.Port() {
		t.Fatalf("both servers on port %d", first.Port())
	}
	psql(t, second, "CREATE TABLE only_here (v int)")
	if got := psql(t, first, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'"); got != "0" {
		t.Fatalf("the table made on the second server is on the first: %s", got)
	}
}
