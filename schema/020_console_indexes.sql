---- tern: disable-tx ----
-- Indexes of the console's list (issue 21): with 10^5 links in a tenant
-- (and 10^8 in the table), every order a creator sorts the list by, and
-- every filter that can match few of them, is an index range that starts
-- with the tenant, read from the page's cursor on, so a page reads about a
-- page of index entries instead of the tenant's links
-- (control/postgres listQuery; TestListUsesIndexes runs EXPLAIN on each).
--
-- This migration runs outside a transaction so that each index on links
-- is built CONCURRENTLY, without blocking creates. Every statement is safe
-- to run again: an interrupted migration is finished by the next start, an
-- invalid index dropped and built again.
--
-- What they cost: a create writes an entry into links_tenant_created,
-- links_tenant_code and links_tenant_host (three more than before), and
-- into the partial indexes only when its row matches them (an expiry, a
-- status other than active).

-- The target's host as lists sort by it: what follows the scheme of the
-- normalized url up to its port, path, query or fragment
-- (control/links ListHost is its Go twin; a test keeps them equal).
CREATE OR REPLACE FUNCTION link_host(url text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT substring(url FROM '^[a-z][a-z0-9+.-]*://([^/?#:]*)') $$;

-- Newest and oldest first, and "created between", over the links every
-- list but the deleted one shows. Partial: a deleted link's entry would
-- only be skipped.
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_created;
CREATE INDEX CONCURRENTLY links_tenant_created ON links (tenant_id, created_at, id)
    WHERE status <> 'deleted';

-- The statuses a few links have (disabled, deleted), each its own range
-- in creation order: without it a filter on a rare status reads the
-- tenant's whole list to fill a page, or finds nothing after reading it.
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_status_created;
CREATE INDEX CONCURRENTLY links_tenant_status_created ON links (tenant_id, status, created_at, id)
    WHERE status <> 'active';

-- Expired links (active, expires_at past): the links with an expiry, by
-- it, so the expired ones are a range below now.
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_expires;
CREATE INDEX CONCURRENTLY links_tenant_expires ON links (tenant_id, expires_at)
    WHERE expires_at IS NOT NULL;

-- By code, and a search by code prefix (codes are COLLATE "C", so LIKE
-- 'abc%' is the range ['abc', 'abd')). links_domain_code starts with the
-- domain, which the platform's tenants share.
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_code;
CREATE INDEX CONCURRENTLY links_tenant_code ON links (tenant_id, code, id);

-- By target host (links_host_reversed groups a domain with its
-- subdomains for search, but reversed strings do not sort as people read
-- hosts).
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_host;
CREATE INDEX CONCURRENTLY links_tenant_host ON links (tenant_id, (link_host(url) COLLATE "C"), id);

-- Title search (links_title_trgm, schema 012) with fast update off. With
-- it on, new titles wait in the index's pending list until a vacuum, and
-- every search reads that whole list (up to gin_pending_list_limit, 4 MB)
-- before the index: on a table that takes creates all day, 10 to 500 ms a
-- search in bench/console. Off, a create writes its title's trigrams into
-- the index at once (a few entries more per create, only for links with a
-- title), and a search reads only its trigrams' postings. The list is
-- emptied into the index once here.
ALTER INDEX IF EXISTS links_title_trgm SET (fastupdate = off);
SELECT gin_clean_pending_list('links_title_trgm'::regclass);

---- create above / drop below ----

ALTER INDEX IF EXISTS links_title_trgm RESET (fastupdate);
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_host;
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_code;
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_expires;
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_status_created;
DROP INDEX CONCURRENTLY IF EXISTS links_tenant_created;
DROP FUNCTION IF EXISTS link_host(text);
