package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc/kvwitness"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natsconn"
)

type allocWitnessCmd struct {
	database
	NATSURL string `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) holding the witness, comma-separated."`
}

func (c *allocWitnessCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return runAllocWitness(ctx, g.DatabaseURL, *c, stdout)
}

type allocFenceRecoverCmd struct {
	database
	NATSURL string `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) holding the witness, comma-separated."`
	Actor   string `default:"fence-recover" help:"Who recovers, recorded in the audit."`
}

func (c *allocFenceRecoverCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return runAllocFenceRecover(ctx, g.DatabaseURL, *c, stdout)
}

// withWitness opens the database at dsn and the witness on natsURL.
func withWitness(ctx context.Context, dsn, natsURL string, fn func(*allocstore.Store, *kvwitness.Witness) error) error {
	pool, err := postgres.Open(ctx, dsn, 0)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	// A one-shot command: fail at once when NATS is unreachable, and
	// reconnect as nats.go does by default, not forever as servers do.
	nc, js, err := natsconn.JetStream(natsURL, "edgelink-control-alloc", nats.Timeout(10*time.Second),
		nats.RetryOnFailedConnect(false), nats.MaxReconnects(nats.DefaultMaxReconnect),
		nats.ReconnectWait(nats.DefaultReconnectWait))
	if err != nil {
		return err
	}
	defer nc.Close()
	return fn(allocstore.New(pool), kvwitness.New(js, kvwitness.Bucket, 1))
}

// runAllocWitness is `control alloc witness`: one line per namespace, and an
// error (exit non-zero) when a counter is below its witness, which is what a
// promoted replica that lost confirmed leases looks like. Run it against a
// promotion candidate before sending it writes.
func runAllocWitness(ctx context.Context, dsn string, c allocWitnessCmd, stdout io.Writer) error {
	return withWitness(ctx, dsn, c.NATSURL, func(st *allocstore.Store, w *kvwitness.Witness) error {
		checks, err := st.CheckWitness(ctx, w)
		if err != nil {
			return fmt.Errorf("alloc witness: %w", err)
		}
		missing := 0
		for _, ch := range checks {
			fmt.Fprintln(stdout, ch)
			if ch.Missing() {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("alloc witness: %d of %d namespaces are below their witness: allocation stays fenced there; "+
				"if this database is the one to keep, run control alloc fence-recover", missing, len(checks))
		}
		return nil
	})
}

// runAllocFenceRecover is `control alloc fence-recover`.
func runAllocFenceRecover(ctx context.Context, dsn string, c allocFenceRecoverCmd, stdout io.Writer) error {
	return withWitness(ctx, dsn, c.NATSURL, func(st *allocstore.Store, w *kvwitness.Witness) error {
		raised, err := st.RecoverFromWitness(ctx, w, c.Actor)
		for _, r := range raised {
			fmt.Fprintf(stdout, "namespace %s: counter raised from %d to %d; [%d, %d) audited as waste (request %s)\n",
				r.Namespace, r.From, r.To, r.From, r.To, r.RequestID)
		}
		if err != nil {
			return fmt.Errorf("alloc fence-recover: %w", err)
		}
		if len(raised) == 0 {
			fmt.Fprintln(stdout, "every counter is at or above its witness: nothing to recover")
		}
		return nil
	})
}
