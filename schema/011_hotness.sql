---- tern: disable-tx ----
-- What a memory-budget snapshot reads to rank links (control/postgres
-- Hotness): the last days' clicks, and the newest links to fill the rest
-- of the budget. Both must stay cheap at 10^8 links, so neither may scan a
-- table whose size grows with every link or every day ever clicked.
--
-- This migration runs outside a transaction so that both indexes are built
-- CONCURRENTLY on tables that may already be large, without blocking
-- creates or the click roller. An invalid index left by an interrupted
-- build is dropped and built again, so the migration can be rerun.

-- The clicks of the last days: the primary key (code, day) cannot find a
-- day without reading every code. day never changes once a row is written,
-- so the roller's many updates of a day row stay HOT (schema 010); the
-- index costs one entry per link per day it is first clicked.
DROP INDEX CONCURRENTLY IF EXISTS link_clicks_daily_day;
CREATE INDEX CONCURRENTLY link_clicks_daily_day ON link_clicks_daily (day);

-- The newest links, for the part of the budget the clicked links leave,
-- read backwards as far as the budget needs. IDs alone cannot say which
-- link is newer: namespaces have disjoint ranges, and a batch's links
-- share one created_at, which id orders.
-- created_at never changes; a create appends at the index's right edge.
DROP INDEX CONCURRENTLY IF EXISTS links_created_at;
CREATE INDEX CONCURRENTLY links_created_at ON links (created_at, id);

---- create above / drop below ----

DROP INDEX CONCURRENTLY IF EXISTS links_created_at;
DROP INDEX CONCURRENTLY IF EXISTS link_clicks_daily_day;
