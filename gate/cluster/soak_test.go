package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// Soak settings, from the environment.
const (
	envSoak       = "EDGELINK_SOAK"             // total duration (default 10m)
	envFaultEvery = "EDGELINK_SOAK_FAULT_EVERY" // one fault this often (default 1m)
	envFaults     = "EDGELINK_SOAK_FAULTS"      // the cycle, comma-separated (default all, in this order)
	envRate       = "EDGELINK_SOAK_RATE"        // creates per second per worker, 4 workers (default 10)
)

var allFaults = []string{"nats", "postgres", "control", "edge", "slow"}

// TestSoak runs mixed create and redirect load for EDGELINK_SOAK with a fault
// every EDGELINK_SOAK_FAULT_EVERY, cycling through: restart of the NATS node
// leading LINK_CHANGES, PostgreSQL killed (SIGKILL) and restarted, a control
// instance SIGKILLed and replaced by a new one, an edge restarted, and the
// authority (control's PostgreSQL) made slow for a while. At the end every
// 201 link redirects on every edge, the allocation audit verifies clean,
// no ID was handed out twice, the boundary never went back, and no answer
// was ever wrong.
func TestSoak(t *testing.T) {
	if os.Getenv("EDGELINK_GATE") == "" {
		t.Skip("minutes long: runs with EDGELINK_GATE=1, as `go tool task gate` does (EDGELINK_SOAK sets its duration)")
	}
	dur := envDuration(t, envSoak, 10*time.Minute)
	every := envDuration(t, envFaultEvery, time.Minute)
	faults := allFaults
	if s := os.Getenv(envFaults); s != "" {
		faults = strings.Split(s, ",")
		for _, f := range faults {
			if !slices.Contains(allFaults, f) {
				t.Fatalf("%s: unknown fault %q; known: %s", envFaults, f, strings.Join(allFaults, ","))
			}
		}
	}
	rate := 10.0
	if s := os.Getenv(envRate); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r <= 0 {
			t.Fatalf("%s=%q: want a positive number", envRate, s)
		}
		rate = r
	}
	slowFor := min(every/2, 15*time.Second)

	// A PostgreSQL of its own, since the soak kills it. fsync is off (a
	// killed server loses nothing the kernel holds) but synchronous_commit
	// stays on, so a COMMIT acknowledged before a 201 survives the kill.
	pg := stack.NewPostgres(t, stack.PostgresConfig{Durable: true, Settings: []string{"fsync=off", "full_page_writes=off"}})
	keys := pg.Keys(t, "gate", 4)
	// The test's own connections go to PostgreSQL directly, never through
	// the proxy; the harness resets its pool after a kill and restart.
	pool := pg.Pool()
	ctx := context.Background()
	// Controls reach PostgreSQL through the proxy that makes it slow.
	proxy := stack.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", pg.Server.Port()))
	proxyDSN := proxy.DSN("edgelink")

	nc := stack.NewNATS(t, stack.NATSConfig{Nodes: 3})
	_, js := nc.Client(t)

	var cmu sync.Mutex
	nextControl := 1
	spec := func() childSpec {
		n := nextControl
		nextControl++
		return childSpec{Instance: fmt.Sprintf("control-%d", n), DatabaseURL: proxyDSN, NATSURL: nc.NodeURL(n % 2),
			StreamReplicas: 3, IDStep: 2000, AbandonAfter: 30 * time.Second}
	}
	controls := []*childControl{startChildControl(t, spec()), startChildControl(t, spec())}
	controlURLs := func() []string {
		cmu.Lock()
		defer cmu.Unlock()
		var us []string
		for _, c := range controls {
			us = append(us, c.url)
		}
		return us
	}
	var edges []*edge
	for i := range 2 {
		edges = append(edges, startEdge(t, fmt.Sprintf("edge-%d", i+1), edgeserver.Config{
			NATSURL: nc.NodeURL(i + 1), SnapshotDir: t.TempDir(), SnapshotPoll: 5 * time.Second,
			SnapshotBootWait: time.Second,
		}))
	}
	edgeURLs := func() []string { return []string{edges[0].URL, edges[1].URL} }

	// The boundary (the counter's next_id) and the newest change version,
	// sampled around every fault: neither may ever go back.
	type bound struct {
		label           string
		nextID, version int64
	}
	var bounds []bound
	sampleBounds := func(label string) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var b bound
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := pool.QueryRow(qctx, `SELECT (SELECT next_id FROM alloc_namespaces WHERE namespace = 'default'),
				(SELECT coalesce(max(version), 0) FROM outbox)`).Scan(&b.nextID, &b.version)
			cancel()
			if err == nil {
				b.label = label
				if n := len(bounds); n > 0 && (b.nextID < bounds[n-1].nextID || b.version < bounds[n-1].version) {
					t.Errorf("rolled back %s: next_id %d -> %d, newest version %d -> %d",
						label, bounds[n-1].nextID, b.nextID, bounds[n-1].version, b.version)
				}
				bounds = append(bounds, b)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sample the boundary %s: %v", label, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	ld := newLoad(keys, controlURLs, edgeURLs)
	loadCtx, stopLoad := context.WithTimeout(ctx, dur)
	wait := ld.run(loadCtx, rate, 2, 60)
	defer func() { stopLoad(); wait() }()
	waitLinks(t, ld, 20, "at the start")
	sampleBounds("at the start")

	injected := map[string]int{}
	var timeline []string
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-loadCtx.Done():
		case <-tick.C:
		}
		if loadCtx.Err() != nil {
			break
		}
		f := faults[i%len(faults)]
		t0 := time.Now()
		sampleBounds("before " + f)
		var what string
		switch f {
		case "nats":
			leader := streamInfo(t, js, linkevent.Stream).Cluster.Leader
			idx := nc.Index(leader)
			nc.StopNode(idx)
			newLeader := ""
			if err := stack.Poll(ctx, "a new leader", 2*time.Minute, func() bool {
				newLeader = streamInfo(t, js, linkevent.Stream).Cluster.Leader
				return newLeader != leader
			}); err != nil {
				t.Fatalf("no new LINK_CHANGES leader 2m after %s stopped", leader)
			}
			// Down a while longer: clients on it fail over, the stream
			// runs on two replicas.
			select {
			case <-time.After(min(every/4, 10*time.Second)):
			case <-loadCtx.Done():
			}
			startNode(t, nc, idx)
			what = fmt.Sprintf("NATS %s (LINK_CHANGES leader) stopped, %s took over, %s restarted", leader, newLeader, leader)
		case "postgres":
			if err := pg.Kill(); err != nil {
				t.Fatalf("kill PostgreSQL: %v", err)
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := pg.Restart(rctx)
			cancel()
			if err != nil {
				t.Fatalf("restart PostgreSQL: %v", err)
			}
			what = "PostgreSQL SIGKILLed and restarted (crash recovery)"
		case "control":
			cmu.Lock()
			k := 0 // the oldest: the replacement goes to the end
			victim := controls[k]
			// Out of the load's list first, so new creates go to the
			// survivor; those in flight on the victim are cut.
			controls = append(controls[:k:k], controls[k+1:]...)
			s := spec()
			cmu.Unlock()
			victim.Kill()
			fresh := startChildControl(t, s)
			cmu.Lock()
			controls = append(controls, fresh)
			cmu.Unlock()
			what = fmt.Sprintf("%s SIGKILLed (process group), %s started", victim.name, fresh.name)
		case "edge":
			e := edges[injected[f]%len(edges)]
			e.restart(t)
			what = fmt.Sprintf("%s restarted (boots from its snapshot copy, replays the stream)", e.name)
		case "slow":
			proxy.SetDelay(100 * time.Millisecond)
			select {
			case <-time.After(slowFor):
			case <-loadCtx.Done():
			}
			proxy.SetDelay(0)
			what = fmt.Sprintf("control's PostgreSQL delayed 100ms per packet each way for %s", slowFor)
		}
		injected[f]++
		sampleBounds("after " + f)
		line := fmt.Sprintf("%s +%s %s (took %s)", f, t0.Sub(start).Round(time.Second), what, time.Since(t0).Round(100*time.Millisecond))
		timeline = append(timeline, line)
		t.Log("fault: " + line)
	}
	stopLoad()
	wait()
	sampleBounds("at the end")

	newest := waitEdgesApplied(t, pool, edges)
	gaps := checkNoGaps(t, edges)
	links, fails := ld.snapshot()
	checked := ld.verifyEverywhere(t, links, edgeURLs())
	audit, rep := verifyAudit(t, pool)
	ids := checkIDs(links, audit)
	if !ids.ok() {
		t.Errorf("IDs: %s", ids)
	}
	if len(bounds) < 2 {
		t.Fatalf("only %d boundary samples", len(bounds))
	}
	first, last := bounds[0], bounds[len(bounds)-1]
	summary := fmt.Sprintf("soak %s, a fault every %s: %v injected; %s; final check: %d link×edge answers 302 on %d edges",
		dur, every, injected, ld.summary(), checked, len(edges))
	t.Log(summary)
	for _, l := range timeline {
		t.Log("  " + l)
	}
	t.Logf("create failures by kind, one of each: %v", sample(fails, 10))
	fmt.Fprintln(os.Stderr, "SOAK SUMMARY:", summary)

	evidence.Record(t, evidence.UniqueIDs, "soak %s with %v faults: %s", dur, injected, ids)
	evidence.Record(t, evidence.DisjointIntervals, "alloc verify after the soak (controls SIGKILLed %d times, PostgreSQL killed %d times): %d audited intervals, %d violations",
		injected["control"], injected["postgres"], rep.Intervals, len(rep.Violations))
	evidence.Record(t, evidence.Jumpable, "soak: %d creates answered 201 (%d failed: %v); each followed right after its 201 (%d at once, %d after retrying 503/no connection, %d still unavailable after 20s); "+
		"at the end all %d link×edge answers were 302 to the target; %d redirects checked under load, %d wrong answers",
		len(links), len(fails), failureCounts(fails), ld.jumpsAtOnce.Load(), ld.jumpsRetried.Load(), ld.jumpsGaveUp.Load(),
		checked, ld.redirects.Load(), ld.wrongN.Load())
	evidence.Record(t, evidence.NoRollback, "%d samples of the counter and the change version around %v faults (PostgreSQL kill/restart, control SIGKILL, NATS leader restart): next_id %d -> %d and version %d -> %d, never lower than the sample before",
		len(bounds), injected, first.nextID, last.nextID, first.version, last.version)
	evidence.Record(t, evidence.ContractUnderLag, "soak with the authority slowed %d times (100ms per packet for %s) and NATS/edge restarts: edges applied up to change version %d with %s; %d wrong answers",
		injected["slow"], slowFor, newest, gaps, ld.wrongN.Load())
}

func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration like 2m", name, s)
	}
	return d
}
