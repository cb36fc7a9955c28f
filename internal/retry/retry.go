// Package retry runs a component's long-lived session again each time it
// returns, until the component's context ends, with a pause between
// sessions that the component chooses (Backoff doubles it after each
// failure). It is the loop of the outbox relay, the click roller and the
// edge's change feed: they stand by, reconnect and reposition through it.
package retry

import (
	"context"
	"time"
)

// Run calls session until ctx ends. Each time session returns while ctx is
// still live, Run asks pause for the wait (0 or less: none) and waits that
// long or until ctx ends. pause runs on Run's goroutine.
func Run(ctx context.Context, session func(context.Context) error, pause func(err error) time.Duration) {
	for ctx.Err() == nil {
		err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		d := pause(err)
		if d <= 0 {
			continue
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Backoff is a pause that doubles each time it is taken, within [lo, hi].
// It is not safe for concurrent use; a Run loop owns one.
type Backoff struct {
	lo, hi, next time.Duration
}

// NewBackoff returns a backoff whose first pause is lo and that never
// grows past hi.
func NewBackoff(lo, hi time.Duration) *Backoff {
	return &Backoff{lo: lo, hi: hi, next: lo}
}

// Next returns the pause to take now and doubles the following one, within
// [lo, hi].
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(max(2*d, b.lo), b.hi)
	return d
}

// Set makes d the pause Next returns next (0: none), whatever came
// before; doubling goes on from there.
func (b *Backoff) Set(d time.Duration) { b.next = d }
