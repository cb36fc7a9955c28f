package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/internal/stack/allinone"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// setStatus changes a link's status the way control's write path does (row
// and outbox event in one statement, xid before version), for as long as the
// API has no PATCH/DELETE.
func setStatus(t *testing.T, pool *pgxpool.Pool, code, status string) {
	t.Helper()
	tag, err := pool.Exec(context.Background(), `
		WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
		v AS MATERIALIZED (SELECT x.xid, nextval('change_version_seq') AS version FROM x),
		l AS (
			UPDATE links SET status = $2, version = v.version, updated_at = now() FROM v WHERE code = $1
			RETURNING links.code, links.url, links.redirect_type, links.status, links.expires_at, links.version)
		INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at)
		SELECT l.version, v.xid, 'link', l.code, l.url, l.redirect_type, l.status, l.expires_at FROM l, v`, code, status)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("set %s %s: %v (%d rows)", code, status, err, tag.RowsAffected())
	}
}

// createExpiring creates a link to url expiring 1.5 to 2.5 s after the
// create is sent (expires_at has whole seconds), and returns its code and
// expiry. Each try takes a fresh instant: waiting out the rate limit (429),
// or a create slow enough that its instant passed before it was checked
// (400), must not leave the link an instant already gone. Bounded by a
// minute, as the other creates' patience.
func createExpiring(t *testing.T, r allinone.Ready, url string) (string, time.Time) {
	t.Helper()
	var c stack.Created
	var expires time.Time
	_ = stack.Poll(context.Background(), "create an expiring link", time.Minute, func() bool {
		expires = time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
		c = client(r).CreateJSON(context.Background(), `{"url": "`+url+`", "expires_at": "`+expires.Format(time.RFC3339)+`"}`)
		passed := c.Status == http.StatusBadRequest && strings.Contains(fmt.Sprint(c.Body), "must be in the future")
		return c.Err != nil || (c.Status != http.StatusTooManyRequests && !passed)
	})
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	if c.Status != http.StatusCreated {
		t.Fatalf("create expiring: %d %v", c.Status, c.Body)
	}
	return c.Code, expires
}

// TestVisibilityContract: every 201 is immediately jumpable on the edge,
// even while the edge's change feed is paused and even when the code was
// probed (404) just before; disable and delete reach the edge as 410 within
// the feed's lag; expiry bites at its instant.
func TestVisibilityContract(t *testing.T) {
	r, e := startEdgeStack(t, "", nil)
	e.Feed.Pause()

	// A custom code probed before it exists, then created.
	if got, _ := follow(t, r, "launch-day"); got != http.StatusNotFound {
		t.Fatalf("probe of an unknown custom code: %d; want 404", got)
	}
	status, body := create(t, r, `{"url": "https://example.com/launch", "code": "launch-day"}`)
	if status != http.StatusCreated {
		t.Fatalf("create launch-day: %d %v", status, body)
	}
	if got, loc := follow(t, r, "launch-day"); got != http.StatusFound || loc != "https://example.com/launch" {
		t.Fatalf("follow right after 201 of a probed code: %d %q; want 302", got, loc)
	}

	const n = 1000
	codes := make([]string, 0, n)
	for i := range n {
		url := fmt.Sprintf("https://example.com/paused/%d", i)
		status, body := create(t, r, `{"url": "`+url+`"}`)
		if status != http.StatusCreated {
			t.Fatalf("create %d: %d %v", i, status, body)
		}
		code := body["code"].(string)
		if got, loc := follow(t, r, code); got != http.StatusFound || loc != url {
			t.Fatalf("link %d (%s) right after its 201 with the feed paused: %d %q; want 302 %q", i, code, got, loc, url)
		}
		codes = append(codes, code)
	}

	// A generated code probed before it is handed out: predict the next ID.
	last, err := base62.Decode(codes[len(codes)-1])
	if err != nil {
		t.Fatal(err)
	}
	next, _ := base62.Encode(last + 1)
	if got, _ := follow(t, r, next); got != http.StatusNotFound {
		t.Fatalf("probe of the next generated code %s: %d; want 404", next, got)
	}
	status, body = create(t, r, `{"url": "https://example.com/next"}`)
	if status != http.StatusCreated {
		t.Fatalf("create next: %d %v", status, body)
	}
	if body["code"] != next {
		t.Logf("the allocator skipped the predicted code %s (got %v); the probe proves nothing for it", next, body["code"])
	}
	if got, _ := follow(t, r, body["code"].(string)); got != http.StatusFound {
		t.Fatalf("follow right after 201 of a probed generated code: %d; want 302", got)
	}
	if e.Overlay.Len() != 0 {
		t.Fatalf("the paused feed applied %d links: the test proved nothing", e.Overlay.Len())
	}
	evidence.Record(t, evidence.Jumpable,
		"with the edge's change feed paused (overlay empty), each of %d creates (%s … %s) answered 302 with its target right after its 201",
		n+2, codes[0], body["code"])
	evidence.Record(t, evidence.ContractUnderLag,
		"negative-cache pre-seed: custom code launch-day and the next generated code %s were probed (404) before they existed, then created with the feed paused; each 302'd right after its 201 (generated code handed out: %v)",
		next, body["code"])

	e.Feed.Resume()
	waitCaughtUp(t, e, "all creates", func() bool { return e.Overlay.Len() >= n+2 })

	pool := dbPool(t, r)
	setStatus(t, pool, codes[0], "disabled")
	setStatus(t, pool, codes[1], "deleted")
	setStatus(t, pool, "launch-day", "disabled")
	pollStatus(t, r, codes[0], http.StatusGone)
	pollStatus(t, r, codes[1], http.StatusGone)
	pollStatus(t, r, "launch-day", http.StatusGone)
	if got, _ := follow(t, r, codes[2]); got != http.StatusFound {
		t.Fatalf("an untouched link answers %d", got)
	}

	// Expiry at its instant, evaluated on the edge at read time.
	soon, expires := createExpiring(t, r, "https://example.com/soon")
	if got, _ := follow(t, r, soon); got != http.StatusFound && time.Now().Before(expires) {
		t.Fatalf("expiring link before its expiry: %d; want 302", got)
	}
	for time.Now().Before(expires) { // bounded by the expiry itself
		time.Sleep(time.Until(expires))
	}
	if got, _ := follow(t, r, soon); got != http.StatusGone {
		t.Fatalf("expired link right after its expiry: %d; want 410", got)
	}
	evidence.Record(t, evidence.ContractUnderLag,
		"after the feed resumed, disable and delete of 3 links reached the edge as 410 within the poll bound; an expiring link answered 410 right after its expiry instant")
}

// TestScanOfSealedSegmentsSparesAuthority: 100,000 random unknown generated
// codes from a sealed segment reach the authority only through bloom false
// positives.
func TestScanOfSealedSegmentsSparesAuthority(t *testing.T) {
	const (
		segStart = 10_000_000_000
		segLen   = 1_000_000
		live     = 20_000
		scan     = 100_000
	)
	// A hint sized for the live codes (1% false positives) makes the bound
	// meaningful: a huge hint would let nothing through.
	r, e := startEdgeStack(t, "", func(c *edgeserver.Config) { c.BloomCapacity = 25_000 })
	pool := dbPool(t, r)
	ctx := context.Background()
	var tenant int64
	if err := pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'dev'`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	exists := make(map[uint64]bool, live)
	ids := make([]int64, 0, live)
	codes := make([]string, 0, live)
	for len(ids) < live {
		id := segStart + rng.Uint64N(segLen)
		if exists[id] {
			continue
		}
		exists[id] = true
		c, _ := base62.Encode(id)
		ids, codes = append(ids, int64(id)), append(codes, c)
	}
	// The segment's links and then its sealed event, as the allocator and
	// the create path would write them.
	if _, err := pool.Exec(ctx, `
		WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
		ins AS (
			INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
			SELECT id, code, $3, 'generated', 'https://example.com/' || code, 'https://example.com/' || code,
			       nextval('change_version_seq')
			FROM unnest($1::bigint[], $2::text[]) AS t(id, code)
			RETURNING code, url, redirect_type, status, version)
		INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status)
		SELECT version, x.xid, 'link', code, url, redirect_type, status FROM ins, x`, ids, codes, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO outbox (version, kind, namespace, seg_start, seg_end, seg_state)
		VALUES (nextval('change_version_seq'), 'segment', 'default', $1, $2, 'sealed')`, segStart, segStart+segLen); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, e, "the sealed segment", func() bool { return e.Segments.Sealed(segStart) && e.Overlay.Len() >= live })

	before := e.Authority.Requests.Load()
	var wrong, done atomic.Int64
	var wg sync.WaitGroup
	work := make(chan string, 1024)
	// The scan comes from 256 addresses: from one it would meet its budget
	// of 404s (429s), which is not what this test is about.
	visitors := make([]*stack.Visitor, 256)
	for i := range visitors {
		visitors[i] = stack.NewVisitor(r.EdgeURL, stack.LoopbackIP(i))
		defer visitors[i].Close()
	}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += 8 {
				code, ok := <-work
				if !ok {
					return
				}
				status, _, err := visitors[i%len(visitors)].Follow(code)
				if err != nil || status != http.StatusNotFound {
					wrong.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	for sent := 0; sent < scan; {
		id := segStart + rng.Uint64N(segLen)
		if exists[id] {
			continue
		}
		c, _ := base62.Encode(id)
		work <- c
		sent++
	}
	close(work)
	wg.Wait()
	asked := e.Authority.Requests.Load() - before
	t.Logf("scan of %d unknown sealed codes: %d reached the authority, %d bloom rejects", scan, asked, e.Resolver.BloomRejects.Load())
	if wrong.Load() != 0 {
		t.Fatalf("%d of %d scanned codes did not answer 404", wrong.Load(), done.Load())
	}
	if asked >= 2000 {
		t.Fatalf("the scan reached the authority %d times; want fewer than 2000", asked)
	}
	for _, c := range codes[:50] {
		if got, _ := follow(t, r, c); got != http.StatusFound {
			t.Fatalf("live code %s in the sealed segment answers %d", c, got)
		}
	}
	evidence.Record(t, evidence.ContractUnderLag,
		"bloom hint: %d unknown codes of a sealed segment all answered 404, %d of them reached the authority (bloom false positives; bound 2000); 50 live codes of the segment 302",
		scan, asked)
}

// TestEdgeCatchesUpAfterNATSRestart: with NATS down the edge keeps serving
// what it knows, reports degraded, answers 503 (never 404) for a link it
// cannot check, and catches up once NATS is back.
func TestEdgeCatchesUpAfterNATSRestart(t *testing.T) {
	ns := stack.NewNATS(t, stack.NATSConfig{})
	r, e := startEdgeStack(t, ns.URL(), nil)
	status, body := create(t, r, `{"url": "https://example.com/before"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, body)
	}
	before := body["code"].(string)
	pollStatus(t, r, before, http.StatusFound)
	waitCaughtUp(t, e, "first link", func() bool { _, ok := e.Overlay.Lookup(link.DefaultDomain, []byte(before)); return ok })

	ns.Stop()
	// Degraded, not unready: every edge shares a NATS outage, and a load
	// balancer must keep sending them the links they know.
	var ready int
	var readyBody string
	_ = stack.Poll(context.Background(), "degraded", 30*time.Second, func() bool {
		ready, readyBody = readyz(r.EdgeURL)
		return ready != http.StatusOK || strings.HasPrefix(readyBody, "degraded:")
	})
	if ready != http.StatusOK || !strings.HasPrefix(readyBody, "degraded:") {
		t.Fatalf("edge readiness with NATS stopped: %d %q; want 200 degraded", ready, readyBody)
	}
	if got, _ := follow(t, r, before); got != http.StatusFound {
		t.Fatalf("known link with NATS down: %d; want 302", got)
	}
	var during []string
	for i := range 5 {
		status, body := create(t, r, fmt.Sprintf(`{"url": "https://example.com/during/%d"}`, i))
		if status != http.StatusCreated {
			t.Fatalf("create with NATS down: %d %v", status, body)
		}
		code := body["code"].(string)
		during = append(during, code)
		if got, _ := follow(t, r, code); got != http.StatusServiceUnavailable {
			t.Fatalf("link created while NATS is down, followed on the edge: %d; want 503 (never a false 404)", got)
		}
	}

	ns.Restart(t)
	for _, code := range during {
		pollStatus(t, r, code, http.StatusFound)
	}
	waitCaughtUp(t, e, "links created during the outage", func() bool {
		for _, code := range during {
			if _, ok := e.Overlay.Lookup(link.DefaultDomain, []byte(code)); !ok {
				return false
			}
		}
		return true
	})
	stack.Eventually(t, "edge ready after NATS came back", 30*time.Second, func() bool {
		status, body := readyz(r.EdgeURL)
		return status == http.StatusOK && body == "ok\n"
	})
	evidence.Record(t, evidence.ContractUnderLag,
		"NATS stopped: a known link kept answering 302; %d links created meanwhile answered 503 (never 404) until NATS returned, then 302 once the edge caught up; readiness 200 degraded during (in service), 200 ok after",
		len(during))
}
