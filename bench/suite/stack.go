package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgserver"
)

// stack is the real edgelink stack on loopback: PostgreSQL from the
// machine's binaries, an embedded NATS JetStream, control in this process,
// and the edge binary as its own process so its CPU is measured alone.
type stack struct {
	pg         *pgserver.Server
	dsn        string
	pool       *pgxpool.Pool
	ns         *natsserver.Server
	natsURL    string
	controlURL string
	apiKey     string
	edge       *measure.Proc
	edgeURL    string
	stopCtl    context.CancelFunc
	ctlDone    chan error

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
func (s *stack) pauseClicks() {
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
func (s *stack) resumeClicks() {
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

func startStack(ctx context.Context, dir string, procs *measure.Group, edgeBin string, logw io.Writer) (_ *stack, err error) {
	s := &stack{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	pgDir := filepath.Join(dir, "pg")
	if err := os.MkdirAll(pgDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	// Durable settings (fsync and synchronous_commit on): creates are
	// measured as production would run them.
	s.pg, err = pgserver.Start(ctx, pgserver.Config{Dir: pgDir, Settings: []string{"max_connections=200", "shared_buffers=256MB"}})
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	admin, err := pgx.Connect(ctx, s.pg.DSN("postgres"))
	if err != nil {
		return nil, err
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE edgelink")
	admin.Close(ctx)
	if err != nil {
		return nil, err
	}
	s.dsn = s.pg.DSN("edgelink")

	s.ns, err = natsserver.NewServer(&natsserver.Options{ServerName: "bench", Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	s.ns.Start()
	if !s.ns.ReadyForConnections(30 * time.Second) {
		return nil, errors.New("nats: not ready within 30s")
	}
	s.natsURL = s.ns.ClientURL()

	edgePort, err := freePort()
	if err != nil {
		return nil, err
	}
	s.edgeURL = "http://127.0.0.1:" + strconv.Itoa(edgePort)
	ctlCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopCtl, s.ctlDone = cancel, make(chan error, 1)
	addr := make(chan net.Addr, 1)
	go func() {
		s.ctlDone <- controlserver.Run(ctlCtx, controlserver.Config{HTTPAddr: "127.0.0.1:0", DatabaseURL: s.dsn, NATSURL: s.natsURL,
			PublicURL: s.edgeURL, Log: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})),
			NoClickRollup: true,
			OnListen:      func(a net.Addr) { addr <- a }})
	}()
	select {
	case a := <-addr:
		s.controlURL = "http://" + a.String()
	case err := <-s.ctlDone:
		s.ctlDone <- err
		return nil, fmt.Errorf("control: %w", err)
	case <-time.After(60 * time.Second):
		return nil, errors.New("control did not listen within 60s")
	}
	s.pool, err = pgxpool.New(ctx, s.dsn)
	if err != nil {
		return nil, err
	}
	if s.nc, err = nats.Connect(s.natsURL); err != nil {
		return nil, err
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		return nil, err
	}
	s.rollLog = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s.resumeClicks()
	st := postgres.New(s.pool)
	tenant, err := st.CreateTenant(ctx, "bench")
	if err != nil {
		return nil, err
	}
	if s.apiKey, err = st.CreateAPIKey(ctx, tenant); err != nil {
		return nil, err
	}

	// The edge with its defaults, as an operator would run it, but with
	// its snapshot folder inside the run's: a snapshot kept from another
	// run (another stream) must not be loaded.
	s.edge, err = procs.Start("edge", edgeArgv(edgeBin, "127.0.0.1:"+strconv.Itoa(edgePort), s.natsURL, "bench", filepath.Join(dir, "edge-bench")),
		"", nil, logw, logw)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s.edgeURL+"/livez", 200, 60*time.Second); err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	return s, nil
}

// edgeArgv is the edge's command line; --snapshot-dir is passed only when
// the binary has the flag (the snapshot boot is newer than this suite).
func edgeArgv(bin, addr, natsURL, name, snapDir string) []string {
	argv := []string{bin, "--listen", addr, "--nats-url", natsURL, "--name", name, "--log-level", "warn"}
	if out, _ := exec.Command(bin, "--help").CombinedOutput(); strings.Contains(string(out), "--snapshot-dir") {
		argv = append(argv, "--snapshot-dir", snapDir)
	}
	return argv
}

func (s *stack) stop() {
	if s.edge != nil {
		s.edge.Stop(5 * time.Second)
	}
	if s.stopCtl != nil {
		s.stopCtl()
		select {
		case <-s.ctlDone:
		case <-time.After(15 * time.Second):
		}
	}
	s.pauseClicks()
	if s.nc != nil {
		s.nc.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
}

// loadLinks creates n links through control's batch endpoint
// (POST /api/v1/links/batch, 1,000 per request) from a few concurrent
// clients, like a campaign tool would.
func (s *stack) loadLinks(ctx context.Context, n int, seed uint64, clients int, progress io.Writer) (time.Duration, error) {
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
				if d := created.Add(int64(k)); d%100_000 < batch && progress != nil {
					fmt.Fprintf(progress, "  loaded %d links (%.0f/s)\n", d, float64(d)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return time.Since(start), <-errc
}

func (s *stack) postBatch(ctx context.Context, body []byte) (int, error) {
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.controlURL+"/api/v1/links/batch", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && attempt < 50 {
			time.Sleep(200 * time.Millisecond) // the tenant's rate limit: wait as a client would
			continue
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("batch: %s: %.300s", resp.Status, b)
		}
		var out struct {
			Created int `json:"created"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return 0, fmt.Errorf("batch answer: %w", err)
		}
		return out.Created, nil
	}
}

// createOne creates one link through POST /api/v1/links and returns its
// code and version.
func (s *stack) createOne(ctx context.Context, target string) (code string, version uint64, err error) {
	body, _ := json.Marshal(map[string]string{"url": target})
	req, _ := http.NewRequestWithContext(ctx, "POST", s.controlURL+"/api/v1/links", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", 0, fmt.Errorf("create: %s: %.300s", resp.Status, b)
	}
	var out struct {
		Code    string `json:"code"`
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", 0, err
	}
	return out.Code, out.Version, nil
}

// dump reads the active links back from the authority, in ID order: the
// data every server of the run serves.
func (s *stack) dump(ctx context.Context) (codes, urls []string, maxVersion uint64, err error) {
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

// edgeMetrics reads the edge's /metrics into a map by series name.
func edgeMetrics(ctx context.Context, base string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
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
	deadline := time.Now().Add(timeout)
	for {
		m, err := edgeMetrics(ctx, edgeURL)
		if err == nil && m["edge_changefeed_applied_version"] >= float64(version) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("edge applied version %v, want %d after %s", m["edge_changefeed_applied_version"], version, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitHTTP(ctx context.Context, url string, status int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := noFollow.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: not %d within %s (last: %s)", url, status, timeout, last)
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
