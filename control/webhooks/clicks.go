package webhooks

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// ClickStore is what the ClickAggregator needs of the authority.
type ClickStore interface {
	// CloseClickWindow closes the click window that ends at end, if it is
	// not closed yet: in one transaction it takes every tenant's gathered
	// clicks (webhook_click_counts) and writes one clicks.aggregated event
	// per tenant that had any, its top links at most top. The window
	// starts where the last one closed. It returns the events written
	// (0 also when another instance closed the window first).
	CloseClickWindow(ctx context.Context, end time.Time, top int) (int, error)
}

// ClickAggregatorConfig tunes a ClickAggregator; zero values take the
// defaults.
type ClickAggregatorConfig struct {
	// Every is the window (default a minute); windows end on multiples of
	// it.
	Every time.Duration
	// Top bounds the links an event lists (default 100); the rest are
	// summed in its "other".
	Top int
	// Now is the clock (default time.Now); After waits (default
	// time.After): tests move time by hand.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	Log   *slog.Logger
}

// ClickAggregator closes a click window every minute. The clicks in a
// window are the ones the click roller applied in it (its transactions
// write webhook_click_counts), so every click applied is in exactly one
// event, however late it reached control. Every control instance may run
// one: the first to close a window closes it.
type ClickAggregator struct {
	store  ClickStore
	cfg    ClickAggregatorConfig
	events atomic.Uint64
}

// NewClickAggregator returns a ClickAggregator.
func NewClickAggregator(store ClickStore, cfg ClickAggregatorConfig) *ClickAggregator {
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Top <= 0 {
		cfg.Top = 100
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &ClickAggregator{store: store, cfg: cfg}
}

// Events counts the clicks.aggregated events this instance wrote.
func (a *ClickAggregator) Events() uint64 { return a.events.Load() }

// Run closes each window as it ends until ctx does. A window that fails to
// close (the database is down) is closed with the next: its clicks stay
// gathered meanwhile.
func (a *ClickAggregator) Run(ctx context.Context) {
	for {
		now := a.cfg.Now()
		next := now.Truncate(a.cfg.Every).Add(a.cfg.Every)
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.After(next.Sub(now)):
		}
		if _, err := a.Close(ctx, next); err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn("close webhook click window", "end", next, "err", err)
		}
	}
}

// Close closes the window that ends at end.
func (a *ClickAggregator) Close(ctx context.Context, end time.Time) (int, error) {
	n, err := a.store.CloseClickWindow(ctx, end, a.cfg.Top)
	a.events.Add(uint64(n))
	return n, err
}
