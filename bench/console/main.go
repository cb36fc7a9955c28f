// Command console measures the server time of every console page with
// 100,000 links in a tenant (issue 21: each page under 100 ms of server
// time), against the same pages of a tenant with 1,000 links in the same
// database, in the same run: the ratio is what a hundred times more links
// costs a page.
//
// It runs the real pieces on loopback (internal/stack): PostgreSQL from the
// machine's binaries, an embedded NATS JetStream, and control in this
// process. Each tenant's links are made through the batch API (realistic
// targets from bench/dataset, titles, tags, custom codes, two domains of
// the tenant's own beside the platform's, expiries), then some are
// disabled and deleted through the API, their creation times are spread
// over the past year (the only write made in SQL: a tenant's links come
// over months, a benchmark's in minutes), and the hottest links get 30
// days of clicks in the rollups through the store the click roller writes
// with. Then a browser's session (signed in with the tenant's key) asks
// every page in turn, round after round, both tenants alternating.
//
// Server time is the console's Server-Timing header (console;dur=…): from
// the request's arrival in the console's handler to its header, which
// covers the session read, the queries and the page rendered into its
// buffer, and not the network or this client. The client's own time is
// reported beside it.
//
//	go run ./bench/console                 # 100,000 and 1,000 links, 25 rounds
//	go run ./bench/console -links 20000 -rounds 10
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/internal/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/console:", err)
		os.Exit(1)
	}
}

type options struct {
	links, baseline int
	rounds          int
	out             string
	explain         string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.IntVar(&o.links, "links", 100_000, "links of the measured tenant")
	fs.IntVar(&o.baseline, "baseline", 1_000, "links of the baseline tenant, in the same database")
	fs.IntVar(&o.rounds, "rounds", 25, "times every page is asked, per tenant (after 2 unmeasured)")
	fs.StringVar(&o.out, "out", "bench/results", "folder of the results file and its chart")
	fs.StringVar(&o.explain, "explain", "", "write PostgreSQL's log into this folder, with the plan (auto_explain, analyzed) of every statement over 100 ms: why a page was slow")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.links < 1000 || o.baseline < 600 || o.rounds < 5 {
		return fmt.Errorf("-links at least 1000, -baseline at least 600 (page 11 of the list), -rounds at least 5")
	}
	started := time.Now()

	dir, err := os.MkdirTemp("", "bench-console-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	settings := []string{"shared_buffers=256MB"}
	if o.explain != "" {
		if o.explain, err = filepath.Abs(o.explain); err != nil {
			return err
		}
		// PostgreSQL runs as its own user when this runs as root.
		if err := os.MkdirAll(o.explain, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(o.explain, 0o777); err != nil {
			return err
		}
		settings = append(settings, "logging_collector=on", "log_directory="+o.explain, "log_filename=postgresql.log",
			"session_preload_libraries=auto_explain", "auto_explain.log_min_duration=100ms", "auto_explain.log_analyze=on",
			"auto_explain.log_buffers=on")
	}
	pg, err := stack.StartPostgres(ctx, stack.PostgresConfig{Database: "bench", Settings: settings})
	if err != nil {
		return err
	}
	defer pg.Close()
	ns, err := stack.StartNATS(ctx, stack.NATSConfig{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		return err
	}
	defer ns.Close()
	keys, err := stack.WriteCodeKeys(dir)
	if err != nil {
		return err
	}
	logw, err := os.Create(filepath.Join(dir, "control.log"))
	if err != nil {
		return err
	}
	defer logw.Close()
	ctl, err := stack.StartControl(context.WithoutCancel(ctx), controlserver.Config{DatabaseURL: pg.DSN, NATSURL: ns.URL(),
		PublicURL: "http://127.0.0.1:8081", Log: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})),
		NoClickRollup: true, Snapshots: snapshots.Schedule{Disabled: true}, CodeKeysFile: keys, DomainKey: stack.CodeKeyName,
		TenantRate: -1})
	if err != nil {
		return err
	}
	defer ctl.Stop()

	var tenants []*tenant
	for _, t := range []struct {
		name  string
		links int
	}{{"big", o.links}, {"small", o.baseline}} {
		fmt.Fprintf(out, "loading %d links into tenant %s …\n", t.links, t.name)
		tn, err := load(ctx, pg, ctl.URL, t.name, t.links)
		if err != nil {
			return fmt.Errorf("load %s: %w", t.name, err)
		}
		fmt.Fprintf(out, "  %d links in %s (%d disabled, %d deleted, %d expired, %d with clicks)\n",
			tn.links, time.Since(tn.loadStart).Round(time.Second), tn.disabled, tn.deleted, tn.expired, tn.clicked)
		tenants = append(tenants, tn)
	}
	if _, err := pg.Pool().Exec(ctx, "ANALYZE"); err != nil {
		return err
	}
	for _, tn := range tenants {
		if tn.browser, err = signIn(ctx, ctl.URL, tn.key); err != nil {
			return fmt.Errorf("sign in %s: %w", tn.name, err)
		}
		if tn.pages, err = pagesOf(ctx, tn); err != nil {
			return fmt.Errorf("pages of %s: %w", tn.name, err)
		}
	}
	fmt.Fprintf(out, "measuring %d pages, %d rounds …\n", len(tenants[0].pages), o.rounds)
	res, err := measure(ctx, tenants, o.rounds)
	if err != nil {
		return err
	}
	var version string
	if err := pg.Pool().QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&version); err != nil {
		return err
	}
	res.command = "go run ./bench/console " + strings.Join(args, " ")
	res.commit, res.postgres, res.took = commit(), version, time.Since(started)
	res.links, res.baseline, res.rounds = o.links, o.baseline, o.rounds
	file, err := res.write(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, res.table())
	fmt.Fprintf(out, "wrote %s\n", file)
	return nil
}

// commit names the results: the commit, -dirty when the console, the list's
// store or this benchmark have changes.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "nocommit"
	}
	c := strings.TrimSpace(string(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD", "--", "bench/console", "control/console", "control/postgres", "control/links", "schema").Run(); err != nil {
		c += "-dirty"
	}
	return c
}
