package controlserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/scrape"
	"github.com/edgelink/edgelink/shared/base62"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// running is a control instance started by a test.
type running struct {
	url  string
	stop func() error // cancels Run (as SIGTERM does) and waits for it
	done chan error
}

// startControl runs control on a loopback listener that exists before Run
// starts, so a test can probe an instance that has not started yet. It is
// stopped when the test ends.
func startControl(t *testing.T, cfg Config) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg) }()
	var result error
	stopped := false
	r.stop = func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-r.done:
		case <-time.After(2 * time.Minute):
			result = fmt.Errorf("control did not stop within 2 minutes")
		}
		return result
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("control stopped with: %v", err)
		}
	})
	return r
}

var client = &http.Client{Timeout: 30 * time.Second}

type answer struct {
	status int
	header http.Header
	body   string
}

func call(t *testing.T, method, url, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{status: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func status(t *testing.T, url string) int { return call(t, "GET", url, "", "").status }

// waitStatus polls url until it answers want, failing after a generous
// deadline with the last answer.
func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	var a answer
	if err := poll.WaitEvery(context.Background(), "GET "+url, 90*time.Second, 50*time.Millisecond, func() bool {
		a = call(t, "GET", url, "", "")
		return a.status == want
	}); err != nil {
		t.Fatalf("%v: still %d %q; want %d", err, a.status, a.body, want)
	}
}

func tenantKey(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	_, key, err := postgres.New(pool).CreateTenantWithKey(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Connections die with the server in the outage test: never reuse one.
	cfg.MaxConnIdleTime = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// lockCounter holds the default namespace's counter row locked in a
// transaction of its own, so every segment lease fails (lock timeout) until
// release is called.
func lockCounter(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	if err := tx.QueryRow(ctx, `SELECT next_id FROM alloc_namespaces WHERE namespace = 'default' FOR UPDATE`).Scan(&next); err != nil {
		t.Fatalf("lock the counter row: %v", err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx) // fails harmlessly when the server died
		}
	}
	t.Cleanup(release)
	return release
}

func createLink(t *testing.T, base, key, url string) answer {
	t.Helper()
	return call(t, "POST", base+"/api/v1/links", key, fmt.Sprintf(`{"url": %q}`, url))
}

// TestProbesFlip runs control against a PostgreSQL of its own, which the
// test locks and stops, and follows the three probes:
//   - /startupz is 503 while the first segment cannot be leased (the counter
//     row is locked), and 200 once it is;
//   - /readyz turns 503 when the runway falls to the low mark while leases
//     fail (creates still succeed from the reserve), and 200 again only
//     once a fresh segment is loaded after PostgreSQL comes back;
//   - /livez stays 200 throughout, also while PostgreSQL is stopped and the
//     loader's leases keep failing.
func TestProbesFlip(t *testing.T) {
	ctx := context.Background()
	// PostgreSQL runs as its own user when the test runs as root: it must
	// be able to enter the folder.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: filepath.Join(dir, "pg"), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	dsn := pg.DSN("postgres")
	pool := newPool(t, dsn)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const step = 4
	ns := idalloc.Namespace{Name: "default", Start: base62.MinID, End: base62.Space, Step: step}
	if err := allocstore.New(pool).EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	key := tenantKey(t, pool)
	nats := natstest.Start(t)

	release := lockCounter(t, pool)
	c := startControl(t, Config{DatabaseURL: dsn, NATSURL: nats.ClientURL(), PublicURL: "http://edge.test",
		IDStep: step, Runway: &idalloc.RunwayMarks{LowIDs: 2, HighIDs: step, LowSeconds: -1, HighSeconds: -1}})

	// Startup: the listener answers before the first segment exists.
	waitStatus(t, c.url+"/livez", 200)
	for i := 0; i < 3; i++ {
		if s := status(t, c.url+"/startupz"); s != 503 {
			t.Fatalf("/startupz before the first segment: %d; want 503", s)
		}
		if s := status(t, c.url+"/readyz"); s != 503 {
			t.Fatalf("/readyz before the first segment: %d; want 503", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	release()
	waitStatus(t, c.url+"/startupz", 200)
	waitStatus(t, c.url+"/readyz", 200)
	if a := createLink(t, c.url, key, "https://example.com/first"); a.status != 201 {
		t.Fatalf("create after startup: %d %s", a.status, a.body)
	}

	// Runway: with leases failing, creates use up the reserve; readiness
	// turns off at the low mark (2 IDs left) while creates still succeed.
	release = lockCounter(t, pool)
	// A lease that committed just before the lock may still be on its way
	// into the allocator (under load that takes a while), and would lift
	// the runway again after readiness was lost: wait until control holds
	// every leased ID it has not handed out, so from here the runway moves
	// only with creates.
	var leased int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(seg_end - seg_start), 0) FROM alloc_audit WHERE namespace = 'default'`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "control holds every leased ID but the one created", 30*time.Second, func() bool {
		fams, err := scrape.Scrape(c.url + "/metrics")
		if err != nil {
			return false
		}
		cur, _ := scrape.Value(fams, "control_idalloc_current_remaining_ids")
		standby, _ := scrape.Value(fams, "control_idalloc_standby_remaining_ids")
		return cur+standby == float64(leased-1)
	})
	created, readyLost := 0, false
	for i := 0; i < 4*step && !readyLost; i++ {
		if a := createLink(t, c.url, key, fmt.Sprintf("https://example.com/runway/%d", i)); a.status != 201 {
			t.Fatalf("create %d with runway left: %d %s", i, a.status, a.body)
		}
		created++
		readyLost = status(t, c.url+"/readyz") == 503
	}
	if !readyLost {
		t.Fatalf("/readyz still 200 after %d creates with leases failing (segments of %d)", created, step)
	}
	t.Logf("readiness lost after %d creates with leases failing", created)
	if a := createLink(t, c.url, key, "https://example.com/reserve"); a.status != 201 {
		t.Fatalf("create below the low mark (reserve left): %d %s", a.status, a.body)
	}
	if s := status(t, c.url+"/readyz"); s != 503 {
		t.Fatalf("/readyz with runway below the low mark: %d; want 503", s)
	}

	// Outage: PostgreSQL stops. The loader's leases fail; liveness holds.
	failures := func() float64 {
		fams, err := scrape.Scrape(c.url + "/metrics")
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		v, _ := scrape.Value(fams, "control_idalloc_load_failures_total")
		return v
	}
	before := failures()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	release()
	livezChecks := 0
	if err := poll.WaitEvery(ctx, fmt.Sprintf("load failures past %v+3 after stopping PostgreSQL", before), 90*time.Second, 100*time.Millisecond, func() bool {
		if failures() >= before+3 {
			return true
		}
		if s := status(t, c.url+"/livez"); s != 200 {
			t.Fatalf("/livez during the PostgreSQL outage: %d; want 200", s)
		}
		livezChecks++
		return false
	}); err != nil {
		t.Fatal(err)
	}
	// Past the time a lease or seal can take (5 s), livez is still green.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if s := status(t, c.url+"/livez"); s != 200 {
			t.Fatalf("/livez during the PostgreSQL outage: %d; want 200", s)
		}
		livezChecks++
	}
	if s := status(t, c.url+"/readyz"); s != 503 {
		t.Fatalf("/readyz during the outage with the runway low: %d; want 503", s)
	}
	if s := status(t, c.url+"/startupz"); s != 503 {
		t.Fatalf("/startupz with the authority unreachable: %d; want 503", s)
	}
	t.Logf("livez 200 on %d checks during the outage; load failures %v -> %v", livezChecks, before, failures())

	// Recovery: PostgreSQL is back, a segment is leased, readiness returns.
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c.url+"/readyz", 200)
	if s := status(t, c.url+"/livez"); s != 200 {
		t.Fatalf("/livez after the outage: %d", s)
	}
	var a answer
	if err := poll.WaitEvery(ctx, "a create after PostgreSQL came back", 90*time.Second, 200*time.Millisecond, func() bool {
		a = createLink(t, c.url, key, "https://example.com/after-outage")
		return a.status == 201
	}); err != nil {
		t.Fatalf("%v: %d %s", err, a.status, a.body)
	}
}

// TestShutdownDrains stops control (as SIGTERM does) while a create is
// blocked in PostgreSQL: /readyz turns 503 and a new create is refused with
// 503 and Retry-After while reads are still served; the blocked create
// completes with 201 once released; then the allocator is closed. Its
// segments are sealed with exactly the committed creates, the counter never
// went back, and the next instance leases above everything the first held:
// unused IDs are discarded, never returned.
func TestShutdownDrains(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool := newPool(t, dsn)
	key := tenantKey(t, pool)
	nats := natstest.Start(t)
	cfg := Config{DatabaseURL: dsn, NATSURL: nats.ClientURL(), PublicURL: "http://edge.test", IDStep: 1000,
		DrainTimeout: 2 * time.Minute}
	c := startControl(t, cfg)
	waitStatus(t, c.url+"/readyz", 200)
	first := createLink(t, c.url, key, "https://example.com/before")
	if first.status != 201 {
		t.Fatalf("create: %d %s", first.status, first.body)
	}

	// Hold every insert into links until the test commits.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `LOCK TABLE links IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan answer, 1)
	go func() { blocked <- createLink(t, c.url, key, "https://example.com/in-flight") }()
	poll.Until(t, "the create to wait on the links lock", 90*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE relation = 'links'::regclass AND NOT granted`).Scan(&n)
		return n > 0
	})

	stopped := make(chan error, 1)
	go func() { stopped <- c.stop() }()
	waitStatus(t, c.url+"/readyz", 503)
	refused := createLink(t, c.url, key, "https://example.com/during-drain")
	if refused.status != 503 || refused.header.Get("Retry-After") == "" {
		t.Fatalf("create while draining: %d Retry-After %q %s; want 503 with Retry-After", refused.status, refused.header.Get("Retry-After"), refused.body)
	}
	if s := status(t, c.url+"/livez"); s != 200 {
		t.Fatalf("/livez while draining: %d", s)
	}
	select {
	case err := <-stopped:
		t.Fatalf("control stopped (%v) with a create in flight", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-blocked; a.status != 201 {
		t.Fatalf("create in flight at shutdown: %d %s; want 201", a.status, a.body)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("control stopped with: %v", err)
	}

	var segments, open, used int64
	var maxEnd, nextID int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE sealed_at IS NULL), coalesce(sum(used_count), 0), max(seg_end)
		FROM alloc_audit WHERE namespace = 'default'`).Scan(&segments, &open, &used, &maxEnd); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT next_id FROM alloc_namespaces WHERE namespace = 'default'`).Scan(&nextID); err != nil {
		t.Fatal(err)
	}
	var links int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM links`).Scan(&links); err != nil {
		t.Fatal(err)
	}
	t.Logf("after shutdown: %d segments, %d open, %d IDs used, %d links, max end %d, counter %d", segments, open, used, links, maxEnd, nextID)
	if open != 0 || used != 2 || links != 2 {
		t.Fatalf("after the drain: %d of %d segments open, %d IDs used, %d links; want all sealed, 2 used, 2 links", open, segments, used, links)
	}
	if nextID < maxEnd {
		t.Fatalf("counter %d below the highest segment end %d: IDs were returned", nextID, maxEnd)
	}

	// A new instance never resumes the old segments.
	c2 := startControl(t, cfg)
	waitStatus(t, c2.url+"/readyz", 200)
	a := createLink(t, c2.url, key, "https://example.com/next-instance")
	if a.status != 201 {
		t.Fatalf("create on the next instance: %d %s", a.status, a.body)
	}
	var made struct{ Code string }
	if err := json.Unmarshal([]byte(a.body), &made); err != nil {
		t.Fatal(err)
	}
	code := made.Code
	id, err := base62.Decode(code)
	if err != nil {
		t.Fatalf("code %q of the next instance: %v", code, err)
	}
	if int64(id) < maxEnd {
		t.Fatalf("next instance handed out ID %d (%s), inside the segments the stopped one held (below %d)", id, code, maxEnd)
	}
}
