package outbox

import (
	"context"
	"time"
)

// purgeBatch bounds one purge statement: a few tens of milliseconds of
// work, done only while the relay is idle, so a large backlog of old rows
// never holds up a publish.
const purgeBatch = 10_000

// purger deletes outbox rows the stream has published and no longer
// holds. A row below the published position that is older than the
// stream's retention serves nobody: the stream has dropped its event too,
// so an edge that still needs it is behind the stream's first message and
// re-syncs from a snapshot, which is built from the links, not the outbox.
// Without this the outbox grows by a row for every change ever made.
type purger struct {
	every time.Duration // between rounds; a round ends with a short batch
	after time.Duration // rows older than this go
	now   func() time.Time

	next time.Time // when the next round may start
	busy bool      // a round is under way: its last batch was full
}

// idle runs one purge batch if a round is due or under way. Errors end the
// round; the next one comes after every.
func (p *purger) idle(ctx context.Context, r *Relay) {
	if p.every <= 0 {
		return
	}
	now := p.now()
	if !p.busy && now.Before(p.next) {
		return
	}
	n, err := r.store.PurgePublished(ctx, now.Add(-p.after), purgeBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Log.Warn("outbox purge failed", "err", err)
		}
		p.busy, p.next = false, now.Add(p.every)
		return
	}
	r.purged.Add(uint64(n))
	p.busy = n == purgeBatch
	if !p.busy {
		p.next = now.Add(p.every)
	}
}
