---- tern: disable-tx ----
-- Click limits enforced (issue 23; docs/click-limits.md): a link with
-- max_clicks stops redirecting once the rollups have counted that many of
-- its clicks. The count is the rollups' own (link_clicks_daily, exactly
-- once), bots included, as Shlink counts max visits. The transaction of the
-- click roller that brings a limited link to its limit also gives the link
-- a change (a new version and its outbox row): every edge learns it on
-- LINK_CHANGES and answers 410. Raising or removing the limit is a change
-- like any other, which re-enables the link everywhere.
--
-- This migration runs outside a transaction so that the index on links,
-- which may hold 10^8 rows, is built CONCURRENTLY without blocking creates.
-- Every statement is safe to run again: an interrupted migration is
-- finished by the next start.

-- clicks_counted: for a link with a limit, the clicks the rollups have
-- counted of it, all days together: set when the limit is set or changed,
-- kept by the click roller's transactions after that. NULL without a
-- limit. The API answers it; edges get it with the link's extras (the
-- relay, the snapshot and the authority read it here) and take their
-- allowance from it.
ALTER TABLE links ADD COLUMN IF NOT EXISTS clicks_counted bigint;

-- The limited links, for the roller's transaction to find among the links
-- it counted clicks of: one probe of this index per clicked link, which
-- holds only the links with a limit (none on most platforms).
DROP INDEX CONCURRENTLY IF EXISTS links_limited;
CREATE INDEX CONCURRENTLY links_limited ON links (domain_id, code) WHERE max_clicks IS NOT NULL;

-- The clicks counted of one link: its day rows, one range of the primary
-- key. Codes are never reused on a domain, and clicks on a code that is no
-- link are counted as unknown, never in link_clicks_daily: so a new link
-- counts 0.
CREATE OR REPLACE FUNCTION link_clicks_counted(d integer, c text) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce(sum(x.clicks), 0)::bigint FROM link_clicks_daily x WHERE x.domain_id = d AND x.code = c $$;

-- A limit set, changed or removed, by any write path: the count is taken
-- then (a roller transaction still running counts its clicks of the link
-- with its next transaction that counts some: see the doc).
CREATE OR REPLACE FUNCTION click_limit_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.max_clicks IS NULL THEN
        NEW.clicks_counted := NULL;
    ELSE
        NEW.clicks_counted := link_clicks_counted(NEW.domain_id, NEW.code);
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS click_limit_created ON links;
CREATE TRIGGER click_limit_created BEFORE INSERT ON links
    FOR EACH ROW WHEN (NEW.max_clicks IS NOT NULL) EXECUTE FUNCTION click_limit_set();
DROP TRIGGER IF EXISTS click_limit_changed ON links;
CREATE TRIGGER click_limit_changed BEFORE UPDATE OF max_clicks ON links
    FOR EACH ROW WHEN (NEW.max_clicks IS DISTINCT FROM OLD.max_clicks) EXECUTE FUNCTION click_limit_set();

-- The roller's statement that adds clicks to links' day rows (inserted, or
-- updated by ON CONFLICT) counts the limited ones among them again, in the
-- same transaction: it locks each (in key order; a change of the link by
-- its creator waits for the roller's commit, or the roller for it), sums
-- its day rows (this statement's included) into clicks_counted, and gives
-- each active link whose count reaches its limit now a change: the row
-- lock is held, the transaction has an xid (it wrote the day rows), then
-- it takes the version, so the relay sees the change as it sees every
-- other (001, and updateLink in control/postgres). The relay reads the
-- count with the row (control/postgres ReadOutbox). A trigger rather than
-- a call in the roller's code, as 018's webhook_gather_clicks: whatever
-- the roller's statements become, a click that reaches a day row counts
-- against its link's limit. A platform without limited links pays one
-- probe of the empty links_limited per statement that wrote day rows.
CREATE OR REPLACE FUNCTION click_limit_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids     bigint[];
    counts  bigint[];
    reached boolean[];
BEGIN
    IF NOT EXISTS (SELECT FROM new_days) OR NOT EXISTS (SELECT FROM links WHERE max_clicks IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(l.id ORDER BY d.domain_id, d.code), array_agg(n.n ORDER BY d.domain_id, d.code),
           array_agg(l.status = 'active' AND coalesce(l.clicks_counted, 0) < l.max_clicks AND n.n >= l.max_clicks
                     ORDER BY d.domain_id, d.code)
      INTO ids, counts, reached
      FROM (SELECT DISTINCT domain_id, code FROM new_days ORDER BY 1, 2) d
      CROSS JOIN LATERAL (SELECT l.id, l.status, l.max_clicks, l.clicks_counted FROM links l
                          WHERE l.domain_id = d.domain_id AND l.code = d.code AND l.max_clicks IS NOT NULL
                          FOR UPDATE) l
      CROSS JOIN LATERAL (SELECT link_clicks_counted(d.domain_id, d.code) AS n) n;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE links l SET clicks_counted = c.n
      FROM unnest(ids, counts, reached) AS c (id, n, r)
     WHERE l.id = c.id AND NOT c.r AND l.clicks_counted IS DISTINCT FROM c.n;
    IF NOT (true = ANY (reached)) THEN
        RETURN NULL;
    END IF;
    WITH v AS MATERIALIZED (
        SELECT c.id, c.n, nextval('change_version_seq') AS version
          FROM unnest(ids, counts, reached) AS c (id, n, r) WHERE c.r ORDER BY c.id
    ), u AS (
        UPDATE links l SET clicks_counted = v.n, version = v.version, updated_at = now()
          FROM v WHERE l.id = v.id
        RETURNING l.code, l.url, l.redirect_type, l.status, l.expires_at, l.version, l.domain_id,
                  l.rules, l.password_hash, l.max_clicks
    )
    INSERT INTO outbox (version, xid, kind, code, url, redirect_type, status, expires_at, domain_id,
                        rules, password_hash, max_clicks)
    SELECT u.version, pg_current_xact_id(), 'link', u.code, u.url, u.redirect_type, u.status, u.expires_at,
           u.domain_id, u.rules, u.password_hash, u.max_clicks FROM u;
    -- Link writes wake the relay from control after their commit (013);
    -- the roller has no wake of its own, and a link reaching its limit is
    -- rare enough for the notification's commit lock not to matter.
    PERFORM pg_notify('outbox', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS click_limit_days_inserted ON link_clicks_daily;
CREATE TRIGGER click_limit_days_inserted AFTER INSERT ON link_clicks_daily
    REFERENCING NEW TABLE AS new_days
    FOR EACH STATEMENT EXECUTE FUNCTION click_limit_count();
DROP TRIGGER IF EXISTS click_limit_days_updated ON link_clicks_daily;
CREATE TRIGGER click_limit_days_updated AFTER UPDATE ON link_clicks_daily
    REFERENCING NEW TABLE AS new_days
    FOR EACH STATEMENT EXECUTE FUNCTION click_limit_count();

-- A link as a webhook event carries it (018's webhook_link_data) gains its
-- limit and count, so the link.updated of a link reaching its limit says
-- limit_reached (control/webhooks judges the state as the API does).
CREATE OR REPLACE FUNCTION webhook_link_data(l links) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', l.id, 'code', l.code, 'domain_id', l.domain_id,
        'domain', (SELECT d.host FROM domains d WHERE d.id = l.domain_id),
        'url', l.url, 'url_original', l.url_original, 'redirect_type', l.redirect_type,
        'status', l.status, 'namespace', l.namespace, 'expires_at', l.expires_at,
        'version', l.version, 'created_at', l.created_at, 'updated_at', l.updated_at,
        'title', l.title,
        'tags', coalesce((SELECT jsonb_agg(t.tag ORDER BY t.tag) FROM link_tags t WHERE t.link_id = l.id), '[]'::jsonb),
        'max_clicks', l.max_clicks, 'clicks_counted', l.clicks_counted)
$$;

-- The limits set before this migration (schema 019's column, unenforced
-- until now) take their count.
UPDATE links SET clicks_counted = link_clicks_counted(domain_id, code)
 WHERE max_clicks IS NOT NULL AND clicks_counted IS NULL;

---- create above / drop below ----

CREATE OR REPLACE FUNCTION webhook_link_data(l links) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', l.id, 'code', l.code, 'domain_id', l.domain_id,
        'domain', (SELECT d.host FROM domains d WHERE d.id = l.domain_id),
        'url', l.url, 'url_original', l.url_original, 'redirect_type', l.redirect_type,
        'status', l.status, 'namespace', l.namespace, 'expires_at', l.expires_at,
        'version', l.version, 'created_at', l.created_at, 'updated_at', l.updated_at,
        'title', l.title,
        'tags', coalesce((SELECT jsonb_agg(t.tag ORDER BY t.tag) FROM link_tags t WHERE t.link_id = l.id), '[]'::jsonb))
$$;

DROP TRIGGER IF EXISTS click_limit_days_updated ON link_clicks_daily;
DROP TRIGGER IF EXISTS click_limit_days_inserted ON link_clicks_daily;
DROP FUNCTION IF EXISTS click_limit_count;
DROP TRIGGER IF EXISTS click_limit_changed ON links;
DROP TRIGGER IF EXISTS click_limit_created ON links;
DROP FUNCTION IF EXISTS click_limit_set;
DROP FUNCTION IF EXISTS link_clicks_counted;
DROP INDEX CONCURRENTLY IF EXISTS links_limited;
ALTER TABLE links DROP COLUMN IF EXISTS clicks_counted;
