-- Link changes stop waking the relay from inside their own transactions.
--
-- The statement trigger of 001 called pg_notify in every transaction that
-- wrote the outbox. A notifying transaction takes a database-wide lock at
-- pre-commit (PreCommit_Notify) and holds it until its commit is done,
-- including the WAL flush: so every create committed one after another, and
-- group commit, which is how PostgreSQL shares one fsync among concurrent
-- commits, never happened. A raw loop of one create per transaction did
-- about 300 commits/s with the trigger and 1,400/s without it on the same
-- two cores.
--
-- Control now wakes the relay after a link write has committed, from a
-- transaction of its own that writes nothing durable, coalesced to at most
-- one in flight (control/postgres, wake.go); a wake that is lost (a crash
-- between the commit and the wake) costs only the relay's poll interval.
-- Segment changes, a few per lease, keep the trigger: they are written by
-- the allocator's store, which has no wake of its own, and are too rare for
-- the lock to matter.
--
-- A control from before this migration still running during an upgrade
-- writes link changes the relay then finds by its poll instead of a wake:
-- later by up to the poll interval, never lost.
DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify_segments AFTER INSERT ON outbox
    FOR EACH ROW WHEN (NEW.kind = 'segment') EXECUTE FUNCTION outbox_notify();

---- create above / drop below ----

DROP TRIGGER outbox_notify_segments ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
