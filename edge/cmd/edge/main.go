// Command edge serves redirects from memory, fed by the control plane's
// change stream.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on --debug-listen
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/edge/unlock"
)

type cli struct {
	Listen   string `default:"127.0.0.1:8081" env:"EDGELINK_EDGE_LISTEN" help:"Address to serve redirects on."`
	NATSURL  string `name:"nats-url" default:"nats://127.0.0.1:4222" env:"EDGELINK_NATS_URL" help:"NATS server(s) with JetStream, comma-separated."`
	Name     string `default:"edge" env:"EDGELINK_EDGE_NAME" help:"Name of this edge in logs and NATS."`
	LogLevel string `default:"info" enum:"debug,info,warn,error" env:"EDGELINK_LOG_LEVEL" help:"Log level."`

	CacheEntries      int64         `default:"1000000" env:"EDGELINK_EDGE_CACHE_ENTRIES" help:"Entries in the long-tail cache of authority answers."`
	BloomCapacity     uint          `default:"4000000" env:"EDGELINK_EDGE_BLOOM_CAPACITY" help:"Codes the bloom hint is sized for (1% false positives); it grows when overfilled."`
	AuthorityTimeout  time.Duration `default:"500ms" env:"EDGELINK_EDGE_AUTHORITY_TIMEOUT" help:"Bound on one authority round trip."`
	AuthorityInflight int           `default:"8" env:"EDGELINK_EDGE_AUTHORITY_INFLIGHT" help:"Authority round trips at once (each carries up to 128 codes)."`
	AuthorityMaxWait  time.Duration `default:"50ms" env:"EDGELINK_EDGE_AUTHORITY_MAX_WAIT" help:"How long an unknown code may wait for a round trip slot before it is answered 503 with Retry-After."`
	NotFoundRate      float64       `name:"not-found-rate" default:"50" env:"EDGELINK_EDGE_NOT_FOUND_RATE" help:"404s per second per client IP before 429 (negative: no budget). A code that exists is never refused."`
	NotFoundBurst     int           `name:"not-found-burst" default:"1000" env:"EDGELINK_EDGE_NOT_FOUND_BURST" help:"Burst of 404s per client IP."`
	TrustedProxies    []string      `name:"trusted-proxies" env:"EDGELINK_EDGE_TRUSTED_PROXIES" help:"Proxies (addresses or CIDRs, comma-separated) whose X-Forwarded-For, or PROXY protocol header with --proxy-protocol, names the client."`
	ProxyProtocol     bool          `name:"proxy-protocol" env:"EDGELINK_EDGE_PROXY_PROTOCOL" help:"Connections from --trusted-proxies must start with a PROXY protocol (v1/v2) header naming the client."`
	GeoIP             []string      `name:"geoip" env:"EDGELINK_EDGE_GEOIP" help:"Country data in Tor's geoip format, for each click's country: a directory holding geoip and geoip6 (Debian's tor-geoipdb: IPFire Location, CC BY-SA 4.0), or the files, comma-separated. The edge does not start if it cannot load them."`
	GeoIPMMDB         string        `name:"geoip-mmdb" env:"EDGELINK_EDGE_GEOIP_MMDB" help:"Country data from a MaxMind DB file instead of --geoip (GeoLite2/GeoIP2 or DB-IP country or city .mmdb), read whole at start. Empty values of either are unset, so a deployment can clear one and set the other."`
	CodeKeys          string        `name:"code-keys" type:"path" env:"EDGELINK_CODE_KEYS" help:"The operator's code key file (lines 'name base64-key'), the same as control's: FF1 domains' unknown codes are ruled out from memory with it; without a domain's key its misses are asked of control."`

	UnlockKeys        string        `name:"unlock-keys" type:"path" env:"EDGELINK_EDGE_UNLOCK_KEYS" help:"Key file (lines 'name base64-key', 32-64 random bytes; the first signs, all verify) for password-protected links' unlock cookies and form tokens. Give every edge the same file; without one each edge signs with a random key of its own and visitors are asked again on another edge."`
	UnlockCookieTTL   time.Duration `name:"unlock-cookie-ttl" default:"1h" env:"EDGELINK_EDGE_UNLOCK_COOKIE_TTL" help:"How long a right password opens its link for the browser that gave it (1m to 24h)."`
	UnlockClientRate  float64       `name:"unlock-client-rate" default:"0.1" env:"EDGELINK_EDGE_UNLOCK_CLIENT_RATE" help:"Password attempts per second per client IP (an IPv6 client is its /64), over all links, past the burst; negative: no limit."`
	UnlockClientBurst int           `name:"unlock-client-burst" default:"10" env:"EDGELINK_EDGE_UNLOCK_CLIENT_BURST" help:"Burst of password attempts per client IP."`
	UnlockLinkRate    float64       `name:"unlock-link-rate" default:"1" env:"EDGELINK_EDGE_UNLOCK_LINK_RATE" help:"Password attempts per second per link, over all clients, past the burst (per edge); negative: no limit."`
	UnlockLinkBurst   int           `name:"unlock-link-burst" default:"60" env:"EDGELINK_EDGE_UNLOCK_LINK_BURST" help:"Burst of password attempts per link."`
	UnlockVerifiers   int           `name:"unlock-verifiers" default:"2" env:"EDGELINK_EDGE_UNLOCK_VERIFIERS" help:"Password verifications at once (argon2id: each holds the hash's memory, 19 MiB by default); attempts past them wait 100 ms, then get 503."`

	LimitReportEvery time.Duration `name:"limit-report-every" default:"50ms" env:"EDGELINK_EDGE_LIMIT_REPORT_EVERY" help:"How often this edge tells the other edges (core NATS, limits.<name>) what it served of each link with a click limit: about how late they stop a link another edge served to its limit. Negative (--limit-report-every=-1s): no reports; each edge stops a limited link within its own allowance alone."`

	SnapshotDir      string        `name:"snapshot-dir" env:"EDGELINK_EDGE_SNAPSHOT_DIR" help:"Folder keeping the newest snapshot, loaded at boot without NATS (default .data/edge-<name>; 'none' keeps none)."`
	SnapshotPoll     time.Duration `name:"snapshot-poll" default:"30s" env:"EDGELINK_EDGE_SNAPSHOT_POLL" help:"How often the snapshot bucket is listed besides being watched."`
	SnapshotBootWait time.Duration `name:"snapshot-boot-wait" default:"5s" env:"EDGELINK_EDGE_SNAPSHOT_BOOT_WAIT" help:"Bound on asking the bucket for a newer snapshot at boot when a local copy exists."`
	LockSnapshot     bool          `name:"lock-snapshot" env:"EDGELINK_EDGE_LOCK_SNAPSHOT" help:"Keep the snapshot in service resident once verified (mlock): needs CAP_IPC_LOCK or a memlock limit of its size, and memory for two snapshots."`

	DebugListen string `name:"debug-listen" env:"EDGELINK_DEBUG_LISTEN" help:"Serve Go's pprof profiles on this address (off when empty; keep it on loopback)."`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, onListen func(net.Addr)) error {
	var c cli
	parser, err := kong.New(&c, kong.Name("edge"), kong.Description("edgelink edge: redirects from memory."),
		kong.Writers(stdout, stderr))
	if err != nil {
		return err
	}
	if _, err := parser.Parse(args); err != nil {
		return err
	}
	// An empty value is no value: clearing an inherited variable is how a
	// deployment turns the image's default data off or swaps it.
	c.GeoIP = slices.DeleteFunc(c.GeoIP, func(s string) bool { return strings.TrimSpace(s) == "" })
	if len(c.GeoIP) > 0 && c.GeoIPMMDB != "" {
		return errors.New("--geoip (EDGELINK_EDGE_GEOIP) and --geoip-mmdb (EDGELINK_EDGE_GEOIP_MMDB) both name country data: give one")
	}
	if c.UnlockCookieTTL < time.Minute || c.UnlockCookieTTL > 24*time.Hour {
		return fmt.Errorf("--unlock-cookie-ttl %v: want 1m to 24h (a right password opens a link for that long)", c.UnlockCookieTTL)
	}
	if c.UnlockVerifiers < 1 || c.UnlockVerifiers > 64 {
		return fmt.Errorf("--unlock-verifiers %d: want 1 to 64", c.UnlockVerifiers)
	}
	if c.LimitReportEvery >= 0 && c.LimitReportEvery < 10*time.Millisecond || c.LimitReportEvery > time.Minute {
		return fmt.Errorf("--limit-report-every %v: want 10ms to 1m, or negative for no reports", c.LimitReportEvery)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	// Each edge keeps its own copy, so edges sharing a host never race on
	// one file.
	switch c.SnapshotDir {
	case "":
		c.SnapshotDir = filepath.Join(".data", "edge-"+c.Name)
	case "none":
		c.SnapshotDir = ""
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if c.DebugListen != "" {
		// Profiles of the real process under real load are how hot-path
		// regressions are found; a separate listener keeps them off the
		// redirect port.
		dbg := &http.Server{Addr: c.DebugListen, Handler: http.DefaultServeMux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := dbg.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				log.Warn("debug listener stopped", "err", err)
			}
		}()
		defer dbg.Close()
	}
	return edgeserver.Run(ctx, edgeserver.Config{HTTPAddr: c.Listen, NATSURL: c.NATSURL, Name: c.Name, Log: log, OnListen: onListen,
		CacheEntries: c.CacheEntries, BloomCapacity: c.BloomCapacity, AuthorityTimeout: c.AuthorityTimeout,
		AuthorityInflight: c.AuthorityInflight, AuthorityMaxWait: c.AuthorityMaxWait,
		NotFoundRate: c.NotFoundRate, NotFoundBurst: c.NotFoundBurst,
		TrustedProxies: c.TrustedProxies, ProxyProtocol: c.ProxyProtocol, CodeKeysFile: c.CodeKeys,
		GeoIP: c.GeoIP, GeoIPMMDB: c.GeoIPMMDB,
		SnapshotDir: c.SnapshotDir, SnapshotPoll: c.SnapshotPoll, SnapshotBootWait: c.SnapshotBootWait,
		LockSnapshot: c.LockSnapshot, UnlockKeysFile: c.UnlockKeys, LimitReportEvery: c.LimitReportEvery,
		Unlock: unlock.Config{CookieTTL: c.UnlockCookieTTL, ClientRate: c.UnlockClientRate, ClientBurst: c.UnlockClientBurst,
			LinkRate: c.UnlockLinkRate, LinkBurst: c.UnlockLinkBurst, Verifiers: c.UnlockVerifiers}})
}
