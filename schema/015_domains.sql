-- Domains (issue 20). A link's key becomes (domain, code): each domain has
-- its own codes, and its own 62^6 IDs as a namespace of the allocator.
--
-- IDs stay one global column with disjoint ranges, so the allocator's
-- audit, fence, witness and exclusion constraints are unchanged: domain d
-- owns [d * 62^6 + 1, (d + 1) * 62^6), its namespace is 'd<d>' (domain 0,
-- the platform's, keeps 'default' and [1, 62^6), so every existing link and
-- segment is already in it). A generated code is the code of the local ID,
-- id - d * 62^6 (shared/link IDBase). 2^24 domains fit a bigint.

CREATE TABLE domains (
    id                 integer PRIMARY KEY CHECK (id BETWEEN 0 AND 16777215),
    -- Canonical (shared/link CanonicalHost): lower case, punycode, no port,
    -- no trailing dot; an IP literal for local set-ups.
    host               text COLLATE "C" NOT NULL UNIQUE CHECK (host ~ '^[a-z0-9.:-]{1,253}$'),
    -- NULL: the platform's domain, which serves tenants without one.
    tenant_id          bigint REFERENCES tenants (id),
    root_redirect      text CHECK (length(root_redirect) <= 2048),
    not_found_redirect text CHECK (length(not_found_redirect) <= 2048),
    robots             text CHECK (length(robots) <= 4096),
    code_mode          text NOT NULL DEFAULT 'ff1' CHECK (code_mode IN ('sequential', 'ff1')),
    -- Names of keys in the operator's key file (--code-keys), current
    -- first; never key bytes.
    key_ids            text[] NOT NULL DEFAULT '{}' CHECK (cardinality(key_ids) <= 8),
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'removed')),
    -- Room for ownership verification (a DNS TXT record or a file under
    -- /.well-known): NULL until verified. Nothing checks it yet.
    verification_token text,
    verified_at        timestamptz,
    version            bigint NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (code_mode = 'sequential' OR cardinality(key_ids) >= 1),
    CHECK ((id = 0) = (tenant_id IS NULL))
);
CREATE INDEX domains_tenant ON domains (tenant_id, id);
CREATE SEQUENCE domain_id_seq AS integer MINVALUE 1 MAXVALUE 16777215 OWNED BY domains.id;

-- The platform's domain. Its host is a placeholder until control starts and
-- writes the host of --public-url (control/postgres EnsureDefaultDomain);
-- its codes stay sequential, as they were issued.
INSERT INTO domains (id, host, code_mode, version)
VALUES (0, 'platform.invalid', 'sequential', nextval('change_version_seq'));

ALTER TABLE links ADD COLUMN domain_id integer NOT NULL DEFAULT 0 REFERENCES domains (id);
ALTER TABLE links DROP CONSTRAINT links_code_key;
CREATE UNIQUE INDEX links_domain_code ON links (domain_id, code);
ALTER TABLE links DROP CONSTRAINT links_id_check;
ALTER TABLE links ADD CONSTRAINT links_id_check
    CHECK (id >= 1 AND id < 16777216 * 56800235584 AND id % 56800235584 <> 0);

ALTER TABLE alloc_namespaces DROP CONSTRAINT alloc_namespaces_upper_bound_check;
ALTER TABLE alloc_namespaces ADD CONSTRAINT alloc_namespaces_upper_bound_check
    CHECK (upper_bound <= 16777216 * 56800235584);
ALTER TABLE alloc_audit DROP CONSTRAINT alloc_audit_seg_end_check;
ALTER TABLE alloc_audit ADD CONSTRAINT alloc_audit_seg_end_check
    CHECK (seg_end <= 16777216 * 56800235584);

-- Domain changes are published like link changes: a row of kind 'domain'
-- carries the whole configuration as it was written (domain_conf, the
-- shape of shared/link Domain), so the relay never reads the domains table
-- and a later change cannot overtake an earlier one. Link rows carry their
-- domain.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('link', 'segment', 'domain'));
ALTER TABLE outbox ADD COLUMN domain_id integer;
ALTER TABLE outbox ADD COLUMN domain_conf jsonb;
INSERT INTO outbox (version, kind, domain_id, domain_conf)
SELECT version, 'domain', id, jsonb_build_object('id', id, 'host', host, 'code_mode', code_mode, 'status', status)
FROM domains WHERE id = 0;

-- Clicks are counted per (domain, code): codes are unique per domain only.
ALTER TABLE link_clicks_daily ADD COLUMN domain_id integer NOT NULL DEFAULT 0;
ALTER TABLE link_clicks_daily DROP CONSTRAINT link_clicks_daily_pkey;
ALTER TABLE link_clicks_daily ADD PRIMARY KEY (domain_id, code, day);
ALTER TABLE link_click_values_daily ADD COLUMN domain_id integer NOT NULL DEFAULT 0;
ALTER TABLE link_click_values_daily DROP CONSTRAINT link_click_values_daily_pkey;
ALTER TABLE link_click_values_daily ADD PRIMARY KEY (domain_id, code, day, dimension, value);

---- create above / drop below ----

ALTER TABLE link_click_values_daily DROP CONSTRAINT link_click_values_daily_pkey;
DELETE FROM link_click_values_daily WHERE domain_id <> 0;
ALTER TABLE link_click_values_daily DROP COLUMN domain_id;
ALTER TABLE link_click_values_daily ADD PRIMARY KEY (code, day, dimension, value);
ALTER TABLE link_clicks_daily DROP CONSTRAINT link_clicks_daily_pkey;
DELETE FROM link_clicks_daily WHERE domain_id <> 0;
ALTER TABLE link_clicks_daily DROP COLUMN domain_id;
ALTER TABLE link_clicks_daily ADD PRIMARY KEY (code, day);
DELETE FROM outbox WHERE kind = 'domain';
ALTER TABLE outbox DROP COLUMN domain_conf;
ALTER TABLE outbox DROP COLUMN domain_id;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('link', 'segment'));
ALTER TABLE alloc_audit DROP CONSTRAINT alloc_audit_seg_end_check;
ALTER TABLE alloc_audit ADD CONSTRAINT alloc_audit_seg_end_check CHECK (seg_end <= 56800235584);
ALTER TABLE alloc_namespaces DROP CONSTRAINT alloc_namespaces_upper_bound_check;
ALTER TABLE alloc_namespaces ADD CONSTRAINT alloc_namespaces_upper_bound_check CHECK (upper_bound <= 56800235584);
-- Down refuses when links of other domains exist: their IDs do not fit the
-- old check, and dropping them would lose links.
ALTER TABLE links DROP CONSTRAINT links_id_check;
ALTER TABLE links ADD CONSTRAINT links_id_check CHECK (id BETWEEN 1 AND 56800235583);
DROP INDEX links_domain_code;
ALTER TABLE links ADD CONSTRAINT links_code_key UNIQUE (code);
ALTER TABLE links DROP COLUMN domain_id;
DROP TABLE domains;
