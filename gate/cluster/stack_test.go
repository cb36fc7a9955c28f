package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/edge/edgeserver"
)

// control is a control instance running in the test process.
type control struct {
	name   string
	url    string
	cancel context.CancelFunc
	done   chan error
}

// startControl runs control with cfg (HTTPAddr, OnListen and Instance are
// set here) and returns once its API listens.
func startControl(t testing.TB, name string, cfg controlserver.Config) *control {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	cfg.HTTPAddr, cfg.Instance = "127.0.0.1:0", name
	cfg.OnListen = func(a net.Addr) { addr <- a }
	c := &control{name: name, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- controlserver.Run(ctx, cfg) }()
	t.Cleanup(func() { c.stop(t) })
	select {
	case a := <-addr:
		c.url = "http://" + a.String()
	case err := <-c.done:
		t.Fatalf("control %s stopped while starting: %v", name, err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("control %s did not listen within 2m", name)
	}
	return c
}

// stop shuts control down gracefully (drains) and waits; a second call is a
// no-op.
func (c *control) stop(t testing.TB) {
	t.Helper()
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.cancel = nil
	t0 := time.Now()
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("control %s stopped with: %v", c.name, err)
		}
		t.Logf("control %s stopped in %s", c.name, time.Since(t0).Round(time.Millisecond))
	case <-time.After(time.Minute):
		t.Errorf("control %s did not stop within 1m", c.name)
	}
}

// edge is an edge running in the test process. Restart keeps its address,
// so the load keeps asking the same URL.
type edge struct {
	name string
	cfg  edgeserver.Config
	url  string
	log  *feedLog

	mu     sync.Mutex
	parts  *edgeserver.Edge
	cancel context.CancelFunc
	done   chan error
}

func startEdge(t testing.TB, name string, cfg edgeserver.Config) *edge {
	t.Helper()
	e := &edge{name: name, cfg: cfg, log: &feedLog{}}
	e.cfg.Name = name
	e.cfg.RatePerIP = -1 // one load generator asks for every fresh code
	e.cfg.Log = slog.New(e.log)
	if e.cfg.HTTPAddr == "" {
		e.cfg.HTTPAddr = "127.0.0.1:0"
	}
	t.Cleanup(func() { e.stop(t) })
	e.start(t)
	return e
}

func (e *edge) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	parts := make(chan *edgeserver.Edge, 1)
	cfg := e.cfg
	cfg.OnListen = func(a net.Addr) { addr <- a }
	cfg.OnStart = func(p *edgeserver.Edge) { parts <- p }
	done := make(chan error, 1)
	go func() { done <- edgeserver.Run(ctx, cfg) }()
	select {
	case a := <-addr:
		if e.url == "" { // a restart listens where the first start did
			e.cfg.HTTPAddr = a.String()
			e.url = "http://" + a.String()
		}
	case err := <-done:
		cancel()
		t.Fatalf("edge %s stopped while starting: %v", e.name, err)
	case <-time.After(2 * time.Minute):
		cancel()
		t.Fatalf("edge %s did not listen within 2m", e.name)
	}
	p := <-parts
	e.mu.Lock()
	e.parts, e.cancel, e.done = p, cancel, done
	e.mu.Unlock()
}

func (e *edge) stop(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.cancel = nil
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	t0 := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("edge %s stopped with: %v", e.name, err)
		}
		t.Logf("edge %s stopped in %s", e.name, time.Since(t0).Round(time.Millisecond))
	case <-time.After(time.Minute):
		t.Errorf("edge %s did not stop within 1m; goroutines: %s", e.name, dumpStacks(e.name))
	}
}

// dumpStacks writes every goroutine's stack to a file and returns its name,
// for a component that did not stop.
func dumpStacks(what string) string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	f, err := os.CreateTemp("", "edgelink-gate-stacks-"+what+"-*.txt")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	_, _ = f.Write(buf)
	return f.Name()
}

// restart stops the edge and starts it again on the same address and
// snapshot folder: it boots from its local snapshot and replays the rest.
func (e *edge) restart(t testing.TB) {
	t.Helper()
	e.stop(t)
	e.start(t)
}

// edgeParts returns the running edge's parts (nil while it is stopped).
func (e *edge) edgeParts() *edgeserver.Edge {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil {
		return nil
	}
	return e.parts
}

// feedLog is the edge's log handler: it drops everything but counts what
// says the change feed lost events, so a gap cannot hide behind the feed's
// own gap counter, which a re-sync from a snapshot resets.
type feedLog struct {
	gaps, resyncs atomic.Int64
	firstGap      atomic.Pointer[string]
}

func (h *feedLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *feedLog) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *feedLog) WithGroup(string) slog.Handler                { return h }
func (h *feedLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.HasPrefix(r.Message, "change feed gap"), strings.HasPrefix(r.Message, "change feed lost events"):
		h.gaps.Add(1)
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		s := b.String()
		h.firstGap.CompareAndSwap(nil, &s)
	case strings.HasPrefix(r.Message, "change feed re-synced"):
		h.resyncs.Add(1)
	}
	return nil
}

// tenantKeys creates n tenants and returns an API key for each: the API's
// rate limit is per tenant, so each create worker gets its own.
func tenantKeys(t testing.TB, dsn string, n int) []string {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := postgres.New(pool)
	var keys []string
	for i := range n {
		id, err := st.CreateTenant(ctx, fmt.Sprintf("gate-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		key, err := st.CreateAPIKey(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return keys
}
