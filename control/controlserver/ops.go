package controlserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/idalloc"
)

// ops backs control's probes and its graceful shutdown. Ready means safe
// to allocate and live means the process progresses: startup = first
// segment loaded and the authority reachable; ready = enough allocation
// runway, with hysteresis; live = the allocator's loop keeps turning,
// whatever the database does.
type ops struct {
	alloc      *idalloc.Allocator
	namespaces []string
	ping       func(context.Context) error
	runway     *idalloc.Runway
	liveStall  time.Duration
	drainFor   time.Duration
	log        *slog.Logger
	loaded     atomic.Bool
}

func newOps(alloc *idalloc.Allocator, ns idalloc.Namespace, ping func(context.Context) error, cfg Config, log *slog.Logger) *ops {
	marks := idalloc.RunwayMarks{LowIDs: 0, HighIDs: max(ns.Step/10, 1), LowSeconds: 10, HighSeconds: 30}
	if cfg.Runway != nil {
		marks = *cfg.Runway
	}
	o := &ops{alloc: alloc, namespaces: []string{ns.Name}, ping: ping, runway: idalloc.NewRunway(marks),
		liveStall: cfg.LiveStall, drainFor: cfg.DrainTimeout, log: log}
	if o.liveStall <= 0 {
		// Far above a loader's longest turn while the authority is down
		// (a lease or a few seals, 5 s each), so an outage never reads as
		// a stall.
		o.liveStall = 2 * time.Minute
	}
	if o.drainFor <= 0 {
		o.drainFor = 10 * time.Second
	}
	return o
}

// waitLoaded waits for the first segment of every namespace, however long
// the authority takes (the startup probe says so meanwhile; an orchestrator
// decides when to give up). It fails only for good (fenced, exhausted) or
// when ctx ends.
func (o *ops) waitLoaded(ctx context.Context) error {
	if err := o.alloc.WaitLoaded(ctx); err != nil {
		return err
	}
	o.loaded.Store(true)
	return nil
}

func (o *ops) startup(ctx context.Context) error {
	if !o.loaded.Load() {
		return errors.New("the first ID segment is not loaded yet")
	}
	if err := o.ping(ctx); err != nil {
		return fmt.Errorf("the authority database does not answer: %w", err)
	}
	return nil
}

// ready needs no database: control creates from the segments it holds
// through an outage, and turns unready only when their runway runs low.
func (o *ops) ready(context.Context) error {
	if !o.loaded.Load() {
		return errors.New("starting: the first ID segment is not loaded yet")
	}
	var errs []error
	for _, ns := range o.namespaces {
		s, err := o.alloc.Stats(ns)
		if err == nil {
			err = o.runway.Check(s)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (o *ops) live() error {
	if o.alloc.Closed() {
		return nil // shutting down: loaders stop on purpose
	}
	if since := time.Since(o.alloc.Progress()); since > o.liveStall {
		return fmt.Errorf("the ID allocator's loader has not turned for %s", since.Round(time.Second))
	}
	return nil
}

// drain refuses new creates and waits, up to the drain timeout, for those
// in flight; the allocator is closed after it.
func (o *ops) drain(h *api.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), o.drainFor)
	defer cancel()
	if err := h.Drain(ctx); err != nil {
		o.log.Warn("shutdown: creates still in flight after the drain timeout", "creates", h.InFlightCreates(), "timeout", o.drainFor)
	}
}
