package allocstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/idalloc"
)

// Interval is one audited allocation.
type Interval struct {
	RequestID string
	Namespace string
	Start     uint64
	End       uint64 // exclusive
	Instance  string
	Epoch     int64
	CreatedAt time.Time
	Sealed    bool
	Used      uint64 // when Sealed
}

func (iv Interval) String() string {
	return fmt.Sprintf("%s [%d, %d) request %s by %s epoch %d", iv.Namespace, iv.Start, iv.End, iv.RequestID, iv.Instance, iv.Epoch)
}

// Violation is one broken audit invariant.
type Violation struct {
	// Kind is "overlap" (Interval and Other share IDs), "above_counter"
	// (Interval ends above its namespace's next_id, Counter), "epoch_above_counter"
	// (Interval carries a newer epoch than the counter row) or
	// "outside_namespace" (Interval is outside the namespace's bounds).
	Kind     string
	Interval Interval
	Other    Interval
	Counter  uint64
}

func (v Violation) String() string {
	switch v.Kind {
	case "overlap":
		return fmt.Sprintf("overlap: %s and %s", v.Interval, v.Other)
	case "above_counter":
		return fmt.Sprintf("above counter: %s ends above next_id %d", v.Interval, v.Counter)
	default:
		return fmt.Sprintf("%s: %s", v.Kind, v.Interval)
	}
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Namespaces int
	Intervals  int
	Violations []Violation
}

// OK reports whether the audit holds every invariant.
func (r VerifyReport) OK() bool { return len(r.Violations) == 0 }

// Verify checks the allocation audit in one consistent snapshot: audited
// intervals are pairwise disjoint (IDs are global, so across namespaces
// too), every interval lies in its namespace's bounds, and every counter is
// at or above every audited end of its namespace, with an epoch at least
// the audited one. It returns the offending intervals; the error is for
// failing to check, not for violations.
func (s *Store) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM alloc_namespaces), (SELECT count(*) FROM alloc_audit)`).
			Scan(&rep.Namespaces, &rep.Intervals); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT `+auditColumnsOf("a")+`, `+auditColumnsOf("b")+`
			FROM alloc_audit a JOIN alloc_audit b
			  ON int8range(a.seg_start, a.seg_end) && int8range(b.seg_start, b.seg_end)
			 AND (a.seg_start, a.request_id) < (b.seg_start, b.request_id)
			ORDER BY a.seg_start, b.seg_start`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var x, y auditRow
			if err := rows.Scan(append(x.dest(), y.dest()...)...); err != nil {
				rows.Close()
				return err
			}
			rep.Violations = append(rep.Violations, Violation{Kind: "overlap", Interval: x.interval(), Other: y.interval()})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
			SELECT `+auditColumnsOf("a")+`, n.next_id,
			       CASE WHEN a.seg_start < n.lower_bound OR a.seg_end > n.upper_bound THEN 'outside_namespace'
			            WHEN a.seg_end > n.next_id THEN 'above_counter'
			            ELSE 'epoch_above_counter' END
			FROM alloc_audit a JOIN alloc_namespaces n ON n.namespace = a.namespace
			WHERE a.seg_start < n.lower_bound OR a.seg_end > n.upper_bound
			   OR a.seg_end > n.next_id OR a.epoch > n.epoch
			ORDER BY a.namespace, a.seg_start`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var x auditRow
			var counter int64
			var kind string
			if err := rows.Scan(append(x.dest(), &counter, &kind)...); err != nil {
				rows.Close()
				return err
			}
			rep.Violations = append(rep.Violations, Violation{Kind: kind, Interval: x.interval(), Counter: uint64(counter)})
		}
		return rows.Err()
	})
	if err != nil {
		return VerifyReport{}, translate("verify allocation audit", err, false)
	}
	return rep, nil
}

// Intervals lists the audit of namespace (every namespace when empty)
// in ID order.
func (s *Store) Intervals(ctx context.Context, namespace string) ([]Interval, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+auditColumns+` FROM alloc_audit
		WHERE $1 = '' OR namespace = $1 ORDER BY seg_start`, namespace)
	if err != nil {
		return nil, translate("list allocations", err, false)
	}
	ivs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Interval, error) {
		var x auditRow
		err := row.Scan(x.dest()...)
		return x.interval(), err
	})
	if err != nil {
		return nil, translate("list allocations", err, false)
	}
	return ivs, nil
}

// WitnessCheck is one namespace's counter set against the allocation
// witness (idalloc.Witness) and its own audit.
type WitnessCheck struct {
	Namespace string
	// Counter is next_id; AuditTop the highest audited end (0 without
	// audit); Witness the high-water recorded outside the database.
	Counter, AuditTop, Witness uint64
}

// Missing reports whether the database lacks leases the witness saw
// confirmed: IDs in [Counter, Witness) may have been handed out by the
// instances of a primary this database never heard from.
func (c WitnessCheck) Missing() bool { return c.Counter < c.Witness }

func (c WitnessCheck) String() string {
	if !c.Missing() {
		return fmt.Sprintf("ok: namespace %s: counter %d is at or above the witness %d (audit top %d)", c.Namespace, c.Counter, c.Witness, c.AuditTop)
	}
	return fmt.Sprintf("MISSING: namespace %s: counter %d (audit top %d) is below the witness %d: leases up to %d were confirmed "+
		"and may have been handed out, but this database has no record of [%d, %d); allocation is refused until the counter is raised above it",
		c.Namespace, c.Counter, c.AuditTop, c.Witness, c.Witness, max(c.Counter, c.AuditTop), c.Witness)
}

// CheckWitness compares every namespace's counter with the witness, in
// namespace order. Point it at a promotion candidate before trusting it.
func (s *Store) CheckWitness(ctx context.Context, w idalloc.Witness) ([]WitnessCheck, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT n.namespace, n.next_id, coalesce(max(a.seg_end), 0)::bigint
		FROM alloc_namespaces n LEFT JOIN alloc_audit a ON a.namespace = n.namespace
		GROUP BY n.namespace ORDER BY n.namespace`)
	if err != nil {
		return nil, translate("check witness", err, false)
	}
	checks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WitnessCheck, error) {
		var c WitnessCheck
		var next, top int64
		err := row.Scan(&c.Namespace, &next, &top)
		c.Counter, c.AuditTop = uint64(next), uint64(top)
		return c, err
	})
	if err != nil {
		return nil, translate("check witness", err, false)
	}
	for i := range checks {
		if checks[i].Witness, err = w.HighWater(ctx, checks[i].Namespace); err != nil {
			return nil, fmt.Errorf("check witness: %w", err)
		}
	}
	return checks, nil
}

// RecoverFromWitness is the operator's way out of a witness fence: every
// namespace whose counter is below the witness has its floor raised to the
// witness's high-water (RaiseFloor: one transaction, the skipped interval
// audited as waste), so allocation resumes above every confirmed interval.
// Namespaces already at or above it are left alone. actor is recorded in
// the audit.
func (s *Store) RecoverFromWitness(ctx context.Context, w idalloc.Witness, actor string) ([]RaiseFloorResult, error) {
	checks, err := s.CheckWitness(ctx, w)
	if err != nil {
		return nil, err
	}
	var out []RaiseFloorResult
	for _, c := range checks {
		if !c.Missing() {
			continue
		}
		res, err := s.RaiseFloor(ctx, c.Namespace, c.Witness, actor)
		if err != nil {
			return out, fmt.Errorf("recover namespace %s to the witness %d: %w", c.Namespace, c.Witness, err)
		}
		out = append(out, res)
	}
	return out, nil
}
