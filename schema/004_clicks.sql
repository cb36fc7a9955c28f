-- Click analytics: rollups of the CLICKS stream, the consumer's stream
-- position, derived counters and redirect service-time histograms.
--
-- Exactly-once: the click roller writes the rollups and its position in the
-- stream in one transaction, so a batch redelivered after a crash is seen to
-- be at or below the position and skipped. Days are UTC.

-- The last stream sequence applied, per stream. Updated only in the same
-- transaction as the rollups it accounts for.
CREATE TABLE click_positions (
    stream     text PRIMARY KEY,
    last_seq   bigint NOT NULL CHECK (last_seq >= 0),
    -- Stream messages that were gone (discarded by the stream's limits)
    -- before the roller read them: clicks lost to backpressure, counted.
    lost_msgs  bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Clicks per link per day. Codes are never reused, so the code is the key;
-- bots are counted apart from people (bot_clicks is included in clicks).
CREATE TABLE link_clicks_daily (
    code       text COLLATE "C" NOT NULL,
    day        date NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (code, day)
);

-- Breakdowns per link per day: referrer host ('' for none), device class,
-- status answered, edge.
CREATE TABLE link_click_breakdown_daily (
    code       text COLLATE "C" NOT NULL,
    day        date NOT NULL,
    dimension  text NOT NULL CHECK (dimension IN ('referrer', 'device', 'status', 'edge')),
    value      text NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (code, day, dimension, value)
);

-- Clicks per tenant per day, so a tenant's totals never scan its links.
CREATE TABLE tenant_clicks_daily (
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    day        date NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (tenant_id, day)
);

-- Clicks per day over everything; unknown_clicks are clicks on codes the
-- authority does not have (they should not exist; counted, not dropped).
CREATE TABLE clicks_daily (
    day            date PRIMARY KEY,
    clicks         bigint NOT NULL,
    bot_clicks     bigint NOT NULL,
    unknown_clicks bigint NOT NULL
);

-- What each edge process reported: clicks it offered to its buffer, clicks
-- it dropped (buffer full, publish failed), and clicks applied here.
-- offered - dropped - applied is what it lost without knowing: the
-- buffer of an edge that was killed.
CREATE TABLE click_sources (
    edge       text NOT NULL,
    boot       text NOT NULL,
    offered    bigint NOT NULL DEFAULT 0,
    dropped    bigint NOT NULL DEFAULT 0,
    applied    bigint NOT NULL DEFAULT 0,
    first_seen timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (edge, boot)
);

-- Redirect service time per day, merged from every edge's histogram
-- (bucket layout: shared/clicks.Bucket). Percentiles are read from it.
CREATE TABLE redirect_latency_daily (
    day    date NOT NULL,
    bucket smallint NOT NULL CHECK (bucket >= 0),
    count  bigint NOT NULL,
    PRIMARY KEY (day, bucket)
);

-- Counters that are history: redirects_total only ever grows with the
-- clicks applied and is never reconciled (rollups may be pruned one day;
-- the count of redirects served stays).
CREATE TABLE counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO counters (name, value) VALUES ('redirects_total', 0);

-- Live (active) links per tenant, maintained by triggers in the same
-- transaction as every insert, status change and delete of links. The count
-- is striped over 16 rows per tenant, picked by the writing backend, so
-- concurrent creates of one tenant do not queue on one counter row; a read
-- sums the stripes. Control reconciles it against the rows at start.
-- Expiry is evaluated at read time, so an expired active link still counts.
CREATE TABLE live_link_counts (
    tenant_id bigint NOT NULL,
    stripe    smallint NOT NULL CHECK (stripe BETWEEN 0 AND 15),
    n         bigint NOT NULL,
    PRIMARY KEY (tenant_id, stripe)
);

CREATE FUNCTION live_link_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO live_link_counts AS c (tenant_id, stripe, n)
        SELECT tenant_id, pg_backend_pid() % 16, count(*) FROM new_rows
        WHERE status = 'active' GROUP BY tenant_id
        ON CONFLICT (tenant_id, stripe) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO live_link_counts AS c (tenant_id, stripe, n)
        SELECT d.tenant_id, pg_backend_pid() % 16, sum(d.delta) FROM (
            SELECT n.tenant_id, (n.status = 'active')::int - (o.status = 'active')::int AS delta
            FROM new_rows n JOIN old_rows o ON o.id = n.id -- a link never changes tenant
        ) d GROUP BY d.tenant_id HAVING sum(d.delta) <> 0
        ON CONFLICT (tenant_id, stripe) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO live_link_counts AS c (tenant_id, stripe, n)
        SELECT tenant_id, pg_backend_pid() % 16, -count(*) FROM old_rows
        WHERE status = 'active' GROUP BY tenant_id
        ON CONFLICT (tenant_id, stripe) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END $$;

-- Statement triggers with transition tables: one counter update per
-- statement and tenant, however many rows a batch create writes.
CREATE TRIGGER live_link_counts_insert AFTER INSERT ON links
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_link_counts_apply();
CREATE TRIGGER live_link_counts_update AFTER UPDATE ON links
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_link_counts_apply();
CREATE TRIGGER live_link_counts_delete AFTER DELETE ON links
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_link_counts_apply();

-- Links that exist before this migration.
INSERT INTO live_link_counts (tenant_id, stripe, n)
SELECT tenant_id, 0, count(*) FROM links WHERE status = 'active' GROUP BY tenant_id;

---- create above / drop below ----

DROP TRIGGER live_link_counts_delete ON links;
DROP TRIGGER live_link_counts_update ON links;
DROP TRIGGER live_link_counts_insert ON links;
DROP FUNCTION live_link_counts_apply;
DROP TABLE live_link_counts;
DROP TABLE counters;
DROP TABLE redirect_latency_daily;
DROP TABLE click_sources;
DROP TABLE clicks_daily;
DROP TABLE tenant_clicks_daily;
DROP TABLE link_clicks_daily;
DROP TABLE link_click_breakdown_daily;
DROP TABLE click_positions;
