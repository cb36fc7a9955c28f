package allocstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

// storeWith is a store on a fresh database that holds namespace ns, and
// the database's pool.
func storeWith(t *testing.T, ns idalloc.Namespace) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	s := New(pool)
	if err := s.EnsureNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// allocLease leases a segment, waiting (as the loader does) while the
// frontier's ceiling is being raised, as after a raise-floor or a widen.
func allocLease(t *testing.T, s *Store, ns, instance string) idalloc.Segment {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		seg, err := s.Lease(context.Background(), idalloc.LeaseRequest{RequestID: uuid.NewString(), Namespace: ns, Instance: instance})
		var wait *idalloc.CeilingWaitError
		if errors.As(err, &wait) && time.Now().Before(deadline) {
			time.Sleep(wait.Wait) // the raise comes into force then
			continue
		}
		if err != nil {
			t.Fatalf("lease: %v", err)
		}
		return seg
	}
}

// TestRaiseFloor: the counter moves only forward, in one transaction with
// an audited, sealed, unused interval; the next lease starts at the new
// floor; the audit still verifies; refusals change nothing.
func TestRaiseFloor(t *testing.T) {
	ctx := context.Background()
	s, pool := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 1_000_000, Step: 100})
	first := allocLease(t, s, "default", "a") // [1, 101)

	refusals := []struct {
		to   uint64
		want error
	}{
		{50, ErrFloorBackwards},           // inside a leased segment
		{101, ErrFloorBackwards},          // equal to the counter
		{1_000_001, idalloc.ErrExhausted}, // past the end
		{0, ErrFloorBackwards},            // zero
	}
	for _, r := range refusals {
		if _, err := s.RaiseFloor(ctx, "default", r.to, "test"); !errors.Is(err, r.want) {
			t.Errorf("raise to %d: %v; want %v", r.to, err, r.want)
		}
	}
	if _, err := s.RaiseFloor(ctx, "nope", 10, "test"); !errors.Is(err, idalloc.ErrUnknownNamespace) {
		t.Errorf("unknown namespace: %v", err)
	}
	var next int64
	if err := pool.QueryRow(ctx, `SELECT next_id FROM alloc_namespaces WHERE namespace = 'default'`).Scan(&next); err != nil || next != int64(first.End) {
		t.Fatalf("after refusals next_id = %d (%v); want %d unchanged", next, err, first.End)
	}

	res, err := s.RaiseFloor(ctx, "default", 500_000, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.From != first.End || res.SkipFrom != first.End || res.To != 500_000 || res.RequestID == "" {
		t.Fatalf("raise answered %+v; want from %d to 500000", res, first.End)
	}
	seg := allocLease(t, s, "default", "a")
	if seg.Start != 500_000 || seg.End != 500_100 {
		t.Fatalf("lease after raise = [%d, %d); want [500000, 500100)", seg.Start, seg.End)
	}
	ivs, err := s.Intervals(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(ivs) != 3 {
		t.Fatalf("audit %v; want 3 intervals", ivs)
	}
	skip := ivs[1]
	if skip.Start != first.End || skip.End != 500_000 || !skip.Sealed || skip.Used != 0 || skip.Instance != RaiseFloorInstance+"alice" {
		t.Errorf("audited skip %+v; want [%d, 500000) sealed, unused, by %salice", skip, first.End, RaiseFloorInstance)
	}
	rep, err := s.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("verify after raise: %+v %v", rep, err)
	}
	var events []string
	rows, err := pool.Query(ctx, `SELECT seg_state FROM outbox WHERE kind = 'segment' AND seg_start = $1 ORDER BY version`, int64(first.End))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		events = append(events, s)
	}
	if len(events) != 2 || events[0] != "opened" || events[1] != "sealed" {
		t.Errorf("events of the skipped interval: %v; want [opened sealed]", events)
	}
	// The skipped IDs are waste, accounted.
	c, err := s.Capacity(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if c.Wasted != 500_000-first.End || c.Allocated != c.Committed+c.Wasted+c.Reserved {
		t.Errorf("capacity %+v; want %d wasted and allocated = committed + wasted + reserved", c, 500_000-first.End)
	}
}

// TestRaiseFloorHealsCounterBelowAudit: a counter behind its own audit
// (as on a promoted replica) is raised only past every audited end, and
// only the IDs above the audit are recorded as skipped.
func TestRaiseFloorHealsCounterBelowAudit(t *testing.T) {
	ctx := context.Background()
	s, pool := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 1_000_000, Step: 100})
	allocLease(t, s, "default", "a")
	allocLease(t, s, "default", "a") // audit up to 201
	if _, err := pool.Exec(ctx, `UPDATE alloc_namespaces SET next_id = 101`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RaiseFloor(ctx, "default", 150, "op"); !errors.Is(err, idalloc.ErrFenced) {
		t.Fatalf("raise below the audited end: %v; want fenced", err)
	}
	res, err := s.RaiseFloor(ctx, "default", 1000, "op")
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 101 || res.SkipFrom != 201 || res.To != 1000 {
		t.Fatalf("raise answered %+v; want from 101, skipped [201, 1000)", res)
	}
	if rep, err := s.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify after healing: %+v %v", rep, err)
	}
	if seg := allocLease(t, s, "default", "a"); seg.Start != 1000 {
		t.Fatalf("lease after healing starts at %d; want 1000", seg.Start)
	}
}

// TestRaiseFloorRacesLeases: raises and leases interleave on the counter
// row; every confirmed interval, raised or leased, is disjoint from the
// others, and every raise that succeeded moved the counter forward.
func TestRaiseFloorRacesLeases(t *testing.T) {
	ctx := context.Background()
	s, _ := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 10_000_000, Step: 10})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var raised []RaiseFloorResult
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if w%2 == 0 {
					_, _ = s.Lease(ctx, idalloc.LeaseRequest{RequestID: uuid.NewString(), Namespace: "default", Instance: "racer"})
					continue
				}
				r, err := s.RaiseFloor(ctx, "default", uint64(1000*(i+1)+w), "racer")
				if err == nil {
					mu.Lock()
					raised = append(raised, r)
					mu.Unlock()
				} else if !errors.Is(err, ErrFloorBackwards) && !errors.Is(err, idalloc.ErrLockTimeout) {
					t.Errorf("raise: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range raised {
		if r.To <= r.From {
			t.Errorf("raise moved %d -> %d", r.From, r.To)
		}
	}
	if len(raised) == 0 {
		t.Error("no raise succeeded")
	}
	rep, err := s.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestAllocStatus: runway, the lease rate from recent leases (not raised
// floors), no create rate or time left without creates (leases are not
// creates), and open segments per instance.
func TestAllocStatus(t *testing.T) {
	ctx := context.Background()
	s, _ := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 1_000_001, Step: 1000})
	if err := s.EnsureNamespace(ctx, idalloc.Namespace{Name: "legacy", Start: 2_000_000, End: 3_000_000, Step: 10}); err != nil {
		t.Fatal(err)
	}
	a1 := allocLease(t, s, "default", "ctl-1")
	allocLease(t, s, "default", "ctl-1")
	allocLease(t, s, "default", "ctl-2")
	if err := s.Seal(ctx, idalloc.SealRequest{RequestID: a1.RequestID, Instance: "ctl-1", Used: 600}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RaiseFloor(ctx, "legacy", 2_500_000, "op"); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Namespaces) != 2 {
		t.Fatalf("status namespaces %+v", st.Namespaces)
	}
	d, l := st.Namespaces[0], st.Namespaces[1]
	if d.Namespace != "default" || d.Next != 3001 || d.Remaining != 1_000_001-3001 || d.LeasedLastHour != 3000 ||
		d.Committed != 600 || d.Wasted != 400 || d.Reserved != 2000 || d.LeaseRate != 3000.0/3600 || d.Rate != 0 || d.TimeLeft != 0 {
		t.Errorf("default: %+v", d)
	}
	if l.Namespace != "legacy" || l.Next != 2_500_000 || l.LeasedLastHour != 0 || l.LeaseRate != 0 || l.Rate != 0 || l.TimeLeft != 0 || l.Wasted != 500_000 {
		t.Errorf("legacy (raised, never leased): %+v", l)
	}
	if len(st.Open) != 2 || st.Open[0].Instance != "ctl-1" || st.Open[0].Segments != 1 || st.Open[0].IDs != 1000 ||
		st.Open[1].Instance != "ctl-2" || st.Open[1].Segments != 1 || st.Open[0].Heartbeat.IsZero() {
		t.Errorf("open segments %+v", st.Open)
	}
}

// TestWiden: the end only grows, never into another namespace, never past
// 62^6; a namespace exhausted at its old end leases again after widening.
func TestWiden(t *testing.T) {
	ctx := context.Background()
	s, _ := storeWith(t, idalloc.Namespace{Name: "default", Start: 1, End: 201, Step: 100})
	if err := s.EnsureNamespace(ctx, idalloc.Namespace{Name: "other", Start: 1000, End: 2000, Step: 100}); err != nil {
		t.Fatal(err)
	}
	allocLease(t, s, "default", "a")
	allocLease(t, s, "default", "a")
	if _, err := s.Lease(ctx, idalloc.LeaseRequest{RequestID: uuid.NewString(), Namespace: "default", Instance: "a"}); !errors.Is(err, idalloc.ErrExhausted) {
		t.Fatalf("lease past the end: %v; want exhausted", err)
	}
	for _, tc := range []struct {
		to   uint64
		want error
	}{{201, ErrNarrowing}, {100, ErrNarrowing}, {1500, idalloc.ErrConfig}, {56800235585, idalloc.ErrConfig}} {
		if _, err := s.Widen(ctx, "default", tc.to); !errors.Is(err, tc.want) {
			t.Errorf("widen to %d: %v; want %v", tc.to, err, tc.want)
		}
	}
	old, err := s.Widen(ctx, "default", 1000)
	if err != nil || old != 201 {
		t.Fatalf("widen to 1000: old %d, %v", old, err)
	}
	if seg := allocLease(t, s, "default", "a"); seg.Start != 201 || seg.End != 301 {
		t.Fatalf("lease after widening [%d, %d); want [201, 301)", seg.Start, seg.End)
	}
	if rep, err := s.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestWidenStaysInItsDomain: a domain's namespace widens within the
// domain's IDs, never past them into the next domain's.
func TestWidenStaysInItsDomain(t *testing.T) {
	ctx := context.Background()
	start, end := link.IDRange(2)
	s, _ := storeWith(t, idalloc.Namespace{Name: "d2", Start: start, End: start + 100, Step: 100})
	if old, err := s.Widen(ctx, "d2", start+1000); err != nil || old != start+100 {
		t.Fatalf("widen d2 within domain 2: old %d, %v", old, err)
	}
	if _, err := s.Widen(ctx, "d2", end); err != nil {
		t.Fatalf("widen d2 to domain 2's end %d: %v", end, err)
	}
	if _, err := s.Widen(ctx, "d2", end+1); !errors.Is(err, idalloc.ErrConfig) {
		t.Errorf("widen d2 past domain 2's IDs: %v; want ErrConfig", err)
	}
}
