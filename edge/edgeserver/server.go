// Package edgeserver wires an edge: the layered store, the snapshot syncer, the
// change feed, the authority client, click recording and the fasthttp redirect server. The
// edge binary and the local all-in-one mode run it.
package edgeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/lookup"
	"github.com/edgelink/edgelink/edge/ratelimit"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/snapsync"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/prom"
)

// Config is everything an edge needs to run. Zero values take the defaults
// noted.
type Config struct {
	HTTPAddr string
	NATSURL  string
	Name     string // identifies the edge in NATS, click subjects and logs
	Log      *slog.Logger

	// CacheEntries bounds the long-tail cache (default 1,000,000).
	CacheEntries int64
	// BloomCapacity sizes the live-code hint (default 4,000,000 at 1%);
	// it is rebuilt twice as large when the stream overfills it.
	BloomCapacity uint
	// AuthorityTimeout bounds one authority round trip (default 500ms);
	// AuthorityConcurrency bounds lookups in flight (default 32).
	AuthorityTimeout     time.Duration
	AuthorityConcurrency int
	// RatePerIP and BurstPerIP bound authority lookups per client IP
	// (defaults 20/s, burst 100); a negative RatePerIP disables the limit.
	RatePerIP  float64
	BurstPerIP int
	// ClickBuffer bounds clicks waiting to be published (default 65,536).
	ClickBuffer int
	// ClickFlushEvery bounds how long a click waits to be published
	// (default 200ms); ClickReportEvery is how often the redirect
	// service-time histogram is published (default 10s).
	ClickFlushEvery, ClickReportEvery time.Duration
	// MaxReadyLag is the most changes the feed may be behind before the
	// edge reports itself degraded (default 1,000); it stays in service.
	MaxReadyLag uint64

	// SnapshotDir keeps the local copy of the newest snapshot, loaded at
	// boot before anything is asked of NATS; empty keeps none.
	SnapshotDir string
	// SnapshotPoll is how often the snapshot bucket is listed besides being
	// watched (default 30s).
	SnapshotPoll time.Duration
	// SnapshotBootWait bounds asking the bucket for a newer snapshot at boot
	// when a local copy exists (default 5s).
	SnapshotBootWait time.Duration

	// OnListen, if set, is called with the server's address once it listens.
	OnListen func(addr net.Addr)
	// OnStart, if set, is called with the running edge before it serves;
	// tests use it to pause the feed and read counters.
	OnStart func(*Edge)
}

// Edge is a running edge's parts, for tests and metrics.
type Edge struct {
	Handler   *redirect.Handler
	Feed      *changefeed.Feed
	Resolver  *resolve.Resolver
	Authority *lookup.Client
	Clicks    *clickpub.Recorder
	Overlay   *store.Overlay
	Segments  *store.Segments
	Snapshots *store.Snapshots
	Syncer    *snapsync.Syncer
}

// Run serves until ctx is done. The edge keeps answering from memory while
// NATS, control or PostgreSQL are unreachable; readiness reports it.
//
// Start order: listen (liveness answers at once), boot the snapshot (local
// copy or the bucket's newest), then start the feed after the snapshot's
// position; readiness waits for both the snapshot and the replay.
// Shutdown order: stop accepting and finish requests, then stop the feed and
// the syncer, then flush clicks, then close NATS.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	defaults(&cfg)
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("edgelink-edge "+cfg.Name), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}

	overlay := store.NewOverlay()
	hint := store.NewHint(cfg.BloomCapacity, 0.01)
	segments := new(store.Segments)
	cache, err := store.NewCache(cfg.CacheEntries)
	if err != nil {
		return err
	}
	defer cache.Close()
	snaps := new(store.Snapshots)
	applied := &store.Layers{Overlay: overlay, Hint: hint, Segments: segments, Snapshots: snaps}
	feed := changefeed.New(js, applied, log)
	syncer := snapsync.New(js, applied, feed, snapsync.Config{Dir: cfg.SnapshotDir, Poll: cfg.SnapshotPoll,
		BootWait: cfg.SnapshotBootWait, Log: log})
	client := lookup.New(nc, lookup.Config{Timeout: cfg.AuthorityTimeout, Concurrency: cfg.AuthorityConcurrency})
	var limiter resolve.Limiter
	if cfg.RatePerIP > 0 {
		limiter = ratelimit.New(cfg.RatePerIP, cfg.BurstPerIP, 100_000, nil)
	}
	res := &resolve.Resolver{
		Cache: cache, Hint: hint, Segments: segments, Authority: client, Limiter: limiter,
		Complete: feed.Complete,
	}
	rec := clickpub.New(js, clickpub.Config{Edge: cfg.Name, Buffer: cfg.ClickBuffer, Log: log,
		FlushEvery: cfg.ClickFlushEvery, ReportEvery: cfg.ClickReportEvery})
	e := &Edge{Feed: feed, Resolver: res, Authority: client, Clicks: rec, Overlay: overlay, Segments: segments,
		Snapshots: snaps, Syncer: syncer}
	// Readiness is lost only for reasons of this edge's own: booting,
	// replaying the stream after boot while the stream is reachable, or a
	// gap in what it applied (it may hold stale links until its re-sync
	// from a snapshot). What every edge shares (NATS down, a slow stream)
	// is reported as degraded but keeps it in service: it answers every
	// link it knows, and 503 (never a guessed 404) for recent ones it
	// cannot check.
	var inService atomic.Bool
	h := &redirect.Handler{Store: applied, Miss: res, Clicks: rec, Ready: func() error {
		p := feed.Position()
		switch {
		case !syncer.Booted():
			return errors.New("booting: loading the snapshot")
		case p.Gaps > 0:
			return fmt.Errorf("re-syncing: %d gaps in the change stream", p.Gaps)
		case inService.Load():
			return nil
		case nc.IsConnected() && !p.CaughtUp:
			return fmt.Errorf("catching up: %d changes pending", p.Pending)
		}
		inService.Store(true)
		return nil
	}, Degraded: func() string {
		p := feed.Position()
		switch {
		case !nc.IsConnected():
			return "change stream unreachable; serving known links, recent ones answer 503"
		case !p.CaughtUp || p.Pending > cfg.MaxReadyLag:
			return fmt.Sprintf("lagging: %d changes pending", p.Pending)
		}
		return ""
	}}
	// Startup: the snapshot (or, with none published, the empty store the
	// stream is replayed into) is loaded. Live: the process makes
	// progress; NATS, control or PostgreSQL being down is not a reason to
	// restart an edge that serves what it knows.
	h.Started = func() error {
		if !syncer.Booted() {
			return errors.New("booting: loading the snapshot")
		}
		return nil
	}
	var beat atomic.Int64
	beat.Store(time.Now().UnixNano())
	h.Live = func() error {
		if since := time.Since(time.Unix(0, beat.Load())); since > liveStall {
			return fmt.Errorf("stalled: the edge's heartbeat has not run for %s", since.Round(time.Second))
		}
		return nil
	}
	e.Handler = h
	reg := newRegistry(e, nc)
	h.Metrics = func(w io.Writer) { _ = prom.WriteText(w, reg) }
	srv := &fasthttp.Server{
		Handler:               rec.Timed(h.Serve), // redirect service-time histogram
		Name:                  "edgelink",
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		ReadBufferSize:        8 << 10, // bounds the request line and headers
		MaxRequestBodySize:    4 << 10,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		// fasthttp's own lines (a client's malformed, slow or oversized
		// request, with its address) go to the edge's logger at debug
		// level, not to stderr: the edge logs nothing per request.
		Logger: debugLog{log},
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	if cfg.OnStart != nil {
		cfg.OnStart(e)
	}
	log.Info("edge listening", "addr", ln.Addr().String())

	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFeed()
	clickCtx, stopClicks := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClicks()
	g := new(errgroup.Group)
	g.Go(func() error {
		// The feed starts where the snapshot ends, so it waits for boot.
		if err := syncer.Boot(feedCtx); err != nil {
			return nil // stopped before boot finished
		}
		var sg errgroup.Group
		sg.Go(func() error { return feed.Run(feedCtx) })
		sg.Go(func() error { return syncer.Run(feedCtx) })
		return sg.Wait()
	})
	g.Go(func() error { return growHint(feedCtx, hint, overlay, cfg.BloomCapacity) })
	g.Go(func() error { heartbeat(feedCtx, &beat); return nil })
	g.Go(func() error { return rec.Run(clickCtx) })
	g.Go(func() error { return srv.Serve(ln) })
	<-ctx.Done()
	feed.Resume() // a paused feed must not hold up shutdown
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.ShutdownWithContext(shutdownCtx)
	stopFeed()
	stopClicks()
	return errors.Join(err, g.Wait())
}

func defaults(c *Config) {
	if c.CacheEntries <= 0 {
		c.CacheEntries = 1_000_000
	}
	if c.BloomCapacity == 0 {
		c.BloomCapacity = 4_000_000
	}
	if c.RatePerIP == 0 {
		c.RatePerIP = 20
	}
	if c.BurstPerIP <= 0 {
		c.BurstPerIP = 100
	}
	if c.MaxReadyLag == 0 {
		c.MaxReadyLag = 1000
	}
}

// growHint rebuilds the bloom hint twice as large whenever the stream has
// overfilled it, so its false-positive rate (and so the authority's load
// under a scan) stays near 1%.
func growHint(ctx context.Context, hint *store.Hint, overlay *store.Overlay, capacity uint) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !hint.Saturated() {
			continue
		}
		capacity *= 2
		// Codes applied during the rebuild are added to the old filter
		// and may miss the new one: re-add the overlay after the swap.
		each := func(add func(string)) {
			overlay.Range(func(e *store.Entry) bool { add(e.Code); return true })
		}
		hint.Rebuild(capacity, each)
		overlay.Range(func(e *store.Entry) bool { hint.Add(e.Code); return true })
	}
}

// liveStall is how long the heartbeat may go without running before /livez
// fails: a scheduler stall or deadlock that long is not going away.
const liveStall = 30 * time.Second

// heartbeat stamps beat every second until ctx is done.
func heartbeat(ctx context.Context, beat *atomic.Int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			beat.Store(now.UnixNano())
		}
	}
}

// debugLog is fasthttp's logger on slog, at debug level.
type debugLog struct{ log *slog.Logger }

func (d debugLog) Printf(format string, args ...any) {
	if d.log.Enabled(context.Background(), slog.LevelDebug) {
		d.log.Debug(fmt.Sprintf(format, args...))
	}
}
