-- A tenant's own request limit, set by an operator (control tenants create
-- --rate/--burst, control tenants set-limits). NULL, per column, takes the
-- server's default (control serve --tenant-rate, --tenant-burst), so
-- changing the default moves every tenant that has none of its own. The API
-- reads both columns in the query that authenticates each request's key, so
-- a change is in force on every control instance from the next request on.
-- The bounds match control/postgres (MaxTenantRate, MaxTenantBurst); the
-- upper bound on the rate also refuses 'NaN' and 'Infinity'.
ALTER TABLE tenants
    ADD COLUMN rate_per_second double precision
        CONSTRAINT tenants_rate_per_second_range CHECK (rate_per_second > 0 AND rate_per_second <= 1000000),
    ADD COLUMN burst integer
        CONSTRAINT tenants_burst_range CHECK (burst BETWEEN 1 AND 1000000);

---- create above / drop below ----

ALTER TABLE tenants DROP COLUMN burst, DROP COLUMN rate_per_second;
