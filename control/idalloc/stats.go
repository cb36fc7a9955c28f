package idalloc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Stats is one namespace's allocator state, for metrics and probes.
type Stats struct {
	Namespace        string
	CurrentRemaining uint64
	StandbyRemaining uint64
	// Rate is the observed rate of this instance in IDs per second, and
	// SecondsLeft the current plus standby runway at that rate (+Inf when
	// idle).
	Rate        float64
	SecondsLeft float64
	Loads       uint64
	Failures    uint64
	// LastFailure is the class of the last failed load ("lock_timeout",
	// "unavailable", "commit_unknown", "rejected", "fenced", "exhausted",
	// "other"), empty after a success; LastError is its error.
	LastFailure string
	LastError   error
	RetryAt     time.Time
	Fenced      bool
	Exhausted   bool
	// Waits counts Next calls that had to wait for a load.
	Waits uint64
	// OpenSegments are leased and not yet sealed; Sealed counts seals.
	OpenSegments int
	Sealed       uint64
	// Discarded counts IDs of retired ranges that were never handed out.
	Discarded uint64
	StrayDone uint64
	// PendingRequest is a lease request whose outcome is still unknown.
	PendingRequest bool
	// FailuresByClass counts failed loads by class (every class of
	// Classes is present).
	FailuresByClass map[string]uint64
	// Uncommitted counts IDs handed out whose create did not commit
	// (rolled back or failed): waste of the create path.
	Uncommitted uint64
	// SweptSegments counts segments of silent instances this allocator's
	// sweeper sealed (allocator-wide, the same in every namespace).
	SweptSegments uint64
	// WitnessSkipped counts witness reads or advances that failed and
	// were skipped (Config.WitnessBestEffort).
	WitnessSkipped uint64
}

// Stats reports namespace's state.
func (a *Allocator) Stats(namespace string) (Stats, error) {
	n := a.namespaces().byName[namespace]
	if n == nil {
		return Stats{}, fmt.Errorf("%w: %q", ErrUnknownNamespace, namespace)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Stats{
		Namespace:      namespace,
		Rate:           n.rate,
		Loads:          n.loads.Load(),
		Failures:       n.failuresTotal.Load(),
		LastError:      n.lastErr,
		LastFailure:    classify(n.lastErr),
		RetryAt:        n.retryAt,
		Fenced:         errors.Is(n.fatal, ErrFenced),
		Exhausted:      errors.Is(n.fatal, ErrExhausted),
		Waits:          n.waits.Load(),
		OpenSegments:   len(*n.live.Load()),
		Sealed:         n.sealed.Load(),
		Discarded:      n.discarded.Load(),
		StrayDone:      n.strayDone.Load() + a.strayDone.Load(),
		PendingRequest: n.pendingReq.Load() != nil,
		Uncommitted:    n.uncommitted.Load(),
		SweptSegments:  a.swept.Load(),
		WitnessSkipped: n.witnessSkipped.Load(),
	}
	s.FailuresByClass = make(map[string]uint64, len(classes))
	for i, c := range classes {
		s.FailuresByClass[c] = n.failures[i].Load()
	}
	if cur := n.cur.Load(); cur != nil {
		s.CurrentRemaining = cur.remaining()
	}
	if n.standby != nil {
		s.StandbyRemaining = n.standby.remaining()
	}
	s.SecondsLeft = math.Inf(1)
	if s.Rate > 0 {
		s.SecondsLeft = float64(s.CurrentRemaining+s.StandbyRemaining) / s.Rate
	}
	return s, nil
}

// Progress is the oldest of the loaders' last turns round their loop: a
// loader turns at least every Tick, and at most LoadTimeout per lease or
// seal later while the authority is down, so an old Progress means a stuck
// process, not an outage. Loaders stop after Close: do not judge a
// closed allocator by it (see Closed).
func (a *Allocator) Progress() time.Time {
	var oldest int64
	for _, n := range a.namespaces().ordered {
		if p := n.progress.Load(); oldest == 0 || p < oldest {
			oldest = p
		}
	}
	return time.Unix(0, oldest)
}

// Capacity reports namespace's space accounting and its rate of committed
// creates as the authority sees them (the store must implement
// CapacityReader), with DaysLeft at that rate.
func (a *Allocator) Capacity(ctx context.Context, namespace string) (Capacity, error) {
	if a.namespaces().byName[namespace] == nil {
		return Capacity{}, fmt.Errorf("%w: %q", ErrUnknownNamespace, namespace)
	}
	cr, ok := a.store.(CapacityReader)
	if !ok {
		return Capacity{}, errors.New("idalloc: capacity: store does not report capacity")
	}
	c, err := cr.Capacity(ctx, namespace)
	if err != nil {
		return Capacity{}, fmt.Errorf("idalloc: capacity: %w", err)
	}
	c.DaysLeft = DaysLeft(c.Remaining, c.Rate)
	return c, nil
}

// DaysLeft is remaining IDs at rate IDs per second, in days (+Inf at rate 0).
func DaysLeft(remaining uint64, rate float64) float64 {
	if rate <= 0 {
		return math.Inf(1)
	}
	return float64(remaining) / rate / 86400
}
