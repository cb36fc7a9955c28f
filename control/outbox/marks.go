package outbox

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/internal/retry"
)

// marks records the relay's published position in the outbox off the
// publish path: the stream is the record and marks are a hint (where a
// relay starts on a stream that holds no event), so publishing never waits
// for one. The newest position wins, one mark is in flight at a time, and a
// failed mark is tried again, with backoff, until it or a newer one lands.
// Safe for concurrent use.
type marks struct {
	mark func(ctx context.Context, next uint64) error // Store.MarkPublished
	log  *slog.Logger

	want   atomic.Uint64 // newest position asked for
	marked atomic.Uint64 // newest position recorded
	wake   chan struct{} // capacity 1: a pending wake-up
	mu     sync.Mutex    // one MarkPublished at a time
}

func newMarks(mark func(ctx context.Context, next uint64) error, log *slog.Logger) *marks {
	return &marks{mark: mark, log: log, wake: make(chan struct{}, 1)}
}

// set asks for next to be marked; it never blocks.
func (m *marks) set(next uint64) {
	for {
		cur := m.want.Load()
		if next <= cur {
			return
		}
		if m.want.CompareAndSwap(cur, next) {
			break
		}
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run marks what set asks for until ctx ends.
func (m *marks) run(ctx context.Context) {
	b := retry.NewBackoff(100*time.Millisecond, 5*time.Second)
	var again <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-again:
		}
		again = nil
		if err := m.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			d := b.Next()
			m.log.Warn("outbox mark failed", "err", err, "retry_in", d)
			again = time.After(d)
			continue
		}
		b = retry.NewBackoff(100*time.Millisecond, 5*time.Second)
	}
}

// flush records the newest position asked for, if it is not recorded yet.
func (m *marks) flush(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.want.Load()
	if next <= m.marked.Load() {
		return nil
	}
	if err := m.mark(ctx, next); err != nil {
		return err
	}
	m.marked.Store(next)
	return nil
}
