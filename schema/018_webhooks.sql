-- Webhooks (issue 22; docs/webhooks.md): a tenant's endpoints, the events
-- waiting to go onto the WEBHOOKS stream, the clicks gathered for the next
-- clicks.aggregated events, and the log of every delivery attempt.
--
-- Link events are written by triggers on links and link_tags, so they are
-- in the same transaction as the change they describe: a change that
-- commits has its event, one that rolls back has none, and no write path
-- can forget to write one. The triggers cost one probe of
-- webhook_endpoints per statement on a platform where nobody subscribes.

CREATE TABLE webhook_endpoints (
    -- "ep_" and 24 hex digits, random: an ID says nothing of how many
    -- endpoints there are.
    id                     text COLLATE "C" PRIMARY KEY CHECK (id ~ '^ep_[0-9a-f]{24}$'),
    tenant_id              bigint NOT NULL REFERENCES tenants (id),
    url                    text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    description            text NOT NULL DEFAULT '' CHECK (char_length(description) <= 256),
    event_types            text[] NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 16),
    -- The signing secret's 32 bytes (shown once, as whsec_ and base64), and
    -- the one it replaced, which also signs until prev_secret_expires_at.
    secret                 bytea NOT NULL CHECK (length(secret) = 32),
    prev_secret            bytea CHECK (length(prev_secret) = 32),
    prev_secret_expires_at timestamptz,
    enabled                boolean NOT NULL DEFAULT true,
    disabled_reason        text CHECK (char_length(disabled_reason) <= 512),
    disabled_at            timestamptz,
    -- Each enabled term of an endpoint has a JetStream consumer of its own,
    -- named by generation, that starts at resume_from: re-enabling starts a
    -- new one, so events of the disabled period are not sent.
    generation             integer NOT NULL DEFAULT 1 CHECK (generation >= 1),
    resume_from            timestamptz NOT NULL DEFAULT now(),
    -- The current run of failed attempts (reset by a success, or by a gap
    -- of a day without attempts): what auto-disabling judges.
    failing_since          timestamptz,
    last_failure_at        timestamptz,
    consecutive_failures   integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    last_success_at        timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CHECK ((prev_secret IS NULL) = (prev_secret_expires_at IS NULL)),
    CHECK (enabled = (disabled_at IS NULL))
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, created_at, id);

-- Events waiting to be published to the WEBHOOKS stream (control/webhooks
-- Publisher deletes them once JetStream has them). event_id is the event's
-- id for good: the stream's de-duplication id, the webhook-id header and
-- what the delivery log is keyed by. One event per link per transaction:
-- a second change of the link in the same transaction merges into it
-- (xid, link_id), so it carries the state the transaction committed.
CREATE TABLE webhook_outbox (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    tenant_id   bigint NOT NULL,
    type        text NOT NULL,
    occurred_at timestamptz NOT NULL,
    data        jsonb NOT NULL,
    xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    link_id     bigint
);
CREATE UNIQUE INDEX webhook_outbox_link_xact ON webhook_outbox (xid, link_id);

-- A link as an event carries it: what the API answers for it, in the
-- columns it is made from (control/webhooks renders the short URL and the
-- state).
CREATE FUNCTION webhook_link_data(l links) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', l.id, 'code', l.code, 'domain_id', l.domain_id,
        'domain', (SELECT d.host FROM domains d WHERE d.id = l.domain_id),
        'url', l.url, 'url_original', l.url_original, 'redirect_type', l.redirect_type,
        'status', l.status, 'namespace', l.namespace, 'expires_at', l.expires_at,
        'version', l.version, 'created_at', l.created_at, 'updated_at', l.updated_at,
        'title', l.title,
        'tags', coalesce((SELECT jsonb_agg(t.tag ORDER BY t.tag) FROM link_tags t WHERE t.link_id = l.id), '[]'::jsonb))
$$;

-- What one event says when two changes of a link in one transaction merge:
-- a create stays a create, a delete stays a delete.
CREATE FUNCTION webhook_merge_type(a text, b text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN 'link.created' IN (a, b) THEN 'link.created'
                WHEN 'link.deleted' IN (a, b) THEN 'link.deleted'
                ELSE 'link.updated' END
$$;

-- Link creates, changes and deletes. A change is an update that took a new
-- version (every mutation does); a delete is the change to 'deleted'.
CREATE FUNCTION webhook_link_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM webhook_endpoints
                   WHERE event_types && '{link.created,link.updated,link.deleted}'::text[]) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO webhook_outbox AS w (tenant_id, type, occurred_at, data, link_id)
        SELECT n.tenant_id, 'link.created', n.updated_at, webhook_link_data(n), n.id
        FROM new_rows n
        WHERE EXISTS (SELECT FROM webhook_endpoints e
                      WHERE e.tenant_id = n.tenant_id AND 'link.created' = ANY (e.event_types))
        ON CONFLICT (xid, link_id) DO UPDATE SET type = webhook_merge_type(w.type, excluded.type),
            occurred_at = excluded.occurred_at, data = excluded.data;
    ELSE
        INSERT INTO webhook_outbox AS w (tenant_id, type, occurred_at, data, link_id)
        SELECT n.tenant_id, k.type, n.updated_at, webhook_link_data(n), n.id
        FROM new_rows n JOIN old_rows o ON o.id = n.id
        CROSS JOIN LATERAL (SELECT CASE WHEN n.status = 'deleted' AND o.status <> 'deleted'
                                        THEN 'link.deleted' ELSE 'link.updated' END AS type) k
        WHERE n.version <> o.version
          AND EXISTS (SELECT FROM webhook_endpoints e
                      WHERE e.tenant_id = n.tenant_id AND k.type = ANY (e.event_types))
        ON CONFLICT (xid, link_id) DO UPDATE SET type = webhook_merge_type(w.type, excluded.type),
            occurred_at = excluded.occurred_at, data = excluded.data;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER webhook_link_created AFTER INSERT ON links
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_link_events();
CREATE TRIGGER webhook_link_changed AFTER UPDATE ON links
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_link_events();

-- Tags are rows of their own and a tag change takes no new version, so
-- tags are watched apart: a link whose tags changed is link.updated, unless
-- its row was written in this same transaction (a create with tags), whose
-- own event carries its tags already.
CREATE FUNCTION webhook_link_tag_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM webhook_endpoints WHERE 'link.updated' = ANY (event_types)) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox AS w (tenant_id, type, occurred_at, data, link_id)
    SELECT l.tenant_id, 'link.updated', now(), webhook_link_data(l), l.id
    FROM links l
    WHERE l.id IN (SELECT link_id FROM changed_tags)
      AND l.xmin <> pg_current_xact_id()::xid
      AND EXISTS (SELECT FROM webhook_endpoints e
                  WHERE e.tenant_id = l.tenant_id AND 'link.updated' = ANY (e.event_types))
    ON CONFLICT (xid, link_id) DO UPDATE SET type = webhook_merge_type(w.type, excluded.type),
        occurred_at = excluded.occurred_at, data = excluded.data;
    RETURN NULL;
END $$;

CREATE TRIGGER webhook_link_tags_added AFTER INSERT ON link_tags
    REFERENCING NEW TABLE AS changed_tags
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_link_tag_events();
CREATE TRIGGER webhook_link_tags_removed AFTER DELETE ON link_tags
    REFERENCING OLD TABLE AS changed_tags
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_link_tag_events();

-- Clicks of subscribed tenants' links, gathered in the click roller's
-- exactly-once transaction and taken whole into clicks.aggregated events
-- once a minute (control/webhooks ClickAggregator): every click the roller
-- applies is in exactly one event.
CREATE TABLE webhook_click_counts (
    tenant_id  bigint NOT NULL,
    domain_id  integer NOT NULL,
    code       text COLLATE "C" NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (tenant_id, domain_id, code)
);

-- The roller adds a link's clicks to its day row in link_clicks_daily
-- (inserted, or updated by ON CONFLICT); what a statement added, new less
-- old, is gathered here, in the same transaction. A trigger rather than a
-- call in the roller's code: whatever the roller's statements become, a
-- click that reaches a link's day row reaches its webhook. Rows go in key
-- order, the order the aggregator locks them in. A platform where nobody
-- subscribes pays one probe of webhook_endpoints per statement; one where
-- somebody does, a lookup of each clicked link's tenant.
CREATE FUNCTION webhook_gather_clicks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM webhook_endpoints WHERE 'clicks.aggregated' = ANY (event_types)) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO webhook_click_counts AS c (tenant_id, domain_id, code, clicks, bot_clicks)
        SELECT l.tenant_id, n.domain_id, n.code, sum(n.clicks), sum(n.bot_clicks)
        FROM new_days n JOIN links l ON l.domain_id = n.domain_id AND l.code = n.code
        WHERE l.tenant_id IN (SELECT tenant_id FROM webhook_endpoints WHERE 'clicks.aggregated' = ANY (event_types))
        GROUP BY l.tenant_id, n.domain_id, n.code
        HAVING sum(n.clicks) <> 0 OR sum(n.bot_clicks) <> 0
        ORDER BY 1, 2, 3
        ON CONFLICT (tenant_id, domain_id, code) DO UPDATE
            SET clicks = c.clicks + excluded.clicks, bot_clicks = c.bot_clicks + excluded.bot_clicks;
    ELSE
        INSERT INTO webhook_click_counts AS c (tenant_id, domain_id, code, clicks, bot_clicks)
        SELECT l.tenant_id, n.domain_id, n.code, sum(n.clicks - o.clicks), sum(n.bot_clicks - o.bot_clicks)
        FROM new_days n
        JOIN old_days o ON o.domain_id = n.domain_id AND o.code = n.code AND o.day = n.day
        JOIN links l ON l.domain_id = n.domain_id AND l.code = n.code
        WHERE l.tenant_id IN (SELECT tenant_id FROM webhook_endpoints WHERE 'clicks.aggregated' = ANY (event_types))
        GROUP BY l.tenant_id, n.domain_id, n.code
        HAVING sum(n.clicks - o.clicks) <> 0 OR sum(n.bot_clicks - o.bot_clicks) <> 0
        ORDER BY 1, 2, 3
        ON CONFLICT (tenant_id, domain_id, code) DO UPDATE
            SET clicks = c.clicks + excluded.clicks, bot_clicks = c.bot_clicks + excluded.bot_clicks;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER webhook_clicks_inserted AFTER INSERT ON link_clicks_daily
    REFERENCING NEW TABLE AS new_days
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_gather_clicks();
CREATE TRIGGER webhook_clicks_updated AFTER UPDATE ON link_clicks_daily
    REFERENCING OLD TABLE AS old_days NEW TABLE AS new_days
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_gather_clicks();

-- The end of the last window the aggregator closed: the next one starts
-- there. One row.
CREATE TABLE webhook_click_window (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    period_end timestamptz NOT NULL
);
INSERT INTO webhook_click_window (period_end) VALUES (date_trunc('minute', now()));

-- Every delivery attempt, per endpoint, newest first by id; purged after
-- the retention control is given (never shorter than the stream keeps
-- events: the succeeded rows are what keeps an event from being delivered
-- twice). At most one succeeded row per (endpoint, event): the unique
-- index decides.
CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id     text COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id        uuid NOT NULL,
    event_type      text NOT NULL,
    attempt         integer NOT NULL CHECK (attempt >= 1),
    outcome         text NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
    status_code     integer,
    latency_ms      integer NOT NULL,
    error           text CHECK (char_length(error) <= 512),
    response_body   text CHECK (char_length(response_body) <= 1024),
    next_attempt_at timestamptz,
    attempted_at    timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE UNIQUE INDEX webhook_deliveries_succeeded ON webhook_deliveries (endpoint_id, event_id)
    WHERE outcome = 'succeeded';
CREATE INDEX webhook_deliveries_attempted ON webhook_deliveries (attempted_at);

---- create above / drop below ----

DROP TABLE webhook_deliveries;
DROP TABLE webhook_click_window;
DROP TRIGGER webhook_clicks_updated ON link_clicks_daily;
DROP TRIGGER webhook_clicks_inserted ON link_clicks_daily;
DROP FUNCTION webhook_gather_clicks;
DROP TABLE webhook_click_counts;
DROP TRIGGER webhook_link_tags_removed ON link_tags;
DROP TRIGGER webhook_link_tags_added ON link_tags;
DROP FUNCTION webhook_link_tag_events;
DROP TRIGGER webhook_link_changed ON links;
DROP TRIGGER webhook_link_created ON links;
DROP FUNCTION webhook_link_events;
DROP FUNCTION webhook_merge_type;
DROP FUNCTION webhook_link_data;
DROP TABLE webhook_outbox;
DROP TABLE webhook_endpoints;
