// Command create benchmarks control's create path, over HTTP with vegeta,
// against a bare pgx loop writing the same rows, in one run on one machine.
//
// It starts its own durable PostgreSQL (fsync and synchronous_commit on, the
// defaults) from the machine's binaries with internal/stack, runs control's
// API in-process on loopback, and reports:
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
// IDs come from an in-memory counter standing in for the segment
// allocator's fast path (one atomic add per ID), so what is measured is the
// create path, not the allocator. Rate limiting is off.
//
//	go run ./bench/create -duration 10s
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
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
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each phase")
	fs.IntVar(&o.clients, "clients", 64, "concurrent clients for single creates (vegeta workers and pgx goroutines alike)")
	fs.IntVar(&o.rate, "rate", 5000, "creates per second of the open-loop phase")
	fs.IntVar(&o.batchClients, "batch-clients", 4, "concurrent clients for batch creates")
	fs.IntVar(&o.writers, "writers", 4, "control's shared create transactions in flight")
	fs.IntVar(&o.rawClients, "raw-clients", 8, "clients of the second pgx 1-per-tx loop (its best concurrency here)")
	if err := fs.Parse(args); err != nil {
		return err
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
	store := postgres.New(pool)
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

	ids := &memIDs{}
	ids.next.Store(1_000_000)
	svc := links.New(store, ids, links.Config{Reserved: api.Routes, Writers: o.writers, MaxCoalesce: 500})
	handler := api.New(store, svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	fmt.Fprintf(out, "edgelink create benchmark: %s per phase, PostgreSQL on this machine (%s)\n\n", o.duration, strings.Join(settings, ", "))

	// Single creates, closed loop, same concurrency on both sides. The
	// baseline goes first so its table is the smaller one.
	raw1 := rawLoop(ctx, pool, tenant, ids, o.clients, 1, o.duration)
	raw8 := rawLoop(ctx, pool, tenant, ids, o.rawClients, 1, o.duration)
	before := svc.Stats()
	api1 := attack(base, key, "/api/v1/links", 1, 0, o.clients, o.duration)
	after := svc.Stats()
	txs, carried := after.SharedTx-before.SharedTx, after.Coalesced-before.Coalesced
	apiOpen := attack(base, key, "/api/v1/links", 1, o.rate, o.clients*4, o.duration)

	rawB := rawLoop(ctx, pool, tenant, ids, o.batchClients, 100, o.duration)
	apiB := attack(base, key, "/api/v1/links/batch", 100, 0, o.batchClients, o.duration)

	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM links").Scan(&n); err != nil {
		return err
	}
	fmt.Fprintf(out, "%-58s %12s %10s %10s %8s\n", "phase", "links/s", "p50", "p99", "errors")
	row := func(name string, r result) {
		fmt.Fprintf(out, "%-58s %12.0f %10s %10s %8d\n", name, r.linksPerSec, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.errors)
	}
	row(fmt.Sprintf("pgx loop, 1 create per tx, %d clients", o.clients), raw1)
	row(fmt.Sprintf("pgx loop, 1 create per tx, %d clients", o.rawClients), raw8)
	row(fmt.Sprintf("API POST /links, closed loop, %d workers", o.clients), api1)
	row(fmt.Sprintf("API POST /links, open loop at %d/s", o.rate), apiOpen)
	row(fmt.Sprintf("pgx loop, 100 links per tx, %d clients", o.batchClients), rawB)
	row(fmt.Sprintf("API POST /links/batch (100), %d workers", o.batchClients), apiB)
	fmt.Fprintf(out, "\nratios (same run, same machine):\n")
	fmt.Fprintf(out, "  API single creates / pgx 1-per-tx loop, same clients:  %.2fx\n", api1.linksPerSec/raw1.linksPerSec)
	fmt.Fprintf(out, "  API single creates / pgx 1-per-tx loop, %d clients:    %.2fx\n", o.rawClients, api1.linksPerSec/raw8.linksPerSec)
	fmt.Fprintf(out, "  API batch creates / pgx 100-row loop:                  %.2fx\n", apiB.linksPerSec/rawB.linksPerSec)
	fmt.Fprintf(out, "  open loop: %.0f of %d/s answered 201 (%.1f%%), p99 %s\n", apiOpen.linksPerSec, o.rate, 100*apiOpen.success, apiOpen.p99.Round(10*time.Microsecond))
	if txs > 0 {
		fmt.Fprintf(out, "  coalescing (closed loop): %d creates in %d shared transactions, %.1f per transaction\n", carried, txs, float64(carried)/float64(txs))
	}
	fmt.Fprintf(out, "  links in the table at the end: %d\n", n)
	return nil
}

type result struct {
	linksPerSec float64
	p50, p99    time.Duration
	errors      int
	success     float64
}

// attack runs vegeta against path. perReq links go in each request (1 for
// POST /links, a batch otherwise); rate 0 is closed loop with workers
// workers, anything else open loop at that many requests per second.
func attack(base, key, path string, perReq, rate, workers int, d time.Duration) result {
	var n atomic.Uint64
	hdr := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
	prefix := fmt.Sprintf("https://example.com/%s/%d/", strings.Trim(strings.ReplaceAll(path, "/", "-"), "-"), time.Now().UnixNano())
	targeter := func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = "POST", base+path, hdr
		if perReq == 1 {
			t.Body = fmt.Appendf(nil, `{"url": "%s%d"}`, prefix, n.Add(1))
			return nil
		}
		var b strings.Builder
		b.WriteString(`{"links": [`)
		for i := range perReq {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"url": "%s%d"}`, prefix, n.Add(1))
		}
		b.WriteString(`]}`)
		t.Body = []byte(b.String())
		return nil
	}
	opts := []func(*vegeta.Attacker){vegeta.Redirects(vegeta.NoFollow), vegeta.KeepAlive(true), vegeta.Timeout(30 * time.Second),
		vegeta.Connections(workers), vegeta.MaxConnections(workers * 2)}
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
		linksPerSec: float64(created) / m.Duration.Seconds(),
		p50:         m.Latencies.P50, p99: m.Latencies.P99,
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
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var local []time.Duration
			n, e := 0, 0
			idv, codes, urls := make([]int64, perTx), make([]string, perTx), make([]string, perTx)
			for time.Now().Before(deadline) {
				for i := range perTx {
					id, _ := ids.NextID(ctx)
					idv[i] = int64(id)
					codes[i], _ = base62.Encode(id)
					urls[i] = fmt.Sprintf("https://example.com/raw/%d/%d", c, id)
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
	return result{linksPerSec: float64(total) / el.Seconds(), p50: quantile(lats, 0.5), p99: quantile(lats, 0.99), errors: errs, success: 1}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// memIDs stands in for the segment allocator's fast path.
type memIDs struct{ next atomic.Uint64 }

func (m *memIDs) NextID(context.Context) (uint64, error) { return m.next.Add(1), nil }

func (*memIDs) Done(uint64, bool) {}
