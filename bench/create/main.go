// Command create benchmarks control's create path, over HTTP with vegeta,
// against a bare pgx loop writing the same rows, in one run on one machine.
//
// It starts its own durable PostgreSQL (fsync and synchronous_commit on, the
// defaults) from the machine's binaries with internal/stack, runs control's
// API (control/api over control/links and control/postgres, as control
// serve wires them) on loopback in a second process of this binary (see
// serve.go), and reports:
//
//   - single creates, closed loop: POST /api/v1/links from N vegeta workers
//     as fast as they are answered, beside N goroutines each inserting one
//     link and its outbox row per transaction with pgx (the same statement
//     shape the API uses: one round trip per create);
//   - single creates, open loop: a fixed rate (default 5,000/s), for p99 at
//     that rate without coordinated omission;
//   - batch creates: POST /api/v1/links/batch with 100 links, beside a raw
//     loop inserting 100 links and their outbox rows per transaction.
//
// and, for every phase, the CPU per link created of control's process, of
// PostgreSQL's processes and of this process (the load: vegeta, or the raw
// loop), from /proc. Control runs apart so that its CPU is its own;
// -profile DIR writes its CPU profile of each API phase.
//
// IDs come from an in-memory counter standing in for the segment
// allocator's fast path (one atomic add per ID), so what is measured is the
// create path, not the allocator. Rate limiting is off.
//
//	go run ./bench/create -duration 10s
//	go run ./bench/create -duration 5s -profile /tmp/create-prof  # then go tool pprof
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/create:", err)
		os.Exit(1)
	}
}

type options struct {
	duration     time.Duration
	clients      int
	rate         int
	batchClients int
	writers      int
	rawClients   int
	profile      string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var (
		o  options
		so serveOptions
	)
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each phase")
	fs.IntVar(&o.clients, "clients", 64, "concurrent clients for single creates (vegeta workers and pgx goroutines alike)")
	fs.IntVar(&o.rate, "rate", 5000, "creates per second of the open-loop phase")
	fs.IntVar(&o.batchClients, "batch-clients", 4, "concurrent clients for batch creates")
	fs.IntVar(&o.writers, "writers", 4, "control's shared create transactions in flight")
	fs.IntVar(&o.rawClients, "raw-clients", 8, "clients of the second pgx 1-per-tx loop (its best concurrency here)")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile of control for each API phase into this folder")
	fs.StringVar(&so.dsn, serveFlag, "", "internal: serve control's API on this database (the benchmark starts itself so)")
	fs.IntVar(&so.coalesce, "serve-coalesce", 500, "internal: control's creates per shared transaction")
	fs.Uint64Var(&so.idStart, "serve-id-start", 0, "internal: control's first ID")
	fs.IntVar(&so.conns, "serve-conns", 16, "internal: control's pool size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if so.dsn != "" {
		so.writers = o.writers
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
		defer stop()
		return serve(ctx, so, out)
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}

	pg, err := stack.StartPostgres(ctx, stack.PostgresConfig{Database: "bench", Durable: true,
		Settings: []string{"max_connections=200", "shared_buffers=256MB"}})
	if err != nil {
		return err
	}
	defer pg.Close()
	pcfg, err := pgxpool.ParseConfig(pg.DSN)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(max(o.clients, 16) + 8)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	tenant, key, err := pg.Tenant(ctx, "bench")
	if err != nil {
		return err
	}
	var settings []string
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_level", "server_version"} {
		var v string
		if err := pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return err
		}
		settings = append(settings, name+"="+v)
	}
	meter, err := newMeter(ctx, pool)
	if err != nil {
		return err
	}

	ids := &memIDs{}
	ids.next.Store(1_000_000)
	g := measure.NewGroup(nil)
	defer g.Stop()
	// control's IDs start far above the raw loops': the two never meet.
	ctl, err := startControl(g, serveOptions{dsn: pg.DSN, writers: o.writers, coalesce: 500,
		idStart: 30_000_000_000, conns: max(o.clients, 16) + 8})
	if err != nil {
		return err
	}
	meter.control = ctl.proc.PID()
	base := ctl.base

	fmt.Fprintf(out, "edgelink create benchmark: %s per phase, PostgreSQL on this machine (%s)\n\n", o.duration, strings.Join(settings, ", "))

	var phases []phase
	measured := func(name, profile string, f func() result) result {
		var prof chan error
		if o.profile != "" && profile != "" {
			prof = make(chan error, 1)
			go func() { prof <- ctl.profile(filepath.Join(o.profile, profile+".pprof"), o.duration) }()
		}
		before := meter.read()
		r := f()
		r.cpu = meter.read().sub(before)
		if prof != nil {
			if err := <-prof; err != nil {
				fmt.Fprintf(os.Stderr, "bench/create: profile %s: %v\n", profile, err)
			}
		}
		phases = append(phases, phase{name, r})
		return r
	}

	// Single creates, closed loop, same concurrency on both sides. The
	// baseline goes first so its table is the smaller one.
	raw1 := measured(fmt.Sprintf("pgx loop, 1 create per tx, %d clients", o.clients), "",
		func() result { return rawLoop(ctx, pool, tenant, ids, o.clients, 1, o.duration) })
	raw8 := measured(fmt.Sprintf("pgx loop, 1 create per tx, %d clients", o.rawClients), "",
		func() result { return rawLoop(ctx, pool, tenant, ids, o.rawClients, 1, o.duration) })
	before, _ := ctl.stats()
	api1 := measured(fmt.Sprintf("API POST /links, closed loop, %d workers", o.clients), "single-closed",
		func() result { return attack(base, key, "/api/v1/links", 1, 0, o.clients, o.duration) })
	after, _ := ctl.stats()
	txs, carried := after[0]-before[0], after[1]-before[1]
	apiOpen := measured(fmt.Sprintf("API POST /links, open loop at %d/s", o.rate), "single-open",
		func() result { return attack(base, key, "/api/v1/links", 1, o.rate, o.clients*4, o.duration) })

	rawB := measured(fmt.Sprintf("pgx loop, 100 links per tx, %d clients", o.batchClients), "",
		func() result { return rawLoop(ctx, pool, tenant, ids, o.batchClients, 100, o.duration) })
	apiB := measured(fmt.Sprintf("API POST /links/batch (100), %d workers", o.batchClients), "batch",
		func() result { return attack(base, key, "/api/v1/links/batch", 100, 0, o.batchClients, o.duration) })

	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM links").Scan(&n); err != nil {
		return err
	}
	fmt.Fprintf(out, "%-58s %12s %10s %10s %8s\n", "phase", "links/s", "p50", "p99", "errors")
	for _, p := range phases {
		r := p.r
		fmt.Fprintf(out, "%-58s %12.0f %10s %10s %8d\n", p.name, r.linksPerSec, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.errors)
	}
	fmt.Fprintf(out, "\nCPU per link created, µs (utime+stime from /proc; control runs as its own process, the loader is vegeta or the pgx loop):\n")
	fmt.Fprintf(out, "%-58s %10s %11s %10s\n", "phase", "control", "PostgreSQL", "loader")
	for _, p := range phases {
		c := p.r.cpu.perLink(p.r.created)
		ctlCol := fmt.Sprintf("%.1f", c.control)
		if !strings.HasPrefix(p.name, "API") {
			ctlCol = "-"
		}
		fmt.Fprintf(out, "%-58s %10s %11.1f %10.1f\n", p.name, ctlCol, c.pg, c.loader)
	}
	fmt.Fprintf(out, "\nratios (same run, same machine):\n")
	fmt.Fprintf(out, "  API single creates / pgx 1-per-tx loop, same clients:  %.2fx\n", api1.linksPerSec/raw1.linksPerSec)
	fmt.Fprintf(out, "  API single creates / pgx 1-per-tx loop, %d clients:    %.2fx\n", o.rawClients, api1.linksPerSec/raw8.linksPerSec)
	fmt.Fprintf(out, "  API batch creates / pgx 100-row loop:                  %.2fx\n", apiB.linksPerSec/rawB.linksPerSec)
	fmt.Fprintf(out, "  open loop: %.0f of %d/s answered 201 (%.1f%%), p99 %s\n", apiOpen.linksPerSec, o.rate, 100*apiOpen.success, apiOpen.p99.Round(10*time.Microsecond))
	if txs > 0 {
		fmt.Fprintf(out, "  coalescing (closed loop): %d creates in %d shared transactions, %.1f per transaction\n", carried, txs, float64(carried)/float64(txs))
	}
	fmt.Fprintf(out, "  PostgreSQL CPU per link, API / pgx loop: single %.2fx (open loop / %d clients), batch %.2fx\n",
		apiOpen.cpu.perLink(apiOpen.created).pg/raw8.cpu.perLink(raw8.created).pg, o.rawClients,
		apiB.cpu.perLink(apiB.created).pg/rawB.cpu.perLink(rawB.created).pg)
	fmt.Fprintf(out, "  links in the table at the end: %d\n", n)
	return nil
}

type phase struct {
	name string
	r    result
}

type result struct {
	linksPerSec float64
	created     int
	p50, p99    time.Duration
	errors      int
	success     float64
	cpu         usage
}

// attack runs vegeta against path. perReq links go in each request (1 for
// POST /links, a batch otherwise); rate 0 is closed loop with workers
// workers, anything else open loop at that many requests per second.
func attack(base, key, path string, perReq, rate, workers int, d time.Duration) result {
	var n atomic.Uint64
	hdr := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
	prefix := fmt.Sprintf(`{"url": "https://example.com/%s/%d/`, strings.Trim(strings.ReplaceAll(path, "/", "-"), "-"), time.Now().UnixNano())
	// Bodies are appended, not formatted: the load generator shares the
	// machine, and the raw loops build their rows as cheaply.
	targeter := func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = "POST", base+path, hdr
		if perReq == 1 {
			b := make([]byte, 0, len(prefix)+24)
			b = strconv.AppendUint(append(b, prefix...), n.Add(1), 10)
			t.Body = append(b, `"}`...)
			return nil
		}
		b := make([]byte, 0, 16+perReq*(len(prefix)+24))
		b = append(b, `{"links": [`...)
		for i := range perReq {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(append(b, prefix...), n.Add(1), 10)
			b = append(b, `"}`...)
		}
		t.Body = append(b, `]}`...)
		return nil
	}
	// Only a batch answer's first bytes are read ({"created":N,); the rest
	// is drained, not kept.
	keep := int64(0)
	if perReq > 1 {
		keep = 64
	}
	opts := []func(*vegeta.Attacker){vegeta.Redirects(vegeta.NoFollow), vegeta.KeepAlive(true), vegeta.Timeout(30 * time.Second),
		vegeta.Connections(workers), vegeta.MaxConnections(workers * 2), vegeta.MaxBody(keep)}
	pace := vegeta.Rate{Freq: rate, Per: time.Second}
	if rate == 0 {
		opts = append(opts, vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(uint64(workers)))
	} else {
		opts = append(opts, vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(uint64(workers)*4))
	}
	atk := vegeta.NewAttacker(opts...)
	var m vegeta.Metrics
	var created int
	for res := range atk.Attack(vegeta.Targeter(targeter), pace, d, path) {
		m.Add(res)
		if res.Code == http.StatusCreated {
			created++
		} else if res.Code == http.StatusOK && perReq > 1 {
			// The answer starts {"created":N, — read just that, so the
			// load generator spends no CPU decoding the rest.
			if rest, ok := bytes.CutPrefix(res.Body, []byte(`{"created":`)); ok {
				if i := bytes.IndexByte(rest, ','); i > 0 {
					if v, err := strconv.Atoi(string(rest[:i])); err == nil {
						created += v
					}
				}
			}
		}
	}
	m.Close()
	return result{
		linksPerSec: float64(created) / m.Duration.Seconds(), created: created,
		p50: m.Latencies.P50, p99: m.Latencies.P99,
		errors:  int(m.Requests) - int(float64(m.Requests)*m.Success),
		success: m.Success,
	}
}

// rawInsert is the bare baseline: the same link and outbox rows the API
// writes, xid before version, with nothing else around it.
const rawInsert = `
WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
i AS MATERIALIZED (
	SELECT t.*, nextval('change_version_seq') AS version
	FROM x, unnest($1::bigint[], $2::text[], $3::text[]) AS t(id, code, url)
),
l AS (
	INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url, redirect_type, status, version)
	SELECT id, code, $4, 'generated', 'default', url, url, 302, 'active', version FROM i
	RETURNING version
)
INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at)
SELECT i.version, x.xid, 'link', i.code, i.url, 302, 'active', NULL::timestamptz FROM l JOIN i USING (version), x`

// rawLoop runs clients goroutines, each inserting perTx links per
// transaction (one statement, autocommit) until d has passed.
func rawLoop(ctx context.Context, pool *pgxpool.Pool, tenant int64, ids *memIDs, clients, perTx int, d time.Duration) result {
	var (
		mu    sync.Mutex
		lats  []time.Duration
		total int
		errs  int
	)
	// URLs as long as the API phases' ones.
	prefix := fmt.Sprintf("https://example.com/pgx-loop-%d-per-tx/%d/", perTx, time.Now().UnixNano())
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var local []time.Duration
			n, e := 0, 0
			idv, codes, urls := make([]int64, perTx), make([]string, perTx), make([]string, perTx)
			for time.Now().Before(deadline) {
				for i := range perTx {
					id, _ := ids.NextID(ctx, link.DefaultDomain)
					idv[i] = int64(id)
					codes[i], _ = base62.Encode(id)
					urls[i] = prefix + strconv.FormatUint(id, 10)
				}
				t0 := time.Now()
				_, err := pool.Exec(ctx, rawInsert, idv, codes, urls, tenant)
				local = append(local, time.Since(t0))
				if err != nil {
					e++
					continue
				}
				n += perTx
			}
			mu.Lock()
			lats, total, errs = append(lats, local...), total+n, errs+e
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	return result{linksPerSec: float64(total) / el.Seconds(), created: total, p50: quantile(lats, 0.5), p99: quantile(lats, 0.99), errors: errs, success: 1}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// memIDs stands in for the segment allocator's fast path.
type memIDs struct{ next atomic.Uint64 }

func (m *memIDs) NextID(context.Context, link.DomainID) (uint64, error) { return m.next.Add(1), nil }

func (*memIDs) Done(uint64, bool) {}
