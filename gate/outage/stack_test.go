package outage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/link"
)

// env is one scenario's authority and stream: a PostgreSQL server of its
// own (tests stop it), an in-process NATS JetStream (tests stop it too) and
// API keys of tenants created on it.
type env struct {
	pg   *stack.Postgres
	nats *stack.NATS
	keys []string
}

func newStack(t *testing.T, tenants int) *env {
	t.Helper()
	// Fast skips fsync, which only an OS crash could notice; commits stay
	// synchronous, so a postmaster killed by a test loses nothing that
	// control answered 201 for (asynchronous commit would).
	pg := stack.NewPostgres(t, stack.PostgresConfig{Settings: []string{"synchronous_commit=on"}})
	return &env{pg: pg, nats: stack.NewNATS(t, stack.NATSConfig{}), keys: pg.Keys(t, "gate", tenants)}
}

// control is the control binary running as a child process in its own
// process group.
type control struct{ *stack.ControlProcess }

// startControl runs `control serve` against the stack with the edge at
// edgeURL as its public URL, plus extra flags, and returns once its API
// listens (the first segment is loaded by then). It is SIGKILLed when the
// test ends if it still runs.
func (s *env) startControl(t *testing.T, edgeURL string, extra ...string) *control {
	t.Helper()
	args := append([]string{"--database-url", s.pg.DSN, "--log-level", "info", "serve",
		"--listen", "127.0.0.1:0", "--nats-url", s.nats.URL(), "--public-url", edgeURL}, extra...)
	return &control{stack.NewControlProcess(t, stack.ControlBinary(t), args...)}
}

// Stop asks control to shut down gracefully (SIGTERM) and waits for it.
func (c *control) Stop(t *testing.T) {
	t.Helper()
	if err := c.Process.Stop(60 * time.Second); err != nil {
		t.Errorf("control: %v", err)
	}
}

// instancePrefix starts the allocator instance name control records in
// the audit: "<hostname>-<pid>-<random>".
func (c *control) instancePrefix() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-", host, c.Pid)
}

// edge is an edge running in this process, and its parts.
type edge struct {
	*stack.Edge
	E *edgeserver.Edge
}

// startEdge runs an edge against natsURL with its snapshot copy in dir. It
// is stopped when the test ends.
func startEdge(t *testing.T, natsURL, dir string) *edge {
	t.Helper()
	cfg := edgeserver.Config{NATSURL: natsURL, Name: fmt.Sprintf("gate-%d", rand.Uint32()), SnapshotDir: dir,
		// A busy 2-core machine must not turn an authority answer into
		// a 503 by timing out.
		AuthorityTimeout: 10 * time.Second}
	e := stack.NewEdge(t, cfg)
	return &edge{Edge: e, E: e.Parts()}
}

// createLink posts one create and returns what came back.
func createLink(controlURL, key, target, customCode string) stack.Created {
	return stack.Client{ControlURL: controlURL, Key: key}.Create(context.Background(), stack.Link{URL: target, Code: customCode})
}

// createPatiently is createLink that waits out the tenant's rate limit.
func createPatiently(controlURL, key, target, customCode string) stack.Created {
	return stack.Client{ControlURL: controlURL, Key: key}.CreatePatiently(context.Background(), stack.Link{URL: target, Code: customCode})
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
	if _, ok := e.E.Overlay.Lookup(link.DefaultDomain, []byte(code)); ok {
		return true
	}
	_, ok := e.E.Snapshots.Lookup(link.DefaultDomain, []byte(code))
	return ok
}

// readers follow known links on an edge without pause, from several
// clients, until Stop (or the end of the test): every answer must be the
// link's 302, whether or not the fault the test makes is on (Fault).
type readers struct {
	Fault                   atomic.Bool
	reads, during, failures atomic.Int64
	first                   atomic.Pointer[string]
	stop                    chan struct{}
	wg                      sync.WaitGroup
	once                    sync.Once
	fault                   string
}

func startReaders(t *testing.T, clients int, seed uint64, edgeURL string, led *stack.Ledger, known []string, fault string) *readers {
	r := &readers{stop: make(chan struct{}), fault: fault}
	for w := range clients {
		r.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				code := known[rng.IntN(len(known))]
				down := r.Fault.Load()
				status, loc, err := stack.Follow(edgeURL, code)
				r.reads.Add(1)
				if down {
					r.during.Add(1)
				}
				if want := led.Get(code).URL; err != nil || status != http.StatusFound || loc != want {
					r.failures.Add(1)
					msg := fmt.Sprintf("GET /%s (%s down: %v): %d %q %v; want 302 %q", code, fault, down, status, loc, err, want)
					r.first.CompareAndSwap(nil, &msg)
				}
			}
		})
	}
	t.Cleanup(r.Stop)
	return r
}

// Stop stops the readers and waits for them; a second call is a no-op.
func (r *readers) Stop() { r.once.Do(func() { close(r.stop); r.wg.Wait() }) }

// check fails the test if a read failed, or none ran during the fault.
func (r *readers) check(t *testing.T) {
	t.Helper()
	if n := r.failures.Load(); n > 0 || r.during.Load() == 0 {
		first := ""
		if p := r.first.Load(); p != nil {
			first = *p
		}
		t.Fatalf("%d of %d reads of known links failed (%d while %s was down); first: %s", n, r.reads.Load(), r.during.Load(), r.fault, first)
	}
}

// waitApplied waits until the edge has applied the outbox's newest version.
func waitApplied(t *testing.T, e *edge, pool *pgxpool.Pool, within time.Duration) uint64 {
	t.Helper()
	return stack.WaitApplied(t, e.Edge, pool, within)
}

// runControlCommand runs a one-shot control subcommand and returns its
// output and error.
func (s *env) runControlCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return stack.RunProcess(ctx, exec.Command(stack.ControlBinary(t), append([]string{"--database-url", s.pg.DSN}, args...)...))
}
