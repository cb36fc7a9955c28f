package postgres

import (
	"context"
	"fmt"
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
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// WriteTx implements links.Store: fn runs in a transaction on the primary,
// committed if fn returns nil.
func (s *Store) WriteTx(ctx context.Context, fn func(links.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(&Tx{tx: tx, keyTTL: s.keyTTL}) })
	return translate(err)
}

// Autocommit implements links.Store: every call of the Tx it returns runs
// on the pool, a transaction of its own.
func (s *Store) Autocommit() links.Tx { return &Tx{tx: s.pool, keyTTL: s.keyTTL} }

// insertLinks writes many links and their outbox rows in one statement. The
// xid is taken before any version (see insertLink). A row whose code (or
// id) exists already is skipped, not an error: its version becomes a hole the
// relay passes once this transaction ends. Rows go in code order so
// concurrent batches wait on each other's codes in one direction only.
const insertLinks = `
WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
i AS MATERIALIZED (
	SELECT t.*, nextval('change_version_seq') AS version
	FROM x, unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
	               $8::int2[], $9::timestamptz[])
	     AS t(id, code, tenant_id, code_source, namespace, url_original, url, redirect_type, expires_at)
),
l AS (
	INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url,
	                   redirect_type, status, expires_at, version)
	SELECT id, code, tenant_id, code_source, namespace, url_original, url, redirect_type, 'active',
	       expires_at, version
	FROM i ORDER BY code
	ON CONFLICT DO NOTHING
	RETURNING version, created_at, updated_at
),
o AS (
	INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at)
	SELECT i.version, x.xid, 'link', i.code, i.url, i.redirect_type, 'active', i.expires_at
	FROM l JOIN i ON i.version = l.version, x
)
SELECT i.code, l.version, l.created_at, l.updated_at FROM l JOIN i ON i.version = l.version`

// InsertLinks implements links.Tx; duplicate codes in one call are
// refused as link.ErrInvalidInput.
func (t *Tx) InsertLinks(ctx context.Context, ls []links.NewLink) ([]bool, error) {
	n := len(ls)
	inserted := make([]bool, n)
	if n == 0 {
		return inserted, nil
	}
	var (
		ids      = make([]int64, n)
		codes    = make([]string, n)
		tenants  = make([]int64, n)
		sources  = make([]string, n)
		nss      = make([]string, n)
		origs    = make([]string, n)
		urls     = make([]string, n)
		rts      = make([]int16, n)
		expires  = make([]pgtype.Timestamptz, n)
		byCode   = make(map[string]int, n)
		dupCodes bool
	)
	for i, nl := range ls {
		l := nl.Link
		ids[i], codes[i], tenants[i] = int64(l.ID), l.Code, l.TenantID
		sources[i] = "generated"
		if nl.Custom {
			sources[i] = "custom"
		}
		nss[i], origs[i], urls[i], rts[i], expires[i] = l.Namespace, l.URLOriginal, l.URL, int16(l.RedirectType), nullTime(l.ExpiresAt)
		if _, dup := byCode[l.Code]; dup {
			dupCodes = true
		}
		byCode[l.Code] = i
	}
	if dupCodes {
		return nil, fmt.Errorf("insert links: %w: duplicate codes in one call", link.ErrInvalidInput)
	}
	rows, err := t.tx.Query(ctx, insertLinks, ids, codes, tenants, sources, nss, origs, urls, rts, expires)
	if err != nil {
		return nil, translate(err)
	}
	var (
		code             string
		version          int64
		created, updated time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&code, &version, &created, &updated}, func() error {
		i := byCode[code]
		l := ls[i].Link
		l.Version, l.CreatedAt, l.UpdatedAt, l.Status = uint64(version), created, updated, link.Active
		inserted[i] = true
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return inserted, nil
}
