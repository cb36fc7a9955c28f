// Package server wires control: the authority pool, migrations, the outbox
// relay and the HTTP API. The control binary and the local all-in-one mode
// both run it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/control/api"
	controlauthority "github.com/edgelink/edgelink/control/authority"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Config is everything control needs to run.
type Config struct {
	HTTPAddr       string // listen address of the API
	DatabaseURL    string // the primary: allocation and writes never go to a replica
	NATSURL        string
	PublicURL      string // base of short URLs, an edge's address
	BlockedDomains []string
	Reserved       []string // extra reserved codes, beyond the routes
	// IDStart and IDEnd bound the default namespace's IDs, [IDStart,
	// IDEnd); zero takes the whole 6-character space. Give instances of
	// another system (a shortener being migrated) a disjoint range.
	IDStart, IDEnd uint64
	// IDStep is the segment length; zero takes idalloc.DefaultStep.
	IDStep uint64
	// AbandonAfter lets this instance seal the open segments of instances
	// silent for that long (the same on every instance); zero takes 10
	// minutes, far above the longest create transaction (10 s).
	AbandonAfter time.Duration
	Log          *slog.Logger
	// OnListen, if set, is called with the API's address once it listens.
	OnListen func(addr net.Addr)
	// NoClickRollup leaves the CLICKS stream to other control instances
	// (tests run the roller in a process of its own to kill it).
	NoClickRollup bool
	// Snapshots is when control builds and publishes edge snapshots by
	// itself; zero fields take the defaults of snapshots.Schedule.
	Snapshots snapshots.Schedule
}

// Run serves until ctx is done, then shuts down in order: stop taking
// requests, finish in-flight ones, stop the relay, close connections.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		// pgx's default (max(4, CPUs)) starves the create writers beside
		// the relay's session, the authority responder and segment loads.
		poolCfg.MaxConns = 24
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	store := postgres.New(pool)
	// Derived counters converge: whatever drifted (a bug, a manual fix in
	// SQL) is corrected against the rows, and said.
	if drifts, err := store.ReconcileLiveLinks(ctx); err != nil {
		log.Error("reconcile live-link counters", "err", err)
	} else {
		for _, d := range drifts {
			log.Warn("live-link counter drifted; corrected", "tenant", d.TenantID, "counted", d.Counted, "actual", d.Actual)
		}
	}

	nc, err := nats.Connect(cfg.NATSURL, nats.Name("edgelink-control"), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}

	ns := idalloc.Namespace{Name: "default", Start: cfg.IDStart, End: cfg.IDEnd, Step: cfg.IDStep}
	if ns.Start == 0 {
		ns.Start = base62.MinID
	}
	if ns.End == 0 {
		ns.End = base62.Space
	}
	abandon := cfg.AbandonAfter
	if abandon <= 0 {
		abandon = 10 * time.Minute
	}
	alloc, err := idalloc.New(ctx, postgres.NewAllocStore(pool), idalloc.Config{
		Namespaces: []idalloc.Namespace{ns}, AbandonAfter: abandon, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("id allocator: %w", err)
	}
	// Unused segments are discarded, never returned; closing waits for
	// in-flight creates to release their IDs so the segments can be sealed.
	var closeOnce sync.Once
	closeAlloc := func() {
		closeOnce.Do(func() {
			closeCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := alloc.Close(closeCtx); err != nil {
				log.Warn("id allocator closed with open segments; another instance's sweeper will seal them", "err", err)
			}
		})
	}
	defer closeAlloc()
	startCtx, cancelStart := context.WithTimeout(ctx, 30*time.Second)
	err = alloc.WaitLoaded(startCtx)
	cancelStart()
	if err != nil {
		return fmt.Errorf("id allocator: %w", err)
	}

	svc := links.New(store, allocIDs{alloc, ns.Name}, links.Config{
		BlockedDomains: cfg.BlockedDomains,
		Reserved:       append(append([]string{}, api.Routes...), cfg.Reserved...),
		Log:            log,
	})
	handler := api.New(store, svc, api.Config{PublicURL: cfg.PublicURL, Ready: store.Ping, Log: log, Stats: store})

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	log.Info("control listening", "addr", ln.Addr().String())

	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	g := new(errgroup.Group)
	g.Go(func() error {
		return outbox.New(store, js, outbox.Config{Log: log}).Run(relayCtx)
	})
	if !cfg.NoClickRollup {
		// Stops with the relay: a batch in flight commits or is redelivered.
		g.Go(func() error { return clickroll.New(store, js, clickroll.Config{Log: log}).Run(relayCtx) })
	}
	// Edges ask about codes they do not know; answering stops with the API.
	g.Go(func() error {
		return controlauthority.New(nc, store, controlauthority.Config{Log: log}).Run(ctx)
	})
	// Scheduled snapshot builds stop with the API; a build cut short is
	// simply not published.
	g.Go(func() error { return snapshots.New(pool, js, log).Run(ctx, cfg.Snapshots) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	// No create is in flight any more: retire the segments (their sealed
	// events go through the outbox), then stop the relay, last, so what
	// committed still goes out; whatever it misses, the next relay
	// publishes.
	closeAlloc()
	stopRelay()
	return errors.Join(err, g.Wait())
}

// allocIDs hands the create path IDs from the segment allocator. Its
// failures are the client's 503: retryable (the authority is slow or down)
// or not (exhausted, fenced), creates cannot proceed either way and
// redirects are unaffected.
type allocIDs struct {
	a  *idalloc.Allocator
	ns string
}

func (x allocIDs) NextID(ctx context.Context) (uint64, error) {
	id, err := x.a.Next(ctx, x.ns)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", link.ErrUnavailable, err)
	}
	return id, nil
}

func (x allocIDs) Done(id uint64, committed bool) { x.a.Done(id, committed) }
