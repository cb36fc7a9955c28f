// Package controlserver wires control: the authority pool, migrations, the outbox
// relay and the HTTP API. The control binary and the local all-in-one mode
// both run it.
package controlserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/console/pgstore"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/kvwitness"
	"github.com/edgelink/edgelink/control/importjobs"
	jobstore "github.com/edgelink/edgelink/control/importjobs/pgstore"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/metrics"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/responder"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/control/visitorsalt"
	whstore "github.com/edgelink/edgelink/control/webhooks/pgstore"
	"github.com/edgelink/edgelink/internal/natsconn"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// Config is everything control needs to run.
type Config struct {
	HTTPAddr       string // listen address of the API
	DatabaseURL    string // the primary: allocation and writes never go to a replica
	NATSURL        string
	PublicURL      string // base of short URLs, an edge's address
	BlockedDomains []string
	// AllowPrivateTargets accepts link targets on loopback, private and
	// link-local addresses and names like localhost (refused by default: a
	// public shortener must not send visitors into their own network).
	AllowPrivateTargets bool
	Reserved            []string // extra reserved codes, beyond the routes
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
	// OnListen, if set, is called with the API's address once it listens
	// and the first ID segment is loaded (creates can succeed).
	OnListen func(addr net.Addr)
	// Listener, if set, is served instead of listening on HTTPAddr (tests
	// probe an instance that has not started yet).
	Listener net.Listener
	// Runway is when /readyz turns unready and ready again (hysteresis);
	// nil takes 10 s / 0 IDs low and 30 s / a tenth of a segment high.
	Runway *idalloc.RunwayMarks
	// LiveStall is how long the allocator's loader may go without turning
	// before /livez fails (default 2 minutes; an authority outage never
	// stalls it that long).
	LiveStall time.Duration
	// DrainTimeout bounds the wait for creates in flight at shutdown
	// (default 10s); new creates are refused with 503 meanwhile.
	DrainTimeout time.Duration
	// NoClickRollup leaves the CLICKS stream to other control instances
	// (tests run the roller in a process of its own to kill it).
	NoClickRollup bool
	// Clicks tunes the click roller (top values kept per dimension, hours
	// kept); its Log and Replicas are control's.
	Clicks clickroll.Config
	// Snapshots is when control builds and publishes edge snapshots by
	// itself; zero fields take the defaults of snapshots.Schedule.
	Snapshots snapshots.Schedule
	// SnapshotBudget, when positive, is how many links the entries of the
	// snapshots control builds hold: the hottest over the last
	// SnapshotHotDays days of clicks (postgres.Hotness; 0 takes its
	// default), then the newest. The bloom still covers every code.
	SnapshotBudget  int
	SnapshotHotDays int
	// StreamReplicas is how many JetStream servers keep each of control's
	// streams (LINK_CHANGES, CLICKS, the LINK_SNAPSHOTS bucket): 3 in a
	// 3-node cluster, so losing a node loses nothing; zero means 1. A
	// Snapshots.Replicas of its own wins for the bucket.
	StreamReplicas int
	// Instance names this process in the allocation audit; empty takes
	// host, pid and a random suffix.
	Instance string
	// ReplicaURL, if set, is a read replica that serves edges' authority
	// lookups to offload the primary. A miss, an error or a slow answer
	// there is asked of the primary (responder.ReplicaFirst), so a
	// lagging replica never turns a fresh 201 into a 404. Writes and
	// allocation never use it.
	ReplicaURL string
	// ReplicaTimeout bounds a replica lookup before the primary is asked
	// (default 200ms).
	ReplicaTimeout time.Duration
	// OnReplicaLookups, if set, is given the replica-first lookup at start
	// (with ReplicaURL), so tests can read its counters.
	OnReplicaLookups func(*responder.ReplicaFirst)
	// AllocWitness is how allocation uses its high-water witness (the
	// JetStream KV bucket ALLOC_WITNESS), which refuses leases from a
	// promoted replica that lost confirmed ones: "required" (default: a
	// lease fails while NATS is unreachable, so creates run on the
	// segments already leased, then answer 503), "best-effort" (lease
	// without it then; a failover during the outage goes unseen) or "off".
	AllocWitness string
	// TenantRate and TenantBurst are the default request limit of a tenant
	// without one of its own (control tenants set-limits); zero takes
	// 100/s and 200, a negative rate leaves such tenants unlimited.
	TenantRate  float64
	TenantBurst int
	// AuthFailureRate and AuthFailureBurst bound each client address's
	// failed authentications (api.Config); zero takes 1/s and 20, a
	// negative rate turns the bound off.
	AuthFailureRate  float64
	AuthFailureBurst int
	// IdempotencyTTL is how long an idempotency key answers retries
	// (links.CheckKeyTTL: at most 30 days); zero takes 24 hours. Each
	// instance purges expired keys in the background.
	IdempotencyTTL time.Duration
	// ConsoleSecureCookies, if set, says whether the console's session
	// cookie is Secure (the console is reached over TLS); nil takes
	// whether PublicURL is https.
	ConsoleSecureCookies *bool
	// CodeKeysFile is the operator's code key file (--code-keys: lines of
	// "name base64-key", the same file on every edge): FF1 domains' codes
	// are made with its keys. Empty: no keys, so no FF1 domain can be
	// created or used. Control refuses to start when an active FF1
	// domain's current key is missing from it.
	CodeKeysFile string
	// DomainKey is the key name new FF1 domains get when they name none
	// (--domain-key); it must be in CodeKeysFile.
	DomainKey string
	// Webhooks is how webhooks are sent (webhooks.go).
	Webhooks WebhookConfig
	// ImportMaxBytes bounds a file uploaded to the console's bulk upload
	// (--import-max-bytes; zero takes console.DefaultMaxUpload, at most
	// 64 MiB, which the schema bounds).
	ImportMaxBytes int64
	// Imports tunes the runner of the console's bulk imports (leases,
	// bounds, retention); zero fields take importjobs' defaults (its
	// Instance a name unique to this process), Log this instance's.
	Imports importjobs.Config
}

// Run serves until ctx is done, then shuts down in order: stop taking
// requests, finish in-flight ones, stop the relay, close connections.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keyTTL := cfg.IdempotencyTTL
	if keyTTL == 0 {
		keyTTL = links.DefaultKeyTTL
	}
	if err := links.CheckKeyTTL(keyTTL); err != nil {
		return err
	}
	// pgx's default pool (max(4, CPUs)) starves the create writers beside
	// the relay's session, the authority responder and segment loads.
	pool, err := postgres.Open(ctx, cfg.DatabaseURL, 24)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	store := postgres.New(pool, postgres.WithIdempotencyTTL(keyTTL))
	keys, err := ff1.LoadKeys(cfg.CodeKeysFile)
	if err != nil {
		return err
	}
	if err := prepareDomains(ctx, store, keys, cfg); err != nil {
		return err
	}
	// Derived counters converge: whatever drifted (a bug, a manual fix in
	// SQL) is corrected against the rows, and said.
	if drifts, err := store.ReconcileLiveLinks(ctx); err != nil {
		log.Error("reconcile live-link counters", "err", err)
	} else {
		for _, d := range drifts {
			log.Warn("live-link counter drifted; corrected", "tenant", d.TenantID, "counted", d.Counted, "actual", d.Actual)
		}
	}

	nc, js, err := natsconn.JetStream(cfg.NATSURL, "edgelink-control")
	if err != nil {
		return err
	}
	defer nc.Close()

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
	var witness idalloc.Witness
	switch cfg.AllocWitness {
	case "", "required", "best-effort":
		witness = kvwitness.New(js, kvwitness.Bucket, cfg.StreamReplicas)
	case "off":
	default:
		return fmt.Errorf("alloc witness: %q is not one of required, best-effort, off", cfg.AllocWitness)
	}
	met := metrics.New()
	allocStore := allocstore.New(pool)
	alloc, err := idalloc.New(ctx, allocStore, idalloc.Config{
		Namespaces: []idalloc.Namespace{ns}, AbandonAfter: abandon, Logger: log, Instance: cfg.Instance,
		// Domains' namespaces are made with the domains, here or by
		// another instance, and learned on their first create.
		Lookup:  allocStore.LookupNamespace,
		OnLoad:  met.ObserveLoad,
		Witness: witness, WitnessBestEffort: cfg.AllocWitness == "best-effort",
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

	svc := links.New(store, allocIDs{alloc, ns.Name}, links.Config{
		BlockedDomains:      cfg.BlockedDomains,
		AllowPrivateTargets: cfg.AllowPrivateTargets,
		Reserved:            append(append(append([]string{}, api.Routes...), console.Routes...), cfg.Reserved...),
		Keys:                keys,
		Log:                 log,
	})
	doms := domains.New(store, domains.Config{Keys: keys, DefaultKey: cfg.DomainKey,
		Targets:  links.TargetPolicy{Blocked: cfg.BlockedDomains, AllowPrivate: cfg.AllowPrivateTargets},
		OnChange: func(d link.Domain) { svc.ForgetDomain(d.Host) }})
	probes := newOps(alloc, ns, store.Ping, cfg, log)
	hooks, err := newWebhooks(whstore.New(pool), js, cfg.PublicURL, cfg.Webhooks, cfg.StreamReplicas, met.Registry, log)
	if err != nil {
		return err
	}
	handler := api.New(store, svc, api.Config{PublicURL: cfg.PublicURL, Log: log, Stats: store,
		Startup: probes.startup, Ready: probes.ready, Live: probes.live,
		Metrics: met.Handler(), Registerer: met.Registry, Domains: doms, Webhooks: hooks.Service,
		RatePerSecond: cfg.TenantRate, Burst: cfg.TenantBurst, HourRetention: cfg.Clicks.HourRetention,
		AuthFailuresPerSecond: cfg.AuthFailureRate, AuthFailureBurst: cfg.AuthFailureBurst})

	// The console draws QR codes with the API's renderer, through an
	// instance of the API that listens nowhere and trusts only the
	// tenant the console's session resolved (console.QRAuth).
	qr := api.New(console.QRAuth{}, svc, api.Config{PublicURL: cfg.PublicURL, Log: log, RatePerSecond: -1, AuthFailuresPerSecond: -1})
	sessions := pgstore.New(pool)
	// Bulk uploads are jobs in PostgreSQL that any instance shows and one
	// runs, writing through svc in process for the job's tenant.
	if cfg.ImportMaxBytes > 64<<20 {
		return fmt.Errorf("import max bytes %d: at most 64 MiB", cfg.ImportMaxBytes)
	}
	importCfg := cfg.Imports
	if importCfg.Log == nil {
		importCfg.Log = log
	}
	short, err := links.NewShortURLs(cfg.PublicURL)
	if err != nil {
		return err
	}
	importStore := jobstore.New(pool)
	imports := importjobs.NewRunner(importStore, svc, short, importCfg)
	web, err := console.New(sessions, sessions, svc, console.Config{PublicURL: cfg.PublicURL, Secure: cfg.ConsoleSecureCookies, Log: log, QR: qr, Stats: store, Domains: doms, Webhooks: hooks.Service,
		Imports: importjobs.Queue{Store: importStore, Runner: imports}, MaxUploadBytes: cfg.ImportMaxBytes, HourRetention: cfg.Clicks.HourRetention})
	if err != nil {
		return err
	}
	root := http.NewServeMux()
	root.Handle(console.Prefix, web)
	root.Handle("/", handler)

	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	srv := &http.Server{
		Handler:           root,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		// Requests outlive ctx: shutdown drains them rather than
		// cancelling a create half way.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// Serve at once, so the probes answer while the first segment loads.
	served := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			served <- err
		}
		close(served)
	}()
	log.Info("control listening", "addr", ln.Addr().String())
	if err := probes.waitLoaded(ctx); err != nil {
		_ = srv.Close()
		if ctx.Err() != nil {
			return errors.Join(<-served) // stopped while starting
		}
		return errors.Join(fmt.Errorf("id allocator: %w", err), <-served)
	}
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}

	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	g := new(errgroup.Group)
	relay := outbox.New(store, js, outbox.Config{Log: log, Replicas: cfg.StreamReplicas})
	g.Go(func() error { return relay.Run(relayCtx) })
	// Webhooks stop with the relay: attempts in flight are logged first.
	g.Go(func() error { return hooks.Run(relayCtx) })
	// The daily visitor salts the edges hash clicks with: every instance
	// keeps them, agreeing through the bucket's revision checks.
	salts := visitorsalt.New(js, visitorsalt.Config{Log: log, Replicas: cfg.StreamReplicas})
	met.Registry.MustRegister(salts.Collectors()...)
	g.Go(func() error { return salts.Run(relayCtx) })
	var roller *clickroll.Roller
	if !cfg.NoClickRollup {
		// Stops with the relay: a batch in flight commits or is redelivered.
		rc := cfg.Clicks
		rc.Log, rc.Replicas = log, cfg.StreamReplicas
		roller = clickroll.New(store, js, rc)
		g.Go(func() error { return roller.Run(relayCtx) })
	}
	var lookup responder.Lookup = store
	var replicaLookups *responder.ReplicaFirst
	if cfg.ReplicaURL != "" {
		// Connects lazily: a replica that is down only sends lookups to
		// the primary.
		replica, err := postgres.Open(ctx, cfg.ReplicaURL, 0)
		if err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		defer replica.Close()
		rf := &responder.ReplicaFirst{Replica: postgres.New(replica), Primary: store, ReplicaTimeout: cfg.ReplicaTimeout}
		if cfg.OnReplicaLookups != nil {
			cfg.OnReplicaLookups(rf)
		}
		lookup, replicaLookups = rf, rf
	}
	// Edges ask about codes they do not know; answering stops with the API.
	// The frontier is always read on the primary: only there is it ordered
	// against the ceiling's raises.
	answers := responder.New(nc, lookup, allocStore, responder.Config{Log: log})
	g.Go(func() error { return answers.Run(ctx) })
	// Expired idempotency keys are read as absent already; the purge only
	// frees their rows. Every instance runs one: they skip each other's.
	keyPurge := links.NewKeyPurge(store, links.KeyPurgeConfig{Log: log})
	g.Go(func() error { keyPurge.Run(ctx); return nil })
	g.Go(func() error { web.Run(ctx, 0); return nil })
	// Stops with ctx: a job in flight is given back to the queue, for
	// another instance (or this one restarted) to run again, replaying
	// what it had made.
	g.Go(func() error { imports.Run(ctx); return nil })
	met.Attach(metrics.Sources{Alloc: alloc, Namespaces: []string{ns.Name}, Links: svc, Relay: relay,
		Responder: answers, Roller: roller, Replica: replicaLookups, KeyPurge: keyPurge})
	// Scheduled snapshot builds stop with the API; a build cut short is
	// simply not published.
	sched := cfg.Snapshots
	if sched.Replicas == 0 {
		sched.Replicas = cfg.StreamReplicas
	}
	builder := snapshots.New(store, js, log).WithBudget(cfg.SnapshotBudget, store.Hotness(cfg.SnapshotHotDays, nil))
	g.Go(func() error { return builder.Run(ctx, sched) })
	g.Go(func() error { met.RunCapacity(ctx, alloc, []string{ns.Name}, 30*time.Second, log); return nil })
	<-ctx.Done()
	// Drain: /readyz and new creates answer 503 while the creates in
	// flight finish (up to DrainTimeout). Then retire the segments: their
	// unused IDs are discarded, never returned, and their sealed events
	// go through the outbox. Then finish the other requests, and stop the
	// relay last, so what committed still goes out; whatever it misses,
	// the next relay publishes.
	probes.drain(handler)
	closeAlloc()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	stopRelay()
	return errors.Join(err, <-served, g.Wait())
}

// allocIDs hands the create path IDs from the segment allocator. Its
// failures are the client's 503: retryable (the authority is slow or down)
// or not (exhausted, fenced), creates cannot proceed either way and
// redirects are unaffected.
type allocIDs struct {
	a  *idalloc.Allocator
	ns string // the platform domain's namespace
}

func (x allocIDs) NextID(ctx context.Context, d link.DomainID) (uint64, error) {
	ns := x.ns
	if d != link.DefaultDomain {
		ns = link.NamespaceOf(d)
	}
	id, err := x.a.Next(ctx, ns)
	if err != nil {
		return 0, allocError(err)
	}
	return id, nil
}

// allocError is an allocation failure in the create path's terms: always
// link.ErrUnavailable (no link can be created now), and link.ErrExhausted
// too once the namespace is used up for good, which the API answers with
// 507 and no Retry-After.
func allocError(err error) error {
	if errors.Is(err, idalloc.ErrExhausted) {
		return fmt.Errorf("%w: %w: %w", link.ErrUnavailable, link.ErrExhausted, err)
	}
	return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
}

func (x allocIDs) Done(id uint64, committed bool) { x.a.Done(id, committed) }
