package importjobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/control/importjobs/pgstore"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// seqIDs hands out IDs in order (the segment allocator has its own tests;
// gate/console runs the real one under the console's imports).
type seqIDs struct{ n *atomic.Uint64 }

func (s seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	return link.IDBase(d) + s.n.Add(1), nil
}
func (seqIDs) Done(uint64, bool) {}

// env is a fresh database with the links service and a job store.
type env struct {
	pool  *pgxpool.Pool
	st    *postgres.Store
	svc   *links.Service
	jobs  *pgstore.Store
	short links.ShortURLs
}

func newEnv(t testing.TB) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	if _, err := st.EnsureDefaultDomain(context.Background(), "sho.rt"); err != nil {
		t.Fatal(err)
	}
	short, err := links.NewShortURLs("https://sho.rt")
	if err != nil {
		t.Fatal(err)
	}
	svc := links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{Reserved: api.Routes})
	return &env{pool: pool, st: st, svc: svc, jobs: pgstore.New(pool), short: short}
}

// tenant makes a tenant with a key and returns both ids and the key.
func (e *env) tenant(t *testing.T, name string) (tenant, keyID int64, key string) {
	t.Helper()
	tenant, key, err := e.st.CreateTenantWithKey(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM api_keys WHERE tenant_id = $1`, tenant).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	return tenant, keyID, key
}

func (e *env) addDomain(t *testing.T, tenant int64, host string) {
	t.Helper()
	if _, err := domains.New(e.st, domains.Config{}).Create(context.Background(), tenant, domains.Input{Host: host, CodeMode: link.CodesSequential}); err != nil {
		t.Fatalf("add domain %s: %v", host, err)
	}
}

// count is how many links tenant has.
func (e *env) count(t *testing.T, tenant int64) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM links WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runner starts a runner of e's jobs writing with l, stopped (and waited
// for) when the test ends.
func (e *env) runner(t *testing.T, l importjobs.Links, cfg importjobs.Config) *importjobs.Runner {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 50 * time.Millisecond
	}
	r := importjobs.NewRunner(e.jobs, l, e.short, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// waitState polls until job id of tenant is in state and returns it.
func (e *env) waitState(t *testing.T, tenant int64, id string, want importjobs.State) importjobs.Job {
	t.Helper()
	var j importjobs.Job
	var err error
	poll.Until(t, fmt.Sprintf("job %s %s", id, want), 2*time.Minute, func() bool {
		j, err = e.jobs.Job(context.Background(), tenant, id)
		return err == nil && j.State == want
	})
	return j
}

// csvRows is a YOURLS CSV of n rows with codes prefix-0000 onwards.
func csvRows(prefix string, n int) []byte {
	var b strings.Builder
	b.WriteString("keyword,url,title\n")
	for i := range n {
		fmt.Fprintf(&b, "%s-%04d,https://example.com/%s/%d,Row %d\n", prefix, i, prefix, i, i)
	}
	return []byte(b.String())
}

// gatedLinks holds every batch until its gate opens: a batch in flight
// for as long as a test needs, which the real service cannot be made to
// do on cue.
type gatedLinks struct {
	importjobs.Links
	gate    chan struct{}
	entered chan struct{} // a batch arrived (buffered 1, never blocks)
	gaveUp  chan struct{} // a batch's run was stopped while it waited (buffered 1)
}

func newGate(l importjobs.Links) *gatedLinks {
	return &gatedLinks{Links: l, gate: make(chan struct{}), entered: make(chan struct{}, 1), gaveUp: make(chan struct{}, 1)}
}

func (g *gatedLinks) CreateBatch(ctx context.Context, tenant int64, key string, reqs []links.CreateRequest) (links.BatchResult, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		select {
		case g.gaveUp <- struct{}{}:
		default:
		}
		return links.BatchResult{}, ctx.Err()
	}
	return g.Links.CreateBatch(ctx, tenant, key, reqs)
}
