// Command control is edgelink's control plane: the creator API, ID
// allocation, the authority database and the change stream's publisher.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
)

type globals struct {
	DatabaseURL string `name:"database-url" env:"EDGELINK_DATABASE_URL" help:"PostgreSQL primary, e.g. postgres://user@host:5432/edgelink (every command but links and import)."`
	LogLevel    string `default:"info" enum:"debug,info,warn,error" env:"EDGELINK_LOG_LEVEL" help:"Log level."`
}

// database is embedded by every command that opens the authority database:
// it refuses to run one without --database-url.
type database struct{}

// AfterApply is kong's hook once the command line is parsed and validated.
func (database) AfterApply(g *globals, kctx *kong.Context) error {
	if g.DatabaseURL == "" {
		return fmt.Errorf("missing flags: --database-url=STRING (or EDGELINK_DATABASE_URL) for %q", kctx.Command())
	}
	return nil
}

// progressOut is stderr, where the long commands draw their progress; it is
// bound apart from stdout, the commands' output.
type progressOut struct{ io.Writer }

type cli struct {
	globals
	Serve    serveCmd    `cmd:"" default:"withargs" help:"Serve the creator API and publish changes (default)."`
	Migrate  migrateCmd  `cmd:"" help:"Apply database migrations and exit."`
	Tenants  tenantsCmd  `cmd:"" help:"Manage tenants and their request limits."`
	Keys     keysCmd     `cmd:"" help:"Manage API keys."`
	Alloc    allocCmd    `cmd:"" help:"Inspect ID allocation."`
	Snapshot snapshotCmd `cmd:"" help:"Build edge snapshots."`
	Links    linksCmd    `cmd:"" help:"Create, list, show, tag, disable, enable and delete links, and draw their QR codes, through the creator API (--api-url, EDGELINK_API_KEY)."`
	Domains  domainsCmd  `cmd:"" help:"Add, list, show, change and remove domains (any tenant's, and the platform's settings)."`
	Webhooks webhooksCmd `cmd:"" help:"Register, list, change, test, disable and enable webhook endpoints and read their delivery logs, through the creator API (--api-url, EDGELINK_API_KEY)."`
	Import   importCmd   `cmd:"" help:"Import Bitly, YOURLS or Shlink exports through the creator API; safe to run again."`
}

type snapshotCmd struct {
	Build snapshotBuildCmd `cmd:"" help:"Build a snapshot of every link at one change version; write it to a file and/or publish it for edges."`
}

type snapshotBuildCmd struct {
	database
	Out      string `help:"File to write (written atomically); empty with --publish writes no file." type:"path"`
	Publish  bool   `help:"Publish to the JetStream object store edges boot from."`
	NATSURL  string `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) with JetStream, comma-separated."`
	Replicas int    `default:"0" help:"Object store replicas; 0 keeps an existing bucket's (1 when it is created)."`
	snapshotBudget
}

// snapshotBudget is the memory budget of the snapshots control builds.
type snapshotBudget struct {
	Budget  int `name:"snapshot-budget" default:"0" env:"EDGELINK_SNAPSHOT_BUDGET" help:"Links a snapshot's entries may hold: the hottest by recent clicks, then the newest; the bloom still covers every code, and an edge answers the rest from its cache and the authority. 0 keeps every link."`
	HotDays int `name:"snapshot-hot-days" default:"7" env:"EDGELINK_SNAPSHOT_HOT_DAYS" help:"Days of clicks (UTC, today included) that rank links for --snapshot-budget (1 to 366)."`
}

func (b snapshotBudget) validate() error {
	if b.Budget < 0 {
		return usageError{fmt.Errorf("--snapshot-budget %d: want 0 (every link) or a positive number of links", b.Budget)}
	}
	if b.HotDays < 1 || b.HotDays > 366 {
		return usageError{fmt.Errorf("--snapshot-hot-days %d: want 1 to 366", b.HotDays)}
	}
	return nil
}

type allocCmd struct {
	Verify       allocVerifyCmd       `cmd:"" help:"Check the allocation audit: intervals pairwise disjoint per namespace, counters at or above every audited end. Exits non-zero and names the offending intervals otherwise."`
	Witness      allocWitnessCmd      `cmd:"" help:"Compare each namespace's counter with the allocation witness kept in NATS (what confirmed leases reached): names the IDs a promoted replica has no record of. Exits non-zero when a counter is below its witness."`
	FenceRecover allocFenceRecoverCmd `cmd:"" help:"After a failover the witness fenced: raise every counter below its witness to it (the skipped IDs are audited as waste), so allocation resumes above every confirmed interval."`
	Status       allocStatusCmd       `cmd:"" help:"Runway per namespace: range, counter, remaining IDs, committed creates per second (last 5 minutes, last hour, peak minute of 7 days) and the time left at them, the lease rate; open segments per instance."`
	RaiseFloor   allocRaiseFloorCmd   `cmd:"" name:"raise-floor" help:"Move a namespace's counter forward to --to (never back), in one audited transaction: start above an old system's IDs."`
	Widen        allocWidenCmd        `cmd:"" help:"Move a namespace's end up to --to (never down, never into another namespace); then restart control with --id-end."`
}

type serveCmd struct {
	database
	Listen         string        `default:"127.0.0.1:8080" env:"EDGELINK_CONTROL_LISTEN" help:"Address of the creator API."`
	NATSURL        string        `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) with JetStream, comma-separated."`
	PublicURL      string        `name:"public-url" default:"http://127.0.0.1:8081" env:"EDGELINK_PUBLIC_URL" help:"Base URL of short links (where edges answer)."`
	BlockedDomains []string      `name:"blocked-domains" env:"EDGELINK_BLOCKED_DOMAINS" help:"Target domains refused, with their subdomains (comma-separated)."`
	AllowPrivate   bool          `name:"allow-private-targets" env:"EDGELINK_ALLOW_PRIVATE_TARGETS" help:"Accept targets on loopback, private and link-local addresses and names like localhost (refused by default: links must not lead into visitors' own networks)."`
	ReservedCodes  []string      `name:"reserved-codes" env:"EDGELINK_RESERVED_CODES" help:"Extra codes custom links may not take (comma-separated)."`
	IDStart        uint64        `name:"id-start" env:"EDGELINK_ID_START" help:"First ID of the default namespace (default 1)."`
	IDEnd          uint64        `name:"id-end" env:"EDGELINK_ID_END" help:"End (exclusive) of the default namespace's IDs (default 62^6, the whole 6-character space)."`
	IDStep         uint64        `name:"id-step" env:"EDGELINK_ID_STEP" help:"IDs per segment lease (default 100000: 20 s at 5,000 creates/s)."`
	ReplicaURL     string        `name:"replica-url" env:"EDGELINK_REPLICA_URL" help:"PostgreSQL read replica serving edges' lookups; a miss or a slow answer there is asked of the primary. Writes and allocation never use it."`
	AllocWitness   string        `name:"alloc-witness" default:"required" enum:"required,best-effort,off" env:"EDGELINK_ALLOC_WITNESS" help:"Allocation high-water witness in NATS (refuses leases from a promoted replica that lost confirmed ones): required (leases wait for NATS), best-effort (lease without it while NATS is down) or off."`
	StreamReplicas int           `name:"stream-replicas" default:"1" env:"EDGELINK_STREAM_REPLICAS" help:"JetStream servers keeping each stream (LINK_CHANGES, CLICKS, LINK_SNAPSHOTS); 3 on a 3-node cluster."`
	DrainTimeout   time.Duration `name:"drain-timeout" default:"10s" env:"EDGELINK_DRAIN_TIMEOUT" help:"At SIGTERM, how long creates in flight may finish (new ones get 503 at once); keep it below the pod's termination grace period."`
	ConsoleCookies string        `name:"console-cookies" default:"auto" enum:"auto,secure,insecure" env:"EDGELINK_CONSOLE_COOKIES" help:"The console's session cookie: secure (control is reached over TLS), insecure (plain HTTP, a laptop) or auto (secure when --public-url is https)."`
	CodeKeys       string        `name:"code-keys" env:"EDGELINK_CODE_KEYS" help:"The FF1 key file (lines: name base64-key, 16, 24 or 32 bytes; keep it secret, and give every edge the same file): the keys of domains with non-enumerable codes. Control refuses to start when an active ff1 domain's current key is not in it."`
	DomainKey      string        `name:"domain-key" env:"EDGELINK_DOMAIN_KEY" help:"The name (in --code-keys) of the key new ff1 domains get; empty: a new ff1 domain must name its key. Rotating it affects only new domains (control domains set --key rotates one domain's)."`
	IdempotencyTTL time.Duration `name:"idempotency-ttl" default:"24h" env:"EDGELINK_IDEMPOTENCY_TTL" help:"How long an Idempotency-Key answers retries (at most 720h, 30 days); a retry after it is a new create with a new code. Expired keys are purged in the background."`
	ImportMaxBytes int64         `name:"import-max-bytes" default:"4194304" env:"EDGELINK_IMPORT_MAX_BYTES" help:"Largest file the console's bulk upload takes, in bytes (at most 64 MiB; larger exports go through control import)."`
	ImportKeep     time.Duration `name:"import-retention" default:"168h" env:"EDGELINK_IMPORT_RETENTION" help:"How long finished bulk imports, with their mapping and rejects files, are kept."`
	serveLimits
	snapshotBudget
	webhookServe
	clickRollup
}

// clickRollup tunes the click roller's rollups.
type clickRollup struct {
	TopValues     int           `name:"click-top-values" default:"100" env:"EDGELINK_CLICK_TOP_VALUES" help:"Values of a dimension (referrer host, country, UTM, edge) kept with counts of their own per link or tenant and day (1 to 10000); the rest are counted as other."`
	HourRetention time.Duration `name:"click-hours-retention" default:"168h" env:"EDGELINK_CLICK_HOURS_RETENTION" help:"How long hourly click rollups are kept (at least 1h); days are kept for ever."`
}

func (c clickRollup) validate() error {
	if c.TopValues < 1 || c.TopValues > 10000 {
		return usageError{fmt.Errorf("--click-top-values %d: want 1 to 10000", c.TopValues)}
	}
	if c.HourRetention < time.Hour {
		return usageError{fmt.Errorf("--click-hours-retention %v: want at least 1h", c.HourRetention)}
	}
	return nil
}

func (s *serveCmd) Run(ctx context.Context, g *globals, log *slog.Logger, onListen func(net.Addr)) error {
	if err := s.serveLimits.validate(); err != nil {
		return err
	}
	if err := links.CheckKeyTTL(s.IdempotencyTTL); err != nil {
		return usageError{fmt.Errorf("--idempotency-ttl: %w", err)}
	}
	if err := s.snapshotBudget.validate(); err != nil {
		return err
	}
	if err := s.clickRollup.validate(); err != nil {
		return err
	}
	hooks, err := s.webhookServe.config()
	if err != nil {
		return err
	}
	if s.ImportMaxBytes < 1 || s.ImportMaxBytes > 64<<20 {
		return usageError{fmt.Errorf("--import-max-bytes %d: want 1 to 67108864 (64 MiB)", s.ImportMaxBytes)}
	}
	if s.ImportKeep < time.Hour {
		return usageError{fmt.Errorf("--import-retention %v: want at least 1h", s.ImportKeep)}
	}
	return controlserver.Run(ctx, controlserver.Config{
		HTTPAddr: s.Listen, DatabaseURL: g.DatabaseURL, NATSURL: s.NATSURL, PublicURL: s.PublicURL, Webhooks: hooks,
		BlockedDomains: lower(s.BlockedDomains), AllowPrivateTargets: s.AllowPrivate, Reserved: s.ReservedCodes, Log: log, OnListen: onListen,
		IDStart: s.IDStart, IDEnd: s.IDEnd, IDStep: s.IDStep,
		StreamReplicas: s.StreamReplicas,
		ReplicaURL:     s.ReplicaURL, AllocWitness: s.AllocWitness, DrainTimeout: s.DrainTimeout,
		TenantRate: s.TenantRate, TenantBurst: s.TenantBurst,
		AuthFailureRate: s.AuthFailureRate, AuthFailureBurst: s.AuthFailureBurst,
		IdempotencyTTL: s.IdempotencyTTL,
		SnapshotBudget: s.Budget, SnapshotHotDays: s.HotDays,
		Clicks:               clickroll.Config{TopValues: s.TopValues, HourRetention: s.HourRetention},
		ConsoleSecureCookies: consoleCookies(s.ConsoleCookies),
		CodeKeysFile:         s.CodeKeys, DomainKey: s.DomainKey,
		ImportMaxBytes: s.ImportMaxBytes, Imports: importjobs.Config{Retention: s.ImportKeep},
	})
}

// consoleCookies is --console-cookies as controlserver takes it: nil for
// auto.
func consoleCookies(v string) *bool {
	secure := v == "secure"
	if v == "auto" {
		return nil
	}
	return &secure
}

type migrateCmd struct{ database }

func (migrateCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		if err := postgres.Migrate(ctx, st.Pool()); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "control:", err)
		os.Exit(exitCode(err)) // exitcode.go; docs/cli.md lists them
	}
}

// run parses args and runs one command until it finishes or ctx ends. A
// command's Run method is given ctx, the globals, the logger, stdout (an
// io.Writer), stderr as progressOut and onListen.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, onListen func(net.Addr)) error {
	var c cli
	parser, err := kong.New(&c, kong.Name("control"),
		kong.Description("edgelink control plane. Flags fall back to the EDGELINK_* environment variables shown."),
		kong.Writers(stdout, stderr), kong.Bind(&c.globals))
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.BindTo(stdout, (*io.Writer)(nil))
	return kctx.Run(log, progressOut{stderr}, onListen)
}

// withStore opens the database, applies migrations and runs fn.
func withStore(ctx context.Context, dsn string, fn func(*postgres.Store) error) error {
	pool, err := postgres.Open(ctx, dsn, 0)
	if err != nil {
		return usageError{fmt.Errorf("--database-url: %w", err)}
	}
	defer pool.Close()
	st := postgres.New(pool)
	// The pool connects lazily: ask once, so an unreachable database says
	// so (and exits as unavailable) rather than failing inside migrate.
	if err := st.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	return fn(st)
}

func lower(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}
