-- The relay's marks become one position instead of a timestamp on every
-- outbox row.
--
-- The relay marked what it had published with an UPDATE of every published
-- row (published_at = now()). That doubled the write work of a bulk load:
-- the partial index outbox_unpublished names published_at, so no such
-- update was HOT, and every row got a second heap version, index entries
-- and WAL, all on the path between two publishes. The stream is the record
-- of what was published (a relay resumes from its last message); the mark
-- is only where a relay starts on a stream that holds no message, so one
-- number says it all: every outbox version below next_version is on the
-- stream or was never committed.
--
-- A control from before this migration that is still running during an
-- upgrade keeps publishing correctly: its relay resumes from the stream,
-- and its marks (an UPDATE of a column that is gone) fail with a warning.
CREATE TABLE outbox_published (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    next_version bigint NOT NULL CHECK (next_version >= 1)
);

INSERT INTO outbox_published (next_version)
SELECT coalesce((SELECT min(version) FROM outbox WHERE published_at IS NULL),
                (SELECT max(version) + 1 FROM outbox),
                1);

DROP INDEX outbox_unpublished;
ALTER TABLE outbox DROP COLUMN published_at;

---- create above / drop below ----

ALTER TABLE outbox ADD COLUMN published_at timestamptz;
UPDATE outbox SET published_at = now() WHERE version < (SELECT next_version FROM outbox_published);
CREATE INDEX outbox_unpublished ON outbox (version) WHERE published_at IS NULL;
DROP TABLE outbox_published;
