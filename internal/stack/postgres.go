package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// PostgresConfig says how to run a PostgreSQL server of the caller's own.
type PostgresConfig struct {
	// Dir holds the cluster; an existing one is reused with its data.
	// Empty makes a temporary folder, removed by Close.
	Dir string
	// Database is created when missing and migrated; empty means
	// "edgelink".
	Database string
	// Durable keeps fsync and full-page writes on, as production runs;
	// the default skips them, which only an OS crash could notice.
	Durable bool
	// Settings are extra "name=value" server settings.
	Settings []string
	// Supervise starts the server again whenever it exits other than by
	// Stop or Kill (pgserver.Config.Supervise), logging on Log: the local
	// stack's PostgreSQL comes back from a crash by itself.
	Supervise bool
	Log       *slog.Logger
}

// Postgres is one migrated database and the pool the harness holds on it.
//
// On a server of its own (StartPostgres, NewPostgres) a test may Stop,
// Kill and Restart it; each of those resets the harness's pool, since the
// stop terminated its connections (SQLSTATE 57P01), so a check after the
// fault never fails on a connection the fault cut. A database on the test
// process's shared server (SharedPostgres) has no Server and must not be
// stopped. Methods are safe for concurrent use.
type Postgres struct {
	// Server is the postmaster; nil on the shared server.
	Server *pgserver.Server
	// DSN reaches the database directly, never through a fault a test
	// puts in front of it.
	DSN  string
	pool *pgxpool.Pool
	temp string
}

// StartPostgres starts a server in cfg.Dir, creates and migrates the
// database, and opens the harness's pool. Close stops it all.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (_ *Postgres, err error) {
	p := &Postgres{}
	defer closeOnError(&err, p.Close)
	dir, err := folder(cfg.Dir, "pg", &p.temp)
	if err != nil {
		return nil, err
	}
	if p.Server, err = pgserver.Start(ctx, pgserver.Config{Dir: dir, Fast: !cfg.Durable, Settings: cfg.Settings,
		Supervise: cfg.Supervise, Logger: cfg.Log}); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	db := cfg.Database
	if db == "" {
		db = "edgelink"
	}
	if err := createDatabase(ctx, p.Server, db); err != nil {
		return nil, err
	}
	p.DSN = p.Server.DSN(db)
	if p.pool, err = pgxpool.New(ctx, p.DSN); err != nil {
		return nil, err
	}
	if err := postgres.Migrate(ctx, p.pool); err != nil {
		return nil, err
	}
	return p, nil
}

// NewPostgres is StartPostgres for a test: it fails the test on error and
// stops the server when the test ends.
func NewPostgres(t testing.TB, cfg PostgresConfig) *Postgres {
	t.Helper()
	return started(t, "PostgreSQL", 2*time.Minute, func(ctx context.Context) (*Postgres, error) { return StartPostgres(ctx, cfg) }, (*Postgres).Close)
}

// SharedPostgres is a fresh migrated database on the test process's shared
// server (internal/pgtest; its TestMain calls stack.Main or pgtest.Main),
// dropped when the test ends. The server is shared: it is not to be
// stopped.
func SharedPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := &Postgres{DSN: pgtest.DSN(t)}
	var err error
	if p.pool, err = pgxpool.New(context.Background(), p.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pool.Close)
	return p
}

// createDatabase creates db on s unless it exists.
func createDatabase(ctx context.Context, s *pgserver.Server, db string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
	return err
}

// Pool is the harness's pool on the database: for a test's own reads and
// writes, outside any fault it makes.
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Store is control's store on the harness's pool.
func (p *Postgres) Store() *postgres.Store { return postgres.New(p.pool) }

// Stop shuts the server down (connections are terminated).
func (p *Postgres) Stop() error { return p.fault(p.Server.Stop) }

// Kill SIGKILLs the postmaster: a crash, recovered at the next start.
func (p *Postgres) Kill() error { return p.fault(p.Server.Kill) }

// Restart starts a stopped or killed server again on its port and data,
// polling through crash recovery.
func (p *Postgres) Restart(ctx context.Context) error {
	return p.fault(func() error { return p.Server.Restart(ctx) })
}

func (p *Postgres) fault(f func() error) error {
	err := f()
	// Drop every connection the fault cut, so the next use dials anew.
	p.pool.Reset()
	return err
}

// StartReplica starts an asynchronous streaming replica of p's server in
// cfg.Dir (a temporary folder when empty; cfg.Database and cfg.Settings are
// ignored) and returns once it replayed the primary's current WAL.
func (p *Postgres) StartReplica(ctx context.Context, cfg PostgresConfig) (_ *Postgres, err error) {
	r := &Postgres{}
	defer closeOnError(&err, r.Close)
	dir, err := folder(cfg.Dir, "replica", &r.temp)
	if err != nil {
		return nil, err
	}
	if r.Server, err = p.Server.StartReplica(ctx, pgserver.Config{Dir: dir, Fast: !cfg.Durable}); err != nil {
		return nil, fmt.Errorf("start replica: %w", err)
	}
	if err := r.Server.WaitReplayed(ctx, p.Server); err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig(p.DSN)
	if err != nil {
		return nil, err
	}
	r.DSN = r.Server.DSN(cc.Database)
	if r.pool, err = pgxpool.New(ctx, r.DSN); err != nil {
		return nil, err
	}
	return r, nil
}

// NewReplica is StartReplica for a test, stopped when the test ends.
func (p *Postgres) NewReplica(t testing.TB) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := p.StartReplica(ctx, PostgresConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, "replica", r.Close)
	return r
}

// Close closes the pool, stops the server and removes a temporary folder.
// Closing twice is harmless.
func (p *Postgres) Close() error {
	if p.pool != nil {
		p.pool.Close()
	}
	var err error
	if p.Server != nil {
		err = p.Server.Stop()
	}
	if p.temp != "" {
		err = errors.Join(err, os.RemoveAll(p.temp))
	}
	return err
}

// Tenant creates a tenant named name and returns its ID and an API key.
func (p *Postgres) Tenant(ctx context.Context, name string) (int64, string, error) {
	id, key, err := p.Store().CreateTenantWithKey(ctx, name)
	if err != nil {
		return 0, "", fmt.Errorf("tenant %s: %w", name, err)
	}
	return id, key, nil
}

// NewTenant is Tenant for a test.
func (p *Postgres) NewTenant(t testing.TB, name string) (int64, string) {
	t.Helper()
	id, key, err := p.Tenant(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id, key
}

// NewKey issues another API key of tenant.
func (p *Postgres) NewKey(t testing.TB, tenant int64) string {
	t.Helper()
	key, err := p.Store().CreateAPIKey(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Keys creates n tenants named prefix-0 … prefix-(n-1) and returns a key of
// each: the API's rate limit is per tenant, so each client gets its own.
func (p *Postgres) Keys(t testing.TB, prefix string, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		_, key := p.NewTenant(t, fmt.Sprintf("%s-%d", prefix, i))
		keys = append(keys, key)
	}
	return keys
}

// Promote turns a replica into a primary and resets the harness's pool on
// it, whose connections were opened read-only during recovery.
func (p *Postgres) Promote(ctx context.Context) error {
	return p.fault(func() error { return p.Server.Promote(ctx) })
}
