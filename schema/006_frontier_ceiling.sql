-- The frontier's ceiling, per namespace: the highest end a confirmed lease
-- may have. Edges are told each namespace's `ceiling` with a promise: no
-- lease ends above it until at least the ceiling's delay (2 s,
-- allocstore.CeilingDelay) after a raise, so an edge may answer 404 for any
-- generated code at or above it, without asking, for half that long after
-- it sent the question (docs/visibility.md). A raise announces its value at
-- once (`ceiling`) and puts it in force at `ceiling_at`; until then
-- `prev_ceiling` is in force.
CREATE TABLE alloc_ceilings (
    namespace    text COLLATE "C" PRIMARY KEY REFERENCES alloc_namespaces (namespace),
    prev_ceiling bigint NOT NULL,
    ceiling      bigint NOT NULL,
    ceiling_at   timestamptz NOT NULL,
    CHECK (prev_ceiling <= ceiling)
);

-- Nothing was promised before this table existed, so each namespace's first
-- ceiling is in force at once, a few segments above its counter.
INSERT INTO alloc_ceilings (namespace, prev_ceiling, ceiling, ceiling_at)
SELECT namespace, least(upper_bound, next_id + 4 * step), least(upper_bound, next_id + 4 * step), 'epoch'
FROM alloc_namespaces;

-- The last line behind the lease transaction, as the exclusion constraints
-- are: no usable interval is confirmed above the ceiling in force, whoever
-- writes it (an older control that does not know ceilings, a bug). Intervals
-- recorded already sealed (raise-floor, recovery from the witness) are waste
-- that is never handed out, and pass.
CREATE FUNCTION alloc_audit_below_ceiling() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    in_force bigint;
BEGIN
    IF NEW.sealed_at IS NOT NULL THEN
        RETURN NEW;
    END IF;
    SELECT CASE WHEN clock_timestamp() >= ceiling_at THEN ceiling ELSE prev_ceiling END
    INTO in_force FROM alloc_ceilings WHERE namespace = NEW.namespace;
    IF in_force IS NULL OR NEW.seg_end > in_force THEN
        RAISE EXCEPTION 'segment [%, %) of namespace % ends above the frontier''s ceiling in force (%)',
            NEW.seg_start, NEW.seg_end, NEW.namespace, in_force
            USING ERRCODE = 'ELC01';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER alloc_audit_below_ceiling BEFORE INSERT ON alloc_audit
    FOR EACH ROW EXECUTE FUNCTION alloc_audit_below_ceiling();

---- create above / drop below ----

DROP TRIGGER alloc_audit_below_ceiling ON alloc_audit;
DROP FUNCTION alloc_audit_below_ceiling();
DROP TABLE alloc_ceilings;
