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
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/control/api"
	controlauthority "github.com/edgelink/edgelink/control/authority"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
)

// Config is everything control needs to run.
type Config struct {
	HTTPAddr       string // listen address of the API
	DatabaseURL    string // the primary: allocation and writes never go to a replica
	NATSURL        string
	PublicURL      string // base of short URLs, an edge's address
	BlockedDomains []string
	Reserved       []string // extra reserved codes, beyond the routes
	Log            *slog.Logger
	// OnListen, if set, is called with the API's address once it listens.
	OnListen func(addr net.Addr)
}

// Run serves until ctx is done, then shuts down in order: stop taking
// requests, finish in-flight ones, stop the relay, close connections.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	store := postgres.New(pool)

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

	svc := links.New(store, sequenceIDs{store}, links.Config{
		BlockedDomains: cfg.BlockedDomains,
		Reserved:       append(append([]string{}, api.Routes...), cfg.Reserved...),
		Log:            log,
	})
	handler := api.New(store, svc, api.Config{PublicURL: cfg.PublicURL, Ready: store.Ping, Log: log})

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
	// Edges ask about codes they do not know; answering stops with the API.
	g.Go(func() error {
		return controlauthority.New(nc, store, controlauthority.Config{Log: log}).Run(ctx)
	})
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
	// The relay stops last so changes committed by in-flight creates still
	// go out; whatever it misses, the next relay publishes.
	stopRelay()
	return errors.Join(err, g.Wait())
}

// sequenceIDs is the first slice's ID source; the segment allocator
// replaces it.
type sequenceIDs struct{ store *postgres.Store }

func (s sequenceIDs) NextID(ctx context.Context) (uint64, error) { return s.store.NextSequenceID(ctx) }
