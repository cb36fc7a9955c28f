---- tern: disable-tx ----
-- Tags and titles of links (issue 20): what a creator files links under and
-- finds them by. Edges never see either, so neither is in the outbox.
--
-- This migration runs outside a transaction so that the indexes on links,
-- which may hold 10^8 rows, are built CONCURRENTLY without blocking creates.
-- Every statement is safe to run again: an interrupted migration is
-- finished by the next start, an invalid index dropped and built again.

-- A link's optional title, at most 256 characters (control/links checks
-- the characters). NOT VALID: the rows that exist hold no title, and
-- checking them would read the whole table under a lock; new and changed
-- rows are checked all the same.
ALTER TABLE links ADD COLUMN IF NOT EXISTS title text;
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'links_title_length') THEN
        ALTER TABLE links ADD CONSTRAINT links_title_length
            CHECK (title IS NULL OR char_length(title) BETWEEN 1 AND 256) NOT VALID;
    END IF;
END $$;

-- Tags live in a table of their own rather than in a text[] column of
-- links with a GIN index (docs/api.md, "Tags"): the listing a filter
-- serves is one tenant's links newest first, a page at a time, and
--   * (tenant_id, tag, link_id) gives each tag's links of one tenant in ID
--     order, so a page is an index range read backwards from the cursor,
--     however many links carry the tag; a GIN index has no order and no
--     tenant, so every page of a popular tag would gather and sort all of
--     its links across every tenant;
--   * adding or removing a tag writes a row of its own, not a new version
--     of a wide links row (and of every index on it).
-- Tags are normalized by control/links (lower case, no spaces, 1 to 64
-- characters); COLLATE "C" compares them byte for byte, as codes are.
CREATE TABLE IF NOT EXISTS link_tags (
    tenant_id bigint NOT NULL REFERENCES tenants (id),
    tag       text COLLATE "C" NOT NULL CHECK (char_length(tag) BETWEEN 1 AND 64),
    link_id   bigint NOT NULL REFERENCES links (id),
    PRIMARY KEY (tenant_id, tag, link_id)
);
-- A link's own tags, read with it and counted against the limit of 20.
CREATE INDEX IF NOT EXISTS link_tags_link ON link_tags (link_id);

-- Search (GET /api/v1/links?q=) matches a code's start, a target's host
-- or a parent domain of it, or a part of the title. The code has its
-- unique index already; the other two get one each.
--
-- The target's host, reversed, so that a domain and its subdomains are
-- one prefix range: moc.elpmaxe and moc.elpmaxe.www. The url is the
-- normalized one: scheme and host in lower case, IDNs in punycode.
CREATE OR REPLACE FUNCTION link_host_reversed(url text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT reverse(substring(url FROM '^[a-z][a-z0-9+.-]*://([^/?#:]*)')) $$;
DROP INDEX CONCURRENTLY IF EXISTS links_host_reversed;
CREATE INDEX CONCURRENTLY links_host_reversed ON links (tenant_id, (link_host_reversed(url) COLLATE "C"), id);

-- Titles by trigram, for a case-insensitive substring; only the links that
-- have one are in it. pg_trgm is a trusted extension: the database's owner
-- may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
DROP INDEX CONCURRENTLY IF EXISTS links_title_trgm;
CREATE INDEX CONCURRENTLY links_title_trgm ON links USING gin (title gin_trgm_ops) WHERE title IS NOT NULL;

---- create above / drop below ----

DROP INDEX CONCURRENTLY IF EXISTS links_title_trgm;
DROP INDEX CONCURRENTLY IF EXISTS links_host_reversed;
DROP FUNCTION IF EXISTS link_host_reversed(text);
DROP TABLE IF EXISTS link_tags;
ALTER TABLE links DROP CONSTRAINT IF EXISTS links_title_length;
ALTER TABLE links DROP COLUMN IF EXISTS title;
