package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Tx implements links.Tx on a transaction, or on the pool for
// Autocommit. It is not safe for concurrent use.
type Tx struct {
	tx     querier
	keyTTL time.Duration // idempotency keys older than this are expired
	// wake is called once links were inserted, at once on Autocommit (each
	// statement has committed), else by WriteTx after the commit.
	wake  func()
	wrote bool
	// autocommit: every statement is a transaction of its own, so one that
	// fails leaves nothing behind and another can be tried in its place.
	autocommit bool
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// WriteTx implements links.Store: fn runs in a transaction on the primary,
// committed if fn returns nil.
func (s *Store) WriteTx(ctx context.Context, fn func(links.Tx) error) error {
	t := &Tx{keyTTL: s.keyTTL}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { t.tx = tx; return fn(t) })
	if err == nil && t.wrote {
		s.waker.wake()
	}
	return translate(err)
}

// Autocommit implements links.Store: every call of the Tx it returns runs
// on the pool, a transaction of its own.
func (s *Store) Autocommit() links.Tx {
	return &Tx{tx: s.pool, keyTTL: s.keyTTL, autocommit: true, wake: s.waker.wake}
}

// insertLinks writes many links and their outbox rows in one statement. The
// xid is taken before any version (see insertLink). A row whose code (or
// id) exists already is skipped, not an error: its version becomes a hole the
// relay passes once this transaction ends. Rows go in (domain, code) order
// so concurrent batches wait on each other's codes in one direction only. A
// NULL url_original is the url itself.
const insertLinks = `
WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
i AS MATERIALIZED (
	SELECT t.*, nextval('change_version_seq') AS version
	FROM x, unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
	               $8::int2[], $9::timestamptz[], $10::text[], $13::int[], $14::bytea[], $15::text[], $16::int8[])
	     AS t(id, code, tenant_id, code_source, namespace, url_original, url, redirect_type, expires_at, title, domain_id,
	          rules, password_hash, max_clicks)
),
l AS (
	INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url,
	                   redirect_type, status, expires_at, version, title, domain_id, rules, password_hash, max_clicks)
	SELECT id, code, tenant_id, code_source, namespace, coalesce(url_original, url), url, redirect_type, 'active',
	       expires_at, version, title, domain_id, rules, password_hash, max_clicks
	FROM i ORDER BY domain_id, code
	ON CONFLICT DO NOTHING
	RETURNING id, version, created_at, updated_at
),
o AS (
	INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at, domain_id,
	                    rules, password_hash, max_clicks)
	SELECT i.version, x.xid, 'link', i.code, i.url, i.redirect_type, 'active', i.expires_at, i.domain_id,
	       i.rules, i.password_hash, i.max_clicks
	FROM l JOIN i ON i.version = l.version, x
),
tg AS (
	INSERT INTO link_tags (tenant_id, tag, link_id)
	SELECT i.tenant_id, g.tag, g.link_id
	FROM unnest($11::bigint[], $12::text[]) AS g(link_id, tag) JOIN l ON l.id = g.link_id JOIN i ON i.id = g.link_id
)
SELECT i.domain_id, i.code, l.version, l.created_at, l.updated_at FROM l JOIN i ON i.version = l.version`

// insertFreshLinks is insertLinks for generated codes that no link holds
// yet, the common case: a plain INSERT, all rows or none. It skips what
// ON CONFLICT costs on every row (a probe of each unique index before the
// insert and a speculative insertion confirmed by a WAL record of its own),
// the join back to the inserted rows, and a result row per link: it answers
// one row, the versions in input order and the transaction's now(), which
// is every row's created_at and updated_at (their default). A code or ID
// that is taken fails it with unique_violation, and with it every row.
//
// A column whose value is the same for every link (the tenant, the
// namespace, the redirect type, the expiry, the domain: nearly always)
// comes as a NULL array, which unnest pads with NULLs, and that one value
// ($9 to $12, $17); url_original is NULL where it is the url. Extras
// ($18 to $20) are rarer still: NULL arrays unless a link has some.
const insertFreshLinks = `
WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
i AS MATERIALIZED (
	SELECT t.id, t.code, t.url, coalesce(t.url_original, t.url) AS url_original,
	       coalesce(t.tenant_id, $9::bigint) AS tenant_id, coalesce(t.namespace, $10::text) AS namespace,
	       coalesce(t.redirect_type, $11::int2) AS redirect_type, coalesce(t.expires_at, $12::timestamptz) AS expires_at,
	       coalesce(t.domain_id, $17::int) AS domain_id,
	       t.title, t.rules, t.password_hash, t.max_clicks, t.ord, nextval('change_version_seq') AS version
	FROM x, unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[],
	               $7::int2[], $8::timestamptz[], $13::text[], $16::int[], $18::bytea[], $19::text[], $20::int8[]) WITH ORDINALITY
	     AS t(id, code, url, url_original, tenant_id, namespace, redirect_type, expires_at, title, domain_id,
	          rules, password_hash, max_clicks, ord)
),
l AS (
	INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url,
	                   redirect_type, status, expires_at, version, title, domain_id, rules, password_hash, max_clicks)
	SELECT id, code, tenant_id, 'generated', namespace, url_original, url, redirect_type, 'active',
	       expires_at, version, title, domain_id, rules, password_hash, max_clicks
	FROM i ORDER BY domain_id, code
),
o AS (
	INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at, domain_id,
	                    rules, password_hash, max_clicks)
	SELECT i.version, x.xid, 'link', i.code, i.url, i.redirect_type, 'active', i.expires_at, i.domain_id,
	       i.rules, i.password_hash, i.max_clicks FROM i, x
),
tg AS (
	INSERT INTO link_tags (tenant_id, tag, link_id)
	SELECT i.tenant_id, g.tag, g.link_id FROM unnest($14::bigint[], $15::text[]) AS g(link_id, tag) JOIN i ON i.id = g.link_id
)
SELECT array_agg(version ORDER BY ord), now() FROM i`

// linkArgs are InsertLinks' links as the statements' arrays.
type linkArgs struct {
	ids      []int64
	codes    []string
	tenants  []int64
	custom   []string // code_source
	nss      []string
	origs    pgtype.FlatArray[pgtype.Text] // NULL where the url is the original
	urls     []string
	rts      []int16
	expires  pgtype.FlatArray[pgtype.Timestamptz]
	titles   pgtype.FlatArray[pgtype.Text] // NULL where there is none
	anyTitle bool
	domains  []int32
	// Extras (links_extras.go), NULL where a link has none.
	rules     [][]byte
	hashes    pgtype.FlatArray[pgtype.Text]
	maxes     pgtype.FlatArray[pgtype.Int8]
	anyExtras bool
	// The links' tags as pairs: tagIDs[k] carries tags[k].
	tagIDs   []int64
	tags     []string
	byCode   map[domainCode]int
	anyTaken bool // a custom code, which another link may hold
}

func newLinkArgs(ls []links.NewLink) (*linkArgs, error) {
	n := len(ls)
	a := &linkArgs{
		ids: make([]int64, n), codes: make([]string, n), tenants: make([]int64, n), custom: make([]string, n),
		nss: make([]string, n), origs: make([]pgtype.Text, n), urls: make([]string, n), rts: make([]int16, n),
		expires: make([]pgtype.Timestamptz, n), titles: make([]pgtype.Text, n), domains: make([]int32, n),
		rules: make([][]byte, n), hashes: make([]pgtype.Text, n), maxes: make([]pgtype.Int8, n),
		byCode: make(map[domainCode]int, n),
	}
	for i, nl := range ls {
		l := nl.Link
		a.ids[i], a.codes[i], a.tenants[i] = int64(l.ID), l.Code, l.TenantID
		a.custom[i] = "generated"
		if nl.Custom {
			a.custom[i], a.anyTaken = "custom", true
		}
		a.nss[i], a.urls[i], a.rts[i], a.expires[i] = l.Namespace, l.URL, int16(l.RedirectType), nullTime(l.ExpiresAt)
		a.domains[i] = int32(nl.Domain)
		if l.URLOriginal != l.URL {
			a.origs[i] = pgtype.Text{String: l.URLOriginal, Valid: true}
		}
		if nl.Title != "" {
			a.titles[i], a.anyTitle = pgtype.Text{String: nl.Title, Valid: true}, true
		}
		if !l.Extras.IsZero() {
			x, err := argsOf(&l.Extras)
			if err != nil {
				return nil, fmt.Errorf("insert links: %w", err)
			}
			a.rules[i], a.hashes[i], a.maxes[i], a.anyExtras = x.rules, x.hash, x.max, true
		}
		for _, tag := range nl.Tags {
			a.tagIDs, a.tags = append(a.tagIDs, int64(l.ID)), append(a.tags, tag)
		}
		k := domainCode{nl.Domain, l.Code}
		if _, dup := a.byCode[k]; dup {
			return nil, fmt.Errorf("insert links: %w: duplicate codes in one call", link.ErrInvalidInput)
		}
		a.byCode[k] = i
	}
	return a, nil
}

// InsertLinks implements links.Tx; duplicate codes in one call are
// refused as link.ErrInvalidInput. On Autocommit, generated codes go in
// with insertFreshLinks, and only if one of them is taken (an imported link
// holds it) again with insertLinks, which skips it.
func (t *Tx) InsertLinks(ctx context.Context, ls []links.NewLink) ([]bool, error) {
	inserted := make([]bool, len(ls))
	if len(ls) == 0 {
		return inserted, nil
	}
	a, err := newLinkArgs(ls)
	if err != nil {
		return nil, err
	}
	if t.autocommit && !a.anyTaken {
		err := t.insertFresh(ctx, ls, a)
		if err == nil {
			for i := range inserted {
				inserted[i] = true
			}
			t.inserted()
			return inserted, nil
		}
		if !isUniqueViolation(err) {
			return nil, translate(err)
		}
		// Nothing of it stands: insertLinks finds which code is taken.
	}
	rows, err := t.tx.Query(ctx, insertLinks, a.ids, a.codes, a.tenants, a.custom, a.nss, a.origs, a.urls, a.rts, a.expires,
		a.titles, a.tagIDs, a.tags, a.domains, a.rules, a.hashes, a.maxes)
	if err != nil {
		return nil, translate(err)
	}
	var (
		domain           int32
		code             string
		version          int64
		created, updated time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&domain, &code, &version, &created, &updated}, func() error {
		i := a.byCode[domainCode{link.DomainID(domain), code}]
		l := ls[i].Link
		// In UTC, as a replay decodes them: an answer and its replay are one link.
		l.Version, l.CreatedAt, l.UpdatedAt, l.Status = uint64(version), created.UTC(), updated.UTC(), link.Active
		inserted[i] = true
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	if slices.Contains(inserted, true) {
		t.inserted()
	}
	return inserted, nil
}

// inserted records that links (and their outbox rows) were written: on
// Autocommit they have committed, so the relay is woken now.
func (t *Tx) inserted() {
	t.wrote = true
	if t.autocommit && t.wake != nil {
		t.wake()
	}
}

// insertFresh runs insertFreshLinks and fills in every link.
func (t *Tx) insertFresh(ctx context.Context, ls []links.NewLink, a *linkArgs) error {
	// Titles and tags are rare on this path: a NULL array each, unnest
	// pads it.
	args := []any{a.ids, a.codes, a.urls, []string(nil), nil, nil, nil, nil, nil, nil, nil, nil, []string(nil), []int64(nil), []string(nil),
		nil, nil, [][]byte(nil), []string(nil), []int64(nil)}
	if a.anyExtras {
		args[17], args[18], args[19] = a.rules, a.hashes, a.maxes
	}
	if slices.ContainsFunc(a.origs, func(o pgtype.Text) bool { return o.Valid }) {
		args[3] = a.origs
	}
	if a.anyTitle {
		args[12] = a.titles
	}
	if len(a.tags) > 0 {
		args[13], args[14] = a.tagIDs, a.tags
	}
	// Each uniform column goes as its one value beside a NULL array.
	uniform := func(arr, one int, vals any, same bool, first any) {
		if same {
			args[arr], args[one] = nil, first
		} else {
			args[arr], args[one] = vals, nil
		}
	}
	uniform(4, 8, a.tenants, allSame(a.tenants), a.tenants[0])
	uniform(5, 9, a.nss, allSame(a.nss), a.nss[0])
	uniform(6, 10, a.rts, allSame(a.rts), a.rts[0])
	uniform(7, 11, a.expires, allSame(a.expires), a.expires[0])
	uniform(15, 16, a.domains, allSame(a.domains), a.domains[0])
	rows, err := t.tx.Query(ctx, insertFreshLinks, args...)
	if err != nil {
		return err
	}
	var (
		versions []int64
		now      time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&versions, &now}, func() error { return nil })
	if err != nil {
		return err
	}
	if len(versions) != len(ls) {
		return fmt.Errorf("insert links: %d versions for %d links", len(versions), len(ls))
	}
	now = now.UTC()
	for i, nl := range ls {
		l := nl.Link
		l.Version, l.CreatedAt, l.UpdatedAt, l.Status = uint64(versions[i]), now, now, link.Active
	}
	return nil
}

// domainCode is a link's key: codes are unique per domain.
type domainCode struct {
	domain link.DomainID
	code   string
}

func allSame[T comparable](vs []T) bool {
	for _, v := range vs[1:] {
		if v != vs[0] {
			return false
		}
	}
	return true
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
