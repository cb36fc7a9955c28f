// Package allinone runs all of edgelink on one machine: a real PostgreSQL
// from the machine's binaries with its data in DataDir/pg, an embedded NATS
// JetStream server with its store in DataDir/nats (or an external one),
// control and one edge, in one process. deploy/local's main (`go tool task
// up`) runs it; tests run it on free ports.
package allinone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/link"
)

// Options say where the stack keeps its data and listens.
type Options struct {
	DataDir     string
	ControlAddr string
	EdgeAddr    string
	NATSPort    int // -1 picks a free port
	Stdout      io.Writer
	Log         *slog.Logger
	// OnReady, if set, is called once everything serves.
	OnReady func(Ready)
	// NATSURL, if set, is an external NATS JetStream server to use instead
	// of the embedded one (tests stop and restart it).
	NATSURL string
	// Edge, if set, adjusts the edge's configuration before it starts.
	Edge func(*edgeserver.Config)
	// Control, if set, adjusts control's configuration before it starts.
	Control func(*controlserver.Config)
	// GeoIP, if set, names the edge's country data in Tor's format (a
	// directory holding geoip and geoip6, or the files: `go tool task up`
	// passes the .data/geoip that `go tool task geoip` fills).
	GeoIP []string
	// Snapshots, if set, is control's snapshot build schedule; nil builds
	// none (tests that count overlay entries must not see swaps), and
	// `go tool task up` sets the default schedule.
	Snapshots *snapshots.Schedule
}

// Ready describes the running stack.
type Ready struct {
	ControlURL, EdgeURL, NATSURL, DatabaseURL, APIKey string
	// Countries says where the edge's country data came from, or that it
	// has none.
	Countries string
}

// Run starts the stack, serves until ctx is done or a component fails,
// then stops everything in reverse order.
func Run(ctx context.Context, o Options) (err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	// PostgreSQL runs as its own user when we are root and must be able to
	// enter our data folder.
	if err := os.Chmod(dataDir, 0o755); err != nil {
		return err
	}
	// Each deferred stop joins its error to what Run returns.
	stop := func(f func() error) { err = errors.Join(err, f()) }

	fmt.Fprintf(o.Stdout, "starting PostgreSQL (data in %s)...\n", filepath.Join(dataDir, "pg"))
	// Supervised: a PostgreSQL that dies under the stack is started again
	// on the same port, and control's pool reconnects to it.
	pg, err := stack.StartPostgres(ctx, stack.PostgresConfig{Dir: filepath.Join(dataDir, "pg"), Durable: true,
		Supervise: true, Log: o.Log.With("component", "postgres")})
	if err != nil {
		return err
	}
	defer stop(pg.Close)

	ns := stack.External(o.NATSURL)
	if o.NATSURL == "" {
		port := o.NATSPort
		if port > 0 && !portFree(port) {
			port = 0
		}
		if ns, err = stack.StartNATS(ctx, stack.NATSConfig{Name: "edgelink-local", Port: port, Dir: filepath.Join(dataDir, "nats")}); err != nil {
			return err
		}
		defer stop(ns.Close)
	}

	// The FF1 code keys control and the edge share: made once, kept with
	// the data, since codes already issued were made with them.
	codeKeys, err := stack.WriteCodeKeys(dataDir)
	if err != nil {
		return err
	}
	ecfg := edgeserver.Config{HTTPAddr: o.EdgeAddr, NATSURL: ns.URL(), Name: "local", Log: o.Log,
		SnapshotDir: filepath.Join(dataDir, "edge-local"), CodeKeysFile: codeKeys}
	countries := "off (no country data named)"
	if len(o.GeoIP) > 0 {
		// Loaded here rather than by the edge, to say what was loaded.
		if ecfg.Geo, err = geo.LoadTor(o.GeoIP...); err != nil {
			return err
		}
		countries = describeCountries(ecfg.Geo.Info())
	}
	edge, err := stack.StartEdge(ctx, with(ecfg, o.Edge))
	if err != nil {
		return err
	}
	defer stop(func() error { return prefix("edge", edge.Stop()) })

	sched := snapshots.Schedule{Disabled: true}
	if o.Snapshots != nil {
		sched = *o.Snapshots
	}
	ccfg := controlserver.Config{HTTPAddr: o.ControlAddr, DatabaseURL: pg.DSN, NATSURL: ns.URL(),
		PublicURL: edge.URL, Log: o.Log, Snapshots: sched, CodeKeysFile: codeKeys, DomainKey: stack.CodeKeyName}
	control, err := stack.StartControl(ctx, with(ccfg, o.Control))
	if err != nil {
		return err
	}
	defer stop(func() error { return prefix("control", control.Stop()) })

	key, err := devKey(ctx, pg, filepath.Join(dataDir, "dev-api-key"))
	if err != nil {
		return err
	}
	ready := Ready{ControlURL: control.URL, EdgeURL: edge.URL, NATSURL: ns.URL(), DatabaseURL: pg.DSN, APIKey: key,
		Countries: countries}
	printWelcome(o.Stdout, ready)
	if o.OnReady != nil {
		o.OnReady(ready)
	}
	select {
	case <-ctx.Done():
	case <-edge.Done():
	case <-control.Done():
	}
	return nil
}

// with is cfg as change leaves it (cfg itself when change is nil).
func with[C any](cfg C, change func(*C)) C {
	if change != nil {
		change(&cfg)
	}
	return cfg
}

// describeCountries is one line on the country data in use, with its
// licence: IPFire's Location data asks to be attributed.
func describeCountries(i geo.Info) string {
	date := "undated"
	if !i.Generated.IsZero() {
		date = "generated " + i.Generated.Format(time.DateOnly)
	}
	return fmt.Sprintf("on: IPFire Location data (CC BY-SA 4.0), %s, %d IPv4 and %d IPv6 ranges, loaded in %v",
		date, i.V4Ranges, i.V6Ranges, i.Load.Round(time.Millisecond))
}

func prefix(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// devKey returns the development tenant's API key, kept in file so a restart
// prints the same key: keys are stored hashed and cannot be shown again.
func devKey(ctx context.Context, pg *stack.Postgres, file string) (string, error) {
	st := pg.Store()
	if b, err := os.ReadFile(file); err == nil {
		key := strings.TrimSpace(string(b))
		if _, err := st.TenantByKey(ctx, key); err == nil {
			return key, nil
		}
	}
	id, err := st.TenantByName(ctx, "dev")
	if errors.Is(err, link.ErrNotFound) {
		id, err = st.CreateTenant(ctx, "dev")
	}
	if err != nil {
		return "", fmt.Errorf("dev tenant: %w", err)
	}
	key, err := st.CreateAPIKey(ctx, id)
	if err != nil {
		return "", fmt.Errorf("dev key: %w", err)
	}
	return key, os.WriteFile(file, []byte(key+"\n"), 0o600)
}

func printWelcome(w io.Writer, r Ready) {
	fmt.Fprintf(w, `
edgelink is running.

  control API   %s
  console       %s/console/ (sign in with the dev API key)
  edge          %s
  NATS          %s
  PostgreSQL    %s
  dev API key   %s
  countries     %s

Create a link:

  curl -sS -X POST %s/api/v1/links \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"url": "https://example.com/hello?utm_source=edgelink"}'

Follow it (put the "code" from the answer in place of CODE):

  curl -sS -i %s/CODE

Add a domain of your own (its codes are FF1: nobody can walk them), make a
link on it, and follow it with that Host:

  curl -sS -X POST %s/api/v1/domains -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' -d '{"host": "go.example.test"}'
  curl -sS -X POST %s/api/v1/links -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"url": "https://example.com/", "domain": "go.example.test"}'
  curl -sS -i -H 'Host: go.example.test' %s/CODE

Press Ctrl-C to stop; data is kept for the next start.
`, r.ControlURL, r.ControlURL, r.EdgeURL, r.NATSURL, r.DatabaseURL, r.APIKey, r.Countries, r.ControlURL, r.APIKey, r.EdgeURL,
		r.ControlURL, r.APIKey, r.ControlURL, r.APIKey, r.EdgeURL)
}
