package links_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// counterIDs hands out 1, 2, 3, …; gate, if set, holds every call until it
// is closed.
type counterIDs struct {
	n    atomic.Uint64
	gate chan struct{}

	mu        sync.Mutex
	done      map[uint64][]bool // every Done call per ID
	handed    []uint64          // every ID handed out
	perDomain map[link.DomainID]uint64
}

func (c *counterIDs) Done(id uint64, committed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(map[uint64][]bool)
	}
	c.done[id] = append(c.done[id], committed)
}

// NextID hands out the platform domain's IDs from n, and other domains'
// from a counter of their own each (perDomain), in their ranges.
func (c *counterIDs) NextID(ctx context.Context, d link.DomainID) (uint64, error) {
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	var id uint64
	if d == link.DefaultDomain {
		id = c.n.Add(1)
	} else {
		c.mu.Lock()
		if c.perDomain == nil {
			c.perDomain = map[link.DomainID]uint64{}
		}
		c.perDomain[d]++
		id = link.IDBase(d) + c.perDomain[d]
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.handed = append(c.handed, id)
	c.mu.Unlock()
	return id, nil
}

// checkDone asserts the IDSource contract the allocator's sealing relies
// on: every ID handed out was released exactly once, as committed exactly
// when a link holds it.
func checkDone(t *testing.T, ids *counterIDs, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM links`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uint64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[uint64(id)] = true
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	for _, id := range ids.handed {
		calls := ids.done[id]
		if len(calls) != 1 {
			t.Errorf("id %d released %d times (%v); want once", id, len(calls), calls)
			continue
		}
		if calls[0] != stored[id] {
			t.Errorf("id %d released as committed=%v, but a link holds it: %v", id, calls[0], stored[id])
		}
	}
}

func setup(t *testing.T, ids links.IDSource, cfg links.Config) (*links.Service, *postgres.Store, *pgxpool.Pool, int64) {
	t.Helper()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return links.New(st, ids, cfg), st, pool, tenant
}

// setupCounted is setup with a counting ID source and no options; when the
// test ends it checks that every ID handed out was released once
// (checkDone).
func setupCounted(t *testing.T) (*links.Service, *postgres.Store, *counterIDs, int64) {
	t.Helper()
	ids := &counterIDs{}
	svc, st, pool, tenant := setup(t, ids, links.Config{})
	t.Cleanup(func() { checkDone(t, ids, pool) })
	return svc, st, ids, tenant
}

// generate creates n links with generated codes and returns the codes.
func generate(t *testing.T, svc *links.Service, tenant int64, n int) []string {
	t.Helper()
	var codes []string
	for range n {
		c, err := svc.Create(context.Background(), tenant, links.CreateRequest{URL: "https://example.com/"})
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c.Link.Code)
	}
	return codes
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCoalescedCreatesKeepTheirOwnAnswers: many concurrent creates, mixing
// generated and custom codes, colliding custom codes, idempotency keys sent
// once and many times, and one create whose caller gave up while queued,
// share few transactions, and each caller gets exactly its own answer.
func TestCoalescedCreatesKeepTheirOwnAnswers(t *testing.T) {
	ids := &counterIDs{gate: make(chan struct{})}
	svc, _, pool, tenant := setup(t, ids, links.Config{Writers: 1, MaxCoalesce: 500})
	ctx := context.Background()

	type call struct {
		req links.CreateRequest
		got links.Created
		err error
	}
	var calls []*call
	add := func(req links.CreateRequest) { calls = append(calls, &call{req: req}) }
	for i := range 100 {
		add(links.CreateRequest{URL: fmt.Sprintf("https://example.com/gen/%d", i)})
	}
	for i := range 50 {
		add(links.CreateRequest{URL: fmt.Sprintf("https://example.com/key/%d", i), IdempotencyKey: fmt.Sprintf("k%d", i)})
	}
	for i := range 10 { // ten keys, each sent five times with one request
		for range 5 {
			add(links.CreateRequest{URL: fmt.Sprintf("https://example.com/rep/%d", i), IdempotencyKey: fmt.Sprintf("rep%d", i)})
		}
	}
	for i := range 20 { // twenty custom codes, each asked for twice
		add(links.CreateRequest{URL: "https://example.com/c1", Code: fmt.Sprintf("code-%d", i)})
		add(links.CreateRequest{URL: "https://example.com/c2", Code: fmt.Sprintf("code-%d", i)})
	}

	// The first create to reach a writer slot holds it (its ID source is
	// gated) until every other create is queued behind it.
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() { c.got, c.err = svc.Create(ctx, tenant, c.req) })
	}
	poll.Until(t, "all creates to queue", 30*time.Second, func() bool { return int(svc.Stats().Coalesced)+links.Queued(svc) == len(calls) })
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := svc.Create(gone, tenant, links.CreateRequest{URL: "https://example.com/gone"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a cancelled context: %v", err)
	}
	close(ids.gate)
	wg.Wait()

	codes := map[string]int{}
	byKey := map[string][]links.Created{}
	taken := map[string]int{}
	for i, c := range calls {
		switch {
		case c.req.Code != "" && errors.Is(c.err, link.ErrCodeTaken):
			taken[c.req.Code]++
			continue
		case c.err != nil:
			t.Fatalf("create %d (%+v): %v", i, c.req, c.err)
		}
		if c.got.Link.URL != c.req.URL || c.got.Link.TenantID != tenant || c.got.Link.Version == 0 {
			t.Fatalf("create %d (%+v) answered %+v", i, c.req, c.got.Link)
		}
		if c.req.Code != "" && c.got.Link.Code != c.req.Code {
			t.Fatalf("create %d asked for %q, got %q", i, c.req.Code, c.got.Link.Code)
		}
		if c.req.IdempotencyKey != "" {
			byKey[c.req.IdempotencyKey] = append(byKey[c.req.IdempotencyKey], c.got)
		}
		if !c.got.Replayed {
			codes[c.got.Link.Code]++
		}
	}
	for code, n := range codes {
		if n != 1 {
			t.Errorf("code %s answered to %d creators", code, n)
		}
	}
	for i := range 20 {
		if code := fmt.Sprintf("code-%d", i); taken[code] != 1 {
			t.Errorf("custom code %s: %d creators told it is taken; want exactly 1", code, taken[code])
		}
	}
	for k, cs := range byKey {
		replays := 0
		for _, c := range cs {
			if !reflect.DeepEqual(c.Link.Link, cs[0].Link.Link) || c.Link.Title != cs[0].Link.Title || !slices.Equal(c.Link.Tags, cs[0].Link.Tags) {
				t.Errorf("key %s answered two links: %+v and %+v", k, c.Link, cs[0].Link)
			}
			if c.Replayed {
				replays++
			}
		}
		if replays != len(cs)-1 {
			t.Errorf("key %s: %d of %d answers replayed; want all but one", k, replays, len(cs))
		}
	}
	want := 100 + 50 + 10 + 20
	if links, events, keys := count(t, pool, "links"), count(t, pool, "outbox WHERE kind = 'link'"), count(t, pool, "idempotency_keys"); links != want || events != want || keys != 60 {
		t.Fatalf("%d links, %d outbox rows, %d keys; want %d, %d, 60", links, events, keys, want, want)
	}
	// The held create went alone; the rest fit in one transaction, except
	// what could not share it: the second asker of each custom code.
	st := svc.Stats()
	if st.SharedTx > 3 || st.Coalesced != uint64(len(calls)) {
		t.Errorf("stats %+v: want %d creates in at most 3 transactions", st, len(calls))
	}
	checkDone(t, ids, pool)
}

// TestGeneratedCodeHeldByCustomLinkIsSkipped: a generated code that a link
// already holds (an import) is skipped, its ID counted as waste, and never
// answered twice.
func TestGeneratedCodeHeldByCustomLinkIsSkipped(t *testing.T) {
	svc, st, _, tenant := setupCounted(t)
	ctx := context.Background()
	imported := &link.Link{ID: 1_000_000, Code: "000002", TenantID: tenant, Namespace: "default",
		URL: "https://imported.example/", URLOriginal: "https://imported.example/", RedirectType: 302}
	if err := st.CreateLink(ctx, imported, true); err != nil {
		t.Fatal(err)
	}
	got := generate(t, svc, tenant, 3)
	if fmt.Sprint(got) != "[000001 000003 000004]" {
		t.Fatalf("generated codes %v; want [000001 000003 000004]", got)
	}
	if w := svc.Stats().WastedIDs; w != 1 {
		t.Fatalf("wasted %d IDs; want 1", w)
	}
}

// TestGeneratedCodeNeverAReservedWord: with the counter at the ID of
// "readyz" (the edge's old readiness path) the generator skips it and the
// other cases of it that come next, counts each as waste, and answers the
// first code that is no reserved word.
func TestGeneratedCodeNeverAReservedWord(t *testing.T) {
	svc, _, ids, tenant := setupCounted(t)
	ctx := context.Background()
	readyz, err := base62.Decode("readyz")
	if err != nil {
		t.Fatal(err)
	}
	readyZ, _ := base62.Decode("readyZ")
	ids.n.Store(readyz - 2) // hands out readyy, readyz, readz0, ...
	got := generate(t, svc, tenant, 3)
	if want := "[readyy readz0 readz1]"; fmt.Sprint(got) != want {
		t.Fatalf("generated codes %v; want %s (readyz skipped)", got, want)
	}
	// READYZ and the other cases are reserved too.
	ids.n.Store(readyZ - 1)
	c, err := svc.Create(ctx, tenant, links.CreateRequest{URL: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Link.Code == "readyZ" {
		t.Fatalf("generated %q", c.Link.Code)
	}
	if s := svc.Stats(); s.ReservedSkips != 2 || s.WastedIDs != 0 {
		t.Fatalf("stats %+v; want 2 reserved skips", s)
	}
}

// TestBatchReleasesEveryID: a batch with an idempotency key, a custom code
// another link holds and an invalid item, then its replay: every ID taken is
// released once, as committed exactly when its link exists.
func TestBatchReleasesEveryID(t *testing.T) {
	svc, _, ids, tenant := setupCounted(t)
	ctx := context.Background()
	if _, err := svc.Create(ctx, tenant, links.CreateRequest{URL: "https://example.com/held", Code: "held-code"}); err != nil {
		t.Fatal(err)
	}
	reqs := []links.CreateRequest{
		{URL: "https://example.com/1"},
		{URL: "https://example.com/2", Code: "held-code"},
		{URL: "javascript:alert(1)"},
		{URL: "https://example.com/3", Code: "fresh-code"},
	}
	for i := range 2 { // the second is a replay
		before := ids.n.Load()
		res, err := svc.CreateBatch(ctx, tenant, "batch-key", reqs)
		if err != nil {
			t.Fatal(err)
		}
		if res.Items[0].Link == nil || res.Items[1].Err == nil || res.Items[2].Err == nil || res.Items[3].Link == nil {
			t.Fatalf("batch results %+v", res.Items)
		}
		// IDs are never given back, so a replay must not take any.
		if taken := ids.n.Load() - before; i == 1 && (taken != 0 || !res.Replayed) {
			t.Fatalf("replay took %d IDs (replayed %v); want 0", taken, res.Replayed)
		}
	}
	if _, err := svc.CreateBatch(ctx, tenant, "", reqs[:1]); err != nil {
		t.Fatal(err)
	}
}

// TestReplayIsTheOriginalLink: a replay answers the very link the original
// create did, field for field (times included: the same instant in the
// same location), whether the original went through a transaction of its
// own or shared one.
func TestReplayIsTheOriginalLink(t *testing.T) {
	svc, _, _, tenant := setupCounted(t)
	ctx := context.Background()
	req := links.CreateRequest{URL: "https://example.com/replay", IdempotencyKey: "same-key",
		ExpiresAt: time.Date(2099, 1, 2, 3, 4, 5, 6000, time.FixedZone("", -7200))}
	first, err := svc.Create(ctx, tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Create(ctx, tenant, req)
	if err != nil || !again.Replayed {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	if !reflect.DeepEqual(again.Link.Link, first.Link.Link) {
		t.Errorf("replay answered %#v; the original answered %#v", *again.Link, *first.Link)
	}
	batch := []links.CreateRequest{{URL: "https://example.com/b1"}, {URL: "https://example.com/b2", Code: "b-two",
		ExpiresAt: time.Date(2099, 1, 2, 3, 4, 5, 6000, time.FixedZone("", 3600))}}
	one, err := svc.CreateBatch(ctx, tenant, "batch-key", batch)
	if err != nil {
		t.Fatal(err)
	}
	two, err := svc.CreateBatch(ctx, tenant, "batch-key", batch)
	if err != nil || !two.Replayed {
		t.Fatalf("batch replay: %+v, %v", two, err)
	}
	for i := range batch {
		if !reflect.DeepEqual(two.Items[i].Link.Link, one.Items[i].Link.Link) {
			t.Errorf("batch item %d: replay answered %#v; the original answered %#v", i, *two.Items[i].Link, *one.Items[i].Link)
		}
	}
}
