// Package visitorsalt keeps the daily visitor salts edges hash clicks with
// (shared/clicks SaltBucket): a random 256-bit salt for today and for
// tomorrow, written before they are needed, and each deleted once its day
// and a grace (clicks.SaltGrace) have passed, so that no visitor hash can be
// recomputed from an address afterwards.
//
// Every control instance runs a Keeper; they agree without a lock. A salt
// is only ever created where its key has never been written (the KV's
// revision check: expected revision 0), so the first writer's salt is the
// day's and no instance ever replaces it, nor recreates one deleted. A
// deletion overwrites the stored message (JetStream's secure delete) and
// then leaves a purge marker, which tells the edges watching the bucket to
// drop the day's salt at once.
package visitorsalt

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelink/edgelink/shared/clicks"
)

// JetStream is the part of JetStream the keeper uses.
type JetStream interface {
	CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
	KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error)
}

// Config tunes a Keeper. Zero values take the defaults noted.
type Config struct {
	// Now is control's clock (default time.Now): tests move it across
	// midnight.
	Now func() time.Time
	// Every is how often salts are checked (default 1 minute): a salt is
	// deleted at most this long after its grace ends.
	Every time.Duration
	// Replicas of the bucket's stream in a NATS cluster (default 1).
	Replicas int
	// Timeout bounds one round of NATS calls (default 10s).
	Timeout time.Duration
	Log     *slog.Logger
}

// Keeper writes and deletes the salts. Safe for concurrent use; one Run at
// a time per Keeper, any number of Keepers (control instances) at once.
type Keeper struct {
	js  JetStream
	cfg Config

	mu     sync.Mutex
	kv     jetstream.KeyValue // nil until opened, and after a failed round
	stream jetstream.Stream

	// Created counts salts this instance wrote; Existing, salts it found
	// another instance (or an earlier run) had written; Deleted, salts it
	// deleted; Failures, rounds that failed (NATS unreachable), retried
	// next round.
	Created, Existing, Deleted, Failures atomic.Uint64
}

// New returns a keeper of js's salt bucket.
func New(js JetStream, cfg Config) *Keeper {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{js: js, cfg: cfg}
}

// Run keeps the salts until ctx is done: a round at once, then every
// Every. A failed round is logged (once until a round succeeds again) and
// retried.
func (k *Keeper) Run(ctx context.Context) error {
	t := time.NewTicker(k.cfg.Every)
	defer t.Stop()
	failing := false
	for {
		rctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
		err := k.Round(rctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			k.Failures.Add(1)
			if !failing {
				k.cfg.Log.Warn("visitor salts: round failed; retrying", "err", err, "every", k.cfg.Every)
			}
			failing = true
		case err == nil && failing:
			k.cfg.Log.Info("visitor salts: rounds succeed again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round makes sure today's and tomorrow's salts exist and deletes those
// whose grace has passed, by the keeper's clock.
func (k *Keeper) Round(ctx context.Context) error {
	kv, stream, err := k.open(ctx)
	if err != nil {
		return err
	}
	now := k.cfg.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	var errs []error
	for _, day := range []time.Time{today, today.Add(24 * time.Hour)} {
		errs = append(errs, k.create(ctx, kv, day))
	}
	errs = append(errs, k.expire(ctx, kv, stream, now))
	if err := errors.Join(errs...); err != nil {
		k.mu.Lock()
		k.kv, k.stream = nil, nil // make sure of the stream again next round
		k.mu.Unlock()
		return err
	}
	return nil
}

// open makes sure of the bucket's stream (its configuration, replicas
// included: control's to set) and opens the bucket, once until a round
// fails.
func (k *Keeper) open(ctx context.Context) (jetstream.KeyValue, jetstream.Stream, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kv != nil {
		return k.kv, k.stream, nil
	}
	cfg := clicks.SaltStreamConfig()
	cfg.Replicas = k.cfg.Replicas
	stream, err := k.js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create or update stream %s: %w", cfg.Name, err)
	}
	kv, err := k.js.KeyValue(ctx, clicks.SaltBucket)
	if err != nil {
		return nil, nil, fmt.Errorf("open bucket %s: %w", clicks.SaltBucket, err)
	}
	k.kv, k.stream = kv, stream
	return kv, stream, nil
}

// create writes day's salt unless its key was ever written: expected
// revision 0 makes JetStream refuse the write otherwise, so the first
// instance's salt is the one every edge gets, and a salt once deleted
// stays deleted.
func (k *Keeper) create(ctx context.Context, kv jetstream.KeyValue, day time.Time) error {
	salt := make([]byte, clicks.SaltLen)
	_, _ = rand.Read(salt) // never fails (crypto/rand)
	_, err := kv.Update(ctx, clicks.SaltKey(day), salt, 0)
	clear(salt) // this instance keeps no copy
	switch {
	case err == nil:
		k.Created.Add(1)
		k.cfg.Log.Info("visitor salt created", "day", clicks.SaltKey(day))
		return nil
	case errors.Is(err, jetstream.ErrKeyExists):
		k.Existing.Add(1)
		return nil
	default:
		return fmt.Errorf("create the salt of %s: %w", clicks.SaltKey(day), err)
	}
}

// expire deletes every salt whose day ended more than clicks.SaltGrace
// before now. Keys that name no day are left alone (not the keeper's).
func (k *Keeper) expire(ctx context.Context, kv jetstream.KeyValue, stream jetstream.Stream, now time.Time) error {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("list salts: %w", err)
	}
	var due []string
	for key := range lister.Keys() {
		day, err := clicks.SaltDay(key)
		if err == nil && !clicks.SaltWanted(day, now) && day.Before(now) {
			due = append(due, key)
		}
	}
	// The channel closes once the listing is complete (the lister stops
	// its watch itself) or ctx is done.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list salts: %w", err) // the list may be cut short
	}
	var errs []error
	for _, key := range due {
		if err := k.delete(ctx, kv, stream, key); err != nil {
			errs = append(errs, fmt.Errorf("delete the salt of %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// delete erases key's salt: the stored message is overwritten (secure
// delete: a purge alone would leave its bytes in the store's files), then
// a purge marker tells watching edges to drop it.
func (k *Keeper) delete(ctx context.Context, kv jetstream.KeyValue, stream jetstream.Stream, key string) error {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil // another instance was first
	}
	if err != nil {
		return err
	}
	if err := stream.SecureDeleteMsg(ctx, e.Revision()); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	if err := kv.Purge(ctx, key); err != nil {
		return err
	}
	k.Deleted.Add(1)
	k.cfg.Log.Info("visitor salt deleted", "day", key)
	return nil
}

// Collectors are the keeper's metrics, for control's registry.
func (k *Keeper) Collectors() []prometheus.Collector {
	f := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		f("control_visitor_salts_created_total", "Daily visitor salts this instance wrote (another instance may have written a day's first: counted there).", &k.Created),
		f("control_visitor_salts_deleted_total", "Daily visitor salts this instance deleted after their day and grace.", &k.Deleted),
		f("control_visitor_salt_failures_total", "Rounds of salt keeping that failed (NATS unreachable): retried every minute; edges hash a day with no salt as unknown visitors.", &k.Failures),
	}
}
