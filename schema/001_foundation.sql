-- Tenants, API keys, links and the change outbox: the authority both sides
-- build on. Codes use COLLATE "C" so "00000A" and "00000a" stay distinct.

CREATE TABLE tenants (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Keys are random 256-bit secrets, so a plain SHA-256 is a safe digest; the
-- secret itself is shown once and never stored.
CREATE TABLE api_keys (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    key_hash   bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    prefix     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

-- One global change sequence: every mutation takes the next value while it
-- holds the row's lock, so versions order changes to the same code.
CREATE SEQUENCE change_version_seq AS bigint;

-- The first slice's ID source; the segment allocator replaces it.
CREATE SEQUENCE link_id_seq AS bigint MINVALUE 1 MAXVALUE 56800235583;

CREATE TABLE links (
    id            bigint PRIMARY KEY CHECK (id BETWEEN 1 AND 56800235583),
    code          text COLLATE "C" NOT NULL UNIQUE,
    tenant_id     bigint NOT NULL REFERENCES tenants (id),
    code_source   text NOT NULL CHECK (code_source IN ('generated', 'custom')),
    namespace     text NOT NULL DEFAULT 'default',
    url_original  text NOT NULL,
    url           text NOT NULL,
    redirect_type smallint NOT NULL DEFAULT 302 CHECK (redirect_type IN (301, 302, 307, 308)),
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled', 'deleted')),
    expires_at    timestamptz,
    version       bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX links_tenant_id ON links (tenant_id, id);

-- The outbox is the change log the relay publishes, in version order. xid
-- records the writing transaction so the relay can tell a version that was
-- rolled back from one whose transaction is still running.
CREATE TABLE outbox (
    version       bigint PRIMARY KEY,
    xid           xid8 NOT NULL DEFAULT pg_current_xact_id(),
    kind          text NOT NULL CHECK (kind IN ('link', 'segment')),
    code          text COLLATE "C",
    url           text,
    redirect_type smallint,
    status        text,
    expires_at    timestamptz,
    namespace     text,
    seg_start     bigint,
    seg_end       bigint,
    seg_state     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (version) WHERE published_at IS NULL;

-- Wakes the relay at commit; it also polls, so a lost notification only delays.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox', '');
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

---- create above / drop below ----

DROP TABLE outbox;
DROP FUNCTION outbox_notify;
DROP TABLE links;
DROP SEQUENCE link_id_seq;
DROP SEQUENCE change_version_seq;
DROP TABLE api_keys;
DROP TABLE tenants;
