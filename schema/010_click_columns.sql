-- Click rollups at marketing scale: a click's device class and status,
-- which take a few fixed values, and the absence of a referrer (a third
-- of clicks: apps, mail clients) are counted in columns of its link's day
-- row instead of in breakdown rows of their own.
--
-- The roller's cost is PostgreSQL's, and it grows with the rows it
-- upserts, not with the clicks: each row is an index probe, a heap update
-- and its WAL. Under a campaign's long tail most links get a click or two
-- a second, so a click was five rows (its link's day, and one each for its
-- referrer, device, status and edge). With device and status in the day
-- row it is three (two without a referrer), and the day row's update stays
-- one heap update (HOT: no index changes, with the room fillfactor leaves
-- on its page).
--
-- link_click_breakdown_daily stays what it was to every reader, a view
-- over the rows that are left (referrer hosts, edge, and any device or
-- status outside the columns: a format-1 click's status 0, a class or status a
-- later edge sends) and the columns unpivoted. A control from before this
-- migration still rolling during an upgrade cannot write to the view: its
-- transactions fail and change nothing (the stream position moves only
-- with them), and the new roller applies those clicks once.
ALTER TABLE link_clicks_daily
    ADD COLUMN device_unknown bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_unknown_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_desktop bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_desktop_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_mobile bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_mobile_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_tablet bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_tablet_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_tv bigint NOT NULL DEFAULT 0,
    ADD COLUMN device_tv_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_301 bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_301_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_302 bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_302_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_307 bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_307_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_308 bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_308_bots bigint NOT NULL DEFAULT 0,
    ADD COLUMN referrer_none bigint NOT NULL DEFAULT 0,
    ADD COLUMN referrer_none_bots bigint NOT NULL DEFAULT 0;

ALTER TABLE link_click_breakdown_daily RENAME TO link_click_values_daily;
ALTER INDEX link_click_breakdown_daily_pkey RENAME TO link_click_values_daily_pkey;

-- Room on each page for the next version of a row: today's rows are
-- updated many times a day, and an update that fits on its page is HOT.
ALTER TABLE link_clicks_daily SET (fillfactor = 80);
ALTER TABLE link_click_values_daily SET (fillfactor = 80);

-- The rows counted so far move into the columns.
INSERT INTO link_clicks_daily AS t (code, day, clicks, bot_clicks, device_unknown, device_unknown_bots, device_desktop, device_desktop_bots, device_mobile, device_mobile_bots, device_tablet, device_tablet_bots, device_tv, device_tv_bots, status_301, status_301_bots, status_302, status_302_bots, status_307, status_307_bots, status_308, status_308_bots, referrer_none, referrer_none_bots)
SELECT code, day, 0, 0,
    coalesce(sum(clicks) FILTER (WHERE dimension = 'device' AND value = 'unknown'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'device' AND value = 'unknown'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'device' AND value = 'desktop'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'device' AND value = 'desktop'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'device' AND value = 'mobile'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'device' AND value = 'mobile'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'device' AND value = 'tablet'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'device' AND value = 'tablet'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'device' AND value = 'tv'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'device' AND value = 'tv'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'status' AND value = '301'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'status' AND value = '301'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'status' AND value = '302'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'status' AND value = '302'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'status' AND value = '307'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'status' AND value = '307'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'status' AND value = '308'), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'status' AND value = '308'), 0),
    coalesce(sum(clicks) FILTER (WHERE dimension = 'referrer' AND value = ''), 0),
    coalesce(sum(bot_clicks) FILTER (WHERE dimension = 'referrer' AND value = ''), 0)
FROM link_click_values_daily
WHERE (dimension = 'device' AND value IN ('unknown', 'desktop', 'mobile', 'tablet', 'tv')) OR (dimension = 'status' AND value IN ('301', '302', '307', '308'))
    OR (dimension = 'referrer' AND value = '')
GROUP BY code, day
ON CONFLICT (code, day) DO UPDATE SET
    device_unknown = t.device_unknown + excluded.device_unknown, device_unknown_bots = t.device_unknown_bots + excluded.device_unknown_bots,
    device_desktop = t.device_desktop + excluded.device_desktop, device_desktop_bots = t.device_desktop_bots + excluded.device_desktop_bots,
    device_mobile = t.device_mobile + excluded.device_mobile, device_mobile_bots = t.device_mobile_bots + excluded.device_mobile_bots,
    device_tablet = t.device_tablet + excluded.device_tablet, device_tablet_bots = t.device_tablet_bots + excluded.device_tablet_bots,
    device_tv = t.device_tv + excluded.device_tv, device_tv_bots = t.device_tv_bots + excluded.device_tv_bots,
    status_301 = t.status_301 + excluded.status_301, status_301_bots = t.status_301_bots + excluded.status_301_bots,
    status_302 = t.status_302 + excluded.status_302, status_302_bots = t.status_302_bots + excluded.status_302_bots,
    status_307 = t.status_307 + excluded.status_307, status_307_bots = t.status_307_bots + excluded.status_307_bots,
    status_308 = t.status_308 + excluded.status_308, status_308_bots = t.status_308_bots + excluded.status_308_bots,
    referrer_none = t.referrer_none + excluded.referrer_none, referrer_none_bots = t.referrer_none_bots + excluded.referrer_none_bots;

DELETE FROM link_click_values_daily
WHERE (dimension = 'device' AND value IN ('unknown', 'desktop', 'mobile', 'tablet', 'tv')) OR (dimension = 'status' AND value IN ('301', '302', '307', '308'))
    OR (dimension = 'referrer' AND value = '');

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

---- create above / drop below ----

DROP VIEW link_click_breakdown_daily;

INSERT INTO link_click_values_daily AS t (code, day, dimension, value, clicks, bot_clicks)
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
WHERE v.clicks <> 0
ON CONFLICT (code, day, dimension, value) DO UPDATE SET
    clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks;

ALTER TABLE link_click_values_daily RESET (fillfactor);
ALTER TABLE link_clicks_daily RESET (fillfactor);
ALTER INDEX link_click_values_daily_pkey RENAME TO link_click_breakdown_daily_pkey;
ALTER TABLE link_click_values_daily RENAME TO link_click_breakdown_daily;

ALTER TABLE link_clicks_daily
    DROP COLUMN device_unknown, DROP COLUMN device_unknown_bots,
    DROP COLUMN device_desktop, DROP COLUMN device_desktop_bots,
    DROP COLUMN device_mobile, DROP COLUMN device_mobile_bots,
    DROP COLUMN device_tablet, DROP COLUMN device_tablet_bots,
    DROP COLUMN device_tv, DROP COLUMN device_tv_bots,
    DROP COLUMN status_301, DROP COLUMN status_301_bots,
    DROP COLUMN status_302, DROP COLUMN status_302_bots,
    DROP COLUMN status_307, DROP COLUMN status_307_bots,
    DROP COLUMN status_308, DROP COLUMN status_308_bots,
    DROP COLUMN referrer_none, DROP COLUMN referrer_none_bots;
