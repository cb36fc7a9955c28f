package idalloc

import (
	"context"
	"errors"
	"time"
)

func (n *nsAlloc) done(id uint64, committed bool) {
	for _, r := range *n.live.Load() {
		if r.contains(id) {
			if committed {
				r.committed.Add(1)
			} else {
				n.uncommitted.Add(1)
			}
			d := r.done.Add(1)
			if d == r.size || (r.retired.Load() && d >= r.handed.Load()) {
				n.wake()
			}
			return
		}
	}
	n.strayDone.Add(1)
}

// retireLocked stops r handing out IDs and counts its unused IDs as
// discarded. n.mu is held.
func (n *nsAlloc) retireLocked(r *idRange) {
	if r.retired.Load() {
		return
	}
	r.retire()
	n.discarded.Add(r.size - r.handed.Load())
}

// sealFinished seals every range that can no longer be used by a create.
func (n *nsAlloc) sealFinished(ctx context.Context) {
	for _, r := range *n.live.Load() {
		if !r.finished() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout)
		err := n.a.store.Seal(sctx, SealRequest{RequestID: r.seg.RequestID, Instance: n.a.cfg.Instance, Used: r.committed.Load()})
		cancel()
		switch {
		case errors.Is(err, ErrUnknownSegment):
			// The authority lost the segment (a failover to a replica that
			// never had it): sealing can never succeed, and its range is
			// audited as waste by the recovery, not by this instance.
			n.a.log.Error("idalloc: segment unknown to the authority, dropped unsealed", "namespace", n.ns.Name,
				"start", r.start, "end", r.start+r.size, "err", err)
		case err != nil:
			// Retried on the next tick; sealing is idempotent.
			n.a.log.Warn("idalloc: seal segment failed", "namespace", n.ns.Name, "start", r.start, "end", r.start+r.size, "err", err)
			continue
		default:
			n.sealed.Add(1)
		}
		r.sealed.Store(true)
		n.mu.Lock()
		old := *n.live.Load()
		live := make([]*idRange, 0, len(old))
		for _, x := range old {
			if x != r {
				live = append(live, x)
			}
		}
		n.live.Store(&live)
		n.sealedIssued += r.taken()
		n.mu.Unlock()
	}
}

func (a *Allocator) runJanitor(ctx context.Context) {
	defer a.janitor.Done()
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		hctx, cancel := context.WithTimeout(ctx, a.cfg.LoadTimeout)
		swept, err := a.store.Heartbeat(hctx, a.cfg.Instance, a.cfg.AbandonAfter)
		cancel()
		now := a.cfg.Now()
		if err == nil {
			a.lastHeartbeat.Store(now.UnixNano())
			if swept > 0 {
				a.swept.Add(uint64(swept))
				a.log.Info("idalloc: sealed segments of silent instances", "segments", swept)
			}
		} else if ctx.Err() == nil {
			a.log.Warn("idalloc: heartbeat failed", "err", err)
		}
		if a.cfg.AbandonAfter > 0 && now.Sub(time.Unix(0, a.lastHeartbeat.Load())) > a.cfg.AbandonAfter/2 {
			a.selfFence()
		}
		select {
		case <-ctx.Done():
			return
		case <-a.closing:
			return
		case <-t.C:
		}
	}
}

// selfFence retires every range: another instance may soon consider this one
// dead and seal its segments.
func (a *Allocator) selfFence() {
	for _, n := range a.namespaces().ordered {
		n.mu.Lock()
		retired := false
		if cur := n.cur.Load(); cur != nil && !cur.retired.Load() && cur.remaining() > 0 {
			n.retireLocked(cur)
			retired = true
		}
		if n.standby != nil {
			n.retireLocked(n.standby)
			n.standby = nil
			retired = true
		}
		n.mu.Unlock()
		if retired {
			a.log.Warn("idalloc: no heartbeat for half the abandon period: ranges retired", "namespace", n.ns.Name)
			n.wake()
		}
	}
}
