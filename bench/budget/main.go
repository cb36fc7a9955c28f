// Command budget is the memory-budget scenario (issue 19 item 3): the same
// links and the same Zipf(1.1) requests against two edges of one run, one
// booted from a snapshot of every link and one from a budgeted snapshot
// holding only the hottest links (control/snapshots.WithBudget ranked by
// postgres.Hotness over a week of clicks) with the bloom of every code,
// both backed by a real authority (PostgreSQL behind control's responder).
// It reports where each edge's answers came from (memory, long-tail cache,
// authority), authority round trips per 1,000 requests, latency
// percentiles, every answer checked against the authority, and the bloom's
// size and false-positive rate, measured here and computed for 10⁸ and
// 3·10⁹ codes.
//
//	go run ./bench/budget -links 1000000            # about 5 minutes
//	go run ./bench/budget -links 10000000 -budget 1000000   # 10M/1M: about 30 minutes, 3 GB of disk
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/atomicfile"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func main() {
	// An interrupt ends the run through its deferred stops, so no
	// PostgreSQL or NATS of its own outlives it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "budget:", err)
		os.Exit(1)
	}
}

type config struct {
	links, budget, cache, requests, warmup, rate, workers int
	s, unknown                                            float64
	seed                                                  uint64
	out, note, commit                                     string
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("budget", flag.ContinueOnError)
	fs.IntVar(&c.links, "links", 1_000_000, "links in the authority")
	fs.IntVar(&c.budget, "budget", 0, "links the budgeted snapshot holds (default links/10, the issue's 10⁸/10⁷)")
	fs.IntVar(&c.cache, "cache", 0, "long-tail cache entries of each edge (default budget/10: the edge's default 10⁶ at a budget of 10⁷)")
	fs.IntVar(&c.requests, "requests", 200_000, "measured requests per edge")
	fs.IntVar(&c.warmup, "warmup", 0, "requests per edge before measuring, filling the cache (default requests/2)")
	fs.IntVar(&c.rate, "rate", 2000, "requests per second, open loop")
	fs.IntVar(&c.workers, "workers", 64, "requests in flight at most")
	fs.Float64Var(&c.s, "s", 1.1, "Zipf exponent")
	fs.Float64Var(&c.unknown, "unknown", 0.10, "share of requests for codes that are no link")
	fs.Uint64Var(&c.seed, "seed", 1, "data set and sample seed")
	fs.StringVar(&c.out, "out", "bench/results", "directory of the results (.md and .png)")
	fs.StringVar(&c.note, "note", "", "a line about the machine for the results (\"busy: …\")")
	fs.StringVar(&c.commit, "commit", "", "the commit measured, for the results' name (default: git's HEAD here)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.budget == 0 {
		c.budget = c.links / 10
	}
	if c.commit == "" {
		c.commit = commit()
	}
	if c.cache == 0 {
		c.cache = max(1, c.budget/10)
	}
	if c.warmup == 0 {
		c.warmup = c.requests / 2
	}
	switch {
	case c.links < 100 || uint64(c.links) > base62.MaxID:
		return c, fmt.Errorf("-links %d: want 100 to %d", c.links, base62.MaxID)
	case c.budget < 1 || c.budget >= c.links:
		return c, fmt.Errorf("-budget %d: want 1 to links-1 (%d)", c.budget, c.links-1)
	case c.requests < 1 || c.warmup < 0 || c.rate < 1 || c.workers < 1 || c.cache < 1:
		return c, errors.New("-requests, -rate, -workers and -cache must be positive, -warmup not negative")
	case c.s <= 1:
		return c, fmt.Errorf("-s %g: a Zipf exponent must be above 1", c.s)
	case c.unknown < 0 || c.unknown >= 1:
		return c, fmt.Errorf("-unknown %g: want a share in [0, 1)", c.unknown)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stdout, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	tmp, err := os.MkdirTemp("", "edgelink-budget-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// PostgreSQL runs as its own user when this runs as root: it must be
	// able to enter the folder.
	if err := os.Chmod(tmp, 0o711); err != nil {
		return err
	}
	pg, err := stack.StartPostgres(ctx, stack.PostgresConfig{Dir: filepath.Join(tmp, "pg")})
	if err != nil {
		return err
	}
	defer pg.Close()
	ns, err := stack.StartNATS(ctx, stack.NATSConfig{Dir: filepath.Join(tmp, "nats")})
	if err != nil {
		return err
	}
	defer ns.Close()
	tenant, _, err := pg.Tenant(ctx, "bench")
	if err != nil {
		return err
	}
	pop := newPopulation(c.links, c.seed)
	// Three times the budget clicked in the week: more links than the
	// budget have clicks, as under a long tail, so ranking matters.
	if err := load(ctx, pg.Pool(), tenant, pop, c.s, 3*c.budget, logf); err != nil {
		return err
	}
	ctl, err := stack.StartControl(ctx, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: ns.URL(),
		PublicURL: "http://127.0.0.1:1", Snapshots: snapshots.Schedule{Disabled: true},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer ctl.Stop()
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st := pg.Store()
	runs := []*edgeRun{{name: "every link"}, {name: fmt.Sprintf("budget %d", c.budget)}}
	for i, r := range runs {
		b := snapshots.New(st, js, nil)
		if i == 1 {
			b = b.WithBudget(c.budget, st.Hotness(7, nil))
		}
		start := time.Now()
		var buf bytes.Buffer
		h, err := b.Build(ctx, &buf, nil)
		if err != nil {
			return err
		}
		r.header, r.fileBytes, r.build = h, buf.Len(), time.Since(start)
		r.dir = filepath.Join(tmp, fmt.Sprintf("edge-%d", i))
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(r.dir, snapshot.ObjectName(h.ChangeVersion)), buf.Bytes()); err != nil {
			return err
		}
		logf("snapshot %q: %d entries, %d codes in the bloom, %d bytes, built in %s", r.name, h.Entries, h.BloomCount, buf.Len(), r.build.Round(time.Millisecond))
	}
	warm := sample(pop, c.s, c.unknown, c.warmup, c.seed+100)
	reqs := sample(pop, c.s, c.unknown, c.requests, c.seed+200)
	links := 0
	for _, q := range reqs {
		if q.index >= 0 {
			links++
		}
	}
	for i, r := range runs {
		if err := r.measure(ctx, ns.URL(), fmt.Sprintf("budget-%d", i), c, pop, warm, reqs, logf); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		r.linkRequests = links
	}
	bl, err := measureBloom(runs[1].bloom, c.links, c.seed)
	if err != nil {
		return err
	}
	return writeResults(c, runs, bl, logf)
}

// edgeRun is one edge of the run and what it measured.
type edgeRun struct {
	name      string
	dir       string
	header    snapshot.Header
	fileBytes int
	build     time.Duration
	ready     time.Duration
	bloom     []byte

	warm, res    *result
	linkRequests int
	// Deltas over the measured pass.
	snapshotHits, overlayHits, cacheHits, resolved, asked, roundTrips, bloomRejects uint64
}

func (r *edgeRun) measure(ctx context.Context, natsURL, name string, c config, p *population, warm, reqs []request, logf func(string, ...any)) error {
	start := time.Now()
	e, err := stack.StartEdge(ctx, edgeserver.Config{NATSURL: natsURL, Name: name, SnapshotDir: r.dir,
		CacheEntries: int64(c.cache), Log: slog.New(slog.DiscardHandler),
		// Every request comes from one address: the per-client 404 budget
		// (abuse policy, not the subject here) would answer the unknown
		// codes 429.
		NotFoundRate: -1})
	if err != nil {
		return err
	}
	defer e.Stop()
	err = stack.Poll(ctx, "edge ready", 5*time.Minute, func() bool {
		resp, err := http.Get(e.URL + "/-/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		return err
	}
	r.ready = time.Since(start)
	parts := e.Parts()
	r.bloom = parts.Snapshots.Current().Snap.Bloom(link.DefaultDomain)
	logf("%s: ready in %s; warming with %d requests", r.name, r.ready.Round(time.Millisecond), len(warm))
	r.warm = drive(ctx, e.URL, p, warm, c.rate, c.workers)
	h, res, a := &parts.Handler.Counters, parts.Resolver, parts.Authority
	s0, o0, c0, v0, k0, t0, b0 := h.SnapshotHits.Load(), h.OverlayHits.Load(), res.CacheHits.Load(), h.Resolved.Load(),
		res.AuthorityAsked.Load(), a.Requests.Load(), res.BloomRejects.Load()
	runtime.GC()
	logf("%s: measuring %d requests at %d/s", r.name, len(reqs), c.rate)
	r.res = drive(ctx, e.URL, p, reqs, c.rate, c.workers)
	r.snapshotHits, r.overlayHits, r.cacheHits = h.SnapshotHits.Load()-s0, h.OverlayHits.Load()-o0, res.CacheHits.Load()-c0
	r.resolved, r.asked, r.roundTrips = h.Resolved.Load()-v0, res.AuthorityAsked.Load()-k0, a.Requests.Load()-t0
	r.bloomRejects = res.BloomRejects.Load() - b0
	logf("%s: p50 %s p99 %s, %d wrong, %d failed; memory %d, cache %d, authority %d (round trips %d)", r.name,
		r.res.percentile(0.50), r.res.percentile(0.99), r.res.wrong.Load(), r.res.failed.Load(),
		r.snapshotHits+r.overlayHits, r.cacheHits, r.resolved-r.cacheHits, r.roundTrips)
	return nil
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "nocommit"
	}
	c := strings.TrimSpace(string(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD", "--", "bench/budget", "edge", "control/snapshots", "control/postgres").Run(); err != nil {
		c += "-dirty"
	}
	return c
}
