// Package postgres holds control's SQL, the ID allocator's aside (that is
// control/allocstore). It implements the store interfaces its consumers
// declare (links, outbox, clickroll, snapshots, the API's authentication and
// statistics) with their own value types, and it is, with allocstore, the
// only place in control that sees pgx errors: it translates them into the
// domain errors of shared/link and those of its consumers.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/schema"
	"github.com/edgelink/edgelink/shared/link"
)

// Open connects a pool to the database at url, a pgx connection string.
// maxConns, when positive, bounds the pool unless url sets pool_max_conns
// itself; zero keeps pgx's default (the larger of 4 and the CPU count).
// The pool connects lazily: a database that is down fails the first query,
// not Open.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if maxConns > 0 && !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// The consumers' interfaces a Store implements; snapshots.Authority and
// the API's are checked where control wires them.
var (
	_ links.Store     = (*Store)(nil)
	_ outbox.Store    = (*Store)(nil)
	_ clickroll.Store = (*Store)(nil)
)

// Store runs control's queries on a pool. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	keyTTL time.Duration
	waker  *waker // wakes the relay after link changes commit
}

// Option configures a Store.
type Option func(*Store)

// WithIdempotencyTTL sets how long an idempotency key answers retries
// (default links.DefaultKeyTTL); check it with links.CheckKeyTTL first.
func WithIdempotencyTTL(ttl time.Duration) Option {
	return func(s *Store) { s.keyTTL = ttl }
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, keyTTL: links.DefaultKeyTTL, waker: &waker{pool: pool}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Pool is the underlying pool, for components that need their own
// connections (the relay's LISTEN).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Migrate applies the schema on one connection of the pool.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	return schema.Migrate(ctx, conn.Conn())
}

// Ping checks that the authority answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return translate(err)
	}
	return nil
}

// lockSession is a dedicated connection holding a session advisory lock:
// the relay's or the click roller's, one active instance at a time.
type lockSession struct {
	conn *pgxpool.Conn
}

// lock takes a dedicated connection holding the session advisory lock key,
// or answers busy while another session holds it.
func (s *Store) lock(ctx context.Context, key int64, busy error) (lockSession, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return lockSession{}, translate(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		conn.Release()
		return lockSession{}, translate(err)
	}
	if !ok {
		conn.Release()
		return lockSession{}, busy
	}
	return lockSession{conn: conn}, nil
}

// Close releases the lock by closing the connection: a connection that
// held a session lock (or LISTENed) must not go back to the pool.
func (l lockSession) Close() { closeConn(l.conn) }

// closeConn closes a dedicated connection instead of giving it back: one
// that held a session lock or LISTENed must not go back to the pool.
func closeConn(conn *pgxpool.Conn) {
	c := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// translate maps driver errors to domain errors; anything unexpected keeps
// its cause for the log.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return link.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505" && strings.Contains(pgErr.ConstraintName, "code"):
			return link.ErrCodeTaken
		case strings.HasPrefix(pgErr.Code, "08"), pgErr.Code == "57P01", pgErr.Code == "57P03", pgErr.Code == "53300":
			return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
		}
		return err
	}
	if pgconn.Timeout(err) || isConnError(err) {
		return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
	}
	return err
}

func isConnError(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}
