-- Link extras (issue 23; docs/rules.md): routing rules, a password and a
-- click limit per link, decided by edges from memory. Each is a column of
-- its own so that a change of one keeps the others in the same statement;
-- the relay (and the snapshot builder) put them together into the one wire
-- form edges read (shared/link Extras). A link without them holds NULL in
-- all three: a bit each in the row's null bitmap, nothing else. So do its
-- outbox rows.
--
-- The constraints are NOT VALID: the rows that exist hold NULL, and
-- checking them would read the whole table under a lock; new and changed
-- rows are checked all the same.

-- rules: the rules' wire form (shared/link AppendRules: a count, then each
-- rule with its conditions and target), checked by control before it is
-- written.
ALTER TABLE links ADD COLUMN rules bytea;
ALTER TABLE links ADD CONSTRAINT links_rules_length
    CHECK (rules IS NULL OR octet_length(rules) BETWEEN 2 AND 131072) NOT VALID;

-- password_hash: argon2id in the PHC string format (shared/passhash).
-- Edges verify it; the API never answers it, and no log holds it.
ALTER TABLE links ADD COLUMN password_hash text;
ALTER TABLE links ADD CONSTRAINT links_password_hash_format
    CHECK (password_hash IS NULL OR (password_hash LIKE '$argon2id$%' AND octet_length(password_hash) <= 256)) NOT VALID;

-- max_clicks: the counted clicks after which the link answers 410 (the
-- rollups count them; a later change enforces it, docs/api.md).
ALTER TABLE links ADD COLUMN max_clicks bigint;
ALTER TABLE links ADD CONSTRAINT links_max_clicks_range
    CHECK (max_clicks IS NULL OR max_clicks BETWEEN 1 AND 9007199254740991) NOT VALID;

-- A link row of the outbox carries them as the link had them at its
-- version.
ALTER TABLE outbox ADD COLUMN rules bytea;
ALTER TABLE outbox ADD COLUMN password_hash text;
ALTER TABLE outbox ADD COLUMN max_clicks bigint;

---- create above / drop below ----

ALTER TABLE outbox DROP COLUMN max_clicks, DROP COLUMN password_hash, DROP COLUMN rules;
ALTER TABLE links DROP COLUMN max_clicks, DROP COLUMN password_hash, DROP COLUMN rules;
