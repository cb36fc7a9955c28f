package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/stack"
)

// benchStack is the real edgelink stack on loopback (internal/stack):
// PostgreSQL from the machine's binaries, an embedded NATS JetStream,
// control in this process, and the edge binary as its own process so its
// CPU is measured alone.
type benchStack struct {
	pg         *stack.Postgres
	pool       *pgxpool.Pool
	ns         *stack.NATS
	natsURL    string
	ctl        *stack.Control
	controlURL string
	client     stack.Client
	edge       *measure.Proc
	edgeURL    string
	// codeKeys is the code key file control and every edge of the run
	// read (FF1 domains' codes are made and ruled out with it).
	codeKeys string

	// The click roller runs here rather than inside control, so the
	// suite can pause it during a timed run.
	nc       *nats.Conn
	js       jetstream.JetStream
	rollLog  *slog.Logger
	clickMu  sync.Mutex
	rollStop context.CancelFunc
	rollDone chan struct{}
}

// pauseClicks stops rolling up clicks until resumeClicks: the edge still
// publishes every click to JetStream during a timed run, but the rollup
// into PostgreSQL (about half a core for the edge's 30,000 clicks/s here,
// on other machines in production) waits until the run is over, instead
// of taking the load generator's CPU and so the edge's offered load.
func (s *benchStack) pauseClicks() {
	s.clickMu.Lock()
	defer s.clickMu.Unlock()
	if s.rollStop != nil {
		s.rollStop()
		<-s.rollDone
		s.rollStop = nil
	}
}

// resumeClicks (re)starts the click roller; it resumes from its durable
// consumer's position.
func (s *benchStack) resumeClicks() {
	s.clickMu.Lock()
	defer s.clickMu.Unlock()
	if s.rollStop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.rollStop, s.rollDone = cancel, make(chan struct{})
	go func() {
		defer close(s.rollDone)
		_ = clickroll.New(postgres.New(s.pool), s.js, clickroll.Config{Log: s.rollLog}).Run(ctx)
	}()
}

func startStack(ctx context.Context, dir string, procs *measure.Group, edgeBin string, logw io.Writer) (_ *benchStack, err error) {
	s := &benchStack{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	// PostgreSQL runs as its own user when we are root and must be able to
	// enter the run's folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	// Durable settings (fsync and synchronous_commit on): creates are
	// measured as production would run them.
	if s.pg, err = stack.StartPostgres(ctx, stack.PostgresConfig{Dir: filepath.Join(dir, "pg"), Durable: true,
		Settings: []string{"max_connections=200", "shared_buffers=256MB"}}); err != nil {
		return nil, err
	}
	s.pool = s.pg.Pool()
	if s.ns, err = stack.StartNATS(ctx, stack.NATSConfig{Name: "bench", Dir: filepath.Join(dir, "nats")}); err != nil {
		return nil, err
	}
	s.natsURL = s.ns.URL()

	edgePort, err := freePort()
	if err != nil {
		return nil, err
	}
	s.edgeURL = "http://127.0.0.1:" + strconv.Itoa(edgePort)
	if s.codeKeys, err = stack.WriteCodeKeys(dir); err != nil {
		return nil, err
	}
	if s.ctl, err = stack.StartControl(context.WithoutCancel(ctx), controlserver.Config{DatabaseURL: s.pg.DSN, NATSURL: s.natsURL,
		PublicURL: s.edgeURL, Log: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})),
		NoClickRollup: true, CodeKeysFile: s.codeKeys, DomainKey: stack.CodeKeyName}); err != nil {
		return nil, err
	}
	s.controlURL = s.ctl.URL
	if s.nc, s.js, err = s.ns.Connect(); err != nil {
		return nil, err
	}
	s.rollLog = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s.resumeClicks()
	_, key, err := s.pg.Tenant(ctx, "bench")
	if err != nil {
		return nil, err
	}
	s.client = stack.Client{ControlURL: s.controlURL, EdgeURL: s.edgeURL, Key: key}

	// The edge with its defaults, as an operator would run it, but with
	// its snapshot folder inside the run's: a snapshot kept from another
	// run (another stream) must not be loaded.
	s.edge, err = procs.Start("edge", edgeArgv(edgeBin, "127.0.0.1:"+strconv.Itoa(edgePort), s.natsURL, "bench", filepath.Join(dir, "edge-bench"), s.codeKeys),
		"", nil, logw, logw)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s.edgeURL+"/-/livez", 200, 60*time.Second); err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	return s, nil
}

// edgeArgv is the edge's command line; --snapshot-dir and --code-keys are
// passed only when the binary has the flag (both are newer than this
// suite, which may measure an older edge).
func edgeArgv(bin, addr, natsURL, name, snapDir, codeKeys string) []string {
	argv := []string{bin, "--listen", addr, "--nats-url", natsURL, "--name", name, "--log-level", "warn"}
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	if strings.Contains(string(out), "--snapshot-dir") {
		argv = append(argv, "--snapshot-dir", snapDir)
	}
	if strings.Contains(string(out), "--code-keys") {
		argv = append(argv, "--code-keys", codeKeys)
	}
	return argv
}

func (s *benchStack) stop() {
	if s.edge != nil {
		s.edge.Stop(5 * time.Second)
	}
	if s.ctl != nil {
		_ = s.ctl.Stop()
	}
	s.pauseClicks()
	if s.nc != nil {
		s.nc.Close()
	}
	if s.ns != nil {
		_ = s.ns.Close()
	}
	if s.pg != nil {
		_ = s.pg.Close()
	}
}

// loadLinks creates n links through control's batch endpoint
// (POST /api/v1/links/batch, 1,000 per request) from a few concurrent
// clients, like a campaign tool would: on the platform's domain when hosts
// is empty, else link i on hosts[i%len(hosts)] (the tenant's domains).
func (s *benchStack) loadLinks(ctx context.Context, n int, seed uint64, clients int, hosts []string, progress io.Writer, batchDone func(total uint64)) (time.Duration, error) {
	const batch = 1000
	var next atomic.Int64
	var created atomic.Int64
	start := time.Now()
	errc := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(c)+1))
			var body bytes.Buffer
			for {
				first := next.Add(batch) - batch
				if first >= int64(n) || ctx.Err() != nil {
					return
				}
				k := min(batch, n-int(first))
				body.Reset()
				body.WriteString(`{"links":[`)
				for i := range k {
					if i > 0 {
						body.WriteByte(',')
					}
					u, _ := json.Marshal(dataset.Target(r))
					body.WriteString(`{"url":`)
					body.Write(u)
					if len(hosts) > 0 {
						h, _ := json.Marshal(hosts[(int(first)+i)%len(hosts)])
						body.WriteString(`,"domain":`)
						body.Write(h)
					}
					body.WriteByte('}')
				}
				body.WriteString(`]}`)
				got, err := s.postBatch(ctx, body.Bytes())
				if err != nil {
					errc <- err
					return
				}
				if got != k {
					errc <- fmt.Errorf("batch created %d of %d links", got, k)
					return
				}
				d := created.Add(int64(k))
				if batchDone != nil {
					batchDone(uint64(d))
				}
				if d%100_000 < batch && progress != nil {
					fmt.Fprintf(progress, "  loaded %d links (%.0f/s)\n", d, float64(d)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return time.Since(start), <-errc
}

func (s *benchStack) postBatch(ctx context.Context, body []byte) (int, error) {
	return s.client.CreateBatch(ctx, body)
}

// createOne creates one link through POST /api/v1/links and returns its
// code and version.
func (s *benchStack) createOne(ctx context.Context, target string) (code string, version uint64, err error) {
	r := s.client.Create(ctx, stack.Link{URL: target})
	if r.Err != nil {
		return "", 0, r.Err
	}
	if r.Status != http.StatusCreated {
		return "", 0, fmt.Errorf("create: %d: %v", r.Status, r.Problem)
	}
	return r.Code, r.Version, nil
}

// dump reads the active links back from the authority, in ID order: the
// data every server of the run serves.
func (s *benchStack) dump(ctx context.Context) (codes, urls []string, maxVersion uint64, err error) {
	rows, err := s.pool.Query(ctx, `SELECT code, url FROM links WHERE status = 'active' ORDER BY id`)
	if err != nil {
		return nil, nil, 0, err
	}
	for rows.Next() {
		var c, u string
		if err := rows.Scan(&c, &u); err != nil {
			return nil, nil, 0, err
		}
		codes, urls = append(codes, c), append(urls, u)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, err
	}
	err = s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM links`).Scan(&maxVersion)
	return codes, urls, maxVersion, err
}

var reMetric = regexp.MustCompile(`(?m)^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$`)

// edgeMetrics reads the edge's /-/metrics into a map by series name.
func edgeMetrics(ctx context.Context, base string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/-/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, x := range reMetric.FindAllSubmatch(b, -1) {
		v, _ := strconv.ParseFloat(string(x[2]), 64)
		m[string(x[1])] = v
	}
	return m, nil
}

// waitApplied polls the edge until its change feed has applied version.
func waitApplied(ctx context.Context, edgeURL string, version uint64, timeout time.Duration) error {
	var m map[string]float64
	if err := stack.Poll(ctx, "edge applies the change version", timeout, func() bool {
		var err error
		m, err = edgeMetrics(ctx, edgeURL)
		return err == nil && m["edge_changefeed_applied_version"] >= float64(version)
	}); err != nil {
		return fmt.Errorf("edge applied version %v, want %d: %w", m["edge_changefeed_applied_version"], version, err)
	}
	return nil
}

func waitHTTP(ctx context.Context, url string, status int, timeout time.Duration) error {
	var last string
	if err := stack.Poll(ctx, url, timeout, func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == status
	}); err != nil {
		return fmt.Errorf("%s: not %d within %s (last: %s)", url, status, timeout, last)
	}
	return nil
}

var noFollow = &http.Client{Timeout: 5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
