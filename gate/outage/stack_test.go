package outage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/shared/base62"
)

// stack is one scenario's authority and stream: a PostgreSQL server of
// its own (tests stop it), an in-process NATS JetStream (tests stop it
// too) and API keys of tenants created on it.
type stack struct {
	pg   *pgserver.Server
	dsn  string
	pool *pgxpool.Pool
	nats *natstest.Server
	keys []string
}

func newStack(t *testing.T, tenants int) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "edgelink-gate-pg-")
	if err != nil {
		t.Fatal(err)
	}
	// Fast skips fsync, which only an OS crash could notice; commits stay
	// synchronous, so a postmaster killed by a test loses nothing that
	// control answered 201 for (asynchronous commit would).
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: dir, Fast: true, Settings: []string{"synchronous_commit=on"}})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
		os.RemoveAll(dir)
	})
	admin, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE edgelink")
	admin.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{pg: pg, dsn: pg.DSN("edgelink"), nats: natstest.Start(t)}
	if s.pool, err = pgxpool.New(ctx, s.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.pool.Close)
	if err := postgres.Migrate(ctx, s.pool); err != nil {
		t.Fatal(err)
	}
	st := postgres.New(s.pool)
	for i := range tenants {
		id, err := st.CreateTenant(ctx, fmt.Sprintf("gate-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		key, err := st.CreateAPIKey(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s.keys = append(s.keys, key)
	}
	return s
}

// control is the control binary running as a child process in its own
// process group.
type control struct {
	URL  string
	Pid  int
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

var listenLine = regexp.MustCompile(`msg="control listening" addr=(\S+)`)

// startControl runs `control serve` against the stack with the edge at
// edgeURL as its public URL, plus extra flags, and returns once its API
// listens (the first segment is loaded by then). It is SIGKILLed when the
// test ends if it still runs.
func (s *stack) startControl(t *testing.T, edgeURL string, extra ...string) *control {
	t.Helper()
	args := append([]string{"--database-url", s.dsn, "--log-level", "info", "serve",
		"--listen", "127.0.0.1:0", "--nats-url", s.nats.ClientURL(), "--public-url", edgeURL}, extra...)
	cmd := exec.Command(controlBinary(t), args...)
	// Its own process group, so a kill takes everything it started; and
	// killed with this process, so a crashed test leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &control{cmd: cmd, log: new(syncBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.Pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("control pid %d log (tail):\n%s", c.Pid, c.log.tail(6000))
		}
	})
	deadline := time.After(2 * time.Minute)
	for {
		if m := listenLine.FindStringSubmatch(c.log.String()); m != nil {
			c.URL = "http://" + m[1]
			return c
		}
		select {
		case <-c.done:
			t.Fatalf("control exited before listening:\n%s", c.log.tail(4000))
		case <-deadline:
			t.Fatalf("control not listening within 2 minutes:\n%s", c.log.tail(4000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill is SIGKILL to control's process group: no deferred function runs,
// no segment is sealed, transactions are cut mid-flight.
func (c *control) Kill() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(-c.Pid, syscall.SIGKILL)
	<-c.done
}

// Stop asks control to shut down gracefully (SIGTERM) and waits for it.
func (c *control) Stop(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(c.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
		if code := c.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("control pid %d exited with %d after SIGTERM:\n%s", c.Pid, code, c.log.tail(4000))
		}
	case <-time.After(60 * time.Second):
		t.Errorf("control pid %d did not stop within 60s of SIGTERM; killing it", c.Pid)
		c.Kill()
	}
}

// instancePrefix starts the allocator instance name control records in
// the audit: "<hostname>-<pid>-<random>".
func (c *control) instancePrefix() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-", host, c.Pid)
}

// syncBuffer collects a child's output for parsing and failure reports.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) tail(n int) string {
	out := s.String()
	if len(out) > n {
		out = "…" + out[len(out)-n:]
	}
	return out
}

// edge is an edge running in this process.
type edge struct {
	URL  string
	E    *edgeserver.Edge
	stop func()
}

// startEdge runs an edge against natsURL with its snapshot copy in dir. It
// is stopped when the test ends.
func startEdge(t *testing.T, natsURL, dir string) *edge {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr, parts := make(chan net.Addr, 1), make(chan *edgeserver.Edge, 1)
	done := make(chan error, 1)
	cfg := edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: natsURL, Name: fmt.Sprintf("gate-%d", rand.Uint32()),
		SnapshotDir: dir, RatePerIP: -1,
		// A busy 2-core machine must not turn an authority answer into
		// a 503 by timing out.
		AuthorityTimeout: 10 * time.Second,
		OnListen:         func(a net.Addr) { addr <- a }, OnStart: func(e *edgeserver.Edge) { parts <- e }}
	go func() { done <- edgeserver.Run(ctx, cfg) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("edge stopped with: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Error("edge did not stop within 60s")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-addr:
		return &edge{URL: "http://" + a.String(), E: <-parts, stop: stop}
	case err := <-done:
		t.Fatalf("edge failed to start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("edge not listening within 60s")
	}
	return nil
}

// apiClient's deadline is far above any server-side bound (a shared create
// transaction is bounded at 10s): a create that hangs shows up as a client
// timeout error, not as a slow success.
var apiClient = &http.Client{Timeout: 2 * time.Minute}

var noFollow = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// created is one create's answer.
type created struct {
	Status     int
	Code       string
	URL        string // the normalized target control answered
	Problem    map[string]any
	RetryAfter string
	Err        error // transport error: no answer at all
}

// createLink posts one create and returns what came back.
func createLink(controlURL, key, target, customCode string) created {
	body := map[string]any{"url": target}
	if customCode != "" {
		body["code"] = customCode
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", controlURL+"/api/v1/links", bytes.NewReader(b))
	if err != nil {
		return created{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiClient.Do(req)
	if err != nil {
		return created{Err: err}
	}
	defer resp.Body.Close()
	out := created{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode == http.StatusCreated {
		out.Code, _ = m["code"].(string)
		out.URL, _ = m["url"].(string)
	} else {
		out.Problem = m
	}
	return out
}

// createPatiently is createLink that waits out the tenant's rate limit.
func createPatiently(t *testing.T, controlURL, key, target, customCode string) created {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c := createLink(controlURL, key, target, customCode)
		if c.Status != http.StatusTooManyRequests || time.Now().After(deadline) {
			return c
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// follow asks the edge for code once.
func follow(edgeURL, code string) (int, string, error) {
	resp, err := noFollow.Get(edgeURL + "/" + code)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// ledger records every 201 a test saw: the code, the target and the ID it
// decodes to, and who answered. Duplicate IDs are what UniqueIDs forbids;
// the unique index would hide them in the table, so they are caught here.
type ledger struct {
	mu     sync.Mutex
	byCode map[string]issued
	byID   map[uint64]string
	dups   []string
	bad    []string
}

type issued struct {
	ID  uint64
	URL string
	By  string
}

func newLedger() *ledger {
	return &ledger{byCode: map[string]issued{}, byID: map[uint64]string{}}
}

// add records a generated code's 201.
func (l *ledger) add(code, url, by string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, err := base62.Decode(code)
	if err != nil || len(code) != base62.Length || id > base62.MaxID {
		l.bad = append(l.bad, fmt.Sprintf("%q (%v)", code, err))
		return
	}
	if prev, ok := l.byID[id]; ok {
		l.dups = append(l.dups, fmt.Sprintf("ID %d answered as %s and %s", id, prev, code))
		return
	}
	l.byID[id] = code
	l.byCode[code] = issued{ID: id, URL: url, By: by}
}

func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byCode)
}

// codes returns the recorded codes in ID order.
func (l *ledger) codes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.byCode))
	for c := range l.byCode {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return l.byCode[out[i]].ID < l.byCode[out[j]].ID })
	return out
}

func (l *ledger) get(code string) issued {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byCode[code]
}

// checkUnique fails the test on a duplicate or malformed ID.
func (l *ledger) checkUnique(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dups) > 0 || len(l.bad) > 0 {
		t.Fatalf("IDs handed out twice: %v; codes outside the 6-character space: %v", l.dups, l.bad)
	}
}

// checkInDatabase fails the test unless every recorded link is in the
// links table with the target its 201 named.
func (l *ledger) checkInDatabase(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	codes := l.codes()
	rows, err := pool.Query(context.Background(), `SELECT code, id, url FROM links WHERE code = ANY($1)`, codes)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id  int64
		url string
	}
	got := map[string]row{}
	var code string
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&code, &r.id, &r.url}, func() error { got[code] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, c := range codes {
		want := l.get(c)
		if g, ok := got[c]; !ok || uint64(g.id) != want.ID || g.url != want.URL {
			if bad++; bad <= 10 {
				t.Errorf("201 for %s (ID %d, %s): the links table has %+v (present %v)", c, want.ID, want.URL, g, ok)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d answered links are not in the database as answered", bad, len(codes))
	}
}

// checkRedirects fails the test unless every code in codes answers 302
// with its target on the edge. Each is polled briefly: it must be a 302 at
// once, but a loaded machine may refuse a connection.
func (l *ledger) checkRedirects(t *testing.T, edgeURL string, codes []string) {
	t.Helper()
	wrong := 0
	for _, c := range codes {
		want := l.get(c).URL
		status, loc, err := follow(edgeURL, c)
		if err != nil || status != http.StatusFound || loc != want {
			if wrong++; wrong <= 10 {
				t.Errorf("GET /%s on the edge: %d %q %v; want 302 %q", c, status, loc, err, want)
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d answered links do not redirect on the edge", wrong, len(codes))
	}
}

// interval is one row of the allocation audit.
type interval struct {
	Start, End uint64
	Instance   string
	Sealed     bool
	Used       uint64
	SealedBy   string
}

func (iv interval) String() string {
	s := fmt.Sprintf("[%d, %d)", iv.Start, iv.End)
	if iv.Sealed {
		s += fmt.Sprintf(" sealed used=%d by %s", iv.Used, iv.SealedBy)
	} else {
		s += " open"
	}
	return s
}

// audit reads every audited interval in ID order.
func audit(t *testing.T, pool *pgxpool.Pool) []interval {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT seg_start, seg_end, instance, sealed_at IS NOT NULL, coalesce(used_count, 0), coalesce(sealed_by, '')
		FROM alloc_audit ORDER BY seg_start`)
	if err != nil {
		t.Fatal(err)
	}
	var out []interval
	var iv interval
	if _, err := pgx.ForEachRow(rows, []any{&iv.Start, &iv.End, &iv.Instance, &iv.Sealed, &iv.Used, &iv.SealedBy}, func() error {
		out = append(out, iv)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// of returns the intervals of instances whose names start with prefix.
func of(ivs []interval, prefix string) []interval {
	var out []interval
	for _, iv := range ivs {
		if strings.HasPrefix(iv.Instance, prefix) {
			out = append(out, iv)
		}
	}
	return out
}

func within(ivs []interval, id uint64) bool {
	for _, iv := range ivs {
		if id >= iv.Start && id < iv.End {
			return true
		}
	}
	return false
}

// knows reports whether the edge holds code itself, from the stream (its
// overlay) or from a snapshot it swapped in, rather than only through the
// authority.
func (e *edge) knows(code string) bool {
	if _, ok := e.E.Overlay.Lookup([]byte(code)); ok {
		return true
	}
	_, ok := e.E.Snapshots.Lookup([]byte(code))
	return ok
}

// newestVersion is the newest change version in the outbox: what an edge
// that received every committed change has applied.
func newestVersion(t *testing.T, pool *pgxpool.Pool) uint64 {
	t.Helper()
	var v int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(version), 0) FROM outbox`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return uint64(v)
}

// waitApplied waits until the edge has applied the outbox's newest version.
func waitApplied(t *testing.T, e *edge, pool *pgxpool.Pool, within time.Duration) uint64 {
	t.Helper()
	want := newestVersion(t, pool)
	deadline := time.Now().Add(within)
	for {
		p := e.E.Feed.Position()
		if p.Version >= want {
			return p.Version
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edge applied version %d (%+v) after %v; the outbox's newest is %d", p.Version, p, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runControlCommand runs a one-shot control subcommand and returns its
// output and error.
func (s *stack) runControlCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, controlBinary(t), append([]string{"--database-url", s.dsn}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
