package idalloc

import (
	"context"
	"fmt"
)

// witnessFloor reads the namespace's high-water from the witness: the
// authority must be at or above it. Unreachable, it fails the lease unless
// the witness is best effort (then the floor is 0 and the lease proceeds
// unchecked, counted in Stats.WitnessSkipped).
func (n *nsAlloc) witnessFloor(ctx context.Context) (uint64, error) {
	w := n.a.cfg.Witness
	if w == nil {
		return 0, nil
	}
	// A third of the lease's time each: an unreachable witness must leave
	// a best-effort lease time to run.
	wctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout/3)
	defer cancel()
	hw, err := w.HighWater(wctx, n.ns.Name)
	if err == nil {
		return hw, nil
	}
	if n.a.cfg.WitnessBestEffort {
		n.witnessSkipped.Add(1)
		n.a.log.Warn("idalloc: allocation witness unreachable; leasing without the failover check (best effort)", "namespace", n.ns.Name, "err", err)
		return 0, nil
	}
	return 0, fmt.Errorf("%w: read allocation witness: %w", ErrStoreUnavailable, err)
}

// witnessAdvance records a confirmed segment's end in the witness before any
// of its IDs is handed out.
func (n *nsAlloc) witnessAdvance(ctx context.Context, end uint64) error {
	w := n.a.cfg.Witness
	if w == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout/3)
	defer cancel()
	err := w.Advance(wctx, n.ns.Name, end)
	if err == nil {
		return nil
	}
	if n.a.cfg.WitnessBestEffort {
		// A later successful advance covers this end too: the witness
		// keeps a high-water, not a list.
		n.witnessSkipped.Add(1)
		n.a.log.Warn("idalloc: allocation witness not advanced; segment used anyway (best effort)", "namespace", n.ns.Name, "end", end, "err", err)
		return nil
	}
	return fmt.Errorf("%w: advance allocation witness: %w", ErrStoreUnavailable, err)
}
