package visibility

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/scrape"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
)

func TestMain(m *testing.M) { stack.Main(m) }

// scale is n in the launch gate and small otherwise.
func scale(small, n int) int {
	if os.Getenv("EDGELINK_GATE") != "" {
		return n
	}
	return small
}

// env is one stack: a database of the test's own, NATS, control and an edge
// with its default limits (the 404 budget included).
type env struct {
	pg      *stack.Postgres
	nats    *stack.NATS
	edge    *stack.Edge
	control *stack.Control
	ccfg    controlserver.Config
	made    int // creators so far: each has a tenant and an address of its own
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{pg: stack.SharedPostgres(t), nats: stack.NewNATS(t, stack.NATSConfig{})}
	e.edge = stack.NewEdge(t, edgeserver.Config{NATSURL: e.nats.URL(), Name: "visibility", SnapshotDir: t.TempDir(),
		// Every limit of the edge is its default but these two: on a
		// busy 2-core machine running control, PostgreSQL, NATS, the edge
		// and the test under the race detector, an authority round trip
		// can take longer than the 50 ms a question may wait for a slot
		// (the shedding that protects an overloaded authority), and the
		// test is about what the edge answers, not about this machine.
		AuthorityTimeout: 10 * time.Second, AuthorityMaxWait: 10 * time.Second})
	e.ccfg = controlserver.Config{DatabaseURL: e.pg.DSN, NATSURL: e.nats.URL(), PublicURL: e.edge.URL,
		Snapshots: snapshots.Schedule{Disabled: true}}
	e.control = stack.NewControl(t, e.ccfg)
	return e
}

// creator is one tenant creating from one loopback address and following
// each link from that address at once.
type creator struct {
	api stack.Client
	v   *stack.Visitor
}

func (e *env) creators(t *testing.T, n int) []creator {
	t.Helper()
	out := make([]creator, n)
	for i := range out {
		e.made++
		_, key := e.pg.NewTenant(t, fmt.Sprintf("creator-%d", e.made))
		v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(e.made))
		t.Cleanup(v.Close)
		out[i] = creator{api: stack.Client{ControlURL: e.control.URL, Key: key}, v: v}
	}
	return out
}

// tally counts what the follows right after a 201 answered.
type tally struct {
	created, redirected atomic.Int64
	mu                  sync.Mutex
	wrong               []string
}

func (tl *tally) bad(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.wrong) < 10 {
		tl.wrong = append(tl.wrong, fmt.Sprintf(format, args...))
	}
}

func (tl *tally) check(t *testing.T, what string) {
	t.Helper()
	if n, ok := tl.created.Load(), tl.redirected.Load(); n == 0 || ok != n || len(tl.wrong) > 0 {
		t.Fatalf("%s: %d of %d fresh links redirected right after their 201; first wrong answers: %s",
			what, ok, n, strings.Join(tl.wrong, "; "))
	}
}

// createAndFollow has c create links links, inFlight at a time, and follow
// each from its address right after its 201.
func createAndFollow(ctx context.Context, c creator, links, inFlight int, tag string, tl *tally) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range inFlight {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(links) {
					return
				}
				target := fmt.Sprintf("https://example.com/%s/%d", tag, i)
				r := c.api.CreatePatiently(ctx, stack.Link{URL: target})
				if r.Status != http.StatusCreated {
					tl.bad("create %s: %d %v %v", target, r.Status, r.Problem, r.Err)
					return
				}
				tl.created.Add(1)
				status, loc, err := c.v.Follow(r.Code)
				if err != nil || status != http.StatusFound || loc != r.URL {
					tl.bad("GET /%s from %s right after its 201: %d %q %v; want 302 %q", r.Code, c.v.IP, status, loc, err, r.URL)
					continue
				}
				tl.redirected.Add(1)
			}
		})
	}
	wg.Wait()
}

// TestEveryFreshLinkRedirects: creators follow each link right after its
// 201, from their own addresses, with the edge's default limits: one
// address eight at a time; fifty addresses at once, with the change feed
// running and then paused (every answer then comes from the authority, many
// codes a message); and during a bulk load of batches. Every follow is a 302
// to the link's target.
func TestEveryFreshLinkRedirects(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	parts := e.edge.Parts()
	before := parts.Handler.Counters.Resolved.Load()

	t.Run("one address, eight at a time", func(t *testing.T) {
		var tl tally
		createAndFollow(ctx, e.creators(t, 1)[0], 300, 8, "one", &tl)
		tl.check(t, "one address")
		evidence.Record(t, evidence.Jumpable, "one client address created %d links eight at a time and followed each right after its 201 with the edge's default limits: all %d 302",
			tl.created.Load(), tl.redirected.Load())
	})

	perCreator := scale(20, 300)
	for _, paused := range []bool{false, true} {
		name := "fifty addresses"
		if paused {
			name += ", change feed paused"
		}
		t.Run(name, func(t *testing.T) {
			if paused {
				parts.Feed.Pause()
				defer parts.Feed.Resume()
			}
			asked, reqs := parts.Resolver.AuthorityAsked.Load(), parts.Authority.Requests.Load()
			var tl tally
			var wg sync.WaitGroup
			for _, c := range e.creators(t, 50) {
				wg.Go(func() { createAndFollow(ctx, c, perCreator, 2, "fifty", &tl) })
			}
			wg.Wait()
			tl.check(t, name)
			asked, reqs = parts.Resolver.AuthorityAsked.Load()-asked, parts.Authority.Requests.Load()-reqs
			if paused && int64(asked) < tl.created.Load() {
				t.Fatalf("with the feed paused only %d of %d follows asked the authority", asked, tl.created.Load())
			}
			evidence.Record(t, evidence.Jumpable, "50 client addresses (50 tenants) created %d links, two at a time each, and followed each right after its 201 (change feed paused: %v): all %d 302; %d of them answered through the authority in %d round trips",
				tl.created.Load(), paused, tl.redirected.Load(), asked, reqs)
		})
	}

	t.Run("during a bulk load", func(t *testing.T) {
		bulk := scale(10_000, 100_000)
		_, key := e.pg.NewTenant(t, "bulk")
		loader := stack.Client{ControlURL: e.control.URL, Key: key}
		loadCtx, stopLoad := context.WithCancel(ctx)
		defer stopLoad()
		var loaded atomic.Int64
		var loadErr atomic.Pointer[string]
		var lw sync.WaitGroup
		batches := atomic.Int64{}
		for range 4 {
			lw.Go(func() {
				for loadCtx.Err() == nil {
					b := batches.Add(1) - 1
					if b >= int64(bulk/1000) {
						return
					}
					var sb strings.Builder
					sb.WriteString(`{"links": [`)
					for i := range 1000 {
						if i > 0 {
							sb.WriteByte(',')
						}
						fmt.Fprintf(&sb, `{"url": "https://bulk.example/%d/%d"}`, b, i)
					}
					sb.WriteString(`]}`)
					created, err := loader.CreateBatch(loadCtx, []byte(sb.String()))
					if err != nil || created != 1000 {
						msg := fmt.Sprintf("batch %d: %d created, %v", b, created, err)
						loadErr.CompareAndSwap(nil, &msg)
						return
					}
					loaded.Add(1000)
				}
			})
		}
		var tl tally
		var wg sync.WaitGroup
		for _, c := range e.creators(t, 8) {
			wg.Go(func() { createAndFollow(ctx, c, 300, 1, "during-bulk", &tl) })
		}
		wg.Wait()
		during := loaded.Load()
		lw.Wait()
		if m := loadErr.Load(); m != nil {
			t.Fatal(*m)
		}
		tl.check(t, "during a bulk load")
		evidence.Record(t, evidence.Jumpable, "while 4 loaders created %d links in batches of 1,000 (%d of them while the follows ran), 8 client addresses created %d links one at a time and followed each right after its 201: all %d 302",
			loaded.Load(), during, tl.created.Load(), tl.redirected.Load())
	})
	t.Logf("follows answered through the authority in all: %d", parts.Handler.Counters.Resolved.Load()-before)
}

// TestUnknownCodesAre404: random codes of the generated shape, asked from
// many addresses, are all 404 while the authority is reachable, and cost
// the authority far fewer round trips than misses (the frontier's
// promise answers them from memory). From one address, past its budget of
// 404s, unknown codes get 429, while a link that address creates, and one
// that exists, still redirect.
func TestUnknownCodesAre404(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.creators(t, 1)[0]
	known := c.api.CreatePatiently(ctx, stack.Link{URL: "https://example.com/known"})
	if known.Status != http.StatusCreated {
		t.Fatalf("create: %d %v", known.Status, known.Problem)
	}
	parts := e.edge.Parts()
	misses := scale(10_000, 100_000)
	const addresses = 200
	reqs, asked := parts.Authority.Requests.Load(), parts.Resolver.AuthorityAsked.Load()
	var got [600]atomic.Int64
	var wg sync.WaitGroup
	var bad atomic.Pointer[string]
	for a := range addresses {
		wg.Go(func() {
			v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(1000+a))
			defer v.Close()
			rng := rand.New(rand.NewPCG(uint64(a), 16))
			for range misses / addresses {
				code, _ := base62.Encode(1 + rng.Uint64N(base62.MaxID))
				status, _, err := v.Follow(code)
				if err != nil {
					msg := err.Error()
					bad.CompareAndSwap(nil, &msg)
					return
				}
				got[status].Add(1)
			}
		})
	}
	wg.Wait()
	if m := bad.Load(); m != nil {
		t.Fatal(*m)
	}
	reqs, asked = parts.Authority.Requests.Load()-reqs, parts.Resolver.AuthorityAsked.Load()-asked
	total := int64(misses / addresses * addresses)
	if got[404].Load() != total {
		t.Fatalf("%d random unknown codes from %d addresses: %d answered 404, %d 429, %d 503, %d 302; want all 404",
			total, addresses, got[404].Load(), got[429].Load(), got[503].Load(), got[302].Load())
	}
	if limit := total * 2 / 100; int64(reqs) >= limit {
		t.Fatalf("%d misses took %d authority round trips (%d codes asked); want fewer than %d (2%%)", total, reqs, asked, limit)
	}
	perHundredK := float64(reqs) * 100_000 / float64(total)
	evidence.Record(t, evidence.ContractUnderLag, "%d random 6-character codes asked from %d client addresses: all %d answered 404 (none 429 or 503); %d authority round trips (%.0f per 100,000 misses), %d codes asked, %d answered by the frontier's promise",
		total, addresses, got[404].Load(), reqs, perHundredK, asked, parts.Resolver.BeyondFrontier.Load())

	// One address past its budget.
	scanner := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(5000))
	defer scanner.Close()
	var statuses [600]int
	rng := rand.New(rand.NewPCG(7, 7))
	started := time.Now()
	for range 1500 {
		code, _ := base62.Encode(1 + rng.Uint64N(base62.MaxID))
		status, _, err := scanner.Follow(code)
		if err != nil {
			t.Fatal(err)
		}
		statuses[status]++
	}
	// The budget (the edge's defaults: 1,000, refilled at 50/s) refills
	// while the scan runs; on a slow enough machine the refill alone keeps
	// up with one client, and then no answer is a 429. What must hold at
	// any speed: the burst is answered 404, no more 404s than the budget
	// and its refill allow, and everything else 429.
	refill := int(50*time.Since(started).Seconds()) + 1
	if statuses[404] < 1000 || statuses[404] > 1000+refill || statuses[404]+statuses[429] != 1500 ||
		(1000+refill < 1500 && statuses[429] == 0) {
		t.Fatalf("1,500 unknown codes from one address: %d 404, %d 429; want the budget's 1,000 and its refill (%d) as 404, the rest 429", statuses[404], statuses[429], refill)
	}
	if status, loc, err := scanner.Follow(known.Code); err != nil || status != http.StatusFound || loc != known.URL {
		t.Fatalf("a known link from the address past its budget: %d %q %v; want 302", status, loc, err)
	}
	_, key := e.pg.NewTenant(t, "scanner")
	fresh := stack.Client{ControlURL: e.control.URL, Key: key}.CreatePatiently(ctx, stack.Link{URL: "https://example.com/fresh-from-scanner"})
	if fresh.Status != http.StatusCreated {
		t.Fatalf("create: %d %v", fresh.Status, fresh.Problem)
	}
	if status, loc, err := scanner.Follow(fresh.Code); err != nil || status != http.StatusFound || loc != fresh.URL {
		t.Fatalf("a link created by the address past its budget, right after its 201: %d %q %v; want 302", status, loc, err)
	}
	other := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(5001))
	defer other.Close()
	if status, _, _ := other.Follow("nope-1234"); status != http.StatusNotFound {
		t.Fatalf("an unknown code from another address: %d; want 404", status)
	}
	evidence.Record(t, evidence.Jumpable, "one client address asked 1,500 random unknown codes: %d 404 then %d 429 (its budget of 404s spent); a known link and one created right then still answered it 302; another address still got 404",
		statuses[404], statuses[429])
}

// TestNoGeneratedCodeShadowsARoute: with the counter raised (alloc
// raise-floor) to just below the ID of "readyz", the edge's old readiness
// path, the generator skips every case of the word and counts it as waste;
// the edge answers its probes under /-/, which no code can take, and the old
// path is a code that does not exist.
func TestNoGeneratedCodeShadowsARoute(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if err := e.control.Stop(); err != nil {
		t.Fatal(err)
	}
	readyz, err := base62.Decode("readyz")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := allocstore.New(e.pg.Pool()).RaiseFloor(ctx, "default", readyz-2, "gate"); err != nil {
		t.Fatal(err)
	}
	e.control = stack.NewControl(t, e.ccfg) // leases above the floor once the ceiling allows
	c := e.creators(t, 1)[0]
	c.api.ControlURL = e.control.URL
	var codes []string
	for i := range 4 {
		r := c.api.CreatePatiently(ctx, stack.Link{URL: fmt.Sprintf("https://example.com/route/%d", i)})
		if r.Status != http.StatusCreated {
			t.Fatalf("create %d: %d %v", i, r.Status, r.Problem)
		}
		if strings.EqualFold(r.Code, "readyz") {
			t.Fatalf("generated code %q: a reserved word", r.Code)
		}
		if status, loc, err := c.v.Follow(r.Code); err != nil || status != http.StatusFound || loc != r.URL {
			t.Fatalf("GET /%s: %d %q %v; want 302", r.Code, status, loc, err)
		}
		codes = append(codes, r.Code)
	}
	if codes[0] != "readyx" || codes[1] != "readyy" || codes[2] != "readz0" {
		t.Fatalf("generated codes %v; want readyx, readyy, then readz0 (readyz skipped)", codes)
	}
	fams, err := stack.Metrics(e.control.URL)
	if err != nil {
		t.Fatal(err)
	}
	skipped, _ := scrape.Value(fams, "control_links_generated_codes_skipped_total", "cause", "reserved")
	if skipped != 1 {
		t.Fatalf("control_links_generated_codes_skipped_total{cause=\"reserved\"} = %v; want 1", skipped)
	}
	for path, want := range map[string]int{"/-/readyz": 200, "/-/livez": 200, "/-/startupz": 200, "/readyz": 404, "/livez": 404} {
		if status, _, err := stack.Get(e.edge.URL + path); err != nil || status != want {
			t.Fatalf("GET %s on the edge: %d %v; want %d", path, status, err, want)
		}
	}
	evidence.Record(t, evidence.WasteAccounted, "counter raised to readyz-2: the generator answered %v, skipping readyz (counted: control_links_generated_codes_skipped_total{cause=\"reserved\"} = %v); the edge's probes answer under /-/ and /readyz is an unknown code (404)",
		codes, skipped)
}
