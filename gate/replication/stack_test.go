package replication

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
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

// cluster is a primary with a database "edgelink" (migrated, one tenant),
// an asynchronous streaming replica of it, and NATS. All are stopped when
// the test ends.
type cluster struct {
	primary, replica *stack.Postgres
	apiKey           string
	nats             *stack.NATS
}

// begin starts a scenario: it skips it unless the gate run asked for it,
// bounds it by within (the context ends with the test) and starts its
// cluster.
func begin(t *testing.T, within time.Duration) (context.Context, *cluster) {
	t.Helper()
	gate(t)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	return ctx, startCluster(t)
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{primary: stack.NewPostgres(t, stack.PostgresConfig{})}
	_, c.apiKey = c.primary.NewTenant(t, "gate")
	c.replica = c.primary.NewReplica(t)
	c.nats = stack.NewNATS(t, stack.NATSConfig{})
	return c
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startControl runs control with cfg (logging to the test unless cfg.Log
// is set) until the test ends; it fails the test if control does not start.
func startControl(t *testing.T, cfg controlserver.Config) *stack.Control {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = testLog(t)
	}
	return stack.NewControl(t, cfg)
}

// startEdge runs an edge on natsURL; it is stopped when the test ends.
func startEdge(t *testing.T, natsURL string) (string, *edgeserver.Edge) {
	t.Helper()
	cfg := edgeserver.Config{NATSURL: natsURL, Name: "gate-replication", Log: testLog(t), SnapshotDir: t.TempDir()}
	e := stack.NewEdge(t, cfg)
	return e.URL, e.Parts()
}

// create posts a link and returns the status and, on 201, the code's ID
// and the code (else the answer). It waits out the per-tenant rate limit
// (429) within a bound.
func create(t *testing.T, controlURL, key, target string) (int, uint64, string) {
	t.Helper()
	r := stack.Client{ControlURL: controlURL, Key: key}.CreatePatiently(context.Background(), stack.Link{URL: target})
	if r.Err != nil {
		t.Fatalf("create: %v", r.Err)
	}
	if r.Status != http.StatusCreated {
		return r.Status, 0, fmt.Sprint(r.Problem)
	}
	id, err := base62.Decode(r.Code)
	if err != nil {
		t.Fatalf("create answered code %q: %v", r.Code, err)
	}
	return r.Status, id, r.Code
}

func follow(t *testing.T, edgeURL, code string) (int, string) {
	t.Helper()
	status, loc, err := stack.Follow(edgeURL, code)
	if err != nil {
		t.Fatalf("GET /%s: %v", code, err)
	}
	return status, loc
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
