-- Click dimensions (issue 22): clicks per hour, countries, browser and OS
-- families, UTM parameters, unique visitors, tenant-wide breakdowns, and a
-- bound on the values any one link's (or tenant's) day keeps per dimension.
--
-- Exactly-once as schema 004: the click roller (control/clickroll) writes
-- every table below in the transaction that moves click_positions, so a
-- batch is counted in all of them or in none. Days and hours are UTC.
--
-- What each table holds (docs/clicks.md has the whole picture; the read
-- side is control/postgres's LinkHours, LinkDays, LinkBreakdown,
-- TenantHours, TenantDays and TenantBreakdown):
--
--   link_clicks_daily         + browser, OS and unknown-country columns;
--                             + visitors (unique human visitors, estimated)
--                             and visitors_sketch (its HyperLogLog)
--   link_click_values_daily   + country, UTM rows; at most N values per
--                             (link, day, dimension), N the roller's
--                             --click-top-values (default 100)
--   link_click_other_daily    the rest of such a dimension, and its
--                             candidates for a place among the N
--   link_clicks_hourly        clicks per link per hour, kept 7 days
--                             (--click-hours-retention)
--   tenant_clicks_daily       + visitors, visitors_sketch
--   tenant_click_values_daily a tenant's clicks per dimension value per day
--   tenant_click_other_daily  the rest, as for links
--   tenant_clicks_hourly      clicks per tenant per hour, kept as hours are
--
-- Browser and OS families take a few fixed values (shared/clicks Browser
-- and OS; the numbers on the wire only grow), so they are columns of the
-- day row as schema 010 made device and status: no rows of their own,
-- whatever the traffic (a value a later edge adds goes to a row of
-- link_click_values_daily until a migration gives it a column). A country
-- is a row (some 250 values); an unknown country (no geo data on the edge)
-- is a column, so an edge without geo costs no row.
--
-- Unique visitors: each click of a person (not a bot) carries a keyed
-- hash of the visitor under a salt of its UTC day (0 when the edge had
-- none); the roller adds it to the day's HyperLogLog sketch (control/hll,
-- precision 14: 0.81% standard error; sparse while small, 12 KiB dense)
-- and stores the estimate beside it. A sketch is merged in the roller's
-- transaction; merging is idempotent. Salts rotate daily, so one day's
-- visitors cannot be matched with another's: uniques are per day only,
-- and a range's are the sum of its days' (visitor-days).

ALTER TABLE link_clicks_daily
    ADD COLUMN browser_unknown bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_unknown_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_other bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_other_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_chrome bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_chrome_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_safari bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_safari_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_firefox bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_firefox_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_edge bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_edge_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_opera bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_opera_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_samsung bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_samsung_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_in_app bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_in_app_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_ie bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_ie_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_yandex bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_yandex_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_uc bigint NOT NULL DEFAULT 0,
    ADD COLUMN browser_uc_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_unknown bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_unknown_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_other bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_other_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_windows bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_windows_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_macos bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_macos_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_ios bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_ios_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_ipados bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_ipados_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_android bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_android_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_linux bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_linux_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_chromeos bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_chromeos_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_harmonyos bigint NOT NULL DEFAULT 0,
    ADD COLUMN os_harmonyos_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN country_none bigint NOT NULL DEFAULT 0,
    ADD COLUMN country_none_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN visitors bigint NOT NULL DEFAULT 0,
    ADD COLUMN visitors_sketch bytea;

ALTER TABLE tenant_clicks_daily
    ADD COLUMN visitors bigint NOT NULL DEFAULT 0,
    ADD COLUMN visitors_sketch bytea;

-- Values of dimensions without a column: referrer hosts, edges, countries,
-- UTM source, medium and campaign of the target that served the click
-- (the link's own target for now: rules' targets join with issue 23), and
-- any device, status, browser or OS without a column. At most N rows per
-- (domain_id, code, day, dimension): see link_click_other_daily.
ALTER TABLE link_click_values_daily DROP CONSTRAINT link_click_breakdown_daily_dimension_check;
ALTER TABLE link_click_values_daily ADD CONSTRAINT link_click_values_daily_dimension_check
    CHECK (dimension IN ('referrer', 'device', 'status', 'edge', 'country', 'browser', 'os', 'utm_source', 'utm_medium', 'utm_campaign'));

-- The clicks of a (link, day, dimension) that have no row of their own in
-- link_click_values_daily: a row exists only once the dimension has had
-- more than N values that day. The rows of the dimension plus this one
-- always sum to the clicks of the link's day that have a value of it.
-- candidates is a Space-Saving summary (control/topn, versioned binary) of
-- the values counted here: a candidate whose clicks since it became one
-- exceed the least kept value's takes that value's place (its clicks move
-- out of other, the evicted value's move in), so a flood of invented
-- values that came first does not keep the real ones out for the day.
CREATE TABLE link_click_other_daily (
    domain_id  integer NOT NULL,
    code       text COLLATE "C" NOT NULL,
    day        date NOT NULL,
    dimension  text NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    candidates bytea NOT NULL,
    PRIMARY KEY (domain_id, code, day, dimension)
);

-- Clicks per link per UTC hour (bots included in clicks), kept for the
-- roller's --click-hours-retention (default 7 days): older rows are deleted
-- in small batches by the active roller, and clicks older than that are not
-- written. A day series in a time zone whose offset is whole hours is
-- exact where its hours are kept; beyond them it can only be read from the
-- UTC days (docs/clicks.md).
CREATE TABLE link_clicks_hourly (
    domain_id  integer NOT NULL,
    code       text COLLATE "C" NOT NULL,
    hour       timestamptz NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (domain_id, code, hour)
) WITH (fillfactor = 80);
-- Hours are written in time order, so a block range index finds the old
-- ones for the pruner at almost no cost to the writes.
CREATE INDEX link_clicks_hourly_hour ON link_clicks_hourly USING brin (hour) WITH (autosummarize = on);

CREATE TABLE tenant_clicks_hourly (
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    hour       timestamptz NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (tenant_id, hour)
);
CREATE INDEX tenant_clicks_hourly_hour ON tenant_clicks_hourly USING brin (hour) WITH (autosummarize = on);

-- A tenant's clicks per dimension value per day, over all its links, for
-- its overview: device, browser and OS by name ('unknown' when the edge
-- could not tell), referrer host ('' none), country ('' unknown), UTM
-- values (links whose target has none have no UTM row). At most N rows per
-- (tenant, day, dimension), the rest in tenant_click_other_daily, as for
-- links: a tenant's value kept here may be one no single link kept.
CREATE TABLE tenant_click_values_daily (
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    day        date NOT NULL,
    dimension  text NOT NULL CHECK (dimension IN ('referrer', 'device', 'country', 'browser', 'os', 'utm_source', 'utm_medium', 'utm_campaign')),
    value      text NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    PRIMARY KEY (tenant_id, day, dimension, value)
) WITH (fillfactor = 80);

CREATE TABLE tenant_click_other_daily (
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    day        date NOT NULL,
    dimension  text NOT NULL,
    clicks     bigint NOT NULL,
    bot_clicks bigint NOT NULL,
    candidates bytea NOT NULL,
    PRIMARY KEY (tenant_id, day, dimension)
);

-- The view of schema 010, with the new columns unpivoted too.
DROP VIEW link_click_breakdown_daily;
CREATE VIEW link_click_breakdown_daily AS
SELECT code, day, dimension, value, clicks, bot_clicks FROM link_click_values_daily
UNION ALL
SELECT d.code, d.day, v.dimension, v.value, v.clicks, v.bot_clicks
FROM link_clicks_daily d
CROSS JOIN LATERAL (VALUES
    ('device', 'unknown', d.device_unknown, d.device_unknown_bots),
    ('device', 'desktop', d.device_desktop, d.device_desktop_bots),
    ('device', 'mobile', d.device_mobile, d.device_mobile_bots),
    ('device', 'tablet', d.device_tablet, d.device_tablet_bots),
    ('device', 'tv', d.device_tv, d.device_tv_bots),
    ('status', '301', d.status_301, d.status_301_bots),
    ('status', '302', d.status_302, d.status_302_bots),
    ('status', '307', d.status_307, d.status_307_bots),
    ('status', '308', d.status_308, d.status_308_bots),
    ('referrer', '', d.referrer_none, d.referrer_none_bots),
    ('browser', 'unknown', d.browser_unknown, d.browser_unknown_bots),
    ('browser', 'other', d.browser_other, d.browser_other_bots),
    ('browser', 'chrome', d.browser_chrome, d.browser_chrome_bots),
    ('browser', 'safari', d.browser_safari, d.browser_safari_bots),
    ('browser', 'firefox', d.browser_firefox, d.browser_firefox_bots),
    ('browser', 'edge', d.browser_edge, d.browser_edge_bots),
    ('browser', 'opera', d.browser_opera, d.browser_opera_bots),
    ('browser', 'samsung-internet', d.browser_samsung, d.browser_samsung_bots),
    ('browser', 'in-app', d.browser_in_app, d.browser_in_app_bots),
    ('browser', 'ie', d.browser_ie, d.browser_ie_bots),
    ('browser', 'yandex', d.browser_yandex, d.browser_yandex_bots),
    ('browser', 'uc', d.browser_uc, d.browser_uc_bots),
    ('os', 'unknown', d.os_unknown, d.os_unknown_bots),
    ('os', 'other', d.os_other, d.os_other_bots),
    ('os', 'windows', d.os_windows, d.os_windows_bots),
    ('os', 'macos', d.os_macos, d.os_macos_bots),
    ('os', 'ios', d.os_ios, d.os_ios_bots),
    ('os', 'ipados', d.os_ipados, d.os_ipados_bots),
    ('os', 'android', d.os_android, d.os_android_bots),
    ('os', 'linux', d.os_linux, d.os_linux_bots),
    ('os', 'chromeos', d.os_chromeos, d.os_chromeos_bots),
    ('os', 'harmonyos', d.os_harmonyos, d.os_harmonyos_bots),
    ('country', '', d.country_none, d.country_none_bots)
) AS v (dimension, value, clicks, bot_clicks)
WHERE v.clicks <> 0;

---- create above / drop below ----

DROP VIEW link_click_breakdown_daily;
CREATE VIEW link_click_breakdown_daily AS
SELECT code, day, dimension, value, clicks, bot_clicks FROM link_click_values_daily
UNION ALL
SELECT d.code, d.day, v.dimension, v.value, v.clicks, v.bot_clicks
FROM link_clicks_daily d
CROSS JOIN LATERAL (VALUES
    ('device', 'unknown', d.device_unknown, d.device_unknown_bots),
    ('device', 'desktop', d.device_desktop, d.device_desktop_bots),
    ('device', 'mobile', d.device_mobile, d.device_mobile_bots),
    ('device', 'tablet', d.device_tablet, d.device_tablet_bots),
    ('device', 'tv', d.device_tv, d.device_tv_bots),
    ('status', '301', d.status_301, d.status_301_bots),
    ('status', '302', d.status_302, d.status_302_bots),
    ('status', '307', d.status_307, d.status_307_bots),
    ('status', '308', d.status_308, d.status_308_bots),
    ('referrer', '', d.referrer_none, d.referrer_none_bots)
) AS v (dimension, value, clicks, bot_clicks)
WHERE v.clicks <> 0;
DROP TABLE tenant_click_other_daily;
DROP TABLE tenant_click_values_daily;
DROP TABLE tenant_clicks_hourly;
DROP TABLE link_clicks_hourly;
-- What only this schema counts goes: other's clicks (they have no value
-- to go back to) and the rows of the new dimensions.
DROP TABLE link_click_other_daily;
DELETE FROM link_click_values_daily WHERE dimension NOT IN ('referrer', 'device', 'status', 'edge');
ALTER TABLE link_click_values_daily DROP CONSTRAINT link_click_values_daily_dimension_check;
ALTER TABLE link_click_values_daily ADD CONSTRAINT link_click_breakdown_daily_dimension_check
    CHECK (dimension IN ('referrer', 'device', 'status', 'edge'));
ALTER TABLE tenant_clicks_daily DROP COLUMN visitors, DROP COLUMN visitors_sketch;
ALTER TABLE link_clicks_daily
    DROP COLUMN browser_unknown, DROP COLUMN browser_unknown_bots,
    DROP COLUMN browser_other, DROP COLUMN browser_other_bots,
    DROP COLUMN browser_chrome, DROP COLUMN browser_chrome_bots,
    DROP COLUMN browser_safari, DROP COLUMN browser_safari_bots,
    DROP COLUMN browser_firefox, DROP COLUMN browser_firefox_bots,
    DROP COLUMN browser_edge, DROP COLUMN browser_edge_bots,
    DROP COLUMN browser_opera, DROP COLUMN browser_opera_bots,
    DROP COLUMN browser_samsung, DROP COLUMN browser_samsung_bots,
    DROP COLUMN browser_in_app, DROP COLUMN browser_in_app_bots,
    DROP COLUMN browser_ie, DROP COLUMN browser_ie_bots,
    DROP COLUMN browser_yandex, DROP COLUMN browser_yandex_bots,
    DROP COLUMN browser_uc, DROP COLUMN browser_uc_bots,
    DROP COLUMN os_unknown, DROP COLUMN os_unknown_bots,
    DROP COLUMN os_other, DROP COLUMN os_other_bots,
    DROP COLUMN os_windows, DROP COLUMN os_windows_bots,
    DROP COLUMN os_macos, DROP COLUMN os_macos_bots,
    DROP COLUMN os_ios, DROP COLUMN os_ios_bots,
    DROP COLUMN os_ipados, DROP COLUMN os_ipados_bots,
    DROP COLUMN os_android, DROP COLUMN os_android_bots,
    DROP COLUMN os_linux, DROP COLUMN os_linux_bots,
    DROP COLUMN os_chromeos, DROP COLUMN os_chromeos_bots,
    DROP COLUMN os_harmonyos, DROP COLUMN os_harmonyos_bots,
    DROP COLUMN country_none, DROP COLUMN country_none_bots,
    DROP COLUMN visitors, DROP COLUMN visitors_sketch;
