package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

const (
	edges   = 3
	limit   = 200 // N
	clients = 6   // clicking at once, each round-robin over the edges
)

// TestClickLimitAcrossEdges: a link created with max_clicks N, clicked
// round-robin over three edges by six clients at once until every edge
// answers 410, is redirected at least N times (no edge stops it early:
// each stops only once it knows N were served) and at most N + (E − 1)·N
// (docs/click-limits.md: N + (E − 1)·(N − C0) + I, with C0 = I = 0 for a
// link created with its limit; the edges' reports usually stop it far
// sooner, and the figure is logged). The rollups then count at least N
// clicks and the API answers status limit_reached; a raised limit makes
// every edge redirect it again, and the API active.
func TestClickLimitAcrossEdges(t *testing.T) {
	pg := stack.SharedPostgres(t)
	nats := stack.NewNATS(t, stack.NATSConfig{})
	var es [edges]*stack.Edge
	for i := range es {
		es[i] = stack.NewEdge(t, edgeserver.Config{NATSURL: nats.URL(), Name: fmt.Sprintf("limits-%c", 'a'+i),
			SnapshotDir: t.TempDir(),
			// The test is about what the edges answer, not about how long
			// a busy machine takes to answer it.
			AuthorityTimeout: 10 * time.Second, AuthorityMaxWait: 10 * time.Second})
	}
	control := stack.NewControl(t, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: nats.URL(), PublicURL: es[0].URL,
		Snapshots: snapshots.Schedule{Disabled: true}})
	_, key := pg.NewTenant(t, "limits")
	api := stack.Client{ControlURL: control.URL, EdgeURL: es[0].URL, Key: key}

	r := api.CreateJSONPatiently(t.Context(), fmt.Sprintf(`{"url":"https://example.com/limited","max_clicks":%d}`, limit))
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %v %v", r.Status, r.Problem, r.Err)
	}
	code := r.Code

	served := clickUntilGone(t, es[:], code)
	var hits, received uint64
	for i, e := range es {
		// Once 410, each edge stays so until the limit changes.
		if status, _, err := stack.Follow(e.URL, code); err != nil || status != http.StatusGone {
			t.Errorf("edge %d after the limit: %d %v; want 410", i, status, err)
		}
		p := e.Parts()
		hits += p.Handler.Counters.Hits.Load()
		received += p.Share.Received.Load()
		t.Logf("edge %d: refusals reached %d, spent %d, shared %d; reports published %d, received %d", i,
			p.Limits.Reached.Load(), p.Limits.Spent.Load(), p.Limits.Shared.Load(), p.Share.Published.Load(), p.Share.Received.Load())
	}
	bound := int64(limit + (edges-1)*limit)
	t.Logf("click limit %d over %d edges sharing reports, %d clients: %d redirects (overshoot %d, %.1f%% of N; bound %d)",
		limit, edges, clients, served, served-limit, 100*float64(served-limit)/limit, bound-limit)
	if served < limit {
		t.Errorf("%d redirects: an edge stopped the link before its %d clicks were served", served, limit)
	}
	if served > bound {
		t.Errorf("%d redirects: past the bound N + (E−1)·N = %d", served, bound)
	}
	if received == 0 {
		// Each edge served the link for more than a report interval: it
		// takes hundreds of requests to reach 410 on all three.
		t.Errorf("no edge received another's report")
	}
	if hits != uint64(served) {
		t.Errorf("the edges count %d redirects, the clients %d", hits, served)
	}

	// The rollups count every click served, bots' included (the test's
	// clients are no browsers): the API says limit_reached.
	var got struct {
		Status        string `json:"status"`
		MaxClicks     *int64 `json:"max_clicks"`
		ClicksCounted *int64 `json:"clicks_counted"`
	}
	read := func() bool {
		a := api.Do(t.Context(), "GET", "/api/v1/links/"+code, "")
		got.ClicksCounted = nil
		return a.Err == nil && a.Status == http.StatusOK && json.Unmarshal(a.Body, &got) == nil
	}
	stack.Eventually(t, "the API to say limit_reached with every click counted", time.Minute, func() bool {
		return read() && got.Status == "limit_reached" && got.ClicksCounted != nil && *got.ClicksCounted == served
	})
	if *got.ClicksCounted < limit {
		t.Fatalf("clicks_counted %d < %d", *got.ClicksCounted, limit)
	}

	// Raised past what was served: every edge redirects again.
	raised := served + 100
	if a := api.Do(t.Context(), "PATCH", "/api/v1/links/"+code, fmt.Sprintf(`{"max_clicks":%d}`, raised)); a.Status != http.StatusOK {
		t.Fatalf("raise the limit: %v", a)
	}
	for i, e := range es {
		status, _, err := stack.FollowUntil(e.URL, code, time.Minute, func(status int, _ string) bool { return status == http.StatusFound })
		if err != nil || status != http.StatusFound {
			t.Errorf("edge %d after the limit was raised to %d: %d %v; want 302", i, raised, status, err)
		}
	}
	stack.Eventually(t, "the API to say active", time.Minute, func() bool {
		return read() && got.Status == "active" && got.MaxClicks != nil && *got.MaxClicks == raised
	})

	// Without reports (NATS's core subjects lost, or
	// --limit-report-every negative) each edge stops the link within its
	// own allowance, or when the roller's change comes: the bound holds
	// alone, and is what a busy machine's clicks come near.
	var alone [edges]*stack.Edge
	for i := range alone {
		alone[i] = stack.NewEdge(t, edgeserver.Config{NATSURL: nats.URL(), Name: fmt.Sprintf("alone-%c", 'a'+i),
			SnapshotDir: t.TempDir(), LimitReportEvery: -1,
			AuthorityTimeout: 10 * time.Second, AuthorityMaxWait: 10 * time.Second})
		if alone[i].Parts().Share != nil {
			t.Fatalf("edge alone-%c shares reports", 'a'+i)
		}
	}
	r = api.CreateJSONPatiently(t.Context(), fmt.Sprintf(`{"url":"https://example.com/alone","max_clicks":%d}`, limit))
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %v %v", r.Status, r.Problem, r.Err)
	}
	served = clickUntilGone(t, alone[:], r.Code)
	for i, e := range alone {
		p := e.Parts()
		t.Logf("edge alone-%c: refusals reached %d, spent %d, shared %d", 'a'+i, p.Limits.Reached.Load(), p.Limits.Spent.Load(), p.Limits.Shared.Load())
	}
	t.Logf("click limit %d over %d edges without reports, %d clients: %d redirects (overshoot %d, %.1f%% of N; bound %d)",
		limit, edges, clients, served, served-limit, 100*float64(served-limit)/limit, bound-limit)
	if served < limit || served > bound {
		t.Errorf("%d redirects without reports: want %d to %d", served, limit, bound)
	}
}

// clickUntilGone clicks code round-robin over es from clients at once
// until every edge has answered 410, and returns the redirects served. A
// 410 of a limit stays (an edge's allowance is not given back, reports
// only grow, the counted clicks only grow) until the limit changes.
func clickUntilGone(t *testing.T, es []*stack.Edge, code string) int64 {
	t.Helper()
	edges := len(es)
	var redirects, requests atomic.Int64
	goneAt := make([]atomic.Bool, edges)
	allGone := func() bool {
		for i := range goneAt {
			if !goneAt[i].Load() {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, clients)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := edgeClient(t)
			for j := c; !allGone(); j++ {
				if ctx.Err() != nil {
					errs <- fmt.Errorf("client %d: the edges did not all answer 410 in time (%d redirects)", c, redirects.Load())
					return
				}
				e := j % edges
				status, err := follow(ctx, hc, es[e].URL+"/"+code)
				requests.Add(1)
				switch {
				case err != nil:
					errs <- fmt.Errorf("client %d, edge %d: %v", c, e, err)
					return
				case status == http.StatusFound:
					redirects.Add(1)
				case status == http.StatusGone:
					goneAt[e].Store(true)
				default:
					errs <- fmt.Errorf("client %d, edge %d: status %d", c, e, status)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	// Logged, not asserted: the overshoot with reports is about this rate
	// times a report's delay.
	t.Logf("%d requests in %v (%.0f/s) until every edge answered 410", requests.Load(), took.Round(time.Millisecond),
		float64(requests.Load())/took.Seconds())
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return redirects.Load()
}

// edgeClient is one client's connections to the edges: kept alive,
// following no redirect.
func edgeClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// follow asks url once and returns the status.
func follow(ctx context.Context, hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
