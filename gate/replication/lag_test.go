package replication

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/responder"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/shared/authority"
)

// Fault matrix row 7, replica lag: jump immediately after commit → every
// 201 redirects, no erroneous 404. Edges' lookups are served by a replica
// whose replay is paused (it lags for as long as the test likes), and the
// edge's change feed is paused too, so every follow is a miss the authority
// answers. Every link must redirect at once; the answers the primary gave
// after a replica miss are counted, and must be many, or the replica did
// not really lag and the test proved nothing.
func TestReplicaLagEveryCreateJumpable(t *testing.T) {
	ctx, c := begin(t, 5*time.Minute)
	edgeURL, e := startEdge(t, c.nats.URL())
	lookups := make(chan *responder.ReplicaFirst, 1)
	// A generous replica timeout: on a busy machine a replica answer can
	// take longer than the default 200 ms, and the caught-up replica must
	// answer every one of its lookups itself.
	ctl := startControl(t, controlserver.Config{DatabaseURL: c.primary.DSN, ReplicaURL: c.replica.DSN,
		ReplicaTimeout: 10 * time.Second, NATSURL: c.nats.URL(), PublicURL: edgeURL, IDStep: 50,
		OnReplicaLookups: func(rf *responder.ReplicaFirst) { lookups <- rf }})
	rf := <-lookups

	if err := c.replica.Server.WaitReplayed(ctx, c.primary.Server); err != nil {
		t.Fatal(err)
	}
	if err := c.replica.Server.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	e.Feed.Pause()

	const n = 200
	var found, notFound, other int
	var codes []string
	for i := range n {
		target := fmt.Sprintf("https://example.com/lag/%d", i)
		status, _, code := create(t, ctl.URL, c.apiKey, target)
		if status != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, status, code)
		}
		codes = append(codes, code)
		switch got, loc := follow(t, edgeURL, code); {
		case got == http.StatusFound && loc == target:
			found++
		case got == http.StatusNotFound:
			notFound++
			t.Errorf("link %d (%s) right after its 201 with the replica lagging: 404", i, code)
		default:
			other++
			t.Errorf("link %d (%s) right after its 201: %d %q; want 302 %q", i, code, got, loc, target)
		}
	}
	fallbacks, fromReplica := rf.Fallbacks.Load(), rf.FromReplica.Load()
	if fallbacks == 0 {
		t.Errorf("no answer came from the primary after a replica miss: the replica did not lag, the test proved nothing")
	}
	// Nothing the edge learned can have come from the paused replica.
	if fromReplica != 0 {
		t.Errorf("%d answers came from a replica paused before the first create", fromReplica)
	}

	// Codes that do not exist: 404, and answered by the primary (the only
	// negatives an edge may cache).
	primaryBefore := rf.FromPrimary.Load()
	const probes = 10
	for i := range probes {
		code := fmt.Sprintf("nope-%d", i)
		if got, _ := follow(t, edgeURL, code); got != http.StatusNotFound {
			t.Errorf("probe of unknown %s: %d; want 404", code, got)
		}
	}
	negFromPrimary := rf.FromPrimary.Load() - primaryBefore
	if negFromPrimary < probes {
		t.Errorf("%d of %d unknown-code answers came from the primary; want all", negFromPrimary, probes)
	}

	// Caught up, the replica serves lookups itself: the offload is real.
	if err := c.replica.Server.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.replica.Server.WaitReplayed(ctx, c.primary.Server); err != nil {
		t.Fatal(err)
	}
	for _, code := range codes[:20] {
		rep, err := rf.LookupForEdge(ctx, code)
		if err != nil || rep.Kind != authority.Found {
			t.Errorf("lookup of %s after the replica caught up: %+v, %v", code, rep, err)
		}
	}
	if got := rf.FromReplica.Load(); got < 20 {
		t.Errorf("after catching up the replica answered %d of 20 lookups; want all", got)
	}
	evidence.Record(t, evidence.ContractUnderLag,
		"replica replay paused, edge change feed paused: %d creates each followed on the edge right after its 201: %d×302, %d×404, %d other; "+
			"%d answers came from the primary after a replica miss, %d from the lagging replica; %d unknown codes: 404, all %d answered by the primary; "+
			"replica caught up: it answered %d lookups itself",
		n, found, notFound, other, fallbacks, fromReplica, probes, negFromPrimary, rf.FromReplica.Load())
	evidence.Record(t, evidence.Jumpable,
		"with lookups served by a lagging replica: %d of %d links redirected (302, right Location) immediately after their 201, 0 needed a retry",
		found, n)
}
