package allocstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/idalloc"
)

// PeakWindow is how far back the peak create rate looks: the busiest
// minute of the last 7 days, the current one included. The per-minute
// counts are kept for 8 days (schema/008_idempotency_expiry.sql).
const PeakWindow = 7 * 24 * time.Hour

// rowQuerier is what the create-rate reads need: a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// createCounts reads namespace's committed creates of the last five
// minutes and of the last hour from the per-minute counts the links
// trigger keeps: a few index lookups, whatever the size of links. Both
// windows end at now (the database's clock when now is zero) and start at
// a whole minute; it returns their end and the start of the current
// minute.
func createCounts(ctx context.Context, q rowQuerier, namespace string, now time.Time) (last5m, lastHour idalloc.CreateCount, at, minute time.Time, err error) {
	var clock *time.Time
	if !now.IsZero() {
		clock = &now
	}
	var n5, n60 int64
	err = q.QueryRow(ctx, `
		WITH b AS (
			SELECT t.now, to_timestamp(floor(extract(epoch FROM t.now) / 60) * 60) AS m
			FROM (SELECT coalesce($2::timestamptz, now()) AS now) t)
		SELECT b.now, b.m,
		       coalesce(sum(c.creates) FILTER (WHERE c.minute >= b.m - interval '5 minutes'), 0)::bigint,
		       coalesce(sum(c.creates), 0)::bigint
		FROM b LEFT JOIN link_creates_per_minute c
		  ON c.namespace = $1 AND c.minute >= b.m - interval '1 hour' AND c.minute <= b.now
		GROUP BY b.now, b.m`, namespace, clock).Scan(&at, &minute, &n5, &n60)
	if err != nil {
		return last5m, lastHour, at, minute, err
	}
	since := at.Sub(minute)
	last5m = idalloc.CreateCount{Creates: uint64(n5), Window: 5*time.Minute + since}
	lastHour = idalloc.CreateCount{Creates: uint64(n60), Window: time.Hour + since}
	return last5m, lastHour, at, minute, nil
}

// peakCreates reads the minute of namespace within PeakWindow before now
// with the most committed creates, and their number; the zero time when
// there were none. The current minute (starting at minute) takes part
// with what it has so far: at worst it understates its own rate.
func peakCreates(ctx context.Context, q rowQuerier, namespace string, minute, now time.Time) (time.Time, uint64, error) {
	var at time.Time
	var n int64
	err := q.QueryRow(ctx, `
		SELECT minute, sum(creates)::bigint FROM link_creates_per_minute
		WHERE namespace = $1 AND minute >= $2 AND minute <= $3
		GROUP BY minute ORDER BY 2 DESC, 1 DESC LIMIT 1`,
		namespace, minute.Add(-PeakWindow), now).Scan(&at, &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, 0, nil
	}
	return at, uint64(n), err
}

// timeLeft is remaining IDs at rate per second; zero when rate is zero
// (no estimate), and the longest Duration when it would overflow.
func timeLeft(remaining uint64, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	secs := float64(remaining) / rate
	if secs >= float64(1<<62)/float64(time.Second) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(secs * float64(time.Second))
}
