package postgres

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/control/topn"
)

// mergeVisitors merges the rollup's visitors into the stored sketches of
// their link and tenant days (read here, in the rollup's transaction, one
// index lookup each), and sets the encoded sketch and its estimate of
// each day whose sketch changed: the upsert writes those and leaves the
// others as they are. A sketch is read again at every rollup that has
// visitors for its day: the roller keeps none, so nothing can go stale.
func (b *clickBatch) mergeVisitors(ctx context.Context, tx pgx.Tx) error {
	var idx []int
	var domains, days []int32
	var codes []string
	for i, sk := range b.linkSketch {
		if sk != nil && !sk.Empty() {
			idx = append(idx, i)
			domains, codes, days = append(domains, b.domains[i]), append(codes, b.codes[i]), append(days, b.days[i])
		}
	}
	if len(idx) > 0 {
		stored, err := readSketches(ctx, tx, `
SELECT (SELECT t.visitors_sketch FROM link_clicks_daily t WHERE t.domain_id = u.domain_id AND t.code = u.code AND t.day = date '1970-01-01' + u.d)
FROM unnest($1::int[], $2::text[], $3::int[]) WITH ORDINALITY AS u (domain_id, code, d, ord) ORDER BY ord`, domains, codes, days)
		if err != nil {
			return fmt.Errorf("read link visitors: %w", err)
		}
		for k, i := range idx {
			if b.sketches[i], b.visitors[i], err = merged(stored[k], b.linkSketch[i]); err != nil {
				return fmt.Errorf("visitors of link %d/%s on day %d: %w", b.domains[i], b.codes[i], b.days[i], err)
			}
		}
	}
	var keys []tenantDay
	for k, r := range b.tenantDays {
		if r.sketch != nil && !r.sketch.Empty() {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, c tenantDay) int { return cmp.Or(cmp.Compare(a.tenant, c.tenant), cmp.Compare(a.day, c.day)) })
	tenants, tdays := make([]int64, len(keys)), make([]int32, len(keys))
	for i, k := range keys {
		tenants[i], tdays[i] = k.tenant, k.day
	}
	stored, err := readSketches(ctx, tx, `
SELECT (SELECT t.visitors_sketch FROM tenant_clicks_daily t WHERE t.tenant_id = u.tenant_id AND t.day = date '1970-01-01' + u.d)
FROM unnest($1::bigint[], $2::int[]) WITH ORDINALITY AS u (tenant_id, d, ord) ORDER BY ord`, tenants, tdays)
	if err != nil {
		return fmt.Errorf("read tenant visitors: %w", err)
	}
	for i, k := range keys {
		r := b.tenantDays[k]
		if r.encoded, r.visits, err = merged(stored[i], r.sketch); err != nil {
			return fmt.Errorf("visitors of tenant %d on day %d: %w", k.tenant, k.day, err)
		}
	}
	return nil
}

func readSketches(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([][]byte, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]byte])
}

// merged is the stored sketch with add merged in, encoded, and its
// estimate; nil when add brought nothing new.
func merged(stored []byte, add *hll.Sketch) ([]byte, int64, error) {
	var s hll.Sketch
	if stored != nil {
		if err := s.UnmarshalBinary(stored); err != nil {
			return nil, 0, err
		}
	}
	if !s.Merge(add) {
		return nil, 0, nil
	}
	enc, err := s.MarshalBinary()
	return enc, int64(s.Estimate()), err
}

// The statements that bound a link's dimensions and a tenant's: the same
// but for their keys ($1 … the key arrays, then the value, clicks, bots or
// other's columns).
type boundSQL struct {
	read, readOther    string
	del, set, setOther string
	keyArgs            func(b *clickBatch, gs []valueGroup) []any
	values             func(b *clickBatch) *valueSet
}

var linkBound = boundSQL{
	read: `
SELECT g.ord, t.value, t.clicks, t.bot_clicks
FROM unnest($1::int[], $2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS g (domain_id, code, d, dim, ord)
CROSS JOIN LATERAL (SELECT value, clicks, bot_clicks FROM link_click_values_daily t
	WHERE t.domain_id = g.domain_id AND t.code = g.code AND t.day = date '1970-01-01' + g.d AND t.dimension = g.dim OFFSET 0) t`,
	readOther: `
SELECT g.ord, o.clicks, o.bot_clicks, o.candidates
FROM unnest($1::int[], $2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS g (domain_id, code, d, dim, ord)
CROSS JOIN LATERAL (SELECT clicks, bot_clicks, candidates FROM link_click_other_daily o
	WHERE o.domain_id = g.domain_id AND o.code = g.code AND o.day = date '1970-01-01' + g.d AND o.dimension = g.dim OFFSET 0) o`,
	del: `
DELETE FROM link_click_values_daily t USING unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::text[]) AS x (domain_id, code, d, dim, val)
WHERE t.domain_id = x.domain_id AND t.code = x.code AND t.day = date '1970-01-01' + x.d AND t.dimension = x.dim AND t.value = x.val`,
	set: `
INSERT INTO link_click_values_daily AS t (domain_id, code, day, dimension, value, clicks, bot_clicks)
SELECT domain_id, code, date '1970-01-01' + d, dim, val, clicks, bots
FROM unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bigint[], $7::bigint[]) AS x (domain_id, code, d, dim, val, clicks, bots)
ON CONFLICT (domain_id, code, day, dimension, value) DO UPDATE SET clicks = excluded.clicks, bot_clicks = excluded.bot_clicks`,
	setOther: `
INSERT INTO link_click_other_daily AS t (domain_id, code, day, dimension, clicks, bot_clicks, candidates)
SELECT domain_id, code, date '1970-01-01' + d, dim, clicks, bots, candidates
FROM unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::bigint[], $6::bigint[], $7::bytea[]) AS x (domain_id, code, d, dim, clicks, bots, candidates)
ON CONFLICT (domain_id, code, day, dimension) DO UPDATE SET clicks = excluded.clicks, bot_clicks = excluded.bot_clicks, candidates = excluded.candidates`,
	keyArgs: func(b *clickBatch, gs []valueGroup) []any {
		domains, codes, days, dims := make([]int32, len(gs)), make([]string, len(gs)), make([]int32, len(gs)), make([]string, len(gs))
		for i, g := range gs {
			domains[i], codes[i], days[i], dims[i] = b.domains[g.link-1], b.codes[g.link-1], g.day, g.dim
		}
		return []any{domains, codes, days, dims}
	},
	values: func(b *clickBatch) *valueSet { return &b.linkValues },
}

var tenantBound = boundSQL{
	read: `
SELECT g.ord, t.value, t.clicks, t.bot_clicks
FROM unnest($1::bigint[], $2::int[], $3::text[]) WITH ORDINALITY AS g (tenant_id, d, dim, ord)
CROSS JOIN LATERAL (SELECT value, clicks, bot_clicks FROM tenant_click_values_daily t
	WHERE t.tenant_id = g.tenant_id AND t.day = date '1970-01-01' + g.d AND t.dimension = g.dim OFFSET 0) t`,
	readOther: `
SELECT g.ord, o.clicks, o.bot_clicks, o.candidates
FROM unnest($1::bigint[], $2::int[], $3::text[]) WITH ORDINALITY AS g (tenant_id, d, dim, ord)
CROSS JOIN LATERAL (SELECT clicks, bot_clicks, candidates FROM tenant_click_other_daily o
	WHERE o.tenant_id = g.tenant_id AND o.day = date '1970-01-01' + g.d AND o.dimension = g.dim OFFSET 0) o`,
	del: `
DELETE FROM tenant_click_values_daily t USING unnest($1::bigint[], $2::int[], $3::text[], $4::text[]) AS x (tenant_id, d, dim, val)
WHERE t.tenant_id = x.tenant_id AND t.day = date '1970-01-01' + x.d AND t.dimension = x.dim AND t.value = x.val`,
	set: `
INSERT INTO tenant_click_values_daily AS t (tenant_id, day, dimension, value, clicks, bot_clicks)
SELECT tenant_id, date '1970-01-01' + d, dim, val, clicks, bots
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::bigint[]) AS x (tenant_id, d, dim, val, clicks, bots)
ON CONFLICT (tenant_id, day, dimension, value) DO UPDATE SET clicks = excluded.clicks, bot_clicks = excluded.bot_clicks`,
	setOther: `
INSERT INTO tenant_click_other_daily AS t (tenant_id, day, dimension, clicks, bot_clicks, candidates)
SELECT tenant_id, date '1970-01-01' + d, dim, clicks, bots, candidates
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[], $5::bigint[], $6::bytea[]) AS x (tenant_id, d, dim, clicks, bots, candidates)
ON CONFLICT (tenant_id, day, dimension) DO UPDATE SET clicks = excluded.clicks, bot_clicks = excluded.bot_clicks, candidates = excluded.candidates`,
	keyArgs: func(_ *clickBatch, gs []valueGroup) []any {
		tenants, days, dims := make([]int64, len(gs)), make([]int32, len(gs)), make([]string, len(gs))
		for i, g := range gs {
			tenants[i], days[i], dims[i] = g.tenant, g.day, g.dim
		}
		return []any{tenants, days, dims}
	},
	values: func(b *clickBatch) *valueSet { return &b.tenantValues },
}

// boundValues brings each group back to at most n values (topn.Group.Apply
// on what was stored before the rollup and the rollup's values): a group
// the upsert wrote (it had room for its values, but not for them all
// with the rows it had) is read back and the rollup's counts taken out
// again; one that came with more than n values was not written. Rows are
// then set to the kept counts, the others deleted, and other set, all in
// the rollup's transaction.
func (b *clickBatch) boundValues(ctx context.Context, tx pgx.Tx, groups []valueGroup, n int) error {
	var links, tenants []valueGroup
	seen := map[valueGroup]bool{}
	for _, g := range groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		if g.tenant == 0 {
			links = append(links, g)
		} else {
			tenants = append(tenants, g)
		}
	}
	if err := b.bound(ctx, tx, &linkBound, links, n); err != nil {
		return fmt.Errorf("bound link values: %w", err)
	}
	if err := b.bound(ctx, tx, &tenantBound, tenants, n); err != nil {
		return fmt.Errorf("bound tenant values: %w", err)
	}
	return nil
}

func (b *clickBatch) bound(ctx context.Context, tx pgx.Tx, q *boundSQL, gs []valueGroup, n int) error {
	if len(gs) == 0 {
		return nil
	}
	slices.SortFunc(gs, func(a, c valueGroup) int {
		return cmp.Or(cmp.Compare(a.link, c.link), cmp.Compare(a.tenant, c.tenant), cmp.Compare(a.day, c.day), strings.Compare(a.dim, c.dim))
	})
	keys := q.keyArgs(b, gs)
	cur := make([]map[string]topn.Counts, len(gs))
	for i := range cur {
		cur[i] = map[string]topn.Counts{}
	}
	rows, err := tx.Query(ctx, q.read, keys...)
	if err != nil {
		return err
	}
	var ord int64
	var val string
	var c topn.Counts
	if _, err := pgx.ForEachRow(rows, []any{&ord, &val, &c.Clicks, &c.Bots}, func() error {
		cur[ord-1][val] = c
		return nil
	}); err != nil {
		return err
	}
	state := make([]topn.Group, len(gs))
	rows, err = tx.Query(ctx, q.readOther, keys...)
	if err != nil {
		return err
	}
	var cand []byte
	if _, err := pgx.ForEachRow(rows, []any{&ord, &c.Clicks, &c.Bots, &cand}, func() error {
		g := &state[ord-1]
		g.Other = c
		return g.Candidates.UnmarshalBinary(cand)
	}); err != nil {
		return err
	}
	var del, set, other []valueGroup
	var delVals, setVals []string
	var setCounts, otherCounts []topn.Counts
	var otherCands [][]byte
	vs := q.values(b)
	for i, g := range gs {
		batch := vs.values(g)
		prev := maps.Clone(cur[i])
		if len(batch) <= n { // the upsert added them: take them out again
			for _, v := range batch {
				p := prev[v.val]
				p.Sub(v.Counts)
				if p.Clicks == 0 {
					delete(prev, v.val)
				} else {
					prev[v.val] = p
				}
			}
		}
		st := &state[i]
		st.Kept = prev
		values := make([]topn.Value, len(batch))
		for k, v := range batch {
			values[k] = topn.Value{Value: v.val, Counts: v.Counts}
		}
		st.Apply(values, n, n)
		for _, v := range slices.Sorted(maps.Keys(cur[i])) {
			if _, ok := st.Kept[v]; !ok {
				del, delVals = append(del, g), append(delVals, v)
			}
		}
		for _, v := range slices.Sorted(maps.Keys(st.Kept)) {
			if k := st.Kept[v]; cur[i][v] != k {
				set, setVals, setCounts = append(set, g), append(setVals, v), append(setCounts, k)
			}
		}
		enc, err := st.Candidates.MarshalBinary()
		if err != nil {
			return err
		}
		other, otherCounts, otherCands = append(other, g), append(otherCounts, st.Other), append(otherCands, enc)
	}
	if len(del) > 0 {
		if _, err := tx.Exec(ctx, q.del, append(q.keyArgs(b, del), delVals)...); err != nil {
			return err
		}
	}
	if len(set) > 0 {
		clicks, bots := make([]int64, len(set)), make([]int64, len(set))
		for i, c := range setCounts {
			clicks[i], bots[i] = c.Clicks, c.Bots
		}
		if _, err := tx.Exec(ctx, q.set, append(q.keyArgs(b, set), setVals, clicks, bots)...); err != nil {
			return err
		}
	}
	clicks, bots := make([]int64, len(other)), make([]int64, len(other))
	for i, c := range otherCounts {
		clicks[i], bots[i] = c.Clicks, c.Bots
	}
	_, err = tx.Exec(ctx, q.setOther, append(q.keyArgs(b, other), clicks, bots, otherCands)...)
	return err
}
