package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/shared/snapshot"
)

// DefaultHotDays is how many days of clicks Hotness ranks by unless told.
const DefaultHotDays = 7

// Hotness ranks links for a memory-budget snapshot
// (control/snapshots.Hotness) by their recent clicks in the rollups.
// Safe for concurrent use.
type Hotness struct {
	store *Store
	days  int
	now   func() time.Time
}

// Hotness returns the ranking over the last days UTC days, today included
// (days <= 0: DefaultHotDays). now, if not nil, replaces the clock (tests).
func (s *Store) Hotness(days int, now func() time.Time) *Hotness {
	if days <= 0 {
		days = DefaultHotDays
	}
	if now == nil {
		now = time.Now
	}
	return &Hotness{store: s, days: days, now: now}
}

// Hottest returns at most n distinct links, by (domain, code), hottest
// first: every link clicked in the window, by its clicks there (most
// first; a tie goes to the link clicked on the later day, then to the
// greater code, then to the greater domain), then the active links never
// clicked in the window, newest first, until n. So a budget larger than
// the clicked set keeps the newest campaigns rather than arbitrary old
// links, and a budget smaller than it keeps only the clicked ones that
// matter most.
//
// It reads one REPEATABLE READ, READ ONLY view: the window's rollup rows
// through link_clicks_daily_day (schema 011), then the newest links
// backwards through links_created_at, each checked against the window by
// the rollups' primary key (domain, code, day). Its cost grows with the
// links clicked in the window and with n, never with every link or every
// day kept. n <= 0 returns nothing.
func (h *Hotness) Hottest(ctx context.Context, n int) ([]snapshot.Key, error) {
	if n <= 0 {
		return nil, nil
	}
	since := h.now().UTC().AddDate(0, 0, 1-h.days)
	since = time.Date(since.Year(), since.Month(), since.Day(), 0, 0, 0, 0, time.UTC)
	var out []snapshot.Key
	err := pgx.BeginTxFunc(ctx, h.store.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, `
			SELECT domain_id, code FROM link_clicks_daily WHERE day >= $1
			GROUP BY domain_id, code
			ORDER BY sum(clicks) DESC, max(day) DESC, code DESC, domain_id DESC
			LIMIT $2`, since, n)
		if err != nil {
			return err
		}
		clicked, err := pgx.CollectRows(rows, pgx.RowToStructByPos[snapshot.Key])
		if err != nil {
			return err
		}
		out = append(out, clicked...)
		if len(out) >= n {
			return nil
		}
		// The rest, newest first, skipping the links the first part
		// already holds (a probe of the rollups' primary key each).
		rows, err = tx.Query(ctx, `
			SELECT domain_id, code FROM links l WHERE status = 'active'
			AND NOT EXISTS (SELECT 1 FROM link_clicks_daily d
			                WHERE d.domain_id = l.domain_id AND d.code = l.code AND d.day >= $1)
			ORDER BY created_at DESC, id DESC
			LIMIT $2`, since, n-len(out))
		if err != nil {
			return err
		}
		newest, err := pgx.CollectRows(rows, pgx.RowToStructByPos[snapshot.Key])
		out = append(out, newest...)
		return err
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
