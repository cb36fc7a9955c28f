package lookup

import (
	"fmt"
	"slices"
	"time"

	"github.com/edgelink/edgelink/shared/authority"
)

// Promise is what one answer said of the allocation frontier. It is
// immutable.
type Promise struct {
	// Until is when the ceilings stop holding: the question's send time
	// plus the answer's promise.
	Until time.Time
	// Life is how long the promise was given for.
	Life time.Duration
	// Frontiers by Start.
	Frontiers []authority.Frontier
}

// Beyond reports whether a generated code with ID id is certainly unknown at
// time at: it lies in a namespace at or above the ceiling the authority
// promised, and the promise holds at at. An ID in no namespace the answer
// named is not beyond anything: links may hold such codes from before the
// namespace's range began (an import).
func (p *Promise) Beyond(id uint64, at time.Time) bool {
	if p == nil || !at.Before(p.Until) {
		return false
	}
	f, ok := namespace(p.Frontiers, id)
	return ok && id >= f.Ceiling
}

// Promise returns the newest promise if it holds now, else nil. Once a
// quarter of it has passed it asks for a new one in the background, so a
// steady stream of misses never finds it gone. It does not allocate.
func (c *Client) Promise() *Promise {
	p := c.promise.Load()
	now := c.cfg.Now()
	if p == nil || !now.Before(p.Until) {
		c.wantFrontier()
		return nil
	}
	if p.Until.Sub(now) < p.Life*3/4 {
		c.wantFrontier()
	}
	return p
}

// namespace returns the frontier of the namespace holding id.
func namespace(fs []authority.Frontier, id uint64) (authority.Frontier, bool) {
	i, _ := slices.BinarySearchFunc(fs, id, func(f authority.Frontier, id uint64) int {
		switch {
		case f.End <= id:
			return -1
		case f.Start > id:
			return 1
		}
		return 0
	})
	if i == len(fs) || fs[i].Start > id || id >= fs[i].End {
		return authority.Frontier{}, false
	}
	return fs[i], true
}

// Settle reports whether no generated code with ID id can have been created
// before the call, as far as the allocation frontier can tell: the promise
// in hand puts id at or above its namespace's ceiling (no waiting); or, when
// no promise holds or id lies between the counter and the ceiling, a
// frontier read after the call finds id at or above the counter. It reports
// false, so the code must be asked about itself, for an ID below the counter
// (leased: its segment may be open) or outside every namespace. Waiting is
// bounded as for Ask.
func (c *Client) Settle(id uint64) (bool, error) {
	if p := c.Promise(); p != nil {
		if p.Beyond(id, c.cfg.Now()) {
			return true, nil
		}
		if f, ok := namespace(p.Frontiers, id); !ok || id < f.Next {
			return false, nil
		}
	}
	fs, err := c.freshFrontier()
	if err != nil {
		return false, err
	}
	f, ok := namespace(fs, id)
	return ok && id >= f.Next, nil
}

type frontierWaiter struct {
	arrived uint64
	done    chan frontierResult // buffered: the sender never blocks on it
}

type frontierResult struct {
	fs  []authority.Frontier // by Start
	err error
}

// freshFrontier waits for the frontiers read by a question sent after the
// call: one such read settles every miss waiting for it.
func (c *Client) freshFrontier() ([]authority.Frontier, error) {
	if !c.nc.IsConnected() {
		c.Failed.Add(1)
		return nil, fmt.Errorf("%w: nats not connected", ErrUnavailable)
	}
	w := &frontierWaiter{done: make(chan frontierResult, 1)}
	c.mu.Lock()
	if len(c.fwait) >= c.cfg.MaxPending {
		c.mu.Unlock()
		c.Busy.Add(1)
		return nil, ErrBusy
	}
	c.clock++
	w.arrived = c.clock
	c.fwait = append(c.fwait, w)
	c.mu.Unlock()
	c.wantFrontier()
	c.poke()
	r, ok := await(c, w.done, func() bool { return c.withdrawFrontier(w) })
	if !ok {
		return nil, ErrBusy
	}
	return r.fs, r.err
}

// withdrawFrontier takes w back if no frontier question has been sent since
// it arrived.
func (c *Client) withdrawFrontier(w *frontierWaiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asking && c.frontierSent > w.arrived {
		return false // the question that answers it is on its way
	}
	n := len(c.fwait)
	c.fwait = slices.DeleteFunc(c.fwait, func(x *frontierWaiter) bool { return x == w })
	return len(c.fwait) < n
}

// Current is the newest promise, held or not, without asking for a new one
// (for metrics).
func (c *Client) Current() *Promise { return c.promise.Load() }

// settle hands the frontiers of the question sent at sent to every miss
// that arrived before it, and asks again for those that came later.
func (c *Client) settle(sent uint64, a *authority.Answer, err error) {
	r := frontierResult{err: err}
	if err == nil {
		r.fs = slices.Clone(a.Frontiers)
		slices.SortFunc(r.fs, func(a, b authority.Frontier) int { return compareUint(a.Start, b.Start) })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asking = false
	late := c.fwait[:0]
	for _, w := range c.fwait {
		if w.arrived < sent {
			w.done <- r
			continue
		}
		late = append(late, w)
	}
	clear(c.fwait[len(late):])
	c.fwait = late
	if len(late) > 0 {
		c.refresh.Store(true)
		c.poke()
	}
}

// keep makes a's frontiers the promise, measured from sentAt, unless the
// promise in hand lasts longer.
func (c *Client) keep(sentAt time.Time, a *authority.Answer) {
	life := min(time.Duration(a.PromiseMillis)*time.Millisecond, c.cfg.MaxPromise)
	if life <= 0 {
		return
	}
	p := &Promise{Until: sentAt.Add(life), Life: life, Frontiers: slices.Clone(a.Frontiers)}
	slices.SortFunc(p.Frontiers, func(a, b authority.Frontier) int { return compareUint(a.Start, b.Start) })
	for {
		old := c.promise.Load()
		if old != nil && !old.Until.Before(p.Until) {
			return
		}
		if c.promise.CompareAndSwap(old, p) {
			c.Refreshes.Add(1)
			return
		}
	}
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
