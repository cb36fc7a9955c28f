package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// wakeSQL notifies the relay's LISTEN in a transaction of its own. It
// writes nothing durable, so it does not wait for the WAL to reach the
// disk: a wake lost in a crash costs only the relay's poll. One string
// without arguments goes by the simple protocol, one round trip.
const wakeSQL = `BEGIN; SET LOCAL synchronous_commit = off; SELECT pg_notify('outbox', ''); COMMIT`

// wakeTimeout bounds one wake; a database too slow for it is one the relay
// will poll anyway.
const wakeTimeout = 5 * time.Second

// waker wakes the relay after link changes have committed (schema 013:
// notifying inside the writing transaction serialized every commit). One
// wake is in flight at a time; every wake asked for while it runs is folded
// into one more after it, so a commit that ends while a wake is on its way
// (and may have been read before the commit) is always followed by a wake.
type waker struct {
	pool *pgxpool.Pool
	// state: 0 idle; 1 a wake in flight; 2 in flight and asked for again.
	state atomic.Int32
}

// wake asks for a wake after the caller's committed change; it never
// blocks.
func (w *waker) wake() {
	for {
		switch w.state.Load() {
		case 0:
			if w.state.CompareAndSwap(0, 1) {
				go w.run()
				return
			}
		case 1:
			if w.state.CompareAndSwap(1, 2) {
				return
			}
		default:
			return
		}
	}
}

func (w *waker) run() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
		// An error (the pool closed, the database down) loses a wake,
		// which the relay's poll covers.
		_, _ = w.pool.Exec(ctx, wakeSQL)
		cancel()
		if w.state.CompareAndSwap(1, 0) {
			return
		}
		w.state.Store(1) // asked again while notifying: once more
	}
}
