package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/internal/stack"
)

func TestVersionOf(t *testing.T) {
	for body, want := range map[string]uint64{
		`{"code":"0000A1","version":123,"url":"x"}`: 123,
		`{"version": 9}`:  9,
		`{"code":"x"}`:    0,
		`{"version":"x"}`: 0,
	} {
		if got := versionOf([]byte(body)); got != want {
			t.Errorf("versionOf(%s) = %d, want %d", body, got, want)
		}
	}
}

// TestCreateRequest: every built request is one valid HTTP request with
// the key, a JSON body of its own and the right length.
func TestCreateRequest(t *testing.T) {
	build := createRequest("127.0.0.1:9", "elk_secret", "https://shop.example/s/", "?utm_source=x")
	var buf []byte
	seen := map[string]bool{}
	for _, i := range []int{0, 7, 10, 123456789} {
		buf = build(buf[:0], i)
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(buf)))
		if err != nil {
			t.Fatalf("request %d: %v\n%s", i, err, buf)
		}
		body, _ := io.ReadAll(req.Body)
		var v struct{ URL string }
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("request %d: body %q: %v", i, body, err)
		}
		want := fmt.Sprintf("https://shop.example/s/%d?utm_source=x", i)
		if req.Method != "POST" || req.URL.Path != "/api/v1/links" || req.Header.Get("Authorization") != "Bearer elk_secret" ||
			req.ContentLength != int64(len(body)) || v.URL != want || seen[v.URL] {
			t.Fatalf("request %d: %s %s %q length %d url %q; want POST /api/v1/links with the key and url %q", i, req.Method, req.URL.Path,
				req.Header.Get("Authorization"), req.ContentLength, v.URL, want)
		}
		seen[v.URL] = true
	}
	if n := testing.AllocsPerRun(100, func() { buf = build(buf[:0], 424242) }); n != 0 {
		t.Fatalf("building a request allocated %v times", n)
	}
}

func TestApplyDelays(t *testing.T) {
	ms := time.Millisecond
	answers := []answered{
		{at: 10 * ms, status: 201, version: 5},  // read at 12: 2 ms
		{at: 11 * ms, status: 201, version: 3},  // read at 9 already: early, 0
		{at: 5 * ms, status: 201, version: 8},   // read at 12 (the read at 20 went back): 7 ms
		{at: 12 * ms, status: 201, version: 10}, // read at 1,500: 1,488 ms
		{at: 13 * ms, status: 429},              // not a create
		{at: 14 * ms, status: 201, version: 20}, // never applied
		{at: 15 * ms, status: 201},              // a 201 without a version
		{},                                      // never answered
	}
	reads := []position{{9 * ms, 4}, {12 * ms, 9}, {20 * ms, 6}, {1500 * ms, 10}}
	got := applyDelays(answers, reads)
	want := applyResult{Reads: 4, Every: 497 * ms, P50: 7 * ms, P99: 1488 * ms, Max: 1488 * ms, Over1s: 1, Early: 1, NotApplied: 1, NoVersion: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("applyDelays (-want +got):\n%s", diff)
	}
}

// fakeControl answers POST /api/v1/links with 201 and the next version,
// and fakeEdge's metrics show the versions applied so far, lagging by
// lag creates until the attack is over.
type fakeStack struct {
	mu      sync.Mutex
	bodies  map[string]bool
	version atomic.Uint64
	lag     uint64
	done    atomic.Bool
}

func (f *fakeStack) control(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var v struct{ URL string }
	if r.Method != "POST" || r.URL.Path != "/api/v1/links" || r.Header.Get("Authorization") != "Bearer elk_k" || json.Unmarshal(body, &v) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	dup := f.bodies[v.URL]
	f.bodies[v.URL] = true
	f.mu.Unlock()
	if dup {
		w.WriteHeader(http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"code":"abc","url":%q,"version":%d}`, v.URL, f.version.Add(1))
}

func (f *fakeStack) edge(w http.ResponseWriter, r *http.Request) {
	v := f.version.Load()
	if !f.done.Load() {
		v -= min(v, f.lag)
	}
	fmt.Fprintf(w, "# HELP edge_x x\nedge_x 1\nedge_changefeed_applied_version %d\nedge_y 2\n", v)
}

func serveHTTP(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestAttackCreates runs the creates generator against a fake control and
// edge: every create is sent once with a target of its own, answered 201,
// and timed until the edge shows its version.
func TestAttackCreates(t *testing.T) {
	f := &fakeStack{bodies: map[string]bool{}, lag: 3}
	control, edge := serveHTTP(t, f.control), serveHTTP(t, f.edge)
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("elk_k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	go func() {
		// The last few versions show only after the attack: the watch
		// waits for them.
		_ = stack.Poll(context.Background(), "attack over", time.Minute, func() bool { return f.version.Load() == 300 })
		f.done.Store(true)
	}()
	err := attackCreates([]string{"-url", control, "-key-file", key, "-edge", edge, "-rate", "1000", "-duration", "300ms",
		"-connections", "8", "-read-every", "1ms", "-watch", "30s"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var r createsResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if r.Sent != 300 || r.Created != 300 || r.Errors != 0 || r.Codes["201"] != 300 || len(f.bodies) != 300 || r.Problem != "" {
		t.Fatalf("sent %d, created %d, errors %d, codes %v, distinct targets %d, problem %q; want 300 created once each",
			r.Sent, r.Created, r.Errors, r.Codes, len(f.bodies), r.Problem)
	}
	a := r.Apply
	if a == nil || a.NotApplied != 0 || a.NoVersion != 0 || a.Reads == 0 || a.ReadErrors != 0 || a.Max <= 0 {
		t.Fatalf("apply figures %+v; want every create applied, with reads", a)
	}
}

// TestAttackCreatesCountsRefusals: answers other than 201 are counted,
// and the first is kept.
func TestAttackCreatesCountsRefusals(t *testing.T) {
	var n atomic.Int64
	control := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"title":"Too Many Requests"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"version":1}`)
	})
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("elk_k"), 0o600)
	var out bytes.Buffer
	if err := attackCreates([]string{"-url", control, "-key-file", key, "-rate", "500", "-duration", "100ms", "-connections", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	var r createsResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Sent != 50 || r.Created != 25 || r.Codes["429"] != 25 || !strings.Contains(r.Problem, "429") || r.Apply != nil {
		t.Fatalf("sent %d, created %d, codes %v, problem %q, apply %v; want 25 of each, the first 429 kept, no edge watched", r.Sent, r.Created, r.Codes, r.Problem, r.Apply)
	}
}

func TestAttackCreatesRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	empty, key := filepath.Join(dir, "empty"), filepath.Join(dir, "key")
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(key, []byte("elk_k"), 0o600)
	for _, args := range [][]string{
		{"-url", "127.0.0.1:1", "-key-file", key},
		{"-url", "http://127.0.0.1:1", "-key-file", filepath.Join(dir, "missing")},
		{"-url", "http://127.0.0.1:1", "-key-file", empty},
		{"-url", "http://127.0.0.1:1", "-key-file", key, "-rate", "0"},
	} {
		if err := attackCreates(args, io.Discard); err == nil {
			t.Errorf("attackCreates(%q) succeeded", args)
		}
	}
}

// TestAttackPgx writes raw creates into a migrated database, open and
// closed loop, each a link and its outbox row.
func TestAttackPgx(t *testing.T) {
	pg := stack.NewPostgres(t, stack.PostgresConfig{})
	ctx := context.Background()
	tenant, _ := pg.NewTenant(t, "raw")
	run := func(args ...string) createsResult {
		t.Helper()
		var out bytes.Buffer
		if err := attackPgx(append([]string{"-dsn", pg.DSN, "-tenant", fmt.Sprint(tenant)}, args...), &out); err != nil {
			t.Fatal(err)
		}
		var r createsResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	open := run("-first-id", "1", "-rate", "200", "-duration", "500ms", "-connections", "4")
	if open.Sent != 100 || open.Created != 100 || open.Errors != 0 || open.Offered != 200 {
		t.Fatalf("open loop: %+v; want 100 created at 200/s", open)
	}
	closed := run("-first-id", "1000000", "-rate", "0", "-duration", "300ms", "-connections", "2")
	if closed.Created == 0 || closed.Errors != 0 {
		t.Fatalf("closed loop: %+v", closed)
	}
	var links, outbox int
	if err := pg.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM links WHERE tenant_id = $1), (SELECT count(*) FROM outbox WHERE kind = 'link')`, tenant).Scan(&links, &outbox); err != nil {
		t.Fatal(err)
	}
	if want := open.Created + closed.Created; links != want || outbox != want {
		t.Fatalf("%d links and %d outbox rows; want %d each", links, outbox, want)
	}
	// Ids already taken are failed inserts, counted, not lost silently.
	again := run("-first-id", "1", "-rate", "100", "-duration", "100ms", "-connections", "1")
	if again.Errors != 10 || again.Created != 0 || !strings.Contains(again.Problem, "duplicate") {
		t.Fatalf("re-inserting ids: %+v; want 10 errors naming the duplicate", again)
	}
	// An open loop it cannot keep up with ends: what has not started
	// within the timeout after the run fails unsent, counted.
	over := run("-first-id", "2000000", "-rate", "100000", "-duration", "100ms", "-connections", "1", "-timeout", "200ms")
	failed := over.Sent - over.Created
	if unsent := over.Errors - failed; unsent <= 0 || over.Sent+unsent != 10000 || over.Problem == "" {
		t.Fatalf("overloaded open loop: %+v; want the creates not started within the timeout counted as errors", over)
	}
	if err := attackPgx([]string{"-dsn", pg.DSN}, io.Discard); err == nil {
		t.Fatal("no tenant accepted")
	}
}

func TestSplitTraces(t *testing.T) {
	out := []byte(`File: suite
Type: cpu
-----------+-------------------------------------------------------
      30ms   syscall.Syscall6
             github.com/nats-io/nats-server/v2/server.(*client).flushOutbound
-----------+-------------------------------------------------------
      20ms   encoding/json.(*encodeState).marshal
             github.com/edgelink/edgelink/control/api.writeJSON
-----------+-------------------------------------------------------
      1.2s   runtime.scanobject
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      10ms   main.(*positionReader).run
-----------+-------------------------------------------------------
`)
	by, total := splitTraces(out)
	want := map[string]time.Duration{"NATS server": 30 * time.Millisecond, "control": 20 * time.Millisecond,
		"Go runtime (GC, scheduler)": 1200 * time.Millisecond, "other": 10 * time.Millisecond}
	if diff := cmp.Diff(want, by); diff != "" || total != 1260*time.Millisecond {
		t.Fatalf("splitTraces: total %s (-want +got):\n%s", total, diff)
	}
}

func TestPgRole(t *testing.T) {
	for _, c := range []struct {
		postmaster bool
		cmdline    string
		want       string
	}{
		{true, "/usr/lib/postgresql/15/bin/postgres\x00-D\x00/x", "other"},
		{false, "postgres: walwriter ", "WAL writer"},
		{false, "postgres: checkpointer ", "other"},
		{false, "postgres: postgres edgelink 127.0.0.1(50312) idle", "backends"},
		{false, "postgres: autovacuum worker edgelink", "other"},
	} {
		if got := pgRole(c.postmaster, c.cmdline); got != c.want {
			t.Errorf("pgRole(%v, %q) = %q, want %q", c.postmaster, c.cmdline, got, c.want)
		}
	}
}

// TestCPUSampleMinus: a process that exited during the run is charged
// only what it spent during it, through the postmaster's reaped CPU.
func TestCPUSampleMinus(t *testing.T) {
	before := cpuSample{suite: 1, edge: 2, machine: 10, wal: 1000, xid: 50, reaped: 5,
		pg: map[int]pgProc{1: {"other", 1}, 2: {"backends", 3}, 3: {"backends", 4}}}
	after := cpuSample{suite: 4, edge: 2.5, machine: 20, wal: 9000, xid: 150, reaped: 5 + 4.5, // pid 3 exited having spent 4.5
		pg: map[int]pgProc{1: {"other", 1.25}, 2: {"backends", 5}, 4: {"backends", 1}, 5: {"WAL writer", 0.5}}}
	got := after.minus(before)
	want := cpuSpent{suite: 3, edge: 0.5, machine: 10, walBytes: 8000, xids: 100,
		pg: map[string]float64{"other": 0.25, "exited": 0.5, "backends": 2 + 1, "WAL writer": 0.5}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(cpuSpent{})); diff != "" {
		t.Fatalf("minus (-want +got):\n%s", diff)
	}
}

// TestReapedCPU: a child's CPU shows in its parent's reaped CPU once it
// has been waited for.
func TestReapedCPU(t *testing.T) {
	before, err := reapedCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A child that spends CPU until the kernel has charged it a tick.
	cmd := exec.Command("sh", "-c", `while [ $(awk '{print $14+$15}' /proc/$$/stat) -lt 3 ]; do :; done`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	after, err := reapedCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("reaped CPU %v before the child, %v after; want more", before, after)
	}
}

func TestWritesBounds(t *testing.T) {
	run := func(what string, rate, created, sent int, p99 time.Duration) writeRun {
		return writeRun{what: what, res: createsResult{Offered: float64(rate), Created: created, Sent: sent, P99: p99}}
	}
	ms := time.Millisecond
	w := &writesRuns{runs: []writeRun{
		run("api", 5000, 100, 100, 20*ms),
		run("api", 10000, 100, 100, 400*ms),
		run("search", 7500, 99, 100, 10*ms), // a refusal: did not hold
		run("search", 6000, 100, 100, 49*ms),
		run("pgx-open", 20000, 100, 100, ms), // not the API's
	}}
	if lo, hi := w.bounds(); lo != 6000 || hi != 7500 {
		t.Fatalf("bounds = %d, %d; want 6000 (held), 7500 (the least that did not)", lo, hi)
	}
}

func TestWritesFlags(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := writesFlags(fs)
	if err := fs.Parse([]string{"-writes-rates", "2000, 4000", "-writes-duration", "5s"}); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(o.rates, []int{2000, 4000}) || o.duration != 5*time.Second || !cmp.Equal(o.rawClients, []int{8, 64}) {
		t.Fatalf("rates %v, duration %s, raw clients %v", o.rates, o.duration, o.rawClients)
	}
	for _, bad := range []string{"", "5000,x", "0", "-5"} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		writesFlags(fs)
		if err := fs.Parse([]string{"-writes-rates", bad}); err == nil {
			t.Errorf("-writes-rates %q accepted", bad)
		}
	}
}
