---- tern: disable-tx ----
-- Two things the authority kept without bound or did not keep at all:
-- idempotency keys (kept forever; now purged after their time to live) and
-- the rate of committed creates (not recorded; capacity was estimated from
-- segment leases, which reserve IDs 100,000 at a time and say little about
-- how fast links are made).
--
-- This migration runs outside a transaction so that the index on a large
-- idempotency_keys table is built CONCURRENTLY, without blocking creates.
-- Every statement is safe to run again: a migration interrupted half way
-- is finished by the next start.

-- Idempotency keys expire: control reads a key older than its time to live
-- (control serve --idempotency-ttl, default 24 h) as absent, so a retry
-- after it is a new create, and each instance deletes expired keys in
-- small batches, oldest first, through this index. An invalid index left
-- by an interrupted build is dropped and built again.
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_created_at;
CREATE INDEX CONCURRENTLY idempotency_keys_created_at ON idempotency_keys (created_at);

-- Committed creates per namespace and minute, written by a trigger in the
-- same transaction as the links, so a rolled-back create is never counted
-- and every committed one is. `control alloc status` and the capacity
-- metrics read their create rates and time left from it with a few index
-- lookups, whatever the size of links.
--
-- It is a ring of 8 days: slot is the minute's number modulo 11,520, and a
-- slot's row is taken over by the next minute that lands on it, so the
-- table never holds more than 11,520 x 16 rows per namespace and needs no
-- purge. Readers look at the last 7 days at most, and filter on minute.
-- As in live_link_counts, each minute's count is striped over 16 rows by
-- the writing backend, so concurrent create transactions rarely wait on
-- one another's row.
--
-- Links that existed before this migration are not counted: the figures
-- start from it (reading links' created_at back would be a full scan).
CREATE TABLE IF NOT EXISTS link_creates_per_minute (
    namespace text COLLATE "C" NOT NULL,
    slot      integer NOT NULL CHECK (slot BETWEEN 0 AND 11519),
    stripe    smallint NOT NULL CHECK (stripe BETWEEN 0 AND 15),
    minute    timestamptz NOT NULL,
    creates   bigint NOT NULL CHECK (creates >= 0),
    PRIMARY KEY (namespace, slot, stripe)
);
CREATE INDEX IF NOT EXISTS link_creates_per_minute_minute ON link_creates_per_minute (namespace, minute);

-- One upsert per statement, namespace and minute, however many links a
-- batch inserts. Minutes are cut from the epoch, not in the session's time
-- zone. A statement whose rows would land two minutes on one slot (rows
-- with hand-set created_at 8 days apart) keeps the newest, and a row older
-- than the minute its slot holds is not counted: it is history, not a
-- recent create.
CREATE OR REPLACE FUNCTION link_creates_per_minute_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO link_creates_per_minute AS c (namespace, slot, stripe, minute, creates)
    SELECT DISTINCT ON (namespace, slot) namespace, slot, pg_backend_pid() % 16, to_timestamp(m * 60), n
    FROM (
        SELECT namespace, m, (((m % 11520) + 11520) % 11520)::integer AS slot, count(*) AS n
        FROM (SELECT namespace, floor(extract(epoch FROM created_at) / 60)::bigint AS m FROM new_rows) r
        GROUP BY namespace, m
    ) g
    ORDER BY namespace, slot, m DESC
    ON CONFLICT (namespace, slot, stripe) DO UPDATE
    SET creates = CASE WHEN c.minute = excluded.minute THEN c.creates + excluded.creates
                       WHEN c.minute < excluded.minute THEN excluded.creates
                       ELSE c.creates END,
        minute = greatest(c.minute, excluded.minute);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER link_creates_per_minute AFTER INSERT ON links
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION link_creates_per_minute_count();

---- create above / drop below ----

DROP TRIGGER IF EXISTS link_creates_per_minute ON links;
DROP FUNCTION IF EXISTS link_creates_per_minute_count();
DROP TABLE IF EXISTS link_creates_per_minute;
DROP INDEX IF EXISTS idempotency_keys_created_at;
