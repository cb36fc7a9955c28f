package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// insertLink writes the link row and its outbox row in one statement, and so
// one implicit transaction and one round trip. The CTE order matters: the
// transaction takes an xid before it takes a change version, so the relay can
// always find the transaction that holds a version it has not seen yet.
const insertLink = `
WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid),
v AS MATERIALIZED (SELECT x.xid, nextval('change_version_seq') AS version FROM x),
l AS (
	INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url,
	                   redirect_type, status, expires_at, version, domain_id, rules, password_hash, max_clicks)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, v.version, $10, $11, $12, $13 FROM v
	RETURNING code, url, redirect_type, status, expires_at, version, created_at, updated_at, domain_id,
	          rules, password_hash, max_clicks
),
o AS (
	INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at, domain_id,
	                    rules, password_hash, max_clicks)
	SELECT l.version, v.xid, 'link', l.code, l.url, l.redirect_type, l.status, l.expires_at, l.domain_id,
	       l.rules, l.password_hash, l.max_clicks FROM l, v
)
SELECT version, created_at, updated_at FROM l`

// CreateLink stores a new active link on the platform's domain and its
// change event (CreateLinkOn link.DefaultDomain).
func (s *Store) CreateLink(ctx context.Context, l *link.Link, custom bool) error {
	return s.CreateLinkOn(ctx, link.DefaultDomain, l, custom)
}

// CreateLinkOn stores a new active link on domain d and its change event.
// l.ID (in d's range, link.IDRange), Code, TenantID, Namespace, URL,
// URLOriginal, RedirectType and ExpiresAt are inputs; Version, Status and
// the timestamps are filled in, and so are Extras (checked). A code that
// exists already on d answers link.ErrCodeTaken, and nothing is written.
func (s *Store) CreateLinkOn(ctx context.Context, d link.DomainID, l *link.Link, custom bool) error {
	source := "generated"
	if custom {
		source = "custom"
	}
	x, err := argsOf(&l.Extras)
	if err != nil {
		return fmt.Errorf("create link: %w", err)
	}
	err = s.pool.QueryRow(ctx, insertLink,
		int64(l.ID), l.Code, l.TenantID, source, l.Namespace, l.URLOriginal, l.URL,
		int16(l.RedirectType), nullTime(l.ExpiresAt), int64(d), x.rules, x.hash, x.max,
	).Scan(&l.Version, &l.CreatedAt, &l.UpdatedAt)
	if err != nil {
		return translate(err)
	}
	s.waker.wake()
	l.Status = link.Active
	return nil
}

// linkColumns are what scanLink reads, from links aliased l: a link, its
// title, its tags, sorted (the primary key's order within one link), its
// domain with the domain's host, and its extras: rules, whether it has a
// password (never the hash: reads answer the API), its click limit and
// the clicks counted against it (schema 021).
const linkColumns = `l.id, l.code, l.tenant_id, l.namespace, l.url, l.url_original, l.redirect_type, l.status,
	l.expires_at, l.version, l.created_at, l.updated_at, l.title,
	ARRAY(SELECT t.tag FROM link_tags t WHERE t.link_id = l.id ORDER BY t.tag),
	l.domain_id, (SELECT d.host FROM domains d WHERE d.id = l.domain_id),
	l.rules, l.password_hash IS NOT NULL, l.max_clicks, l.clicks_counted`

// GetLink implements links.Store.
func (s *Store) GetLink(ctx context.Context, tenantID int64, d link.DomainID, code string) (*links.Link, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+linkColumns+` FROM links l WHERE l.domain_id = $3 AND l.code = $1 AND l.tenant_id = $2`,
		code, tenantID, int64(d))
	return scanLink(row)
}

func scanLink(row pgx.Row) (*links.Link, error) {
	var (
		l       links.Link
		id      int64
		rt      int16
		status  string
		expires pgtype.Timestamptz
		version int64
		title   pgtype.Text
		domain  int64
		rules   []byte
		max     pgtype.Int8
		counted pgtype.Int8
	)
	err := row.Scan(&id, &l.Code, &l.TenantID, &l.Namespace, &l.URL, &l.URLOriginal, &rt, &status,
		&expires, &version, &l.CreatedAt, &l.UpdatedAt, &title, &l.Tags, &domain, &l.Domain,
		&rules, &l.PasswordProtected, &max, &counted)
	if err != nil {
		return nil, translate(err)
	}
	if err := readExtras(&l.Extras, rules, max); err != nil {
		return nil, fmt.Errorf("link %d: %w", id, err)
	}
	readCounted(&l.Extras, counted)
	l.ID, l.RedirectType, l.Status, l.Version = uint64(id), link.RedirectType(rt), link.Status(status), uint64(version)
	l.DomainID = link.DomainID(domain)
	if expires.Valid {
		l.ExpiresAt = expires.Time
	}
	l.Title = title.String
	if len(l.Tags) == 0 {
		l.Tags = nil
	}
	return &l, nil
}

func nullTime(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}
