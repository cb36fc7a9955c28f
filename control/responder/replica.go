package responder

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// ReplicaFirst answers edges' lookups from a read replica to offload the
// primary, without breaking the visibility contract (every 201 is
// immediately jumpable): a replica lags, so its "no such link" may be a link
// created after its replay position. Whenever the replica has no link for
// the code, fails, or does not answer within ReplicaTimeout, the primary is
// asked, within what is left of the caller's deadline. So every NotFound it
// returns comes from the primary, and those are the only negatives an edge
// may cache.
//
// A Found from the replica may be as old as the replica's lag (a link
// disabled on the primary a moment ago can still be Found there); the edge
// applies the newer change from the stream over it by version, as it does
// for any authority answer.
//
// Its counters are safe to read concurrently. The zero value is not usable:
// set Replica and Primary.
type ReplicaFirst struct {
	Replica, Primary Lookup
	// ReplicaTimeout bounds the replica's answer (default 200ms) so a slow
	// replica leaves time for the primary.
	ReplicaTimeout time.Duration

	// FromReplica counts Found answers served by the replica; FromPrimary
	// every answer the primary gave after a replica miss (Fallbacks of
	// them for a code the replica did not have but the primary did: the
	// replica's lag, made visible), ReplicaFailed replica errors and
	// timeouts.
	FromReplica, FromPrimary, Fallbacks, ReplicaFailed atomic.Uint64
}

// LookupForEdge implements Lookup.
func (f *ReplicaFirst) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	timeout := f.ReplicaTimeout
	if timeout <= 0 {
		timeout = 200 * time.Millisecond
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	rep, err := f.Replica.LookupForEdge(rctx, code)
	cancel()
	switch {
	case err == nil && rep.Kind == authority.Found:
		f.FromReplica.Add(1)
		return rep, nil
	case err != nil:
		f.ReplicaFailed.Add(1)
	}
	rep, perr := f.Primary.LookupForEdge(ctx, code)
	if perr != nil {
		if err != nil {
			return authority.Reply{}, fmt.Errorf("replica: %w; primary: %w", err, perr)
		}
		return authority.Reply{}, fmt.Errorf("primary after a replica miss: %w", perr)
	}
	f.FromPrimary.Add(1)
	if err == nil && rep.Kind == authority.Found {
		f.Fallbacks.Add(1)
	}
	return rep, nil
}

// LookupCodes implements Lookup: every code the replica has is answered from
// it; the rest (and all of them when the replica fails or is slow) are
// asked of the primary, whose version then stands for the NotFounds.
func (f *ReplicaFirst) LookupCodes(ctx context.Context, domains []link.DomainID, codes []string) ([]authority.Reply, uint64, error) {
	timeout := f.ReplicaTimeout
	if timeout <= 0 {
		timeout = 200 * time.Millisecond
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	reps, version, err := f.Replica.LookupCodes(rctx, domains, codes)
	cancel()
	var missing []int
	if err != nil {
		f.ReplicaFailed.Add(1)
		reps = make([]authority.Reply, len(codes))
		for i := range codes {
			missing = append(missing, i)
		}
	} else {
		for i, r := range reps {
			if r.Kind == authority.Found {
				f.FromReplica.Add(1)
			} else {
				missing = append(missing, i)
			}
		}
	}
	if len(missing) == 0 {
		return reps, version, nil
	}
	ask := make([]string, len(missing))
	var askDomains []link.DomainID
	if len(domains) != 0 {
		askDomains = make([]link.DomainID, len(missing))
	}
	for j, i := range missing {
		ask[j] = codes[i]
		if askDomains != nil {
			askDomains[j] = domains[i]
		}
	}
	preps, pversion, perr := f.Primary.LookupCodes(ctx, askDomains, ask)
	if perr != nil {
		if err != nil {
			return nil, 0, fmt.Errorf("replica: %w; primary: %w", err, perr)
		}
		return nil, 0, fmt.Errorf("primary after a replica miss: %w", perr)
	}
	for j, i := range missing {
		reps[i] = preps[j]
		f.FromPrimary.Add(1)
		if err == nil && preps[j].Kind == authority.Found {
			f.Fallbacks.Add(1)
		}
	}
	return reps, pversion, nil
}

// LookupKeys asks the primary whenever hosts are asked, codes and hosts
// together: a replica behind the primary does not have a domain created a
// moment ago, and a host missing from it proves nothing. Host questions
// are rare (an edge asks once per domain it has not received yet), so
// they cost the primary little. Without hosts it is LookupCodes.
func (f *ReplicaFirst) LookupKeys(ctx context.Context, domains []link.DomainID, codes, hosts []string) ([]authority.Reply, []link.Domain, uint64, error) {
	if len(hosts) == 0 {
		reps, v, err := f.LookupCodes(ctx, domains, codes)
		return reps, nil, v, err
	}
	reps, found, v, err := f.Primary.LookupKeys(ctx, domains, codes, hosts)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("primary: %w", err)
	}
	f.FromPrimary.Add(uint64(len(codes)))
	return reps, found, v, nil
}
