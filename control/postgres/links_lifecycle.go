package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// updateLink changes one link and writes its outbox row in one statement.
// The order is the contract the relay depends on: cur locks the row first,
// x then makes sure the transaction has an xid, and only then does v take
// the change version; so whoever holds a version is a transaction the relay
// can see running, and versions of one code increase in commit order.
// A deleted link is left alone (u is empty), which the caller reports.
const updateLink = `
WITH cur AS MATERIALIZED (
	SELECT id, status FROM links WHERE domain_id = $14 AND code = $1 AND tenant_id = $2 FOR UPDATE
),
x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid FROM cur WHERE cur.status <> 'deleted'),
v AS MATERIALIZED (SELECT cur.id, x.xid, nextval('change_version_seq') AS version FROM cur, x),
u AS (
	UPDATE links l SET
		url           = CASE WHEN $3::bool THEN $4::text ELSE l.url END,
		url_original  = CASE WHEN $3::bool THEN $5::text ELSE l.url_original END,
		redirect_type = CASE WHEN $6::bool THEN $7::int2 ELSE l.redirect_type END,
		expires_at    = CASE WHEN $8::bool THEN $9::timestamptz ELSE l.expires_at END,
		status        = CASE WHEN $10::bool THEN $11::text ELSE l.status END,
		title         = CASE WHEN $12::bool THEN nullif($13::text, '') ELSE l.title END,
		version = v.version, updated_at = now()
	FROM v WHERE l.id = v.id
	RETURNING l.id, l.code, l.tenant_id, l.namespace, l.url, l.url_original, l.redirect_type, l.status,
	          l.expires_at, l.version, l.created_at, l.updated_at, l.title, l.domain_id
),
o AS (
	INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at, domain_id)
	SELECT u.version, v.xid, 'link', u.code, u.url, u.redirect_type, u.status, u.expires_at, u.domain_id FROM u, v
)
SELECT u.id, u.code, u.tenant_id, u.namespace, u.url, u.url_original, u.redirect_type, u.status,
       u.expires_at, u.version, u.created_at, u.updated_at, u.title,
       ARRAY(SELECT t.tag FROM link_tags t WHERE t.link_id = u.id ORDER BY t.tag),
       (SELECT d.host FROM domains d WHERE d.id = $14)
FROM cur LEFT JOIN u ON true`

// UpdateLink implements links.Store in one statement (updateLink).
func (s *Store) UpdateLink(ctx context.Context, tenantID int64, d link.DomainID, code string, c links.Change) (*links.Link, error) {
	row := s.pool.QueryRow(ctx, updateLink, code, tenantID,
		c.SetURL, c.URL, c.URLOriginal,
		c.SetRedirect, int16(c.RedirectType),
		c.SetExpiry, nullTime(c.ExpiresAt),
		c.SetStatus, string(c.Status),
		c.SetTitle, c.Title, int64(d))
	var (
		id      pgtype.Int8
		tenant  pgtype.Int8
		l       links.Link
		title   pgtype.Text
		strs    [5]pgtype.Text // code, namespace, url, url_original, status
		rt      pgtype.Int2
		expires pgtype.Timestamptz
		version pgtype.Int8
		created pgtype.Timestamptz
		updated pgtype.Timestamptz
		host    pgtype.Text
	)
	err := row.Scan(&id, &strs[0], &tenant, &strs[1], &strs[2], &strs[3], &rt, &strs[4], &expires, &version, &created, &updated, &title, &l.Tags, &host)
	if err != nil {
		return nil, translate(err)
	}
	if !id.Valid {
		return nil, link.ErrDeleted
	}
	s.waker.wake()
	l.ID, l.Code, l.TenantID, l.Namespace = uint64(id.Int64), strs[0].String, tenant.Int64, strs[1].String
	l.URL, l.URLOriginal, l.RedirectType, l.Status = strs[2].String, strs[3].String, link.RedirectType(rt.Int16), link.Status(strs[4].String)
	l.Version, l.CreatedAt, l.UpdatedAt = uint64(version.Int64), created.Time, updated.Time
	l.DomainID, l.Domain = d, host.String
	if expires.Valid {
		l.ExpiresAt = expires.Time
	}
	l.Title = title.String
	if len(l.Tags) == 0 {
		l.Tags = nil
	}
	return &l, nil
}
