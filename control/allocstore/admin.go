package allocstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// Operator commands on the allocation authority: what `control alloc
// status` shows and what `control alloc raise-floor` changes. Both run on
// the primary, like leases.

// RaiseFloorInstance prefixes the audit row's instance of a raise-floor, so
// the skipped interval is told apart from leases (and left out of rates).
const RaiseFloorInstance = "raise-floor:"

// ErrFloorBackwards is returned by RaiseFloor for a target at or below the
// namespace's counter: the counter only ever moves forward.
var ErrFloorBackwards = errors.New("the counter only moves forward")

// RaiseFloorResult is what RaiseFloor did.
type RaiseFloorResult struct {
	Namespace string
	// From and To are the counter before and after. [SkipFrom, To) was
	// skipped: audited as a sealed interval with no link (waste, RequestID
	// its audit row) and never handed out. SkipFrom is From unless the
	// audit already reached above the counter; SkipFrom = To (no audit
	// row) when it reached To.
	From, To, SkipFrom uint64
	RequestID          string
}

// RaiseFloor moves namespace's counter (next_id) forward to `to`, so every
// ID below `to` is never handed out: the step of a migration that must start
// above an old system's high-water mark. It is one transaction on the
// primary: lock the counter row, check, conditionally update exactly one
// row, audit [next_id, to) as an interval sealed with no use, and emit its
// opened and sealed events (edges may then answer misses in it without
// asking the authority). actor names who raised it in the audit.
//
// It refuses (wrapping ErrFloorBackwards) a target at or below the counter,
// (wrapping idalloc.ErrExhausted) one above the namespace's end, (wrapping
// idalloc.ErrFenced) one below an audited end or when the audit carries a
// newer epoch than the counter, and (wrapping idalloc.ErrUnknownNamespace)
// an unknown namespace. On error nothing changed. A counter below its audit
// is healed by a target above every audited end; only IDs above the audit
// are recorded as skipped.
func (s *Store) RaiseFloor(ctx context.Context, namespace string, to uint64, actor string) (RaiseFloorResult, error) {
	res := RaiseFloorResult{Namespace: namespace, To: to}
	if actor == "" {
		actor = "operator"
	}
	instance := RaiseFloorInstance + actor
	if len(instance) > 200 {
		instance = instance[:200]
	}
	if to > uint64(1)<<62 {
		return res, fmt.Errorf("raise floor: %d is out of range", to)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if s.lockTimeout > 0 {
			if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`,
				fmt.Sprintf("%dms", s.lockTimeout.Milliseconds())); err != nil {
				return err
			}
		}
		var next, upper, epoch int64
		err := tx.QueryRow(ctx, `
			SELECT next_id, upper_bound, epoch, pg_current_xact_id()
			FROM alloc_namespaces WHERE namespace = $1 FOR UPDATE`, namespace).Scan(&next, &upper, &epoch, nil)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", idalloc.ErrUnknownNamespace, namespace)
		}
		if err != nil {
			return err
		}
		res.From = uint64(next)
		if int64(to) <= next {
			return fmt.Errorf("%w: namespace %s is at %d; %d would not raise it", ErrFloorBackwards, namespace, next, to)
		}
		if int64(to) > upper {
			return fmt.Errorf("%w: namespace %s ends at %d (exclusive); widen the range instead of raising the floor to %d",
				idalloc.ErrExhausted, namespace, upper, to)
		}
		// A counter below its own audit (a promoted replica that kept
		// the audit but not the counter) is healed only by a target above
		// every audited end; a newer epoch in the audit is not healed by
		// moving the counter at all.
		var topEnd, topEpoch int64
		err = tx.QueryRow(ctx, `SELECT seg_end, epoch FROM alloc_audit WHERE namespace = $1 ORDER BY seg_end DESC LIMIT 1`,
			namespace).Scan(&topEnd, &topEpoch)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if topEpoch > epoch || topEnd > int64(to) {
			return fmt.Errorf("%w: namespace %s: counter %d epoch %d, audited high-water %d epoch %d: raise to at least the audited end, and see control alloc verify",
				idalloc.ErrFenced, namespace, next, epoch, topEnd, topEpoch)
		}
		tag, err := tx.Exec(ctx, `UPDATE alloc_namespaces SET next_id = $3, updated_at = now() WHERE namespace = $1 AND next_id = $2`,
			namespace, next, int64(to))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("advance counter of %s from %d: %d rows updated, want 1", namespace, next, tag.RowsAffected())
		}
		// Leases resume above `to` once the frontier's ceiling allows:
		// raise it now, so that is CeilingDelay from here, not from the
		// next lease.
		var step int64
		if err := tx.QueryRow(ctx, `SELECT step FROM alloc_namespaces WHERE namespace = $1`, namespace).Scan(&step); err != nil {
			return err
		}
		if _, _, _, err := raiseCeiling(ctx, tx, namespace, min(upper, int64(to)+ceilingSegments*step)); err != nil {
			return err
		}
		skip := max(next, topEnd) // IDs above the audit that nobody holds
		res.SkipFrom = uint64(skip)
		if skip == int64(to) {
			return nil // the audit already covers everything up to `to`
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO alloc_audit (request_id, namespace, seg_start, seg_end, instance, epoch, sealed_at, sealed_by, used_count)
			VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, now(), $4, 0)
			RETURNING request_id::text`, namespace, skip, int64(to), instance, epoch).Scan(&res.RequestID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO outbox (version, kind, namespace, seg_start, seg_end, seg_state)
			SELECT nextval('change_version_seq'), 'segment', $1, $2, $3, s
			FROM unnest(ARRAY[$4, $5]::text[]) WITH ORDINALITY AS t(s, o) ORDER BY o`,
			namespace, skip, int64(to), linkevent.SegmentOpened, linkevent.SegmentSealed)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrFloorBackwards) || errors.Is(err, idalloc.ErrExhausted) || errors.Is(err, idalloc.ErrFenced) ||
			errors.Is(err, idalloc.ErrUnknownNamespace) {
			return res, fmt.Errorf("raise floor: %w", err)
		}
		return res, translate("raise floor", err, false)
	}
	return res, nil
}

// NamespaceStatus is one namespace's runway as `control alloc status` shows
// it. The embedded Capacity's Rate and TimeLeft are committed creates, not
// leases.
type NamespaceStatus struct {
	idalloc.Capacity
	Lower, Upper, Next uint64 // [Lower, Upper) and the next unallocated ID
	Step               uint64
	Epoch              int64
	// LeasedLastHour and LeasedLastDay are IDs leased by instances (raised
	// floors excluded) in the last hour and day; LeaseRate (per second) is
	// the larger of the two averages. Leases reserve a segment at a time
	// ahead of use and include what is later wasted: at low traffic one
	// lease dwarfs the creates, so no time left is derived from it.
	LeasedLastHour, LeasedLastDay uint64
	LeaseRate                     float64
	// PeakMinute is the minute of the last PeakWindow (the current one
	// included) with the most committed creates, PeakCreates their number
	// and PeakRate that per second; PeakMinute is zero when there were
	// none.
	PeakMinute  time.Time
	PeakCreates uint64
	PeakRate    float64
	// TimeLeft is Remaining at Rate, TimeLeftAtPeak at PeakRate; zero when
	// the rate is zero (no estimate).
	TimeLeft, TimeLeftAtPeak time.Duration
}

// OpenSegments are the segments an instance holds open in a namespace.
type OpenSegments struct {
	Namespace, Instance string
	Segments            int
	IDs                 uint64 // their total size
	Oldest              time.Time
	Heartbeat           time.Time // zero when the instance never heartbeat
}

// Status is the allocation authority's state for operators.
type Status struct {
	Namespaces []NamespaceStatus
	Open       []OpenSegments
}

// Status reads every namespace's counter, accounting, recent lease rate and
// committed creates (of the last five minutes and hour, and the peak
// minute of PeakWindow), and the open segments per instance, in one
// consistent snapshot.
func (s *Store) Status(ctx context.Context) (Status, error) {
	var st Status
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT n.namespace, n.lower_bound, n.upper_bound, n.next_id, n.step, n.epoch,
			       coalesce(sum(a.used_count) FILTER (WHERE a.sealed_at IS NOT NULL), 0)::bigint,
			       coalesce(sum(a.seg_end - a.seg_start - a.used_count) FILTER (WHERE a.sealed_at IS NOT NULL), 0)::bigint,
			       coalesce(sum(a.seg_end - a.seg_start) FILTER (WHERE a.sealed_at IS NULL), 0)::bigint,
			       coalesce(sum(a.seg_end - a.seg_start) FILTER (WHERE a.created_at > now() - interval '1 hour'
			                AND a.instance NOT LIKE 'raise-floor:%'), 0)::bigint,
			       coalesce(sum(a.seg_end - a.seg_start) FILTER (WHERE a.created_at > now() - interval '1 day'
			                AND a.instance NOT LIKE 'raise-floor:%'), 0)::bigint
			FROM alloc_namespaces n LEFT JOIN alloc_audit a ON a.namespace = n.namespace
			GROUP BY n.namespace ORDER BY n.lower_bound`)
		if err != nil {
			return err
		}
		st.Namespaces, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (NamespaceStatus, error) {
			var ns NamespaceStatus
			var lower, upper, next, step, committed, wasted, reserved, hour, day int64
			if err := row.Scan(&ns.Namespace, &lower, &upper, &next, &step, &ns.Epoch,
				&committed, &wasted, &reserved, &hour, &day); err != nil {
				return ns, err
			}
			ns.Lower, ns.Upper, ns.Next, ns.Step = uint64(lower), uint64(upper), uint64(next), uint64(step)
			ns.LeasedLastHour, ns.LeasedLastDay = uint64(hour), uint64(day)
			ns.Capacity = idalloc.Capacity{
				Namespace: ns.Namespace, Total: uint64(upper - lower), Allocated: uint64(next - lower),
				Committed: uint64(committed), Wasted: uint64(wasted), Reserved: uint64(reserved),
				Remaining: uint64(upper - next),
			}
			ns.LeaseRate = max(float64(hour)/3600, float64(day)/86400)
			return ns, nil
		})
		if err != nil {
			return err
		}
		for i := range st.Namespaces {
			ns := &st.Namespaces[i]
			var at, minute time.Time
			ns.Last5m, ns.LastHour, at, minute, err = createCounts(ctx, tx, ns.Namespace, s.clock())
			if err != nil {
				return err
			}
			ns.Rate = max(ns.Last5m.PerSecond(), ns.LastHour.PerSecond())
			ns.DaysLeft = idalloc.DaysLeft(ns.Remaining, ns.Rate)
			ns.TimeLeft = timeLeft(ns.Remaining, ns.Rate)
			if ns.PeakMinute, ns.PeakCreates, err = peakCreates(ctx, tx, ns.Namespace, minute, at); err != nil {
				return err
			}
			ns.PeakRate = float64(ns.PeakCreates) / 60
			ns.TimeLeftAtPeak = timeLeft(ns.Remaining, ns.PeakRate)
		}
		rows, err = tx.Query(ctx, `
			SELECT a.namespace, a.instance, count(*), sum(a.seg_end - a.seg_start)::bigint, min(a.created_at),
			       coalesce(max(i.heartbeat_at), 'epoch'::timestamptz)
			FROM alloc_audit a LEFT JOIN alloc_instances i ON i.instance = a.instance
			WHERE a.sealed_at IS NULL
			GROUP BY a.namespace, a.instance ORDER BY a.namespace, a.instance`)
		if err != nil {
			return err
		}
		st.Open, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OpenSegments, error) {
			var o OpenSegments
			var ids int64
			err := row.Scan(&o.Namespace, &o.Instance, &o.Segments, &ids, &o.Oldest, &o.Heartbeat)
			o.IDs = uint64(ids)
			if o.Heartbeat.Unix() == 0 {
				o.Heartbeat = time.Time{}
			}
			return o, err
		})
		return err
	})
	if err != nil {
		return Status{}, translate("allocation status", err, false)
	}
	return st, nil
}

// ErrNarrowing is returned by Widen for an end at or below the current one:
// a namespace's range only grows.
var ErrNarrowing = errors.New("a namespace's range only grows")

// errPastDomain: a widen past the end of the namespace's domain's IDs.
var errPastDomain = errors.New("past the domain's IDs")

// Widen moves namespace's end (exclusive) up to `to`, at most the end of
// its domain's IDs (62^6 for the platform's, link.IDRange), in one
// statement that touches exactly one row; the table's exclusion constraint
// refuses (wrapping idalloc.ErrConfig) an end that would overlap another
// namespace. It returns the old end.
//
// Control instances check their configured range against the authority's
// when they start and refuse segments past their configured end, so widen
// with every instance stopped and start them again with the new --id-end
// (docs/runbooks/capacity-exhaustion.md).
func (s *Store) Widen(ctx context.Context, namespace string, to uint64) (uint64, error) {
	var old, lower int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT upper_bound, lower_bound FROM alloc_namespaces WHERE namespace = $1 FOR UPDATE`, namespace).Scan(&old, &lower)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", idalloc.ErrUnknownNamespace, namespace)
		}
		if err != nil {
			return err
		}
		// A namespace stays in its domain's IDs: past them lie another
		// domain's, whose codes would collide with its own.
		d, _ := link.SplitID(uint64(lower))
		if _, end := link.IDRange(d); to > end {
			return fmt.Errorf("%w: %d is past the IDs of namespace %s's domain (its 62^6 end is %d)", errPastDomain, to, namespace, end)
		}
		if int64(to) <= old {
			return fmt.Errorf("%w: namespace %s ends at %d; %d would not widen it", ErrNarrowing, namespace, old, to)
		}
		tag, err := tx.Exec(ctx, `UPDATE alloc_namespaces SET upper_bound = $3, updated_at = now() WHERE namespace = $1 AND upper_bound = $2`,
			namespace, old, int64(to))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("widen %s: %d rows updated, want 1", namespace, tag.RowsAffected())
		}
		// The ceiling stopped at the old end; the new IDs come into use
		// once a raise above it is in force, CeilingDelay from now.
		var next, step int64
		if err := tx.QueryRow(ctx, `SELECT next_id, step FROM alloc_namespaces WHERE namespace = $1`, namespace).Scan(&next, &step); err != nil {
			return err
		}
		_, _, _, err = raiseCeiling(ctx, tx, namespace, min(int64(to), max(next, old)+ceilingSegments*step))
		return err
	})
	switch {
	case err == nil:
		return uint64(old), nil
	case pgCode(err) == "23P01":
		return uint64(old), fmt.Errorf("widen: %w: namespace %s up to %d would overlap another namespace's range", idalloc.ErrConfig, namespace, to)
	case errors.Is(err, ErrNarrowing), errors.Is(err, idalloc.ErrUnknownNamespace):
		return uint64(old), fmt.Errorf("widen: %w", err)
	case errors.Is(err, errPastDomain):
		return uint64(old), fmt.Errorf("widen: %w: %w", idalloc.ErrConfig, err)
	}
	return uint64(old), translate("widen", err, false)
}
