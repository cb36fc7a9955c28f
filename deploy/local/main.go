// Command local runs all of edgelink on one machine for development: a real
// PostgreSQL from the machine's binaries with its data in .data/pg, an
// embedded NATS JetStream server with its store in .data/nats, control and
// one edge, in one process. `go tool task up` runs it. Production runs the
// control and edge binaries separately against external services.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/shared/link"
)

// Options say where the stack keeps its data and listens.
type Options struct {
	DataDir     string
	ControlAddr string
	EdgeAddr    string
	NATSPort    int // -1 picks a free port
	Stdout      io.Writer
	Log         *slog.Logger
	// OnReady, if set, is called once everything serves.
	OnReady func(Ready)
	// NATSURL, if set, is an external NATS JetStream server to use instead
	// of the embedded one (tests stop and restart it).
	NATSURL string
	// Edge, if set, adjusts the edge's configuration before it starts.
	Edge func(*edgeserver.Config)
	// Control, if set, adjusts control's configuration before it starts.
	Control func(*controlserver.Config)
	// Snapshots, if set, is control's snapshot build schedule; nil builds
	// none (tests that count overlay entries must not see swaps), and
	// `go tool task up` sets the default schedule.
	Snapshots *snapshots.Schedule
}

// Ready describes the running stack.
type Ready struct {
	ControlURL, EdgeURL, NATSURL, DatabaseURL, APIKey string
}

func main() {
	var o Options
	flag.StringVar(&o.DataDir, "data", ".data", "folder for PostgreSQL data, the NATS store and the dev API key")
	flag.StringVar(&o.ControlAddr, "control", "127.0.0.1:8080", "control API address")
	flag.StringVar(&o.EdgeAddr, "edge", "127.0.0.1:8081", "edge address")
	flag.IntVar(&o.NATSPort, "nats-port", 4222, "NATS port (a free one is picked if it is taken)")
	flag.Parse()
	o.Snapshots = &snapshots.Schedule{}
	o.Stdout = os.Stdout
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "edgelink local:", err)
		os.Exit(1)
	}
}

// Run starts the stack, serves until ctx is done, then stops everything in
// reverse order.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	// PostgreSQL runs as its own user when we are root and must be able to
	// enter our data folder.
	if err := os.Chmod(dataDir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "starting PostgreSQL (data in %s)...\n", filepath.Join(dataDir, "pg"))
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: filepath.Join(dataDir, "pg")})
	if err != nil {
		return err
	}
	defer pg.Stop()
	dsn, err := ensureDatabase(ctx, pg, "edgelink")
	if err != nil {
		return err
	}

	natsURL := o.NATSURL
	if natsURL == "" {
		natsPort := o.NATSPort
		if natsPort > 0 && !portFree(natsPort) {
			natsPort = -1
		}
		ns, err := server.NewServer(&server.Options{
			ServerName: "edgelink-local", Host: "127.0.0.1", Port: natsPort, NoSigs: true, NoLog: true,
			JetStream: true, StoreDir: filepath.Join(dataDir, "nats"),
		})
		if err != nil {
			return fmt.Errorf("nats: %w", err)
		}
		ns.Start()
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		if !ns.ReadyForConnections(30 * time.Second) {
			return errors.New("nats: not ready within 30s")
		}
		natsURL = ns.ClientURL()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	controlAddr, edgeAddr := make(chan net.Addr, 1), make(chan net.Addr, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		ecfg := edgeserver.Config{HTTPAddr: o.EdgeAddr, NATSURL: natsURL, Name: "local", Log: o.Log,
			SnapshotDir: filepath.Join(dataDir, "edge-local"), OnListen: func(a net.Addr) { edgeAddr <- a }}
		if o.Edge != nil {
			o.Edge(&ecfg)
		}
		err := edgeserver.Run(gctx, ecfg)
		return prefix("edge", err)
	})
	var edgeURL string
	select {
	case a := <-edgeAddr:
		edgeURL = "http://" + a.String()
	case <-gctx.Done():
		return g.Wait()
	}
	sched := snapshots.Schedule{Disabled: true}
	if o.Snapshots != nil {
		sched = *o.Snapshots
	}
	g.Go(func() error {
		ccfg := controlserver.Config{HTTPAddr: o.ControlAddr, DatabaseURL: dsn, NATSURL: natsURL,
			PublicURL: edgeURL, Log: o.Log, Snapshots: sched, OnListen: func(a net.Addr) { controlAddr <- a }}
		if o.Control != nil {
			o.Control(&ccfg)
		}
		err := controlserver.Run(gctx, ccfg)
		return prefix("control", err)
	})
	var controlURL string
	select {
	case a := <-controlAddr:
		controlURL = "http://" + a.String()
	case <-gctx.Done():
		return g.Wait()
	}
	key, err := devKey(ctx, dsn, filepath.Join(dataDir, "dev-api-key"))
	if err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	ready := Ready{ControlURL: controlURL, EdgeURL: edgeURL, NATSURL: natsURL, DatabaseURL: dsn, APIKey: key}
	printWelcome(o.Stdout, ready)
	if o.OnReady != nil {
		o.OnReady(ready)
	}
	return g.Wait()
}

func prefix(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func ensureDatabase(ctx context.Context, pg *pgserver.Server, name string) (string, error) {
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", err
		}
	}
	return pg.DSN(name), nil
}

// devKey returns the development tenant's API key, kept in file so a restart
// prints the same key: keys are stored hashed and cannot be shown again.
func devKey(ctx context.Context, dsn, file string) (string, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	st := postgres.New(pool)
	if b, err := os.ReadFile(file); err == nil {
		key := strings.TrimSpace(string(b))
		if _, err := st.TenantByKey(ctx, key); err == nil {
			return key, nil
		}
	}
	id, err := st.TenantByName(ctx, "dev")
	if errors.Is(err, link.ErrNotFound) {
		id, err = st.CreateTenant(ctx, "dev")
	}
	if err != nil {
		return "", fmt.Errorf("dev tenant: %w", err)
	}
	key, err := st.CreateAPIKey(ctx, id)
	if err != nil {
		return "", fmt.Errorf("dev key: %w", err)
	}
	return key, os.WriteFile(file, []byte(key+"\n"), 0o600)
}

func printWelcome(w io.Writer, r Ready) {
	fmt.Fprintf(w, `
edgelink is running.

  control API   %s
  edge          %s
  NATS          %s
  PostgreSQL    %s
  dev API key   %s

Create a link:

  curl -sS -X POST %s/api/v1/links \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"url": "https://example.com/hello?utm_source=edgelink"}'

Follow it (put the "code" from the answer in place of CODE):

  curl -sS -i %s/CODE

Press Ctrl-C to stop; data is kept for the next start.
`, r.ControlURL, r.EdgeURL, r.NATSURL, r.DatabaseURL, r.APIKey, r.ControlURL, r.APIKey, r.EdgeURL)
}
