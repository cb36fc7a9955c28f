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
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/clientip"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/edge/limitshare"
	"github.com/edgelink/edgelink/edge/lookup"
	"github.com/edgelink/edgelink/edge/ratelimit"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/snapsync"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/edge/visitorsalt"
	"github.com/edgelink/edgelink/internal/natsconn"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
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
	// AuthorityInflight bounds the round trips at once (default 8), and
	// AuthorityMaxWait how long a question waits for one before the edge
	// answers 503 (default 50ms): load is shed, not queued.
	AuthorityTimeout  time.Duration
	AuthorityInflight int
	AuthorityMaxWait  time.Duration
	// NotFoundRate and NotFoundBurst are each client IP's budget of 404s
	// (defaults 50/s, burst 1,000); past it a 404 is answered 429. It is
	// never spent on a code that exists. A negative NotFoundRate turns it
	// off.
	NotFoundRate  float64
	NotFoundBurst int
	// TrustedProxies are the addresses or CIDRs of proxies in front of the
	// edge whose word on the client's address is taken: X-Forwarded-For
	// from them, or, with ProxyProtocol, the PROXY protocol header they
	// must then send (v1 or v2; connections from anyone else are read
	// as they are). Their X-Forwarded-Host names the request's host (its
	// domain) in either mode; anyone else's is ignored.
	TrustedProxies []string
	ProxyProtocol  bool
	// CodeKeysFile is the operator's code key file (shared/ff1 LoadKeys,
	// the same file control reads): an FF1 domain's misses are decoded
	// with its keys to rule random codes out from memory. Without the
	// file, or without a domain's key in it, that domain's misses are
	// asked of the authority. Its bytes are never logged.
	CodeKeysFile string
	// CodeKeys, when set, is used instead of CodeKeysFile (tests).
	CodeKeys *ff1.Keys
	// GeoIP names country data in Tor's format (geo.LoadTor: a directory
	// holding geoip and geoip6, as Debian's tor-geoipdb installs, or the
	// files); GeoIPMMDB an operator's MaxMind DB file instead (GeoLite2 or
	// DB-IP country or city). At most one; with neither, clicks carry no
	// country. Data named that does not load stops the edge at start. Geo,
	// when set, is used instead of both (tests, the local stack).
	GeoIP     []string
	GeoIPMMDB string
	Geo       *geo.Table
	// UnlockKeysFile is the key file that signs password-protected links'
	// unlock cookies and form tokens (edge/unlock LoadKeys: "name
	// base64-key" lines, the first signs). Every edge behind the same
	// hosts needs the same file, or a cookie one edge set is refused by
	// the next (the visitor is asked again). Without one an edge signs
	// with a random key of its own, logged as a warning. Its bytes are
	// never logged.
	UnlockKeysFile string
	// Unlock sizes the password gate: cookie and form lifetimes, attempts
	// per client and per link, verifications at once (edge/unlock
	// Config; zero values take its defaults). Unlock.Keys, when set, is
	// used instead of UnlockKeysFile (tests).
	Unlock unlock.Config
	// LimitReportEvery is how often the edge tells the other edges, on
	// core NATS (edge/limitshare), what it served of each link with a
	// click limit, and so about how late they learn it (default 50ms). A
	// negative value sends and takes no reports: each edge then stops a
	// limited link within its own allowance alone (docs/click-limits.md).
	LimitReportEvery time.Duration
	// ClickBuffer bounds clicks waiting to be published (default 65,536).
	ClickBuffer int
	// ClickFlushEvery bounds how long a click waits to be published
	// (default 200ms); ClickReportEvery is how often the redirect
	// service-time histogram is published (default 10s).
	ClickFlushEvery, ClickReportEvery time.Duration
	// MaxReadyLag is the most stream messages the feed may be behind
	// before the edge reports itself degraded (default 100; a message
	// carries up to 1,000 changes of one relay run); it stays in service.
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
	// LockSnapshot keeps the snapshot in service resident once verified
	// (snapsync.Config.LockSnapshot: needs CAP_IPC_LOCK or a memlock limit
	// of the file's size, and memory for two snapshots).
	LockSnapshot bool

	// OnListen, if set, is called with the server's address once it listens.
	OnListen func(addr net.Addr)
	// OnStart, if set, is called with the running edge before it serves;
	// tests use it to pause the feed and read counters.
	OnStart func(*Edge)
}

// Edge is a running edge's parts, for tests and metrics.
type Edge struct {
	Handler   *redirect.Handler
	Domains   *store.Domains
	Feed      *changefeed.Feed
	Resolver  *resolve.Resolver
	Hosts     *resolve.Hosts
	Authority *lookup.Client
	Clicks    *clickpub.Recorder
	Countries *Countries // nil without country data
	Unlock    *unlock.Gate
	Limits    *redirect.ClickLimits
	Share     *limitshare.Share // nil with reports off
	Salts     *visitorsalt.Salts
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
	keys := cfg.CodeKeys
	if keys == nil {
		var err error
		if keys, err = ff1.LoadKeys(cfg.CodeKeysFile); err != nil {
			return err // names the file and the line, never a key
		}
	}
	countries, err := loadCountries(cfg, log)
	if err != nil {
		return err
	}
	gate, err := newGate(cfg, log)
	if err != nil {
		return err
	}
	nc, js, err := natsconn.JetStream(cfg.NATSURL, "edgelink-edge "+cfg.Name)
	if err != nil {
		return err
	}
	defer nc.Close()

	overlay := store.NewOverlay()
	hint := store.NewHint(cfg.BloomCapacity, 0.01)
	segments := new(store.Segments)
	cache, err := store.NewCache(cfg.CacheEntries)
	if err != nil {
		return err
	}
	defer cache.Close()
	snaps := new(store.Snapshots)
	// The domain table: the snapshot's (on each install) and the stream's
	// domain events, through the layers.
	domains := store.NewDomains(keys)
	applied := &store.Layers{Overlay: overlay, Hint: hint, Segments: segments, Snapshots: snaps, Cache: cache,
		Domains: domains}
	feed := changefeed.New(js, applied, log)
	syncer := snapsync.New(js, applied, feed, snapsync.Config{Dir: cfg.SnapshotDir, Poll: cfg.SnapshotPoll,
		BootWait: cfg.SnapshotBootWait, LockSnapshot: cfg.LockSnapshot, Log: log})
	client := lookup.New(nc, lookup.Config{Timeout: cfg.AuthorityTimeout, Inflight: cfg.AuthorityInflight,
		MaxWait: cfg.AuthorityMaxWait})
	res := &resolve.Resolver{
		Cache: cache, Hint: hint, Segments: segments, Authority: client, Complete: feed.Complete,
	}
	// A host the table lacks may be a domain created a moment ago: asked of
	// the authority before any 404 (edge/redirect host.go).
	hosts := &resolve.Hosts{Domains: domains, Authority: client}
	// Visitor hashes use the salt control keeps for each UTC day.
	salts := visitorsalt.New(js, visitorsalt.Config{Log: log})
	ccfg := clickpub.Config{Edge: cfg.Name, Buffer: cfg.ClickBuffer, Log: log,
		FlushEvery: cfg.ClickFlushEvery, ReportEvery: cfg.ClickReportEvery, Visitors: salts}
	if countries != nil { // a nil *Countries in the interface would be a Geo that is there
		ccfg.Geo = countries
	}
	rec := clickpub.New(js, ccfg)
	e := &Edge{Domains: domains, Feed: feed, Resolver: res, Hosts: hosts, Authority: client, Clicks: rec, Salts: salts, Countries: countries, Overlay: overlay,
		Segments: segments, Snapshots: snaps, Syncer: syncer, Unlock: gate}
	proxies, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		return err
	}
	// Click limits: this edge's allowance of each limited link, and the
	// other edges' reports of theirs (docs/click-limits.md).
	limits := new(redirect.ClickLimits)
	e.Limits = limits
	if cfg.LimitReportEvery > 0 {
		e.Share = limitshare.New(nc, limits, limitshare.Config{Edge: cfg.Name, Every: cfg.LimitReportEvery, Log: log})
	}
	h := &redirect.Handler{Domains: domains, Store: applied, Miss: res, Hosts: hosts, Clicks: rec, Unlock: gate, Limits: limits}
	if countries != nil {
		// Rules' country conditions: the table itself, uncounted (the
		// lookups counted are the clicks').
		h.Countries = countries.Table
	}
	if cfg.NotFoundRate > 0 {
		h.NotFoundLimit = ratelimit.New(cfg.NotFoundRate, cfg.NotFoundBurst, 100_000, nil)
	}
	if len(cfg.TrustedProxies) > 0 && !cfg.ProxyProtocol {
		h.ClientIP = func(ctx *fasthttp.RequestCtx) netip.Addr {
			return proxies.Client(ctx.RemoteIP(), ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor))
		}
	}
	if len(cfg.TrustedProxies) > 0 {
		h.FromProxy = func(ctx *fasthttp.RequestCtx) bool { return proxies.Proxied(ctx.Conn()) }
	}
	var beat atomic.Int64
	beat.Store(time.Now().UnixNano())
	newProbes(syncer, feed, nc, cfg.MaxReadyLag, &beat).attach(h)
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
	ln, err := listen(cfg.HTTPAddr, cfg.ProxyProtocol, cfg.TrustedProxies)
	if err != nil {
		return err
	}
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	if cfg.OnStart != nil {
		cfg.OnStart(e)
	}
	log.Info("edge listening", "addr", ln.Addr().String(), "code_keys", len(keys.Names()))

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
	g.Go(func() error { return salts.Run(clickCtx) }) // its salts stay held after: the last flush uses them
	g.Go(func() error { return client.Run(feedCtx) })
	if e.Share != nil {
		// Reports go on while requests finish, and once more after.
		g.Go(func() error { return e.Share.Run(clickCtx) })
	}
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
	if c.NotFoundRate == 0 {
		c.NotFoundRate = 50
	}
	if c.NotFoundBurst <= 0 {
		c.NotFoundBurst = 1000
	}
	if c.MaxReadyLag == 0 {
		c.MaxReadyLag = 100
	}
	if c.LimitReportEvery == 0 {
		c.LimitReportEvery = 50 * time.Millisecond
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
		each := func(add func(link.DomainID, string)) {
			overlay.Range(func(d link.DomainID, code []byte, _ store.Record) bool { add(d, string(code)); return true })
		}
		hint.Rebuild(capacity, each)
		overlay.Range(func(d link.DomainID, code []byte, _ store.Record) bool { hint.Add(d, string(code)); return true })
	}
}

// debugLog is fasthttp's logger on slog, at debug level.
type debugLog struct{ log *slog.Logger }

func (d debugLog) Printf(format string, args ...any) {
	if d.log.Enabled(context.Background(), slog.LevelDebug) {
		d.log.Debug(fmt.Sprintf(format, args...))
	}
}
