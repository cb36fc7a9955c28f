// Package allocstore is the ID allocator's authority in PostgreSQL: the
// per-namespace counter rows, the allocation audit, leases and seals (each
// one transaction on the primary), and the operator's checks and repairs
// (verify, status, raise-floor, widen, the witness comparison and the
// recovery from it). It implements idalloc.Store. Beside control/postgres it
// is the only place in control that sees SQL or pgx errors.
package allocstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// Store is the Postgres authority of the ID allocator: it implements
// idalloc.Store and idalloc.CapacityReader on the primary's pool. Every
// lease is one transaction on one connection: lock the namespace's counter
// row, compute, conditionally update it, audit, emit the segment's opened
// event, commit. It is safe for concurrent use.
//
// Never point it at a replica: the counter must be read where it is written.
type Store struct {
	pool        *pgxpool.Pool
	lockTimeout time.Duration
	now         func() time.Time // nil: the database's clock
}

// Option configures a Store.
type Option func(*Store)

// WithLockTimeout bounds how long a lease waits for the counter row
// lock (SET LOCAL lock_timeout); past it the lease fails with
// idalloc.ErrLockTimeout. Zero waits as long as the context allows. The
// default is 2s.
func WithLockTimeout(d time.Duration) Option {
	return func(s *Store) { s.lockTimeout = d }
}

// WithClock makes the create-rate windows of Capacity and Status end at
// now() instead of at the database's clock (tests place creates in time).
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// clock is the end of the create-rate windows: zero for the database's.
func (s *Store) clock() time.Time {
	if s.now == nil {
		return time.Time{}
	}
	return s.now()
}

// New returns the allocation authority on pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, lockTimeout: 2 * time.Second}
	for _, o := range opts {
		o(s)
	}
	return s
}

var _ interface {
	idalloc.Store
	idalloc.CapacityReader
} = (*Store)(nil)

// EnsureNamespace implements idalloc.Store. A new namespace starts at
// ns.Start; an existing one must have the same bounds (its step is updated
// to ns.Step). A range overlapping another namespace's is refused by the
// table's exclusion constraint and reported as idalloc.ErrConfig.
func (s *Store) EnsureNamespace(ctx context.Context, ns idalloc.Namespace) error {
	step := ns.Step
	if step == 0 {
		step = idalloc.DefaultStep
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO alloc_namespaces (namespace, next_id, step, lower_bound, upper_bound)
		VALUES ($1, $2, $3, $2, $4)
		ON CONFLICT (namespace) DO NOTHING`,
		ns.Name, int64(ns.Start), int64(step), int64(ns.End))
	if err != nil {
		if pgCode(err) == "23P01" || pgCode(err) == "23514" {
			return fmt.Errorf("%w: namespace %s [%d, %d): %w", idalloc.ErrConfig, ns.Name, ns.Start, ns.End, err)
		}
		return translate("ensure namespace", err, false)
	}
	// A new namespace's first ceiling is in force at once: edges promise
	// nothing about IDs outside every namespace they were told of.
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO alloc_ceilings (namespace, prev_ceiling, ceiling, ceiling_at)
		SELECT namespace, least(upper_bound, next_id + $2 * step), least(upper_bound, next_id + $2 * step), 'epoch'
		FROM alloc_namespaces WHERE namespace = $1
		ON CONFLICT (namespace) DO NOTHING`, ns.Name, ceilingSegments); err != nil {
		return translate("ensure namespace: ceiling", err, false)
	}
	var lower, upper, curStep int64
	if err := s.pool.QueryRow(ctx, `SELECT lower_bound, upper_bound, step FROM alloc_namespaces WHERE namespace = $1`,
		ns.Name).Scan(&lower, &upper, &curStep); err != nil {
		return translate("ensure namespace", err, false)
	}
	if uint64(lower) != ns.Start || uint64(upper) != ns.End {
		return fmt.Errorf("%w: namespace %s is configured as [%d, %d) but the authority has [%d, %d)",
			idalloc.ErrConfig, ns.Name, ns.Start, ns.End, lower, upper)
	}
	if uint64(curStep) != step {
		if _, err := s.pool.Exec(ctx, `UPDATE alloc_namespaces SET step = $2, updated_at = now() WHERE namespace = $1`,
			ns.Name, int64(step)); err != nil {
			return translate("ensure namespace", err, false)
		}
	}
	return nil
}

// Lease implements idalloc.Store: one transaction on the primary.
//
//  1. Lock the counter row (SELECT … FOR UPDATE), which also gives the
//     transaction its xid before it takes an outbox version.
//  2. Look the request id up in the audit: once the lock is held, every
//     earlier lease of the namespace has ended, so a retry after an unknown
//     commit outcome finds its committed interval and returns it.
//  3. Fence: refuse (idalloc.ErrFenced) when an audited interval ends above
//     next_id or carries a newer epoch, as on a promoted lagging replica,
//     or when next_id is below req.Floor (the witness's high-water), as on
//     one that lost its audit too.
//  4. start = next_id, size = min(step, upper - start); refuse with
//     idalloc.ErrExhausted when nothing is left.
//  5. UPDATE … SET next_id = end WHERE next_id = start, which must touch
//     exactly one row; insert the audit row, the opened event and the
//     instance's heartbeat; commit.
//
// A failure before COMMIT was sent leaves nothing behind and wraps
// idalloc.ErrLockTimeout or idalloc.ErrStoreUnavailable. A failure of COMMIT
// itself whose outcome pgx cannot rule out wraps idalloc.ErrCommitUnknown:
// retry with the same request id.
func (s *Store) Lease(ctx context.Context, req idalloc.LeaseRequest) (idalloc.Segment, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return idalloc.Segment{}, translate("lease: begin", err, false)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	seg, fresh, err := s.leaseInTx(ctx, tx, req)
	var wait *raisedWait
	if errors.As(err, &wait) {
		// No room under the ceiling in force: the raise that makes room
		// commits alone, and the loader comes back once it is in force.
		if cerr := tx.Commit(ctx); cerr != nil {
			return idalloc.Segment{}, translate("lease: commit the ceiling's raise", cerr, false)
		}
		return idalloc.Segment{}, wait.CeilingWaitError
	}
	if err != nil {
		return idalloc.Segment{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return idalloc.Segment{}, translate("lease: commit", err, fresh)
	}
	return seg, nil
}

func (s *Store) leaseInTx(ctx context.Context, tx pgx.Tx, req idalloc.LeaseRequest) (seg idalloc.Segment, fresh bool, err error) {
	if s.lockTimeout > 0 {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`,
			fmt.Sprintf("%dms", s.lockTimeout.Milliseconds())); err != nil {
			return seg, false, translate("lease: set lock_timeout", err, false)
		}
	}
	var nextID, step, upper, epoch int64
	err = tx.QueryRow(ctx, `
		SELECT next_id, step, upper_bound, epoch, pg_current_xact_id()
		FROM alloc_namespaces WHERE namespace = $1 FOR UPDATE`, req.Namespace).
		Scan(&nextID, &step, &upper, &epoch, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return seg, false, fmt.Errorf("%w: lease: namespace %q has no counter row", idalloc.ErrConfig, req.Namespace)
	}
	if err != nil {
		return seg, false, translate("lease: lock counter row", err, false)
	}

	// Idempotency: a committed lease under this request id wins.
	var prev auditRow
	err = tx.QueryRow(ctx, `SELECT `+auditColumns+` FROM alloc_audit WHERE request_id = $1`, req.RequestID).
		Scan(prev.dest()...)
	switch {
	case err == nil:
		if prev.Namespace != req.Namespace {
			return seg, false, fmt.Errorf("lease: request id %s belongs to namespace %q, not %q", req.RequestID, prev.Namespace, req.Namespace)
		}
		return prev.segment(), false, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return seg, false, translate("lease: look up request", err, false)
	}

	// Fence: the counter must be at or above every audited end.
	var topEnd, topEpoch int64
	err = tx.QueryRow(ctx, `
		SELECT seg_end, epoch FROM alloc_audit WHERE namespace = $1
		ORDER BY seg_end DESC LIMIT 1`, req.Namespace).Scan(&topEnd, &topEpoch)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return seg, false, translate("lease: read audit high-water", err, false)
	}
	if topEnd > nextID || topEpoch > epoch {
		return seg, false, fmt.Errorf("%w: namespace %s: counter next_id %d epoch %d is below the audited high-water %d epoch %d",
			idalloc.ErrFenced, req.Namespace, nextID, epoch, topEnd, topEpoch)
	}
	// Fence: the counter must be at or above the witness kept outside the
	// database, which sees what a promoted replica lost with its audit.
	if req.Floor > 0 && uint64(nextID) < req.Floor {
		return seg, false, fmt.Errorf("%w: namespace %s: counter next_id %d is below the allocation witness %d: "+
			"confirmed leases are missing from this database (a promoted lagging replica?); see control alloc witness",
			idalloc.ErrFenced, req.Namespace, nextID, req.Floor)
	}
	if nextID >= upper {
		return seg, false, fmt.Errorf("%w: namespace %s: next_id %d reached upper bound %d", idalloc.ErrExhausted, req.Namespace, nextID, upper)
	}

	start := nextID
	end := start + min(step, upper-start)
	inForce, err := s.ceiling(ctx, tx, req, start, end, step, upper)
	if err != nil {
		return seg, false, err
	}
	end = min(end, inForce)
	tag, err := tx.Exec(ctx, `
		UPDATE alloc_namespaces SET next_id = $3, updated_at = now()
		WHERE namespace = $1 AND next_id = $2`, req.Namespace, start, end)
	if err != nil {
		return seg, false, translate("lease: advance counter", err, false)
	}
	if tag.RowsAffected() != 1 {
		return seg, false, fmt.Errorf("lease: advance counter of %s from %d: %d rows updated, want 1", req.Namespace, start, tag.RowsAffected())
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO alloc_audit (request_id, namespace, seg_start, seg_end, instance, epoch)
		VALUES ($1, $2, $3, $4, $5, $6)`, req.RequestID, req.Namespace, start, end, req.Instance, epoch)
	b.Queue(`
		INSERT INTO outbox (version, kind, namespace, seg_start, seg_end, seg_state)
		VALUES (nextval('change_version_seq'), 'segment', $1, $2, $3, $4)`,
		req.Namespace, start, end, linkevent.SegmentOpened)
	b.Queue(heartbeatSQL, req.Instance)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if pgCode(err) == "23P01" {
			return seg, false, fmt.Errorf("%w: namespace %s: [%d, %d) overlaps an audited interval", idalloc.ErrFenced, req.Namespace, start, end)
		}
		return seg, false, translate("lease: audit", err, false)
	}
	return idalloc.Segment{
		RequestID: req.RequestID, Namespace: req.Namespace, Start: uint64(start), End: uint64(end),
		Epoch: epoch, Instance: req.Instance,
	}, true, nil
}

// CeilingDelay is how long a raise of the frontier's ceiling takes to come
// into force. Edges rely on a ceiling for half of it after they asked
// (Promise); the other half covers the clocks of two database servers
// across a failover, which may disagree by up to that much.
const CeilingDelay = 2 * time.Second

// Promise is how long after an edge's question was sent it may rely on the
// ceilings the answer gave.
const Promise = CeilingDelay / 2

// ceilingSegments is the least headroom, in segments, kept between a
// lease's end and the announced ceiling.
const ceilingSegments = 4

// raisedWait is a lease that found no room under the ceiling in force after
// raising it: the transaction commits the raise alone.
type raisedWait struct{ *idalloc.CeilingWaitError }

// ceiling returns the ceiling in force for a lease [start, end) in the
// transaction that holds the namespace's counter row, raising the announced
// ceiling first when it is less than half the headroom above end (the
// headroom being ceilingSegments segments, or req.Ahead IDs when that is
// more), up to the namespace's end. A raise takes the ceiling row's lock
// before it reads the clock, so a frontier read that holds the row (FOR
// SHARE) either sees the raise or precedes its clock reading (see
// Frontiers). When start is at or above the ceiling in force it returns a
// *raisedWait (the raise must commit) or an *idalloc.CeilingWaitError (a
// raise is already on its way).
func (s *Store) ceiling(ctx context.Context, tx pgx.Tx, req idalloc.LeaseRequest, start, end, step, upper int64) (int64, error) {
	var inForce, announced int64
	var wait float64 // seconds until the announced ceiling is in force
	err := tx.QueryRow(ctx, `
		SELECT CASE WHEN clock_timestamp() >= ceiling_at THEN ceiling ELSE prev_ceiling END, ceiling,
		       (CASE WHEN clock_timestamp() >= ceiling_at THEN 0 ELSE extract(epoch FROM ceiling_at - clock_timestamp()) END)::float8
		FROM alloc_ceilings WHERE namespace = $1`, req.Namespace).Scan(&inForce, &announced, &wait)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: lease: namespace %q has no ceiling row", idalloc.ErrConfig, req.Namespace)
	}
	if err != nil {
		return 0, translate("lease: read the ceiling", err, false)
	}
	headroom := max(ceilingSegments*step, int64(min(req.Ahead, uint64(upper))))
	raised := false
	if announced < upper && announced-end < headroom/2 {
		if inForce, announced, wait, err = raiseCeiling(ctx, tx, req.Namespace, min(upper, end+headroom)); err != nil {
			return 0, fmt.Errorf("lease: %w", err)
		}
		raised = true
	}
	if start < inForce {
		return inForce, nil
	}
	w := &idalloc.CeilingWaitError{Namespace: req.Namespace, Wait: time.Duration(wait * float64(time.Second))}
	if raised {
		return 0, &raisedWait{w}
	}
	return 0, w
}

// raiseCeiling raises namespace's announced ceiling to want, in force
// CeilingDelay from now, in tx; a ceiling already at or above want is left
// as it is. It takes the row's lock before it reads the clock (see
// Frontiers for why) and returns the ceiling in force now, the one
// announced and the seconds until that one is in force.
func raiseCeiling(ctx context.Context, tx pgx.Tx, namespace string, want int64) (inForce, announced int64, wait float64, err error) {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM alloc_ceilings WHERE namespace = $1 FOR UPDATE`, namespace); err != nil {
		return 0, 0, 0, translate("lock the ceiling", err, false)
	}
	err = tx.QueryRow(ctx, `
		UPDATE alloc_ceilings SET
			prev_ceiling = CASE WHEN clock_timestamp() >= ceiling_at THEN ceiling ELSE prev_ceiling END,
			ceiling = greatest(ceiling, $2),
			ceiling_at = CASE WHEN ceiling >= $2 THEN ceiling_at ELSE clock_timestamp() + make_interval(secs => $3) END
		WHERE namespace = $1
		RETURNING CASE WHEN clock_timestamp() >= ceiling_at THEN ceiling ELSE prev_ceiling END, ceiling,
			(CASE WHEN clock_timestamp() >= ceiling_at THEN 0 ELSE extract(epoch FROM ceiling_at - clock_timestamp()) END)::float8`,
		namespace, want, CeilingDelay.Seconds()).Scan(&inForce, &announced, &wait)
	if err != nil {
		return 0, 0, 0, translate("raise the ceiling", err, false)
	}
	return inForce, announced, wait, nil
}

const heartbeatSQL = `
	INSERT INTO alloc_instances (instance) VALUES ($1)
	ON CONFLICT (instance) DO UPDATE SET heartbeat_at = now()`

// Seal implements idalloc.Store: it marks the segment sealed with its used
// count and emits the sealed event in the same transaction. Sealing a sealed
// segment does nothing; an unknown request id is an error.
func (s *Store) Seal(ctx context.Context, req idalloc.SealRequest) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The UPDATE's row lock gives the transaction its xid before
		// nextval takes the event's version.
		var ns string
		var start, end int64
		err := tx.QueryRow(ctx, `
			UPDATE alloc_audit
			SET sealed_at = now(), sealed_by = $2, used_count = least($3::bigint, seg_end - seg_start)
			WHERE request_id = $1 AND sealed_at IS NULL
			RETURNING namespace, seg_start, seg_end`,
			req.RequestID, req.Instance, int64(min(req.Used, math.MaxInt64))).Scan(&ns, &start, &end)
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM alloc_audit WHERE request_id = $1)`, req.RequestID).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return fmt.Errorf("%w: seal: no audited segment with request id %s", idalloc.ErrUnknownSegment, req.RequestID)
			}
			return nil
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO outbox (version, kind, namespace, seg_start, seg_end, seg_state)
			VALUES (nextval('change_version_seq'), 'segment', $1, $2, $3, $4)`,
			ns, start, end, linkevent.SegmentSealed)
		return err
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, idalloc.ErrUnknownSegment) {
			return fmt.Errorf("seal segment: %w", err)
		}
		return translate("seal segment", err, false)
	}
	return nil
}

// Heartbeat implements idalloc.Store. With abandonAfter > 0 it also seals
// every open segment whose instance has not heartbeaten (or leased) for
// longer than abandonAfter, counting as used the links that exist in it, and
// emits their sealed events.
func (s *Store) Heartbeat(ctx context.Context, instance string, abandonAfter time.Duration) (int, error) {
	if _, err := s.pool.Exec(ctx, heartbeatSQL, instance); err != nil {
		return 0, translate("heartbeat", err, false)
	}
	if abandonAfter <= 0 {
		return 0, nil
	}
	return s.SealAbandoned(ctx, "sweeper:"+instance, abandonAfter)
}

// SealAbandoned seals the open segments of instances silent for longer than
// silence (see Heartbeat) and returns how many it sealed. sealedBy is
// recorded in the audit.
func (s *Store) SealAbandoned(ctx context.Context, sealedBy string, silence time.Duration) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			WITH dead AS (
				UPDATE alloc_audit a
				SET sealed_at = now(), sealed_by = $1,
				    used_count = (SELECT count(*) FROM links l WHERE l.id >= a.seg_start AND l.id < a.seg_end)
				WHERE a.sealed_at IS NULL
				  AND a.created_at < now() - make_interval(secs => $2)
				  AND NOT EXISTS (
					SELECT 1 FROM alloc_instances i
					WHERE i.instance = a.instance AND i.heartbeat_at >= now() - make_interval(secs => $2))
				RETURNING a.namespace, a.seg_start, a.seg_end)
			INSERT INTO outbox (version, kind, namespace, seg_start, seg_end, seg_state)
			SELECT nextval('change_version_seq'), 'segment', namespace, seg_start, seg_end, $3
			FROM (SELECT * FROM dead ORDER BY seg_start) d`,
			sealedBy, silence.Seconds(), linkevent.SegmentSealed)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, translate("seal abandoned segments", err, false)
	}
	return n, nil
}

// Capacity implements idalloc.CapacityReader from the counter row, the
// audit and the per-minute counts of committed creates: Rate is the busier
// of the last five minutes' and the last hour's creates per second.
func (s *Store) Capacity(ctx context.Context, namespace string) (idalloc.Capacity, error) {
	var lower, upper, next, committed, wasted, reserved int64
	err := s.pool.QueryRow(ctx, `
		SELECT n.lower_bound, n.upper_bound, n.next_id,
		       coalesce(sum(a.used_count) FILTER (WHERE a.sealed_at IS NOT NULL), 0)::bigint,
		       coalesce(sum(a.seg_end - a.seg_start - a.used_count) FILTER (WHERE a.sealed_at IS NOT NULL), 0)::bigint,
		       coalesce(sum(a.seg_end - a.seg_start) FILTER (WHERE a.sealed_at IS NULL), 0)::bigint
		FROM alloc_namespaces n LEFT JOIN alloc_audit a ON a.namespace = n.namespace
		WHERE n.namespace = $1
		GROUP BY n.namespace`, namespace).Scan(&lower, &upper, &next, &committed, &wasted, &reserved)
	if errors.Is(err, pgx.ErrNoRows) {
		return idalloc.Capacity{}, fmt.Errorf("%w: %q", idalloc.ErrUnknownNamespace, namespace)
	}
	if err != nil {
		return idalloc.Capacity{}, translate("capacity", err, false)
	}
	c := idalloc.Capacity{
		Namespace: namespace,
		Total:     uint64(upper - lower),
		Allocated: uint64(next - lower),
		Committed: uint64(committed),
		Wasted:    uint64(wasted),
		Reserved:  uint64(reserved),
		Remaining: uint64(upper - next),
	}
	if c.Last5m, c.LastHour, _, _, err = createCounts(ctx, s.pool, namespace, s.clock()); err != nil {
		return idalloc.Capacity{}, translate("capacity: create rate", err, false)
	}
	c.Rate = max(c.Last5m.PerSecond(), c.LastHour.PerSecond())
	c.DaysLeft = idalloc.DaysLeft(c.Remaining, c.Rate)
	return c, nil
}

const auditColumns = `request_id::text, namespace, seg_start, seg_end, instance, epoch, created_at, sealed_at IS NOT NULL, coalesce(used_count, 0)`

func auditColumnsOf(t string) string {
	return t + `.request_id::text, ` + t + `.namespace, ` + t + `.seg_start, ` + t + `.seg_end, ` + t + `.instance, ` +
		t + `.epoch, ` + t + `.created_at, ` + t + `.sealed_at IS NOT NULL, coalesce(` + t + `.used_count, 0)`
}

type auditRow struct {
	RequestID, Namespace, Instance string
	Start, End, Epoch, Used        int64
	CreatedAt                      time.Time
	Sealed                         bool
}

func (r *auditRow) dest() []any {
	return []any{&r.RequestID, &r.Namespace, &r.Start, &r.End, &r.Instance, &r.Epoch, &r.CreatedAt, &r.Sealed, &r.Used}
}

func (r *auditRow) segment() idalloc.Segment {
	return idalloc.Segment{RequestID: r.RequestID, Namespace: r.Namespace, Start: uint64(r.Start), End: uint64(r.End), Epoch: r.Epoch, Instance: r.Instance}
}

func (r *auditRow) interval() Interval {
	return Interval{RequestID: r.RequestID, Namespace: r.Namespace, Start: uint64(r.Start), End: uint64(r.End),
		Instance: r.Instance, Epoch: r.Epoch, CreatedAt: r.CreatedAt, Sealed: r.Sealed, Used: uint64(r.Used)}
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// translate classifies a driver error for the allocator. atCommit says
// the error came from COMMIT of a transaction that wrote: unless pgx can
// prove the server never got it, its outcome is unknown.
func translate(op string, err error, atCommit bool) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		switch pgErr.Code {
		case "55P03": // lock_not_available: lock_timeout
			return fmt.Errorf("%s: %w: %w", op, idalloc.ErrLockTimeout, err)
		case "57014", "57P01", "57P02", "57P03", "08000", "08003", "08006", "40001", "40P01", "25006":
			// canceled, shutting down, connection failures, serialization,
			// deadlock, read-only (a replica): nothing committed.
			return fmt.Errorf("%s: %w: %w", op, idalloc.ErrStoreUnavailable, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	case atCommit && !pgconn.SafeToRetry(err):
		return fmt.Errorf("%s: %w: %w", op, idalloc.ErrCommitUnknown, err)
	default:
		// Before COMMIT a lost connection aborts the transaction on the
		// server: nothing was committed.
		return fmt.Errorf("%s: %w: %w", op, idalloc.ErrStoreUnavailable, err)
	}
}
