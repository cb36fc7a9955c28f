// Package pgtest gives tests a real PostgreSQL: one server per test process,
// started from the machine's binaries, and a fresh migrated database per test
// cloned from a template in well under a second.
//
// A package that uses it calls Main from its TestMain, which stops the server
// and removes its folder when the tests end, whatever their outcome.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/schema"
)

const template = "edgelink_template"

var (
	mainCalled atomic.Bool
	once       sync.Once
	server     *pgserver.Server
	serverDir  string
	startErr   error
	dbSeq      atomic.Int64
)

// Main runs the package's tests and then stops the shared server.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main that returns the tests' exit code instead of exiting, for a
// TestMain with more to clean up.
func Run(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	if serverDir != "" {
		_ = os.RemoveAll(serverDir)
	}
	return code
}

// Server returns the process's PostgreSQL server, starting it on first use.
func Server(t testing.TB) *pgserver.Server {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) (or pgtest.Run, or stack.Main) from this package's TestMain so the server is stopped after the tests")
	}
	once.Do(func() {
		serverDir, startErr = os.MkdirTemp("", "edgelink-pgtest-")
		if startErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		server, startErr = pgserver.Start(ctx, pgserver.Config{Dir: serverDir, Fast: true})
		if startErr != nil {
			return
		}
		startErr = migrateTemplate(ctx, server)
	})
	if startErr != nil {
		t.Fatalf("pgtest: start PostgreSQL: %v", startErr)
	}
	return server
}

func migrateTemplate(ctx context.Context, s *pgserver.Server) error {
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+template); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.DSN(template))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return schema.Migrate(ctx, conn)
}

// DSN creates a fresh database with every migration applied and returns its
// connection string. The database is dropped when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	s := Server(t)
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+template); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return s.DSN(name)
}

// Pool opens a pool on a fresh database (see DSN), closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), DSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
