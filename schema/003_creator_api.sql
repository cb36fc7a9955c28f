-- Idempotency keys of the creator API. The primary key is what decides a
-- race between two requests carrying the same key: the second INSERT waits
-- for the first transaction and then finds the row (ON CONFLICT DO NOTHING),
-- so there is never a select-then-insert window.
CREATE TABLE idempotency_keys (
    tenant_id    bigint NOT NULL REFERENCES tenants (id),
    idem_key     text NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 255),
    -- SHA-256 of the normalized request: a replay must match it exactly.
    request_hash bytea NOT NULL CHECK (length(request_hash) = 32),
    -- What the original request was answered with, written in the same
    -- transaction as the links it created, so a committed key always has it.
    response     bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, idem_key)
);

-- Listing a tenant's links by status pages through this index.
CREATE INDEX links_tenant_status_id ON links (tenant_id, status, id);

---- create above / drop below ----

DROP INDEX links_tenant_status_id;
DROP TABLE idempotency_keys;
