package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/shared/base62"
)

// gate skips a scenario unless the launch-gate run asked for it: each
// starts two PostgreSQL servers, NATS, control and often an edge.
func gate(t *testing.T) {
	t.Helper()
	if os.Getenv("EDGELINK_GATE") == "" {
		t.Skip("starts a primary and a streaming replica: runs with EDGELINK_GATE=1, as `go tool task gate` does")
	}
}

// cluster is a primary with a database "edgelink" (migrated, one tenant)
// and an asynchronous streaming replica of it. Both are stopped when the
// test ends.
type cluster struct {
	primary, replica       *pgserver.Server
	primaryDSN, replicaDSN string
	apiKey                 string
}

func startCluster(t *testing.T, ctx context.Context) *cluster {
	t.Helper()
	start := func(what string, f func(dir string) (*pgserver.Server, error)) *pgserver.Server {
		t.Helper()
		dir, err := os.MkdirTemp("", "edgelink-gate-"+what+"-")
		if err != nil {
			t.Fatal(err)
		}
		s, err := f(dir)
		if err != nil {
			os.RemoveAll(dir)
			t.Fatalf("start %s: %v", what, err)
		}
		t.Cleanup(func() {
			if err := s.Stop(); err != nil {
				t.Errorf("stop %s: %v", what, err)
			}
			os.RemoveAll(dir)
		})
		return s
	}
	c := &cluster{}
	c.primary = start("primary", func(dir string) (*pgserver.Server, error) {
		return pgserver.Start(ctx, pgserver.Config{Dir: dir, Fast: true})
	})
	if _, err := c.primary.Query(ctx, "CREATE DATABASE edgelink"); err != nil {
		t.Fatal(err)
	}
	c.primaryDSN = c.primary.DSN("edgelink")
	pool := open(t, c.primaryDSN)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "gate")
	if err != nil {
		t.Fatal(err)
	}
	if c.apiKey, err = st.CreateAPIKey(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	c.replica = start("replica", func(dir string) (*pgserver.Server, error) {
		return c.primary.StartReplica(ctx, pgserver.Config{Dir: dir, Fast: true})
	})
	c.replicaDSN = c.replica.DSN("edgelink")
	if err := c.replica.WaitReplayed(ctx, c.primary); err != nil {
		t.Fatal(err)
	}
	return c
}

func open(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// control is one control instance running in the test process.
type control struct {
	url  string
	stop func() error
}

// startControl runs control with cfg (HTTPAddr, OnListen and Log are set
// here) until the test ends or stop is called; it fails the test if control
// does not start.
func startControl(t *testing.T, cfg controlserver.Config) *control {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.OnListen = func(a net.Addr) { addr <- a }
	if cfg.Log == nil {
		cfg.Log = testLog(t)
	}
	go func() { done <- controlserver.Run(ctx, cfg) }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(60 * time.Second):
				stopErr = fmt.Errorf("control did not stop within 60s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("control stopped with: %v", err)
		}
	})
	select {
	case a := <-addr:
		return &control{url: "http://" + a.String(), stop: stop}
	case err := <-done:
		t.Fatalf("control did not start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("control did not listen within 2 minutes")
	}
	return nil
}

// startEdge runs an edge on natsURL; it is stopped when the test ends.
func startEdge(t *testing.T, natsURL string) (string, *edgeserver.Edge) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	started := make(chan *edgeserver.Edge, 1)
	done := make(chan error, 1)
	go func() {
		done <- edgeserver.Run(ctx, edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: natsURL, Name: "gate-replication",
			Log: testLog(t), SnapshotDir: t.TempDir(), RatePerIP: -1,
			OnListen: func(a net.Addr) { addr <- a }, OnStart: func(e *edgeserver.Edge) { started <- e }})
	}()
	t.Cleanup(func() {
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
	var url string
	select {
	case a := <-addr:
		url = "http://" + a.String()
	case err := <-done:
		t.Fatalf("edge did not start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("edge did not listen within 2 minutes")
	}
	select {
	case e := <-started:
		return url, e
	case err := <-done:
		t.Fatalf("edge did not start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("edge did not start within 2 minutes")
	}
	return "", nil
}

var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// create posts a link and returns the status and, on 201, the code's ID. It
// waits out the per-tenant rate limit (429) within a bound.
func create(t *testing.T, controlURL, key, target string) (int, uint64, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("POST", controlURL+"/api/v1/links", strings.NewReader(`{"url": "`+target+`"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusCreated {
			return resp.StatusCode, 0, string(b)
		}
		var out struct{ Code string }
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("create answered %s: %v", b, err)
		}
		id, err := base62.Decode(out.Code)
		if err != nil {
			t.Fatalf("create answered code %q: %v", out.Code, err)
		}
		return resp.StatusCode, id, out.Code
	}
}

func follow(t *testing.T, edgeURL, code string) (int, string) {
	t.Helper()
	resp, err := client.Get(edgeURL + "/" + code)
	if err != nil {
		t.Fatalf("GET /%s: %v", code, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// proxy forwards TCP to a target that can be switched, as a virtual IP or a
// connection pooler in front of "the primary" is moved after a failover:
// switching closes every forwarded connection.
type proxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.target.Store(&target)
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.ln.Addr(), db)
}

func (p *proxy) retarget(target string) {
	p.target.Store(&target)
	p.closeAll()
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", *p.target.Load())
		if err != nil {
			in.Close()
			continue
		}
		p.track(in)
		p.track(out)
		pipe := func(dst, src net.Conn) {
			defer dst.Close()
			defer src.Close()
			_, _ = io.Copy(dst, src)
			p.mu.Lock()
			delete(p.conns, src)
			delete(p.conns, dst)
			p.mu.Unlock()
		}
		p.wg.Go(func() { pipe(out, in) })
		p.wg.Go(func() { pipe(in, out) })
	}
}

// counter reads one namespace's next_id.
func counter(t *testing.T, ctx context.Context, pool *pgxpool.Pool) uint64 {
	t.Helper()
	var next int64
	if err := pool.QueryRow(ctx, `SELECT next_id FROM alloc_namespaces WHERE namespace = 'default'`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	return uint64(next)
}
