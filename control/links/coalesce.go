package links

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// flushTimeout bounds one shared create transaction. It is detached from
// the callers' contexts: one creator hanging up must not roll back the
// others' links.
const flushTimeout = 10 * time.Second

// coalescer is group commit for creates. A create joins a queue; whoever
// holds one of the writer slots takes everything queued (up to max) into one
// transaction, so under load one commit carries many creates and at rest a
// create is written alone at once, with no timer. Each create still gets its
// own answer: its own code or error, its own idempotency key. The writers are
// the callers' own goroutines; there is nothing to start or stop.
type coalescer struct {
	s     *Service
	slots chan struct{}
	max   int

	mu      sync.Mutex
	pending []*item

	txs, items atomic.Uint64
}

func newCoalescer(s *Service, writers, max int) *coalescer {
	return &coalescer{s: s, slots: make(chan struct{}, writers), max: max}
}

type keyID struct {
	tenant int64
	key    string
}

// do queues it and returns its answer once a shared transaction holding it
// has ended. If ctx ends while it is still queued, it is withdrawn and
// nothing is written; once taken into a transaction it may still commit.
func (c *coalescer) do(ctx context.Context, it *item) (Created, error) {
	it.done = make(chan struct{})
	c.mu.Lock()
	c.pending = append(c.pending, it)
	c.mu.Unlock()
	for {
		if c.isTaken(it) {
			// Another caller's transaction carries it now.
			select {
			case <-it.done:
				return it.res, it.err
			case <-ctx.Done():
				return Created{}, ctx.Err()
			}
		}
		select {
		case <-it.done:
			return it.res, it.err
		case <-ctx.Done():
			if c.withdraw(it) {
				return Created{}, ctx.Err()
			}
		case c.slots <- struct{}{}:
			if batch := c.take(it); len(batch) > 0 {
				c.flush(ctx, batch)
			}
			<-c.slots
		}
	}
}

func (c *coalescer) isTaken(it *item) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return it.taken
}

func (c *coalescer) withdraw(it *item) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it.taken {
		return false
	}
	for i, p := range c.pending {
		if p == it {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			break
		}
	}
	it.taken = true
	return true
}

// take removes up to max items from the queue, own first, and returns them.
// Items that cannot share the transaction stay queued for the next one: a
// custom code already in it (the unique index would decide between the two
// anyway, but InsertLinks wants distinct codes) and an idempotency key
// already in it with another request. The same key with the same request
// rides along as a follower: it gets its leader's answer as a replay.
func (c *coalescer) take(own *item) []*item {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	batch := make([]*item, 0, min(len(c.pending), c.max))
	leaders := make(map[keyID]*item)
	codes := make(map[string]bool)
	add := func(it *item) bool {
		if it.key != "" {
			k := keyID{it.link.TenantID, it.key}
			if l := leaders[k]; l != nil {
				if string(l.hash) != string(it.hash) {
					return false
				}
				it.leader = l
			} else {
				leaders[k] = it
			}
		}
		if it.custom && it.leader == nil {
			if codes[it.link.Code] {
				delete(leaders, keyID{it.link.TenantID, it.key})
				return false
			}
			codes[it.link.Code] = true
		}
		it.taken = true
		batch = append(batch, it)
		return true
	}
	if !own.taken {
		add(own)
	}
	rest := c.pending[:0]
	for _, it := range c.pending {
		if it.taken || (len(batch) < c.max && add(it)) {
			continue
		}
		rest = append(rest, it)
	}
	clear(c.pending[len(rest):])
	c.pending = rest
	return batch
}

// flush writes batch in one transaction and answers every item in it. If
// that transaction fails as a whole (a deadlock with another instance, a
// lost connection), each create is retried in a transaction of its own, so
// one create's trouble cannot fail the others.
func (c *coalescer) flush(ctx context.Context, batch []*item) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	leaders := make([]*item, 0, len(batch))
	for _, it := range batch {
		if it.leader == nil {
			leaders = append(leaders, it)
		}
	}
	c.txs.Add(1)
	c.items.Add(uint64(len(batch)))
	err := c.s.write(ctx, leaders)
	if err != nil && len(leaders) > 1 {
		c.s.cfg.Log.Warn("shared create transaction failed; retrying its creates one by one", "creates", len(leaders), "err", err)
		for _, it := range leaders {
			one := []*item{it} // write gives it a new ID
			if err := c.s.write(ctx, one); err != nil {
				it.res, it.err = Created{}, err
			}
		}
	} else if err != nil {
		leaders[0].res, leaders[0].err = Created{}, err
	}
	for _, it := range batch {
		if l := it.leader; l != nil {
			it.res, it.err = l.res, l.err
			it.res.Replayed = l.err == nil
		}
	}
	// Every write of this flush has ended: its IDs can be released before
	// anyone is answered.
	c.s.releaseIDs(leaders)
	for _, it := range batch {
		close(it.done)
	}
}
