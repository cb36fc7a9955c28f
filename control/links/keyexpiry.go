package links

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// An idempotency key answers retries for its time to live, counted from
// the request that claimed it. After that it is expired: the store reads
// it as absent (whether or not it was purged yet), so a retry with it is a
// new create and gets a new link and code, and a KeyPurge deletes it.
const (
	DefaultKeyTTL = 24 * time.Hour
	// MaxKeyTTL bounds the time to live: keys are kept to absorb retries,
	// not as a record, and every one kept is a row of the table.
	MaxKeyTTL = 30 * 24 * time.Hour
)

// CheckKeyTTL refuses a key time to live that is not positive or is above
// MaxKeyTTL.
func CheckKeyTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxKeyTTL {
		return fmt.Errorf("idempotency key time to live %v: want more than 0 and at most %v (30 days)", ttl, MaxKeyTTL)
	}
	return nil
}

// KeyPurger deletes expired idempotency keys.
type KeyPurger interface {
	// PurgeExpiredKeys deletes up to limit expired keys, oldest first, in
	// one short statement, and returns how many it deleted. Keys another
	// transaction holds locked (a purger running beside it, a retry taking
	// an expired key over) are skipped, never waited for, so purgers may
	// run at once and never delay a create.
	PurgeExpiredKeys(ctx context.Context, limit int) (int, error)
}

// KeyPurgeConfig tunes a KeyPurge; zero values take the defaults.
type KeyPurgeConfig struct {
	// Batch is the most keys one statement deletes (default 1,000): each
	// statement locks only its own rows, for milliseconds.
	Batch int
	// Pause is the wait between two statements of one round (default
	// 100 ms), so a large backlog is worked off without hogging the
	// database.
	Pause time.Duration
	// Every is the wait between rounds (default 1 minute); a round ends
	// with a statement that deleted less than Batch.
	Every time.Duration
	Log   *slog.Logger
}

// KeyPurge deletes expired idempotency keys in small batches, round after
// round, until its context ends. Every control instance runs one; they
// share the work. Purging only frees space: expiry itself is decided when
// a key is read. It is safe for concurrent use.
type KeyPurge struct {
	p      KeyPurger
	cfg    KeyPurgeConfig
	purged atomic.Uint64
}

// NewKeyPurge returns a purge of p's expired keys; Run starts it.
func NewKeyPurge(p KeyPurger, cfg KeyPurgeConfig) *KeyPurge {
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 100 * time.Millisecond
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &KeyPurge{p: p, cfg: cfg}
}

// Purged is how many keys this purge deleted so far.
func (k *KeyPurge) Purged() uint64 { return k.purged.Load() }

// Run purges until ctx ends. A failed statement ends its round (logged
// once until a round succeeds again); the next round retries.
func (k *KeyPurge) Run(ctx context.Context) {
	failing := false
	for {
		err := k.round(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			k.cfg.Log.Warn("idempotency key purge failed; retrying next round", "every", k.cfg.Every, "err", err)
		case err == nil && failing:
			k.cfg.Log.Info("idempotency key purge works again")
		}
		failing = err != nil
		if !wait(ctx, k.cfg.Every) {
			return
		}
	}
}

// round deletes batches until one comes back short.
func (k *KeyPurge) round(ctx context.Context) error {
	for {
		n, err := k.p.PurgeExpiredKeys(ctx, k.cfg.Batch)
		if err != nil {
			return fmt.Errorf("purge expired idempotency keys: %w", err)
		}
		k.purged.Add(uint64(n))
		if n < k.cfg.Batch || !wait(ctx, k.cfg.Pause) {
			return nil
		}
	}
}

// wait waits d, or less when ctx ends first; it reports whether ctx is
// still live.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
