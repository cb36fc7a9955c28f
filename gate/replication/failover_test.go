package replication

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/kvwitness"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
)

// Fault matrix row 9, database failover: promote a lagging replica and
// isolate the old primary → unsafe allocation is refused, not just "the
// service is up".
//
// The replica is cut off (as a partition would) after it has the schema and
// the first links; the primary then confirms more segments, which only the
// witness in NATS and control's memory know of. The old primary is stopped,
// the replica promoted, and "the primary" (a proxy, as a virtual IP) moved
// to it. The promoted database's own audit is consistent, so its own fence
// sees nothing; the witness must: a fresh control refuses to start, the old
// one serves only from the segments it had been confirmed and then answers
// 503. No ID is handed out twice. The operator's recovery (fence-recover:
// raise the counter to the witness) resumes allocation above every
// confirmed interval.
func TestFailoverToLaggingReplicaRefusesUnsafeAllocation(t *testing.T) {
	ctx, c := begin(t, 8*time.Minute)
	_, js := c.nats.Client(t)
	witness := kvwitness.New(js, kvwitness.Bucket, 1)
	vip := stack.NewProxy(t, "127.0.0.1:"+strconv.Itoa(c.primary.Server.Port()))
	const step = 10
	cfg := controlserver.Config{DatabaseURL: vip.DSN("edgelink"), NATSURL: c.nats.URL(), PublicURL: "http://127.0.0.1:1",
		IDStep: step, Instance: "control-a"}
	a := startControl(t, cfg)
	ids := stack.NewLedger()
	createN := func(url, who string, n int) []uint64 {
		t.Helper()
		var got []uint64
		for i := range n {
			status, id, code := create(t, url, c.apiKey, fmt.Sprintf("https://example.com/%s/%d", strings.ReplaceAll(who, " ", "-"), i))
			if status != http.StatusCreated {
				t.Fatalf("%s create %d: %d %s", who, i, status, code)
			}
			ids.Add(code, "", who)
			got = append(got, id)
		}
		return got
	}

	// Replicated: the schema, the tenant and the first links.
	createN(a.URL, "a before the partition", 25)
	if err := c.replica.Server.WaitReplayed(ctx, c.primary.Server); err != nil {
		t.Fatal(err)
	}
	if err := c.replica.Server.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	// Confirmed on the primary only.
	createN(a.URL, "a after the partition", 30)
	primary := c.primary.Pool()
	oldAudit, err := allocstore.New(primary).Intervals(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	oldCounter := counter(t, ctx, primary)
	hw, err := witness.HighWater(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if hw != oldCounter {
		t.Fatalf("witness %d, old primary's counter %d: every confirmed lease should be witnessed", hw, oldCounter)
	}

	// Failover: isolate the old primary, promote the replica, move the VIP.
	if err := c.primary.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	vip.Retarget("127.0.0.1:" + strconv.Itoa(c.replica.Server.Port()))
	promoted := c.replica.Pool()
	pstore := allocstore.New(promoted)
	promotedCounter := counter(t, ctx, promoted)
	if promotedCounter >= hw {
		t.Fatalf("promoted counter %d is not behind the witness %d: the replica did not lag", promotedCounter, hw)
	}
	rep, err := pstore.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blind := rep.OK() // its audit lost the leases together with the counter
	checks, err := pstore.CheckWitness(ctx, witness)
	if err != nil || len(checks) != 1 || !checks[0].Missing() {
		t.Fatalf("CheckWitness on the promoted replica = %v, %v; want default below the witness", checks, err)
	}
	explained := checks[0].String()
	auditAtPromotion, err := pstore.Intervals(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}

	// A fresh control, with no memory, on the promoted database.
	freshCfg := cfg
	freshCfg.DatabaseURL, freshCfg.Instance, freshCfg.Log = c.replica.DSN, "control-b", testLog(t)
	bctx, bcancel := context.WithTimeout(ctx, 2*time.Minute)
	freshErr := controlserver.Run(bctx, freshCfg)
	bcancel()
	if !errors.Is(freshErr, idalloc.ErrFenced) {
		t.Fatalf("fresh control on the promoted replica: %v; want it refused with ErrFenced", freshErr)
	}

	// The old control: whatever it still holds was confirmed and witnessed;
	// then it must refuse.
	var afterFailover []uint64
	var refusals int
	deadline := time.Now().Add(2 * time.Minute)
	for refusals < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("old control still creating after 2 minutes on the promoted replica (%d IDs since the failover)", len(afterFailover))
		}
		status, id, body := create(t, a.URL, c.apiKey, "https://example.com/after-failover")
		switch status {
		case http.StatusCreated:
			ids.Add(body, "", "a after the failover")
			afterFailover = append(afterFailover, id)
			refusals = 0
		case http.StatusServiceUnavailable:
			refusals++
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("old control after the failover: %d %s", status, body)
		}
	}
	for _, id := range afterFailover {
		if !inAny(id, oldAudit) {
			t.Errorf("ID %d handed out after the failover is in no interval the old primary confirmed", id)
		}
	}
	auditWhileFenced, err := pstore.Intervals(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(auditWhileFenced) != len(auditAtPromotion) {
		t.Errorf("the promoted database leased %d segments while fenced: %v", len(auditWhileFenced)-len(auditAtPromotion), auditWhileFenced)
	}
	if dups := ids.Dups(); len(dups) > 0 {
		t.Fatalf("IDs handed out twice: %v", dups)
	}

	// The operator's recovery.
	raised, err := pstore.RecoverFromWitness(ctx, witness, "gate-operator")
	if err != nil || len(raised) != 1 || raised[0].From != promotedCounter || raised[0].To != hw {
		t.Fatalf("fence-recover = %+v, %v; want default raised %d → %d", raised, err, promotedCounter, hw)
	}
	var resumed []uint64
	deadline = time.Now().Add(2 * time.Minute)
	for len(resumed) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("old control did not resume within 2 minutes of the recovery")
		}
		status, id, body := create(t, a.URL, c.apiKey, "https://example.com/recovered")
		switch status {
		case http.StatusCreated:
			ids.Add(body, "", "a after recovery")
			resumed = append(resumed, id)
		case http.StatusServiceUnavailable:
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("old control after recovery: %d %s", status, body)
		}
	}
	resumed = append(resumed, createN(a.URL, "a after recovery", 20)...)
	b := startControl(t, freshCfg)
	resumed = append(resumed, createN(b.URL, "b after recovery", 20)...)
	for _, id := range resumed {
		if id < hw {
			t.Errorf("ID %d handed out after recovery is below the witness %d", id, hw)
		}
	}
	if dups := ids.Dups(); len(dups) > 0 {
		t.Fatalf("IDs handed out twice: %v", dups)
	}
	rep, err = pstore.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Errorf("Verify on the promoted primary after recovery = %+v, %v", rep, err)
	}
	checks, err = pstore.CheckWitness(ctx, witness)
	if err != nil || checks[0].Missing() {
		t.Errorf("CheckWitness after recovery = %v, %v", checks, err)
	}

	// Every interval ever confirmed, by either primary, pairwise disjoint.
	finalAudit, err := pstore.Intervals(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	// The recovery's record of the skipped IDs is not a lease: it must
	// cover exactly what the promoted database lost.
	union := map[string]allocstore.Interval{}
	var skipped []allocstore.Interval
	for _, iv := range append(append([]allocstore.Interval{}, oldAudit...), finalAudit...) {
		if strings.HasPrefix(iv.Instance, allocstore.RaiseFloorInstance) {
			skipped = append(skipped, iv)
			continue
		}
		union[iv.RequestID] = iv
	}
	lostLeases := 0
	for _, iv := range oldAudit {
		if inAny(iv.Start, auditAtPromotion) {
			continue
		}
		lostLeases++
		if !inAny(iv.Start, skipped) || !inAny(iv.End-1, skipped) {
			t.Errorf("lease %v lost in the failover is not covered by the recovery's skipped interval %v", iv, skipped)
		}
	}
	if lostLeases == 0 {
		t.Error("the promoted database lost no lease: the replica did not lag")
	}
	all := make([]allocstore.Interval, 0, len(union))
	for _, iv := range union {
		all = append(all, iv)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	overlaps := 0
	for i := 1; i < len(all); i++ {
		if all[i].Start < all[i-1].End {
			overlaps++
			t.Errorf("confirmed intervals overlap: %v and %v", all[i-1], all[i])
		}
	}
	// Check the fences' own figures before recording them.
	evidence.Record(t, evidence.NoRollback,
		"promoted lagging replica: counter %d, witness %d (old primary %d); its own Verify saw nothing wrong: %v; CheckWitness: %s; "+
			"fresh control refused to start: %v; old control handed out %d IDs from segments the old primary had confirmed, then 20×503; "+
			"0 segments leased on the promoted database while fenced; fence-recover raised %d→%d; %d IDs after recovery all ≥ %d; "+
			"%d IDs handed out in all, 0 duplicates",
		promotedCounter, hw, oldCounter, blind, explained, freshErr, len(afterFailover), promotedCounter, hw, len(resumed), hw,
		ids.Len())
	evidence.Record(t, evidence.DisjointIntervals,
		"failover: %d leases confirmed by the old primary (%d of them lost by the promoted replica, all inside the recovery's skipped [%d, %d)) "+
			"and %d leases on the promoted one after recovery: %d distinct leases, %d overlaps",
		len(oldAudit), lostLeases, promotedCounter, hw, len(finalAudit)-len(auditAtPromotion)-len(skipped), len(all), overlaps)
	evidence.Record(t, evidence.UniqueIDs,
		"failover: %d IDs handed out by control before, during and after the failover (%d before, %d from confirmed runway after, %d after recovery): 0 duplicates",
		ids.Len(), ids.Len()-len(afterFailover)-len(resumed), len(afterFailover), len(resumed))
}

func inAny(id uint64, ivs []allocstore.Interval) bool {
	for _, iv := range ivs {
		if id >= iv.Start && id < iv.End {
			return true
		}
	}
	return false
}
