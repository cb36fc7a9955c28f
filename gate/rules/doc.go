// Package rules is the launch gate's check of issue 23's edge half on a
// whole stack (PostgreSQL, NATS, control and an edge with the IPFire
// fixture of edge/geo, behind a trusted proxy, each real): a password link
// never redirects without its password and never shows its target before,
// guessing is cut at the configured rate from one client and from many;
// routing rules send iOS, Android and desktop clients to their three
// targets, and a country rule follows the geo data. Links are followed
// right after their 201 with the edge's change feed paused (so what the
// edge knows of them, extras included, comes from the authority) and
// again once the feed has applied them.
package rules
