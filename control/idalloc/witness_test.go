package idalloc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/idalloctest"
	"github.com/edgelink/edgelink/control/idalloc/kvwitness"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
)

// 9 (in small). The authority loses its last leases together with their
// audit rows, as an asynchronous replica promoted before they reached it
// would: the database's own fence cannot see it, the witness in NATS can. A
// freshly started instance, with no memory of its own, refuses to allocate;
// recovery raises the counter to the witness and allocation resumes above
// every confirmed interval. (gate/replication does this with a real
// promoted replica.)
func TestWitnessFencesAuthorityThatLostLeases(t *testing.T) {
	pool := pgtest.Pool(t)
	store := allocstore.New(pool)
	_, js := natstest.Start(t).Connect(t)
	witness := kvwitness.New(js, "", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := idalloc.Namespace{Name: "witnessed", Start: 1, End: 1_000_000, Step: 5}
	rec := newRecorder()
	cfg := fastConfig(t, rec, ns)
	cfg.Witness = witness
	a := idalloctest.Start(t, store, cfg)
	for range 12 {
		id, err := a.Next(ctx, ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		rec.id(id)
	}
	// The old primary's instance stops; its IDs had no Done (their creates
	// died with the primary), so its segments stay open.
	cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_ = a.Close(cctx)
	ccancel()
	segs := rec.segments()
	top := segs[len(segs)-1].End
	hw, err := witness.HighWater(ctx, ns.Name)
	if err != nil || hw != top {
		t.Fatalf("witness = %d, %v; want the last confirmed end %d", hw, err, top)
	}

	// The promoted replica missed everything from the second segment on.
	lost := segs[1].Start
	if _, err := pool.Exec(ctx, `DELETE FROM alloc_audit WHERE namespace = $1 AND seg_start >= $2`, ns.Name, int64(lost)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE alloc_namespaces SET next_id = $2 WHERE namespace = $1`, ns.Name, int64(lost)); err != nil {
		t.Fatal(err)
	}
	if rep, err := store.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("Verify = %+v, %v; the audit alone should look consistent", rep, err)
	}

	fresh := fastConfig(t, rec, ns)
	fresh.Witness = witness
	b := idalloctest.Start(t, store, fresh)
	refused := b.WaitLoaded(ctx)
	if !errors.Is(refused, idalloc.ErrFenced) {
		t.Fatalf("fresh instance on the lagging authority: WaitLoaded = %v, want ErrFenced", refused)
	}
	if id, err := b.Next(ctx, ns.Name); !errors.Is(err, idalloc.ErrFenced) {
		t.Fatalf("fresh instance: Next = %d, %v; want ErrFenced", id, err)
	}
	if ivs, _ := store.Intervals(ctx, ns.Name); len(ivs) != 1 {
		t.Errorf("the refused leases wrote audit rows: %v", ivs)
	}
	checks, err := store.CheckWitness(ctx, witness)
	if err != nil || len(checks) != 1 || !checks[0].Missing() || checks[0].Counter != lost || checks[0].Witness != top {
		t.Fatalf("CheckWitness = %v, %v; want counter %d below witness %d", checks, err, lost, top)
	}

	raised, err := store.RecoverFromWitness(ctx, witness, "test")
	if err != nil || len(raised) != 1 || raised[0].From != lost || raised[0].To != top {
		t.Fatalf("RecoverFromWitness = %+v, %v; want [%d, %d) skipped", raised, err, lost, top)
	}
	var after []uint64
	poll.Until(t, "allocation resumes after recovery", 20*time.Second, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		id, err := b.Next(cctx, ns.Name)
		if err == nil {
			after = append(after, id)
		}
		return err == nil
	})
	for range 20 {
		id, err := b.Next(ctx, ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, id)
	}
	for _, id := range after {
		rec.id(id)
		if id < top {
			t.Errorf("ID %d handed out after recovery is below the witness %d", id, top)
		}
	}
	rec.check(t, ns.Start, ns.End)
	evidence.Record(t, evidence.NoRollback,
		"authority lost leases [%d, %d) with their audit (Verify saw nothing): a fresh instance was refused (%v); "+
			"recovery raised the counter %d→%d; %d IDs after it all ≥ %d; %d IDs in all, 0 duplicates",
		lost, top, refused, lost, top, len(after), top, len(rec.ids))
}

// With NATS down, a required witness lets the allocator run on the segments
// it holds and then refuse (retryable) within that bound; a best-effort one
// keeps leasing and counts what it skipped.
func TestWitnessUnreachable(t *testing.T) {
	for _, bestEffort := range []bool{false, true} {
		name := "required"
		if bestEffort {
			name = "best-effort"
		}
		t.Run(name, func(t *testing.T) {
			store := allocstore.New(pgtest.Pool(t))
			nats := natstest.Start(t)
			_, js := nats.Connect(t)
			ns := idalloc.Namespace{Name: "nonats", Start: 1, End: 1_000_000, Step: 10}
			rec := newRecorder()
			cfg := fastConfig(t, rec, ns)
			cfg.Witness, cfg.WitnessBestEffort = kvwitness.New(js, "", 1), bestEffort
			// Each lease with NATS down spends up to two thirds of this on
			// the witness and must still reach the store in the rest,
			// however busy the machine.
			cfg.LoadTimeout = 5 * time.Second
			a := idalloctest.Start(t, store, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := a.WaitLoaded(ctx); err != nil {
				t.Fatal(err)
			}
			for range 6 { // past half the first segment: the standby loads
				id, err := a.Next(ctx, ns.Name)
				if err != nil {
					t.Fatal(err)
				}
				rec.id(id)
				a.Done(id, true)
			}
			poll.Until(t, "the standby is leased", 10*time.Second, func() bool {
				s, _ := a.Stats(ns.Name)
				return s.StandbyRemaining > 0
			})
			s, _ := a.Stats(ns.Name)
			runway := s.CurrentRemaining + s.StandbyRemaining
			nats.Stop()
			taken := uint64(0)
			// A required witness refuses at this bound; a best-effort one
			// must lease within it, a lease taking up to LoadTimeout.
			nextWithin := 3 * time.Second
			if bestEffort {
				nextWithin = 30 * time.Second
			}
			for {
				cctx, cancel := context.WithTimeout(ctx, nextWithin)
				id, err := a.Next(cctx, ns.Name)
				cancel()
				if err != nil {
					if bestEffort || !idalloc.Retryable(err) {
						t.Fatalf("Next after %d IDs with NATS down: %v", taken, err)
					}
					break
				}
				rec.id(id)
				a.Done(id, true)
				taken++
				if bestEffort && taken == 3*runway {
					break
				}
			}
			rec.check(t, ns.Start, ns.End)
			s, _ = a.Stats(ns.Name)
			if !bestEffort {
				if taken != runway {
					t.Errorf("handed out %d IDs with the witness unreachable, want exactly the %d leased before", taken, runway)
				}
				evidence.Record(t, evidence.ReserveThenReject,
					"witness (NATS) unreachable: %d IDs handed out from the %d already leased, then retryable refusal (%s)", taken, runway, s.LastFailure)
				return
			}
			if s.WitnessSkipped == 0 {
				t.Errorf("best effort leased past the runway without counting skipped witness calls: %+v", s)
			}
		})
	}
}
