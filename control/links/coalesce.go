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
	// write writes the leaders of a batch, answers each and releases
	// their IDs.
	write func(ctx context.Context, leaders []*item)
	slots chan struct{}
	max   int

	mu      sync.Mutex
	pending []*item

	txs, items atomic.Uint64
}

// newCoalescer returns a coalescer that runs up to writers shared writes at
// once, each of up to max creates, through write.
func newCoalescer(write func(ctx context.Context, leaders []*item), writers, max int) *coalescer {
	return &coalescer{write: write, slots: make(chan struct{}, writers), max: max}
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

// flush writes batch in one shared write and answers every item in it:
// followers get their leader's answer as a replay.
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
	// Every write of this flush ends, and its IDs are released, before
	// anyone is answered.
	c.write(ctx, leaders)
	for _, it := range batch {
		if l := it.leader; l != nil {
			it.res, it.err = l.res, l.err
			it.res.Replayed = l.err == nil
		}
	}
	for _, it := range batch {
		close(it.done)
	}
}
