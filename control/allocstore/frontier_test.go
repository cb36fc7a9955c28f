package allocstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/authority"
)

// ceilingRow is a namespace's ceiling row as the table holds it.
type ceilingRow struct {
	prev, ceiling int64
	inForce       int64
	pending       bool // ceiling_at is still ahead
}

func readCeiling(t *testing.T, pool *pgxpool.Pool, ns string) ceilingRow {
	t.Helper()
	var r ceilingRow
	if err := pool.QueryRow(context.Background(), `
		SELECT prev_ceiling, ceiling, CASE WHEN clock_timestamp() >= ceiling_at THEN ceiling ELSE prev_ceiling END,
		       clock_timestamp() < ceiling_at
		FROM alloc_ceilings WHERE namespace = $1`, ns).Scan(&r.prev, &r.ceiling, &r.inForce, &r.pending); err != nil {
		t.Fatal(err)
	}
	return r
}

// bringIntoForce stands for the passage of CeilingDelay: the pending raise
// is in force from now.
func bringIntoForce(t *testing.T, pool *pgxpool.Pool, ns string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE alloc_ceilings SET ceiling_at = clock_timestamp() WHERE namespace = $1`, ns); err != nil {
		t.Fatal(err)
	}
}

func frontierOf(t *testing.T, s *Store, ns string) authority.Frontier {
	t.Helper()
	fs, promise, err := s.Frontiers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if promise != Promise || 2*promise > CeilingDelay {
		t.Fatalf("promise %v; want %v, at most half the ceiling's delay %v", promise, Promise, CeilingDelay)
	}
	for _, f := range fs {
		if f.Namespace == ns {
			return f
		}
	}
	t.Fatalf("no frontier for %s in %+v", ns, fs)
	return authority.Frontier{}
}

// TestCeilingStaysAhead: leases raise the announced ceiling before they need
// it, so at a steady pace no lease waits; every lease ends at or below the
// ceiling in force when it was confirmed, and at or below every ceiling
// announced before it; Frontiers reports the range, the counter and the
// announced ceiling.
func TestCeilingStaysAhead(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s := New(pool)
	ns := idalloc.Namespace{Name: "default", Start: 1, End: 100_000, Step: 100}
	if err := s.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	f := frontierOf(t, s, "default")
	if f.Start != 1 || f.End != 100_000 || f.Next != 1 || f.Ceiling != 1+ceilingSegments*100 {
		t.Fatalf("fresh namespace: %+v; want [1, 100000), next 1, ceiling %d in force", f, 1+ceilingSegments*100)
	}
	announced := f.Ceiling
	for i := range 30 {
		before := readCeiling(t, pool, "default")
		seg, err := s.Lease(ctx, idalloc.LeaseRequest{RequestID: uuid.NewString(), Namespace: "default", Instance: "a"})
		if err != nil {
			t.Fatalf("lease %d: %v (ceiling %+v)", i, err, before)
		}
		if int64(seg.End) > before.inForce && int64(seg.End) > readCeiling(t, pool, "default").prev {
			t.Fatalf("lease %d [%d, %d) ends above the ceiling in force %+v", i, seg.Start, seg.End, before)
		}
		if seg.End > announced {
			t.Fatalf("lease %d [%d, %d) ends above %d, announced before it", i, seg.Start, seg.End, announced)
		}
		f = frontierOf(t, s, "default")
		if f.Next != seg.End || f.Ceiling < seg.End+ceilingSegments*100/2 {
			t.Fatalf("after lease %d [%d, %d): frontier %+v; want next at its end and the ceiling half the headroom above", i, seg.Start, seg.End, f)
		}
		announced = f.Ceiling
		bringIntoForce(t, pool, "default") // leases come seconds apart, raises take effect meanwhile
	}
	// A fast namespace asks for more headroom.
	if _, err := s.Lease(ctx, idalloc.LeaseRequest{RequestID: uuid.NewString(), Namespace: "default", Instance: "a", Ahead: 5000}); err != nil {
		t.Fatal(err)
	}
	if f := frontierOf(t, s, "default"); f.Ceiling < f.Next+5000/2 {
		t.Fatalf("with Ahead 5000: %+v; want the ceiling at least 2500 above the counter", f)
	}
}

// TestLeaseWaitsForTheCeiling: a lease that finds no room under the ceiling
// in force raises it, commits the raise alone and says how long until it is
// in force; leases meanwhile wait, without raising again; once in force the
// lease succeeds. Room for part of a segment gives a shorter segment, no
// wait.
func TestLeaseWaitsForTheCeiling(t *testing.T) {
	ctx := context.Background()
	s, pool := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 100_000, Step: 100})
	// The ceiling in force 50 IDs above the counter, nothing pending.
	if _, err := pool.Exec(ctx, `UPDATE alloc_ceilings SET prev_ceiling = 51, ceiling = 51, ceiling_at = 'epoch'`); err != nil {
		t.Fatal(err)
	}
	lease := func() (idalloc.Segment, error) {
		return s.Lease(ctx, idalloc.LeaseRequest{RequestID: uuid.NewString(), Namespace: "default", Instance: "a"})
	}
	seg, err := lease()
	if err != nil || seg.Start != 1 || seg.End != 51 {
		t.Fatalf("lease with room for 50: [%d, %d), %v; want [1, 51)", seg.Start, seg.End, err)
	}
	c := readCeiling(t, pool, "default")
	if !c.pending || c.inForce != 51 || c.ceiling <= 51 {
		t.Fatalf("after the short lease: %+v; want a raise pending and 51 still in force", c)
	}
	_, err = lease()
	var wait *idalloc.CeilingWaitError
	if !errors.As(err, &wait) || wait.Wait <= 0 || wait.Wait > CeilingDelay || idalloc.Class(err) != "ceiling_wait" {
		t.Fatalf("lease with no room: %v; want a CeilingWaitError of at most %v", err, CeilingDelay)
	}
	if again := readCeiling(t, pool, "default"); again != c {
		t.Fatalf("a waiting lease changed the ceiling: %+v, was %+v", again, c)
	}
	if f := frontierOf(t, s, "default"); f.Next != 51 || f.Ceiling != uint64(c.ceiling) {
		t.Fatalf("frontier %+v; want next 51 and the announced %d", f, c.ceiling)
	}
	bringIntoForce(t, pool, "default")
	if seg, err := lease(); err != nil || seg.Start != 51 || seg.End != 151 {
		t.Fatalf("lease once in force: [%d, %d), %v; want [51, 151)", seg.Start, seg.End, err)
	}

	// No room at all and nothing pending: the lease raises, and its
	// transaction commits only the raise.
	if _, err := pool.Exec(ctx, `UPDATE alloc_ceilings SET prev_ceiling = 151, ceiling = 151, ceiling_at = 'epoch'`); err != nil {
		t.Fatal(err)
	}
	if _, err := lease(); !errors.As(err, &wait) {
		t.Fatalf("lease at the ceiling: %v; want a CeilingWaitError", err)
	}
	if c := readCeiling(t, pool, "default"); !c.pending || c.inForce != 151 || c.ceiling <= 151 {
		t.Fatalf("after the raise: %+v; want a raise above 151 pending", c)
	}
	var audited int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM alloc_audit`).Scan(&audited); err != nil || audited != 2 {
		t.Fatalf("%d audited intervals (%v); want the 2 leases only", audited, err)
	}
}

// TestAuditRefusesIntervalsAboveTheCeiling: whoever writes the audit, no
// usable interval is confirmed above the ceiling in force; waste recorded
// sealed passes.
func TestAuditRefusesIntervalsAboveTheCeiling(t *testing.T) {
	ctx := context.Background()
	_, pool := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 100_000, Step: 100})
	insert := func(start, end int64, sealed bool) error {
		_, err := pool.Exec(ctx, `
			INSERT INTO alloc_audit (request_id, namespace, seg_start, seg_end, instance, epoch, sealed_at, sealed_by, used_count)
			VALUES (gen_random_uuid(), 'default', $1, $2, 'old-control', 1,
			        CASE WHEN $3 THEN now() END, CASE WHEN $3 THEN 'x' END, CASE WHEN $3 THEN 0 END)`, start, end, sealed)
		return err
	}
	if err := insert(401, 501, false); pgCode(err) != "ELC01" {
		t.Fatalf("an open interval above the ceiling 401: %v; want SQLSTATE ELC01", err)
	}
	if err := insert(1, 401, false); err != nil {
		t.Fatalf("an open interval up to the ceiling: %v", err)
	}
	if err := insert(401, 9000, true); err != nil {
		t.Fatalf("sealed waste above the ceiling: %v", err)
	}
}

// TestFrontierReadIsOrderedAgainstRaises: the property the edge's promise
// rests on (docs/visibility.md). A raise the frontier read does not report
// must read its clock after that read: while a raise holds the ceiling's row
// uncommitted, the read waits and then reports it; while a read holds the
// row, a raise waits, and its ceiling comes into force CeilingDelay after
// the read ended.
func TestFrontierReadIsOrderedAgainstRaises(t *testing.T) {
	ctx := context.Background()
	s, pool := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 100_000, Step: 100})
	waitingOnLock := func(what string) {
		t.Helper()
		poll.Until(t, what+" waiting for the ceiling's row lock", 30*time.Second, func() bool {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
	}

	// A raise in flight: the read waits for it and reports it.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, _, _, err := raiseCeiling(ctx, tx, "default", 5000); err != nil {
		t.Fatal(err)
	}
	got := make(chan authority.Frontier, 1)
	go func() { // answers before the test ends: the cleanup rolls tx back
		fs, _, err := s.Frontiers(ctx)
		if err != nil || len(fs) != 1 {
			t.Errorf("frontiers: %+v, %v", fs, err)
			got <- authority.Frontier{}
			return
		}
		got <- fs[0]
	}()
	waitingOnLock("the frontier read")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if f := <-got; f.Ceiling != 5000 {
		t.Fatalf("a read that waited for a raise reports ceiling %d; want the raise's 5000", f.Ceiling)
	}

	// A read in flight: the raise waits, and its clock is read after the
	// read's transaction ended.
	reader, err := pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Rollback(ctx) })
	if _, err := reader.Exec(ctx, frontiersSQL); err != nil {
		t.Fatal(err)
	}
	raised := make(chan error, 1)
	go func() {
		raised <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, _, _, err := raiseCeiling(ctx, tx, "default", 9000)
			return err
		})
	}()
	waitingOnLock("the raise")
	var readEnded time.Time
	if err := reader.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&readEnded); err != nil {
		t.Fatal(err)
	}
	if err := reader.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	var at time.Time
	if err := pool.QueryRow(ctx, `SELECT ceiling_at FROM alloc_ceilings WHERE namespace = 'default'`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if at.Before(readEnded.Add(CeilingDelay)) {
		t.Fatalf("the raise comes into force at %v, %v after the read ended; want at least %v", at, at.Sub(readEnded), CeilingDelay)
	}
}
