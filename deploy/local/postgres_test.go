package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/internal/stack/allinone"
)

// The local stack's PostgreSQL lives in DataDir/pg: these tests are about
// that server dying under the stack and a data folder a crash left behind.

// lockFile is the stack's PostgreSQL's postmaster.pid in dataDir.
func lockFile(dataDir string) string { return filepath.Join(dataDir, "pg", "data", "postmaster.pid") }

// postmasterPID reads the pid a running server wrote in its lock file, as
// an operator would (head -1 postmaster.pid); 0 when there is none.
func postmasterPID(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

func dsnPort(t *testing.T, dsn string) int {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("database URL %q has no port", dsn)
	}
	return port
}

// answers reports whether a fresh connection to dsn runs a query: each ask
// dials anew, so no connection the fault cut is ever reused.
func answers(ctx context.Context, dsn string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one) == nil && one == 1
}

func newDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "edgelink-local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A PostgreSQL killed with SIGKILL under the running stack is started
// again by the stack, on the port the stack printed; control reconnects by
// itself: a create answers 201 again, the outbox relay publishes it, its
// link redirects, and the link made before the kill is still there.
func TestLocalStackRestartsAKilledPostgres(t *testing.T) {
	dir := newDataDir(t)
	r := allinone.New(t, allinone.Options{DataDir: dir}).Ready
	ctx := context.Background()
	before := client(r).CreateJSONPatiently(ctx, `{"url": "https://example.com/before"}`)
	if before.Status != http.StatusCreated {
		t.Fatalf("create before the kill: %v %v", before.Status, before.Problem)
	}
	pid := postmasterPID(lockFile(dir))
	if pid <= 0 {
		t.Fatalf("no postmaster pid in %s", lockFile(dir))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}

	// Backends outlive their postmaster for a moment, so a create right
	// after the kill may still succeed: wait for the new postmaster first.
	if err := stack.Poll(ctx, "a new postmaster answers on the printed database URL", 2*time.Minute, func() bool {
		now := postmasterPID(lockFile(dir))
		return now > 0 && now != pid && answers(ctx, r.DatabaseURL)
	}); err != nil {
		t.Fatalf("%v (killed pid %d; lock file names %d)", err, pid, postmasterPID(lockFile(dir)))
	}
	var after stack.Created
	if err := stack.Poll(ctx, "a create answered 201 after PostgreSQL was restarted", time.Minute, func() bool {
		after = client(r).CreateJSON(ctx, `{"url": "https://example.com/after"}`)
		return after.Status == http.StatusCreated
	}); err != nil {
		t.Fatalf("%v; last answer: %v %v %v", err, after.Status, after.Problem, after.Err)
	}
	// The outbox relay's session on the old server died with it: it
	// publishes the new link's change too.
	pool := dbPool(t, r) // opened after the restart: no connection the kill cut
	var unpublished int
	if err := stack.Poll(ctx, "the outbox relay publishes again", time.Minute, func() bool {
		return pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE version >= (SELECT next_version FROM outbox_published)`).Scan(&unpublished) == nil && unpublished == 0
	}); err != nil {
		t.Errorf("%v: %d outbox rows unpublished", err, unpublished)
	}
	if got := client(r).Do(ctx, "GET", "/api/v1/links/"+before.Code, ""); got.Status != http.StatusOK {
		t.Errorf("the link made before the kill: %v", got)
	}
	if status, loc := waitRedirect(t, r, after.Code); status != http.StatusFound || loc != "https://example.com/after" {
		t.Errorf("the link made after the restart: %d %q; want 302 to https://example.com/after", status, loc)
	}
}

// A data folder whose PostgreSQL was killed (SIGKILL: no shutdown, the
// lock file left behind) comes up with the next start, on the port the
// last run printed, with its data. The killed postmaster's pid belongs to
// another live process by then, as after a reboot or in a restarted
// container: here another PostgreSQL's postmaster, on a data folder of its
// own, which PostgreSQL's own check (is that pid alive?) takes for the
// owner of the lock. That server is left alone.
func TestUpAfterACrashKeepsItsPort(t *testing.T) {
	dir := newDataDir(t)
	s := allinone.New(t, allinone.Options{DataDir: dir})
	ctx := context.Background()
	c := client(s.Ready).CreateJSONPatiently(ctx, `{"url": "https://example.com/kept"}`)
	if c.Status != http.StatusCreated {
		t.Fatalf("create: %v %v", c.Status, c.Problem)
	}
	port := dsnPort(t, s.Ready.DatabaseURL)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop the first run: %v", err)
	}

	crashed, err := pgserver.Start(ctx, pgserver.Config{Dir: filepath.Join(dir, "pg"), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	if err := crashed.Kill(); err != nil {
		t.Fatal(err)
	}
	other := stack.NewPostgres(t, stack.PostgresConfig{})
	otherLock := filepath.Join(other.Server.DataDir(), "postmaster.pid")
	reused := postmasterPID(otherLock)
	b, err := os.ReadFile(lockFile(dir))
	if err != nil {
		t.Fatalf("the killed server left no lock file: %v", err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	if err := os.WriteFile(lockFile(dir), []byte(strconv.Itoa(reused)+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	otherBefore, err := os.ReadFile(otherLock)
	if err != nil {
		t.Fatal(err)
	}

	r := allinone.New(t, allinone.Options{DataDir: dir}).Ready
	if got := dsnPort(t, r.DatabaseURL); got != port {
		t.Errorf("database URL %s after the crash; want port %d, as the last run printed", r.DatabaseURL, port)
	}
	if status, loc := waitRedirect(t, r, c.Code); status != http.StatusFound || loc != "https://example.com/kept" {
		t.Errorf("the link made before the crash: %d %q; want 302", status, loc)
	}
	if after, err := os.ReadFile(otherLock); err != nil || string(after) != string(otherBefore) {
		t.Errorf("the other server's lock file changed: %v\n%s\nwas\n%s", err, after, otherBefore)
	}
	if !answers(ctx, other.DSN) {
		t.Errorf("the other server, whose pid the stale lock file named, no longer answers")
	}
}
