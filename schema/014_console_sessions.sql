-- Sessions of the creator console (control/console): a browser signs in
-- with an API key once and holds a random session token in a cookie from
-- then on. Only the token's SHA-256 is stored (the token is 256 random
-- bits, so a plain digest is safe, as for api_keys): a copy of this table
-- signs nobody in.
--
-- A session belongs to the key it was opened with, and every request reads
-- it joined to that key: revoking the key (revoked_at) ends its sessions
-- on their next request, on every control instance, with no cache to
-- invalidate. Expiry is read-time too (expires_at, idle and absolute);
-- the purge only frees rows.
--
-- subject_kind leaves room for user accounts: today every session is
-- opened with a key ('key', key_id set); a 'user' session would name a
-- user row instead, and role holds what it may do.
CREATE TABLE console_sessions (
    token_hash   bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    tenant_id    bigint NOT NULL REFERENCES tenants (id),
    subject_kind text NOT NULL DEFAULT 'key' CHECK (subject_kind IN ('key')),
    key_id       bigint REFERENCES api_keys (id),
    role         text NOT NULL DEFAULT 'owner' CHECK (role IN ('owner')),
    -- The per-session CSRF token every form posts back.
    csrf_token   text NOT NULL CHECK (length(csrf_token) BETWEEN 32 AND 128),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    CHECK (subject_kind <> 'key' OR key_id IS NOT NULL)
);

-- A key's sessions, for the join on every request and for ending them.
CREATE INDEX console_sessions_key ON console_sessions (key_id);
-- The purge of expired rows.
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
