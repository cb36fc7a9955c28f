-- The live-link counters' statement trigger (004) counted an UPDATE's
-- change per tenant by joining the statement's old and new rows on id.
-- Transition tables have no statistics, so the planner may join them in a
-- nested loop: an UPDATE of 100,000 links (bench/console's loader, an
-- operator's bulk fix) ran for over 24 minutes in it, spilling to disk.
-- The join is not needed: a link never changes tenant and each updated
-- row is once in each set, so a tenant's change is its active rows after
-- less its active rows before, two scans and one aggregate, linear in the
-- rows updated.
CREATE OR REPLACE FUNCTION live_link_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO live_link_counts AS c (tenant_id, stripe, n)
        SELECT tenant_id, pg_backend_pid() % 16, count(*) FROM new_rows
        WHERE status = 'active' GROUP BY tenant_id
        ON CONFLICT (tenant_id, stripe) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO live_link_counts AS c (tenant_id, stripe, n)
        SELECT d.tenant_id, pg_backend_pid() % 16, sum(d.delta) FROM (
            SELECT tenant_id, 1 AS delta FROM new_rows WHERE status = 'active'
            UNION ALL
            SELECT tenant_id, -1 FROM old_rows WHERE status = 'active'
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

---- create above / drop below ----

CREATE OR REPLACE FUNCTION live_link_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
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
