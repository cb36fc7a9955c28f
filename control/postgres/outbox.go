package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// relayLockKey is the advisory lock that makes one relay the publisher.
const relayLockKey int64 = 0x65646765_6c6e6b31 // "edgelnk1"

// ReadOutbox implements outbox.Store. A link row is its link's event on
// its domain (a row from before domains has none: the platform's); a
// domain row carries the domain's whole configuration as it was written
// (domain_conf, the JSON of link.Domain), which becomes the event's Conf
// as of the row's version.
//
// A limited link's event carries the clicks counted of it
// (links.clicks_counted, schema 021) as the relay reads them, when the
// link's limit is still the row's: a count read later than the change is
// as sound a start for an edge's allowance (docs/click-limits.md), and
// closer. A row of a limit changed since carries none (a count against
// another limit could say reached when the newer one is not); the newer
// row follows it.
//
// A row that cannot become an event ends the page before it, so what
// precedes it is published; when it is the first row, ReadOutbox fails
// naming it, and the relay stays on it (a change is never skipped) with
// the reason in its log.
func (s *Store) ReadOutbox(ctx context.Context, from uint64, limit int) (outbox.Page, error) {
	var page outbox.Page
	rows, err := s.pool.Query(ctx, `
		SELECT version, kind, code, url, redirect_type, status, expires_at,
		       namespace, seg_start, seg_end, seg_state, domain_id, domain_conf,
		       rules, password_hash, max_clicks,
		       CASE WHEN max_clicks IS NOT NULL THEN (SELECT l.clicks_counted FROM links l
		            WHERE l.domain_id = outbox.domain_id AND l.code = outbox.code AND l.max_clicks = outbox.max_clicks) END
		FROM outbox WHERE version >= $1 ORDER BY version LIMIT $2`, int64(from), limit)
	if err != nil {
		return page, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanOutbox(rows)
		if err != nil {
			if len(page.Events) > 0 {
				return page, nil
			}
			return page, err
		}
		page.Events = append(page.Events, e)
	}
	return page, translate(rows.Err())
}

func scanOutbox(row pgx.Rows) (linkevent.Event, error) {
	var (
		e                            linkevent.Event
		version                      int64
		kind                         string
		code, url, status, ns, segSt pgtype.Text
		rt                           pgtype.Int2
		expires                      pgtype.Timestamptz
		segStart, segEnd             pgtype.Int8
		domain                       pgtype.Int4
		conf                         []byte
		rules                        []byte
		hash                         pgtype.Text
		maxClicks, counted           pgtype.Int8
	)
	if err := row.Scan(&version, &kind, &code, &url, &rt, &status, &expires, &ns, &segStart, &segEnd, &segSt, &domain, &conf,
		&rules, &hash, &maxClicks, &counted); err != nil {
		return e, translate(err)
	}
	e.Version, e.Kind = uint64(version), linkevent.Kind(kind)
	if domain.Valid {
		if domain.Int32 < 0 || link.DomainID(domain.Int32) > link.MaxDomainID {
			return e, fmt.Errorf("outbox row %d: domain %d", version, domain.Int32)
		}
		e.Domain = link.DomainID(domain.Int32)
	}
	switch e.Kind {
	case linkevent.KindDomain:
		var c link.Domain
		if err := json.Unmarshal(conf, &c); err != nil {
			return e, fmt.Errorf("outbox row %d: domain configuration: %w", version, err)
		}
		if !domain.Valid || c.ID != e.Domain {
			return e, fmt.Errorf("outbox row %d: configuration of domain %d in a row of domain %d (set %v)", version, c.ID, domain.Int32, domain.Valid)
		}
		// The configuration is as of the change that wrote it, whatever
		// version its JSON says: edges compare it by this one.
		c.Version = e.Version
		e.Conf = &c
		return e, nil
	}
	e.Code, e.URL, e.Status = code.String, url.String, link.Status(status.String)
	// A link's extras (links_extras.go): its rules, password hash and
	// click limit, as one value in the wire form edges read. The error
	// names no value: the hash and the targets stay out of logs.
	x, err := composeExtras(rules, hash, maxClicks, counted)
	if err != nil {
		return e, fmt.Errorf("outbox row %d: extras: %w", version, err)
	}
	e.Extras = string(x)
	e.RedirectType = link.RedirectType(rt.Int16)
	if expires.Valid {
		e.ExpiresAt = expires.Time.UnixMilli()
	}
	e.Namespace, e.SegState = ns.String, segSt.String
	e.SegStart, e.SegEnd = uint64(segStart.Int64), uint64(segEnd.Int64)
	return e, nil
}

// XactCeiling implements outbox.Store.
func (s *Store) XactCeiling(ctx context.Context) (uint64, error) {
	var x string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&x)
	})
	if err != nil {
		return 0, translate(err)
	}
	return strconv.ParseUint(x, 10, 64)
}

// XactsEndedBelow implements outbox.Store. A snapshot lists the running transactions below its
// xmax, and xmax passes ceiling once the ceiling's own transaction has
// ended, so a fresh snapshot answers for all of them.
func (s *Store) XactsEndedBelow(ctx context.Context, ceiling uint64) (bool, error) {
	var ended bool
	c := strconv.FormatUint(ceiling, 10)
	err := s.pool.QueryRow(ctx, `
		SELECT pg_snapshot_xmax(s) > $1::text::xid8
		       AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(s) AS x WHERE x < $1::text::xid8)
		FROM (SELECT pg_current_snapshot() AS s) AS t`, c).Scan(&ended)
	return ended, translate(err)
}

// MinOutboxVersion implements outbox.Store: the first outbox row at or
// after the published position (outbox_published), one probe of the
// primary key.
func (s *Store) MinOutboxVersion(ctx context.Context) (uint64, bool, error) {
	var v pgtype.Int8
	if err := s.pool.QueryRow(ctx, `
		SELECT min(version) FROM outbox
		WHERE version >= (SELECT next_version FROM outbox_published)`).Scan(&v); err != nil {
		return 0, false, translate(err)
	}
	return uint64(v.Int64), v.Valid, nil
}

// MarkPublished implements outbox.Store: one row, moved forward only, so a
// late mark of an older position (a relay that lost its lock) changes
// nothing, and an unchanged one writes nothing.
func (s *Store) MarkPublished(ctx context.Context, next uint64) error {
	_, err := s.pool.Exec(ctx, `UPDATE outbox_published SET next_version = $1 WHERE next_version < $1`, int64(next))
	return translate(err)
}

// PurgePublished implements outbox.Store. The published position is read
// in the statement, so a row the relay has not published is never
// deleted; oldest versions first, by the primary key.
func (s *Store) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM outbox WHERE version IN (
			SELECT version FROM outbox
			WHERE version < (SELECT next_version FROM outbox_published) AND created_at < $1
			ORDER BY version LIMIT $2)`, before, limit)
	if err != nil {
		return 0, translate(err)
	}
	return int(tag.RowsAffected()), nil
}

// relaySession is a dedicated connection holding the relay's advisory lock
// and listening for outbox notifications.
type relaySession struct{ lockSession }

// AcquireRelay implements outbox.Store on a dedicated connection.
func (s *Store) AcquireRelay(ctx context.Context) (outbox.Session, error) {
	l, err := s.lock(ctx, relayLockKey, outbox.ErrBusy)
	if err != nil {
		return nil, err
	}
	if _, err := l.conn.Exec(ctx, `LISTEN outbox`); err != nil {
		l.Close() // drops the lock with the connection
		return nil, translate(err)
	}
	return &relaySession{l}, nil
}

// Wait implements outbox.Session.
func (r *relaySession) Wait(ctx context.Context) error {
	_, err := r.conn.Conn().WaitForNotification(ctx)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("relay session lost: %w", err)
	}
	return nil
}
