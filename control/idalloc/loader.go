package idalloc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// nsAlloc is one namespace's double buffer and loader.
type nsAlloc struct {
	a  *Allocator
	ns Namespace

	// cur is the range Next takes from without a lock.
	cur atomic.Pointer[idRange]
	// live holds every leased range not yet sealed (copy-on-write under
	// mu), so Done finds an ID's range without a lock.
	live atomic.Pointer[[]*idRange]
	// kick wakes the loader; a full channel means a wake-up is pending.
	kick chan struct{}

	mu      sync.Mutex
	standby *idRange
	ready   chan struct{} // closed and replaced whenever waiters should look again
	fatal   error         // ErrExhausted or ErrFenced (wrapped)
	lastErr error
	retryAt time.Time
	fails   int     // consecutive failures, for backoff
	rate    float64 // IDs per second, EWMA

	// Owned by the loader goroutine.
	pendingReq   atomic.Pointer[string] // lease request id to retry (outcome unknown or failed)
	highWater    uint64                 // end of the highest segment this process got
	maxEpoch     int64
	sealedIssued uint64
	lastIssued   uint64
	lastSample   time.Time
	instRate     float64

	loads, failuresTotal, waits, sealed, discarded, strayDone atomic.Uint64
	// uncommitted counts Done(id, false): IDs whose create did not commit.
	uncommitted atomic.Uint64
	failures    [len(classes)]atomic.Uint64 // by classes index
	// progress is when the loader last went round its loop (Unix
	// nanoseconds): the liveness probe's evidence of progress.
	progress atomic.Int64

	// witnessSkipped counts best-effort witness failures.
	witnessSkipped atomic.Uint64
}

func (n *nsAlloc) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *nsAlloc) run(ctx context.Context) {
	defer n.a.loaders.Done()
	t := time.NewTicker(n.a.cfg.Tick)
	defer t.Stop()
	for {
		n.progress.Store(n.a.cfg.Now().UnixNano())
		n.sealFinished(ctx)
		if n.a.closed.Load() {
			if len(*n.live.Load()) == 0 {
				return
			}
		} else {
			n.sampleRate()
			n.maybeLoad(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-t.C:
		}
	}
}

// trigger is how many remaining IDs make the loader fetch the standby.
func (n *nsAlloc) trigger(size uint64, rate float64) uint64 {
	t := size / 2
	if need := rate * n.a.cfg.PrefetchAhead.Seconds(); need > float64(t) {
		if need >= float64(size) {
			return size
		}
		t = uint64(need)
	}
	return t
}

func (n *nsAlloc) sampleRate() {
	now := n.a.cfg.Now()
	issued := n.sealedIssued
	for _, r := range *n.live.Load() {
		issued += r.taken()
	}
	if n.lastSample.IsZero() {
		n.lastSample, n.lastIssued = now, issued
		return
	}
	dt := now.Sub(n.lastSample).Seconds()
	if dt < 0.05 {
		return
	}
	inst := float64(issued-n.lastIssued) / dt
	alpha := 1 - math.Exp(-dt/5)
	n.mu.Lock()
	n.rate += alpha * (inst - n.rate)
	n.mu.Unlock()
	n.instRate = inst
	n.lastSample, n.lastIssued = now, issued
}

func (n *nsAlloc) maybeLoad(ctx context.Context) {
	now := n.a.cfg.Now()
	n.mu.Lock()
	rate := max(n.rate, n.instRate)
	cur := n.cur.Load()
	need := n.standby == nil && !errors.Is(n.fatal, ErrExhausted) && !now.Before(n.retryAt) &&
		(cur == nil || cur.remaining() <= n.trigger(cur.size, rate))
	n.mu.Unlock()
	if !need {
		return
	}
	select {
	case n.a.loadSlots <- struct{}{}:
	default:
		n.fail(ErrRejected)
		return
	}
	started := n.a.cfg.Now()
	seg, err := n.lease(ctx)
	<-n.a.loadSlots
	if f := n.a.cfg.OnLoad; f != nil {
		f(n.ns.Name, n.a.cfg.Now().Sub(started), classify(err))
	}
	if err != nil {
		n.fail(err)
		return
	}
	n.publish(seg, rate)
}

func (n *nsAlloc) lease(ctx context.Context) (Segment, error) {
	req := n.pendingReq.Load()
	retried := req != nil
	if req == nil {
		id := newRequestID()
		req = &id
		// Kept until a lease succeeds: a retry after any failure, above
		// all an unknown commit outcome, reuses the id and so gets the
		// committed interval back instead of a second one.
		n.pendingReq.Store(req)
	}
	n.loads.Add(1)
	started := n.a.cfg.Now()
	lctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout)
	defer cancel()
	floor, err := n.witnessFloor(lctx)
	if err != nil {
		return Segment{}, fmt.Errorf("lease segment: %w", err)
	}
	n.mu.Lock()
	ahead := uint64(max(n.rate, n.instRate) * ceilingHorizon.Seconds())
	n.mu.Unlock()
	seg, err := n.a.store.Lease(lctx, LeaseRequest{RequestID: *req, Namespace: n.ns.Name, Instance: n.a.cfg.Instance,
		Floor: floor, Ahead: ahead})
	if err != nil {
		return Segment{}, fmt.Errorf("lease segment: %w", err)
	}
	n.pendingReq.Store(nil)
	n.a.lastHeartbeat.Store(started.UnixNano()) // a lease is a heartbeat too
	switch {
	case seg.Namespace != n.ns.Name || seg.Start < n.ns.Start || seg.End > n.ns.End || seg.Start >= seg.End:
		return Segment{}, fmt.Errorf("%w: lease returned [%d, %d) in %q, outside namespace %s [%d, %d)",
			ErrFenced, seg.Start, seg.End, seg.Namespace, n.ns.Name, n.ns.Start, n.ns.End)
	case seg.Start < n.highWater || seg.Epoch < n.maxEpoch:
		// The authority went back behind what this process already
		// holds (a promoted lagging replica): never hand these out.
		return Segment{}, fmt.Errorf("%w: lease returned [%d, %d) epoch %d below this instance's high-water %d epoch %d",
			ErrFenced, seg.Start, seg.End, seg.Epoch, n.highWater, n.maxEpoch)
	case seg.Start < floor && !retried:
		// The store should have refused; a retry may legitimately get
		// its own earlier interval back, nothing else may start below.
		return Segment{}, fmt.Errorf("%w: lease returned [%d, %d) below the allocation witness %d",
			ErrFenced, seg.Start, seg.End, floor)
	}
	if err := n.witnessAdvance(lctx, seg.End); err != nil {
		// Retry under the same request id: it gets this very interval
		// back from the authority and records it again before using it.
		n.pendingReq.Store(req)
		return Segment{}, fmt.Errorf("lease segment: [%d, %d) confirmed but not witnessed: %w", seg.Start, seg.End, err)
	}
	n.highWater, n.maxEpoch = seg.End, seg.Epoch
	if f := n.a.cfg.OnSegment; f != nil {
		f(seg)
	}
	return seg, nil
}

func (n *nsAlloc) publish(seg Segment, rate float64) {
	size := seg.End - seg.Start
	r := newRange(seg, size-n.trigger(size, rate), n.a.cfg.Now())
	n.mu.Lock()
	live := append(append(make([]*idRange, 0, len(*n.live.Load())+1), *n.live.Load()...), r)
	n.live.Store(&live) // before any Next can see r, so Done finds it
	switch cur := n.cur.Load(); {
	case n.a.closed.Load():
		n.retireLocked(r)
	case cur == nil || cur.remaining() == 0:
		n.cur.Store(r)
	default:
		n.standby = r
	}
	n.lastErr, n.fails, n.retryAt = nil, 0, time.Time{}
	if errors.Is(n.fatal, ErrFenced) {
		n.fatal = nil
	}
	close(n.ready)
	n.ready = make(chan struct{})
	n.mu.Unlock()
	n.wake()
}

// ceilingHorizon is how far ahead, at the observed rate, the loader asks
// the store to keep the frontier's ceiling: well past the ceiling's delay
// (allocstore.CeilingDelay), so a burst of creates never waits for it.
const ceilingHorizon = 20 * time.Second

func (n *nsAlloc) fail(err error) {
	var wait *CeilingWaitError
	if errors.As(err, &wait) {
		// Not a failure: the ceiling was raised and takes effect soon.
		n.mu.Lock()
		n.lastErr = err
		n.retryAt = n.a.cfg.Now().Add(wait.Wait)
		close(n.ready)
		n.ready = make(chan struct{})
		n.mu.Unlock()
		n.failures[classIndex(classify(err))].Add(1)
		n.a.log.Info("idalloc: waiting for the frontier's ceiling", "namespace", n.ns.Name, "wait", wait.Wait)
		return
	}
	n.failuresTotal.Add(1)
	class := classify(err)
	n.failures[classIndex(class)].Add(1)
	n.mu.Lock()
	n.fails++
	n.lastErr = err
	backoff := n.a.cfg.BackoffMax
	if shift := n.fails - 1; shift < 20 {
		backoff = min(n.a.cfg.BackoffMax, n.a.cfg.BackoffMin<<shift)
	}
	switch class {
	case "exhausted", "fenced":
		n.fatal = err
		backoff = n.a.cfg.BackoffMax
	}
	// ±20% jitter so instances do not retry in step.
	backoff = time.Duration(float64(backoff) * (0.8 + 0.4*mathrand.Float64()))
	n.retryAt = n.a.cfg.Now().Add(backoff)
	close(n.ready)
	n.ready = make(chan struct{})
	n.mu.Unlock()
	n.a.log.Warn("idalloc: segment load failed", "namespace", n.ns.Name, "class", class, "backoff", backoff, "err", err)
}

// newRequestID returns a random UUID (version 4) string.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
