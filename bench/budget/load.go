package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/shared/base62"
)

// population is the data set: links 1…n (generated codes, ID order), each
// with a target, and the Zipf popularity that ranks them: rank r is link
// byRank[r]. Ranks are spread over the IDs by a seeded permutation, so hot
// links are not the first IDs.
type population struct {
	n      int
	urls   []string
	byRank []int32 // rank → index (ID − 1)
}

func newPopulation(n int, seed uint64) *population {
	r := rand.New(rand.NewPCG(seed, 0xb0d6e7))
	p := &population{n: n, urls: make([]string, n), byRank: make([]int32, n)}
	for i := range p.urls {
		p.urls[i] = dataset.Target(r)
	}
	for i, v := range r.Perm(n) {
		p.byRank[i] = int32(v)
	}
	return p
}

func code(index int) string {
	c, err := base62.Encode(uint64(index) + 1)
	if err != nil {
		panic(err) // index < n ≤ 62^6 - 1, checked by the flags
	}
	return c
}

// load writes the population into the authority as a bulk create leaves
// it: every link active, its segment sealed (one audited interval
// [1, n+1), so misses below it are decided by the edge's bloom), the
// allocator's counter past it, and the change sequence past every link's
// version. Then a week of clicks: the hottest clicked links' expected
// clicks under the same Zipf(s) the load draws from, so Hotness ranks them
// as a week of this traffic would have.
func load(ctx context.Context, pool *pgxpool.Pool, tenant int64, p *population, s float64, clicked int, logf func(string, ...any)) error {
	start := time.Now()
	i := 0
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"links"},
		[]string{"id", "code", "tenant_id", "code_source", "namespace", "url_original", "url", "redirect_type", "status", "version"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == p.n {
				return nil, nil
			}
			i++
			if i%1_000_000 == 0 {
				logf("links: %d of %d copied (%s)", i, p.n, time.Since(start).Round(time.Second))
			}
			u := p.urls[i-1]
			return []any{int64(i), code(i - 1), tenant, "generated", "default", u, u, int16(302), "active", int64(i)}, nil
		}))
	if err != nil {
		return fmt.Errorf("copy links: %w", err)
	}
	logf("links: %d copied in %s", p.n, time.Since(start).Round(time.Second))
	_, err = pool.Exec(ctx, `
		INSERT INTO alloc_namespaces (namespace, next_id, step, lower_bound, upper_bound)
		VALUES ('default', $1, 100000, 1, 56800235584)
		ON CONFLICT (namespace) DO UPDATE SET next_id = excluded.next_id`, p.n+1)
	if err != nil {
		return fmt.Errorf("allocator counter: %w", err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO alloc_audit (request_id, namespace, seg_start, seg_end, instance, epoch, sealed_at, sealed_by, used_count)
		VALUES (gen_random_uuid(), 'default', 1, $1, 'bench-budget', 1, now(), 'bench-budget', $2)`, p.n+1, p.n)
	if err != nil {
		return fmt.Errorf("sealed segment: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT setval('change_version_seq', $1)`, p.n); err != nil {
		return fmt.Errorf("change sequence: %w", err)
	}
	// Expected clicks of a week at 1,000 requests a second.
	week := 7 * 24 * 3600 * 1000.0
	h := 0.0
	for r := range p.n {
		h += math.Pow(float64(r+1), -s)
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	r := 0
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"link_clicks_daily"}, []string{"code", "day", "clicks", "bot_clicks"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if r == min(clicked, p.n) {
				return nil, nil
			}
			c := max(1, int64(week*math.Pow(float64(r+1), -s)/h))
			row := []any{code(int(p.byRank[r])), day, c, int64(0)}
			r++
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("copy clicks: %w", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE links; ANALYZE link_clicks_daily`); err != nil {
		return err
	}
	logf("clicks of %d links written; load done in %s", min(clicked, p.n), time.Since(start).Round(time.Second))
	return nil
}
