package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// These tests run control and edges against one PostgreSQL and one NATS,
// publish snapshots with control's builder and check what edges answer
// against the authority's rows.

// linkRow is a link as the tests write it.
type linkRow struct {
	id      int64
	code    string
	custom  bool
	url     string
	rt      int16
	status  string
	expires *time.Time
}

// genLinks makes n links with IDs from base upward (spaced so unknown codes
// lie between them) and a mix of every state an edge must answer.
func genLinks(rng *rand.Rand, n int, base int64, customPrefix string) []linkRow {
	past, future := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	out := make([]linkRow, 0, n)
	for i := range n {
		l := linkRow{id: base + int64(i)*3, rt: []int16{301, 302, 302, 302, 307, 308}[rng.IntN(6)], status: "active"}
		if i%10 == 9 {
			l.custom, l.code = true, fmt.Sprintf("%s-%05d", customPrefix, i)
		} else {
			l.code, _ = base62.Encode(uint64(l.id))
		}
		l.url = fmt.Sprintf("https://shop%d.example.com/campaign/%d/item-%d?utm_source=mail&utm_campaign=c%d", i%7, i%13, i, i%5)
		switch p := rng.IntN(100); {
		case p < 7:
			l.status = "disabled"
		case p < 12:
			l.status = "deleted"
		case p < 20:
			l.expires = &past
		case p < 25:
			l.expires = &future
		}
		out = append(out, l)
	}
	return out
}

// inTx runs fn in a transaction that has its xid before it takes any
// version, as control's write path does (the relay relies on it).
func inTx(t *testing.T, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `SELECT pg_current_xact_id()`); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// insertLinks writes rows and their outbox events.
func insertLinks(t *testing.T, pool *pgxpool.Pool, rows []linkRow) {
	t.Helper()
	ctx := context.Background()
	var tenant int64
	if err := pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'dev'`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	ids, codes, sources, urls, rts, statuses := make([]int64, len(rows)), make([]string, len(rows)), make([]string, len(rows)),
		make([]string, len(rows)), make([]int16, len(rows)), make([]string, len(rows))
	expires := make([]pgtype.Timestamptz, len(rows))
	for i, l := range rows {
		ids[i], codes[i], urls[i], rts[i], statuses[i] = l.id, l.code, l.url, l.rt, l.status
		sources[i] = "generated"
		if l.custom {
			sources[i] = "custom"
		}
		if l.expires != nil {
			expires[i] = pgtype.Timestamptz{Time: *l.expires, Valid: true}
		}
	}
	inTx(t, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			WITH ins AS (
				INSERT INTO links (id, code, tenant_id, code_source, url_original, url, redirect_type, status, expires_at, version)
				SELECT id, code, $8, src, url, url, rt, st, ex, nextval('change_version_seq')
				FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::text[], $7::timestamptz[])
				     AS t(id, code, src, url, rt, st, ex)
				RETURNING code, url, redirect_type, status, expires_at, version)
			INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at)
			SELECT version, pg_current_xact_id(), 'link', code, url, redirect_type, status, expires_at FROM ins`,
			ids, codes, sources, urls, rts, statuses, expires, tenant)
		return err
	})
}

// updateLinks changes codes with set (an UPDATE … SET clause) and writes
// their outbox events.
func updateLinks(t *testing.T, pool *pgxpool.Pool, codes []string, set string) {
	t.Helper()
	inTx(t, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `
			WITH l AS (
				UPDATE links SET `+set+`, version = nextval('change_version_seq'), updated_at = now()
				WHERE code = ANY($1)
				RETURNING code, url, redirect_type, status, expires_at, version)
			INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at)
			SELECT version, pg_current_xact_id(), 'link', code, url, redirect_type, status, expires_at FROM l`, codes)
		return err
	})
}

// waitPublished waits until the relay has put every outbox row on the
// stream.
func waitPublished(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	if err := stack.Poll(context.Background(), "every outbox row published", 60*time.Second, func() bool {
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE version >= (SELECT next_version FROM outbox_published)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}); err != nil {
		t.Fatalf("%v: %d outbox rows unpublished", err, n)
	}
}

// buildAndPublish runs control's snapshot builder and publishes the file.
func buildAndPublish(t *testing.T, pool *pgxpool.Pool, js jetstream.JetStream) snapshot.Header {
	t.Helper()
	ctx := context.Background()
	var buf bytes.Buffer
	h, err := snapshots.New(postgres.New(pool), js, nil).Build(ctx, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshots.Publish(ctx, js, buf.Bytes(), 1); err != nil {
		t.Fatal(err)
	}
	return h
}

type answer struct {
	status   int
	location string
}

// authority is what every edge must answer for each code the authority
// holds, at now.
func authority(t *testing.T, pool *pgxpool.Pool) map[string]answer {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT code, url, redirect_type, status, expires_at FROM links`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]answer{}
	var (
		code, url, status string
		rt                int16
		expires           pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&code, &url, &rt, &status, &expires}, func() error {
		if status == "active" && (!expires.Valid || time.Now().Before(expires.Time)) {
			out[code] = answer{int(rt), url}
		} else {
			out[code] = answer{http.StatusGone, ""}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sample picks n codes: known ones and unknown ones (generated codes between
// the known IDs, and custom codes nobody made).
func sample(rng *rand.Rand, truth map[string]answer, n, unknown int) []string {
	known := make([]string, 0, len(truth))
	for c := range truth {
		known = append(known, c)
	}
	rng.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	out := known[:min(n-unknown, len(known))]
	for len(out) < n {
		var c string
		if len(out)%4 == 0 {
			c = fmt.Sprintf("nobody-%06d", rng.IntN(1_000_000))
		} else {
			c, _ = base62.Encode(20_000_000_000 + rng.Uint64N(3_000_000))
		}
		if _, ok := truth[c]; !ok {
			out = append(out, c)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// askAll asks edgeURL for every code with a few keep-alive clients.
func askAll(t *testing.T, edgeURL string, codes []string) map[string]answer {
	t.Helper()
	var mu sync.Mutex
	out := make(map[string]answer, len(codes))
	work := make(chan string)
	var wg sync.WaitGroup
	// Visitors from many addresses, as an edge's are: none of them spends
	// its budget of 404s, which is not what these tests are about.
	visitors := make([]*stack.Visitor, 64)
	for i := range visitors {
		visitors[i] = stack.NewVisitor(edgeURL, stack.LoopbackIP(i))
		defer visitors[i].Close()
	}
	var n atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for code := range work {
				a := answer{status: -1}
				v := visitors[n.Add(1)%int64(len(visitors))]
				if status, loc, err := v.Follow(code); err == nil {
					a = answer{status, loc}
				}
				mu.Lock()
				out[code] = a
				mu.Unlock()
			}
		}()
	}
	for _, c := range codes {
		work <- c
	}
	close(work)
	wg.Wait()
	return out
}

// compare reports every code whose answer differs from the authority's
// (404 for codes it does not hold).
func compare(t *testing.T, what string, truth, got map[string]answer, codes []string) {
	t.Helper()
	wrong := 0
	for _, c := range codes {
		want, ok := truth[c]
		if !ok {
			want = answer{http.StatusNotFound, ""}
		}
		if got[c] != want {
			if wrong++; wrong <= 10 {
				t.Errorf("%s: /%s answered %+v, the authority says %+v", what, c, got[c], want)
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%s: %d of %d answers differ from the authority", what, wrong, len(codes))
	}
}

// runEdge runs one more edge against natsURL, stopped when the test ends.
func runEdge(t *testing.T, natsURL, dir string, adjust func(*edgeserver.Config)) (string, *edgeserver.Edge, func()) {
	t.Helper()
	cfg := edgeserver.Config{NATSURL: natsURL, Name: "snap-" + fmt.Sprint(rand.Uint32()), SnapshotDir: dir,
		// Unknown codes go to the authority: a generous timeout and wait
		// for a lookup slot keep a busy test machine from turning a 404
		// into a 503.
		AuthorityTimeout: 10 * time.Second, AuthorityMaxWait: 10 * time.Second}
	if adjust != nil {
		adjust(&cfg)
	}
	e := stack.NewEdge(t, cfg)
	stop := func() {
		if err := e.Stop(); err != nil {
			t.Errorf("edge stopped with: %v", err)
		}
	}
	return e.URL, e.Parts(), stop
}

func waitReady(t *testing.T, edgeURL string) {
	t.Helper()
	var status int
	var body string
	if err := stack.Poll(context.Background(), "edge ready", 60*time.Second, func() bool {
		status, body = readyz(edgeURL)
		return status == http.StatusOK
	}); err != nil {
		t.Fatalf("%v: %d %s", err, status, body)
	}
}

func codesOf(rows []linkRow) []string {
	out := make([]string, len(rows))
	for i, l := range rows {
		out[i] = l.code
	}
	return out
}

// ownNATS is the local stack on a NATS of the test's own, which a test may
// stop and whose snapshot bucket it reads and writes, with the stack's
// database and a JetStream client of that NATS.
type ownNATS struct {
	nats    *stack.NATS
	js      jetstream.JetStream
	pool    *pgxpool.Pool
	edgeURL string
	edge    *edgeserver.Edge // the stack's own edge
}

func startOnOwnNATS(t *testing.T) *ownNATS {
	t.Helper()
	s := &ownNATS{nats: stack.NewNATS(t, stack.NATSConfig{})}
	r, e := startEdgeStack(t, s.nats.URL(), nil)
	s.pool, s.edgeURL, s.edge = dbPool(t, r), r.EdgeURL, e
	_, s.js = s.nats.Client(t)
	return s
}

// streamInfo is the JetStream stream name and what it holds now.
func streamInfo(t *testing.T, js jetstream.JetStream, name string) (jetstream.Stream, *jetstream.StreamInfo) {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s, info
}

// seed inserts rows and waits until the outbox has published them.
func (s *ownNATS) seed(t *testing.T, rows []linkRow) {
	t.Helper()
	insertLinks(t, s.pool, rows)
	waitPublished(t, s.pool)
}

// TestEdgeBootsFromSnapshotLikeAuthority: an edge booted from a snapshot
// plus the stream after it answers 10,000 sampled codes exactly like the
// authority; it is not ready before the replay; and booted again from its
// local copy with NATS down, it serves the links it knows.
func TestEdgeBootsFromSnapshotLikeAuthority(t *testing.T) {
	s := startOnOwnNATS(t)
	rng := rand.New(rand.NewPCG(6, 6))

	phase1 := genLinks(rng, 9000, 20_000_000_000, "promo")
	s.seed(t, phase1)
	h := buildAndPublish(t, s.pool, s.js)
	t.Logf("snapshot at change version %d, stream seq %d, %d entries", h.ChangeVersion, h.StreamSeq, h.Entries)

	// Changes after the snapshot, which only the replay brings: new links,
	// and snapshot links disabled, deleted, re-enabled and retargeted.
	phase2 := genLinks(rng, 2000, 20_000_000_001, "late")
	insertLinks(t, s.pool, phase2)
	var active, disabled []string
	for _, l := range phase1 {
		switch {
		case l.status == "active" && l.expires == nil:
			active = append(active, l.code)
		case l.status == "disabled":
			disabled = append(disabled, l.code)
		}
	}
	updateLinks(t, s.pool, active[:300], `status = 'disabled'`)
	updateLinks(t, s.pool, active[300:500], `status = 'deleted'`)
	updateLinks(t, s.pool, active[500:700], `url = url || '&retargeted=1', redirect_type = 307`)
	updateLinks(t, s.pool, disabled[:100], `status = 'active'`)
	updateLinks(t, s.pool, active[700:800], `expires_at = now() - interval '1 minute'`)
	waitPublished(t, s.pool)

	dir := t.TempDir()
	edgeURL, e, stop := runEdge(t, s.nats.URL(), dir, func(c *edgeserver.Config) {
		c.OnStart = func(e *edgeserver.Edge) { e.Feed.Pause() }
	})
	stack.Eventually(t, "edge boots from the snapshot", 60*time.Second, e.Syncer.Booted)
	if cur := e.Snapshots.Current(); cur == nil || cur.Snap.Header.ChangeVersion != h.ChangeVersion {
		t.Fatalf("edge booted from %+v, want the snapshot at %d", cur, h.ChangeVersion)
	}
	if status, body := readyz(edgeURL); status != http.StatusServiceUnavailable {
		t.Fatalf("ready with the snapshot loaded but the replay paused: %d %s", status, body)
	}
	e.Feed.Resume()
	waitReady(t, edgeURL)
	// 2,000 new links and 900 changed ones came after the snapshot.
	if n := e.Overlay.Len(); n > len(phase2)+900 {
		t.Fatalf("the overlay holds %d entries: the edge replayed more than the changes after the snapshot", n)
	}

	truth := authority(t, s.pool)
	codes := sample(rng, truth, 10_000, 1500)
	compare(t, "edge booted from a snapshot", truth, askAll(t, edgeURL, codes), codes)
	t.Logf("10,000 answers match; %d from the snapshot, overlay %d entries", e.Handler.Counters.SnapshotHits.Load(), e.Overlay.Len())

	// Boot from the local copy with NATS down: the links the snapshot
	// holds and nothing changed since answer as before; readiness says
	// degraded.
	stop()
	s.nats.Stop()
	changed := map[string]bool{}
	for _, c := range append(append(codesOf(phase2), active[:800]...), disabled[:100]...) {
		changed[c] = true
	}
	var stable []string
	for _, l := range phase1 {
		if !changed[l.code] && len(stable) < 2000 {
			stable = append(stable, l.code)
		}
	}
	offURL, off, _ := runEdge(t, s.nats.URL(), dir, nil)
	stack.Eventually(t, "edge boots from its local copy with NATS down", 30*time.Second, off.Syncer.Booted)
	compare(t, "edge booted from disk with NATS down", truth, askAll(t, offURL, stable), stable)
	// In service, degraded: every edge restarted during a NATS outage
	// would otherwise stay out of the load balancer with a snapshot on
	// disk that answers every link it holds.
	if status, body := readyz(offURL); status != http.StatusOK || !strings.HasPrefix(body, "degraded:") {
		t.Fatalf("edge booted from disk without NATS: readiness %d %q; want 200 degraded", status, body)
	}
	evidence.Record(t, evidence.ContractUnderLag,
		"an edge booted from a snapshot (change version %d) plus the stream after it answered 10,000 sampled codes exactly like the authority; booted again from its disk copy with NATS down it answered %d unchanged links like the authority and reported itself in service, degraded",
		h.ChangeVersion, len(stable))
}

// TestHotSwapUnderLoad: snapshots swapped in while clients follow links get
// zero failed or wrong answers; a corrupt and a truncated snapshot are
// refused and the edge keeps serving the one it had.
func TestHotSwapUnderLoad(t *testing.T) {
	s := startOnOwnNATS(t)
	rng := rand.New(rand.NewPCG(7, 7))
	rows := genLinks(rng, 5000, 21_000_000_000, "load")
	s.seed(t, rows)
	truth := authority(t, s.pool)
	codes := codesOf(rows)

	waitSwap := func(v uint64) {
		t.Helper()
		stack.Eventually(t, fmt.Sprintf("snapshot %d in service", v), 60*time.Second, func() bool {
			cur := s.edge.Snapshots.Current()
			return cur != nil && cur.Snap.Header.ChangeVersion == v
		})
	}
	waitSwap(buildAndPublish(t, s.pool, s.js).ChangeVersion)

	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg            sync.WaitGroup
		asked, failed atomic.Int64
		firstWrong    atomic.Pointer[string]
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lr := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				code := codes[lr.IntN(len(codes))]
				status, loc, err := stack.Follow(s.edgeURL, code)
				asked.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				if got := (answer{status, loc}); got != truth[code] {
					failed.Add(1)
					msg := fmt.Sprintf("/%s answered %+v, want %+v", code, got, truth[code])
					firstWrong.CompareAndSwap(nil, &msg)
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	obs, err := s.js.ObjectStore(context.Background(), snapshot.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		roundStart := time.Now()
		// Unrelated new links move the change version on.
		s.seed(t, genLinks(rng, 300, 22_000_000_000+int64(round)*10_000, fmt.Sprintf("r%d", round)))
		before := asked.Load()
		h := buildAndPublish(t, s.pool, s.js)
		waitSwap(h.ChangeVersion)
		if asked.Load() == before {
			t.Fatal("no request was answered while the snapshot was swapped: the test proved nothing")
		}

		// A damaged file under a newer name is refused; the edge keeps h.
		data, err := obs.GetBytes(context.Background(), snapshot.ObjectName(h.ChangeVersion))
		if err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			data[len(data)/2] ^= 0x40
		} else {
			data = data[:len(data)-1000]
		}
		rejected := s.edge.Syncer.Rejected.Load()
		if _, err := obs.PutBytes(context.Background(), snapshot.ObjectName(h.ChangeVersion+1), data); err != nil {
			t.Fatal(err)
		}
		stack.Eventually(t, "damaged snapshot refused", 60*time.Second, func() bool { return s.edge.Syncer.Rejected.Load() != rejected })
		if err := s.edge.Syncer.LastRejection(); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("refusal: %v, want ErrCorrupt", err)
		}
		t.Logf("round %d (%v): swapped to %d; refused: %v", round, time.Since(roundStart).Round(time.Millisecond), h.ChangeVersion, s.edge.Syncer.LastRejection())
		if v := s.edge.Snapshots.Current().Snap.Header.ChangeVersion; v != h.ChangeVersion {
			t.Fatalf("after a refused snapshot the edge serves %d, want %d kept", v, h.ChangeVersion)
		}
		if err := obs.Delete(context.Background(), snapshot.ObjectName(h.ChangeVersion+1)); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	if msg := firstWrong.Load(); msg != nil {
		t.Errorf("first wrong answer: %s", *msg)
	}
	t.Logf("%d requests during %d swaps, %d failed or wrong; overlay now %d entries",
		asked.Load(), s.edge.Syncer.Swaps.Load(), failed.Load(), s.edge.Overlay.Len())
	if failed.Load() != 0 || asked.Load() == 0 {
		t.Fatalf("%d of %d requests failed or answered wrong during hot swaps", failed.Load(), asked.Load())
	}
}

// TestEdgeResyncsAfterRetention: an edge whose position has left the
// stream (retention purged events it never applied) reports not ready,
// waits for a snapshot that meets the stream, re-syncs from it by itself and
// then answers like the authority.
func TestEdgeResyncsAfterRetention(t *testing.T) {
	s := startOnOwnNATS(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 8))
	first := genLinks(rng, 2000, 23_000_000_000, "old")
	s.seed(t, first)
	h1 := buildAndPublish(t, s.pool, s.js)

	// The edge boots from the first snapshot, catches up, and goes away.
	dir := t.TempDir()
	edgeURL, _, stop := runEdge(t, s.nats.URL(), dir, nil)
	waitReady(t, edgeURL)
	stop()

	// While it is away: changes, a newer snapshot, then retention drops
	// everything the edge has not applied, and the newer snapshot goes too
	// (as if the edge came back between the purge and the next build).
	insertLinks(t, s.pool, genLinks(rng, 1000, 23_000_000_001, "new"))
	updateLinks(t, s.pool, codesOf(first[:200]), `status = 'disabled'`)
	waitPublished(t, s.pool)
	stream, info := streamInfo(t, s.js, linkevent.Stream)
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(info.State.LastSeq)); err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq <= h1.StreamSeq+1 {
		t.Fatalf("the purge left the edge's position (%d) on the stream (last %d)", h1.StreamSeq, info.State.LastSeq)
	}

	edgeURL, e, _ := runEdge(t, s.nats.URL(), dir, nil)
	stack.Eventually(t, "the edge notices that the stream lost its events", 60*time.Second, func() bool { return !e.Feed.Complete() })
	if status, body := readyz(edgeURL); status == http.StatusOK {
		t.Fatalf("edge behind the stream's retention reports ready: %s", body)
	}
	h2 := buildAndPublish(t, s.pool, s.js)
	waitReady(t, edgeURL)
	if v := e.Snapshots.Current().Snap.Header.ChangeVersion; v != h2.ChangeVersion || e.Syncer.Resyncs.Load() == 0 {
		t.Fatalf("edge serves snapshot %d after %d re-syncs, want %d after at least 1", v, e.Syncer.Resyncs.Load(), h2.ChangeVersion)
	}
	truth := authority(t, s.pool)
	codes := sample(rng, truth, 3000, 300)
	compare(t, "edge re-synced after retention", truth, askAll(t, edgeURL, codes), codes)
}
