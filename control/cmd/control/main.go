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

	"github.com/alecthomas/kong"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/server"
)

type globals struct {
	DatabaseURL string `name:"database-url" env:"EDGELINK_DATABASE_URL" required:"" help:"PostgreSQL primary, e.g. postgres://user@host:5432/edgelink."`
	LogLevel    string `default:"info" enum:"debug,info,warn,error" env:"EDGELINK_LOG_LEVEL" help:"Log level."`
}

type cli struct {
	globals
	Serve    serveCmd    `cmd:"" default:"withargs" help:"Serve the creator API and publish changes (default)."`
	Migrate  migrateCmd  `cmd:"" help:"Apply database migrations and exit."`
	Tenants  tenantsCmd  `cmd:"" help:"Manage tenants."`
	Keys     keysCmd     `cmd:"" help:"Manage API keys."`
	Alloc    allocCmd    `cmd:"" help:"Inspect ID allocation."`
	Snapshot snapshotCmd `cmd:"" help:"Build edge snapshots."`
}

type snapshotCmd struct {
	Build snapshotBuildCmd `cmd:"" help:"Build a snapshot of every link at one change version; write it to a file and/or publish it for edges."`
}

type snapshotBuildCmd struct {
	Out      string `help:"File to write (written atomically); empty with --publish writes no file." type:"path"`
	Publish  bool   `help:"Publish to the JetStream object store edges boot from."`
	NATSURL  string `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) with JetStream, comma-separated."`
	Replicas int    `default:"1" help:"Object store replicas when the bucket is created."`
}

type allocCmd struct {
	Verify struct{} `cmd:"" help:"Check the allocation audit: intervals pairwise disjoint per namespace, counters at or above every audited end. Exits non-zero and names the offending intervals otherwise."`
}

type serveCmd struct {
	Listen         string   `default:"127.0.0.1:8080" env:"EDGELINK_CONTROL_LISTEN" help:"Address of the creator API."`
	NATSURL        string   `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) with JetStream, comma-separated."`
	PublicURL      string   `name:"public-url" default:"http://127.0.0.1:8081" env:"EDGELINK_PUBLIC_URL" help:"Base URL of short links (where edges answer)."`
	BlockedDomains []string `name:"blocked-domains" env:"EDGELINK_BLOCKED_DOMAINS" help:"Target domains refused, with their subdomains (comma-separated)."`
	ReservedCodes  []string `name:"reserved-codes" env:"EDGELINK_RESERVED_CODES" help:"Extra codes custom links may not take (comma-separated)."`
	IDStart        uint64   `name:"id-start" env:"EDGELINK_ID_START" help:"First ID of the default namespace (default 1)."`
	IDEnd          uint64   `name:"id-end" env:"EDGELINK_ID_END" help:"End (exclusive) of the default namespace's IDs (default 62^6, the whole 6-character space)."`
	IDStep         uint64   `name:"id-step" env:"EDGELINK_ID_STEP" help:"IDs per segment lease (default 100000: 20 s at 5,000 creates/s)."`
}

type migrateCmd struct{}

type tenantsCmd struct {
	Create tenantsCreateCmd `cmd:"" help:"Create a tenant and print its first API key."`
}

type tenantsCreateCmd struct {
	Name string `arg:"" help:"Tenant name."`
}

type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Issue another API key for a tenant; it is shown once."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke an API key; its next request fails."`
}

type keysCreateCmd struct {
	Tenant string `arg:"" help:"Tenant name."`
}

type keysRevokeCmd struct {
	Key string `arg:"" help:"The API key to revoke."`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "control:", err)
		os.Exit(1)
	}
}

// run parses args and runs one command until it finishes or ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, onListen func(net.Addr)) error {
	var c cli
	parser, err := kong.New(&c, kong.Name("control"),
		kong.Description("edgelink control plane. Flags fall back to the EDGELINK_* environment variables shown."),
		kong.Writers(stdout, stderr))
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

	switch cmd := kctx.Command(); {
	case cmd == "serve":
		s := c.Serve
		return server.Run(ctx, server.Config{
			HTTPAddr: s.Listen, DatabaseURL: c.DatabaseURL, NATSURL: s.NATSURL, PublicURL: s.PublicURL,
			BlockedDomains: lower(s.BlockedDomains), Reserved: s.ReservedCodes, Log: log, OnListen: onListen,
			IDStart: s.IDStart, IDEnd: s.IDEnd, IDStep: s.IDStep,
		})
	case cmd == "migrate":
		return withStore(ctx, c.DatabaseURL, func(st *postgres.Store) error {
			if err := postgres.Migrate(ctx, st.Pool()); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "migrations applied")
			return nil
		})
	case strings.HasPrefix(cmd, "tenants create"):
		return withStore(ctx, c.DatabaseURL, func(st *postgres.Store) error {
			id, err := st.CreateTenant(ctx, c.Tenants.Create.Name)
			if err != nil {
				return fmt.Errorf("create tenant: %w", err)
			}
			key, err := st.CreateAPIKey(ctx, id)
			if err != nil {
				return fmt.Errorf("create key: %w", err)
			}
			fmt.Fprintf(stdout, "tenant %q created (id %d)\napi key (shown once): %s\n", c.Tenants.Create.Name, id, key)
			return nil
		})
	case strings.HasPrefix(cmd, "keys create"):
		return withStore(ctx, c.DatabaseURL, func(st *postgres.Store) error {
			id, err := st.TenantByName(ctx, c.Keys.Create.Tenant)
			if err != nil {
				return fmt.Errorf("tenant %q: %w", c.Keys.Create.Tenant, err)
			}
			key, err := st.CreateAPIKey(ctx, id)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "api key (shown once): %s\n", key)
			return nil
		})
	case cmd == "snapshot build":
		return runSnapshotBuild(ctx, c.DatabaseURL, c.Snapshot.Build, stdout, stderr)
	case cmd == "alloc verify":
		return runAllocVerify(ctx, c.DatabaseURL, stdout)
	case strings.HasPrefix(cmd, "keys revoke"):
		return withStore(ctx, c.DatabaseURL, func(st *postgres.Store) error {
			if err := st.RevokeAPIKey(ctx, c.Keys.Revoke.Key); err != nil {
				return fmt.Errorf("revoke: %w", err)
			}
			fmt.Fprintln(stdout, "key revoked")
			return nil
		})
	}
	return fmt.Errorf("unknown command %q", kctx.Command())
}

// withStore opens the database, applies migrations and runs fn.
func withStore(ctx context.Context, dsn string, fn func(*postgres.Store) error) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	return fn(postgres.New(pool))
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
