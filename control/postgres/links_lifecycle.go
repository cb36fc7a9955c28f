package postgres

import (
	"context"
	"fmt"

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
		rules         = CASE WHEN $15::bool THEN $16::bytea ELSE l.rules END,
		password_hash = CASE WHEN $17::bool THEN nullif($18::text, '') ELSE l.password_hash END,
		max_clicks    = CASE WHEN $19::bool THEN nullif($20::int8, 0) ELSE l.max_clicks END,
		version = v.version, updated_at = now()
	FROM v WHERE l.id = v.id
	RETURNING l.id, l.code, l.tenant_id, l.namespace, l.url, l.url_original, l.redirect_type, l.status,
	          l.expires_at, l.version, l.created_at, l.updated_at, l.title, l.domain_id,
	          l.rules, l.password_hash, l.max_clicks, l.clicks_counted
),
o AS (
	INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at, domain_id,
	                    rules, password_hash, max_clicks)
	SELECT u.version, v.xid, 'link', u.code, u.url, u.redirect_type, u.status, u.expires_at, u.domain_id,
	       u.rules, u.password_hash, u.max_clicks FROM u, v
)
SELECT u.id, u.code, u.tenant_id, u.namespace, u.url, u.url_original, u.redirect_type, u.status,
       u.expires_at, u.version, u.created_at, u.updated_at, u.title,
       ARRAY(SELECT t.tag FROM link_tags t WHERE t.link_id = u.id ORDER BY t.tag),
       (SELECT d.host FROM domains d WHERE d.id = $14),
       u.rules, u.password_hash IS NOT NULL, u.max_clicks, u.clicks_counted
FROM cur LEFT JOIN u ON true`

// updateLinkOn runs updateLink on q: the pool, or UpdateLink's
// transaction. The caller wakes the relay once the change has committed.
func (s *Store) updateLinkOn(ctx context.Context, q rowQuerier, tenantID int64, d link.DomainID, code string, c links.Change) (*links.Link, error) {
	// Rules go as their wire form (links_extras.go); Service.Update
	// checked them.
	rules, err := link.AppendRules(nil, c.Rules)
	if err != nil {
		return nil, fmt.Errorf("update link: %w", err)
	}
	if len(rules) == 0 {
		rules = nil // NULL: no rules
	}
	row := q.QueryRow(ctx, updateLink, code, tenantID,
		c.SetURL, c.URL, c.URLOriginal,
		c.SetRedirect, int16(c.RedirectType),
		c.SetExpiry, nullTime(c.ExpiresAt),
		c.SetStatus, string(c.Status),
		c.SetTitle, c.Title, int64(d),
		c.SetRules, rules, c.SetPassword, c.PasswordHash, c.SetMaxClicks, c.MaxClicks)
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
		xrules  []byte
		locked  pgtype.Bool // has a password
		max     pgtype.Int8
		counted pgtype.Int8
	)
	err = row.Scan(&id, &strs[0], &tenant, &strs[1], &strs[2], &strs[3], &rt, &strs[4], &expires, &version, &created, &updated, &title, &l.Tags, &host,
		&xrules, &locked, &max, &counted)
	if err != nil {
		return nil, translate(err)
	}
	if !id.Valid {
		return nil, link.ErrDeleted
	}
	if err := readExtras(&l.Extras, xrules, max); err != nil {
		return nil, fmt.Errorf("link %d: %w", id.Int64, err)
	}
	readCounted(&l.Extras, counted)
	l.PasswordProtected = locked.Bool
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
