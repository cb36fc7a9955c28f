package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// ReadLinks implements snapshots.Authority in one REPEATABLE READ, READ
// ONLY transaction: its counts, its sealed segments, its domains and its
// links are all of one snapshot of the database.
func (s *Store) ReadLinks(ctx context.Context, begin func(counts map[link.DomainID]int64, sealed []snapshot.Sealed, domains []link.Domain) error, each func(snapshot.Link) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		counts := map[link.DomainID]int64{}
		rows, err := tx.Query(ctx, `SELECT domain_id, count(*) FROM links GROUP BY domain_id`)
		if err != nil {
			return err
		}
		var (
			d link.DomainID
			n int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&d, &n}, func() error { counts[d] = n; return nil }); err != nil {
			return err
		}
		sealed, err := readSealed(ctx, tx)
		if err != nil {
			return err
		}
		domains, err := readSnapshotDomains(ctx, tx)
		if err != nil {
			return err
		}
		if err := begin(counts, sealed, domains); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT domain_id, code, url, redirect_type, status, expires_at, version,
			rules, password_hash, max_clicks, clicks_counted FROM links`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			l       snapshot.Link
			rt      int16
			status  string
			expires pgtype.Timestamptz
			version int64
			rules   []byte
			hash    pgtype.Text
			max     pgtype.Int8
			counted pgtype.Int8
		)
		for rows.Next() {
			if err := rows.Scan(&l.Domain, &l.Code, &l.URL, &rt, &status, &expires, &version, &rules, &hash, &max, &counted); err != nil {
				return err
			}
			// The extras' wire form (links_extras.go); nil for a plain
			// link. A fresh slice: the writer keeps what it is given.
			if l.Extras, err = composeExtras(rules, hash, max, counted); err != nil {
				return fmt.Errorf("link of version %d on domain %d: extras: %w", version, l.Domain, err)
			}
			l.RedirectType, l.Status, l.Version, l.ExpiresAt = link.RedirectType(rt), link.Status(status), uint64(version), 0
			if expires.Valid {
				l.ExpiresAt = expires.Time.UnixMilli()
			}
			if err := each(l); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return translate(err)
}

// readSnapshotDomains reads every domain, removed ones too, in ascending
// number: the snapshot's domain table.
func readSnapshotDomains(ctx context.Context, tx pgx.Tx) ([]link.Domain, error) {
	rows, err := tx.Query(ctx, `
		SELECT id, host, coalesce(tenant_id, 0), coalesce(root_redirect, ''), coalesce(not_found_redirect, ''),
		       coalesce(robots, ''), code_mode, key_ids, status, version
		FROM domains ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (link.Domain, error) {
		var (
			d       link.Domain
			version int64
		)
		err := r.Scan(&d.ID, &d.Host, &d.TenantID, &d.RootRedirect, &d.NotFoundRedirect, &d.Robots, &d.CodeMode, &d.KeyIDs, &d.Status, &version)
		if len(d.KeyIDs) == 0 {
			d.KeyIDs = nil
		}
		d.Version = uint64(version)
		return d, err
	})
}

// readSealed merges each namespace's sealed audit intervals.
func readSealed(ctx context.Context, tx pgx.Tx) ([]snapshot.Sealed, error) {
	rows, err := tx.Query(ctx, `
		SELECT namespace, seg_start, seg_end FROM alloc_audit
		WHERE sealed_at IS NOT NULL ORDER BY namespace, seg_start`)
	if err != nil {
		return nil, err
	}
	type row struct {
		NS         string
		Start, End int64
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, err
	}
	var out []snapshot.Sealed
	for _, r := range all {
		if len(out) == 0 || out[len(out)-1].Namespace != r.NS {
			out = append(out, snapshot.Sealed{Namespace: r.NS})
		}
		s := &out[len(out)-1]
		iv := snapshot.Interval{Start: uint64(r.Start), End: uint64(r.End)}
		if n := len(s.Intervals); n > 0 && s.Intervals[n-1].End == iv.Start {
			s.Intervals[n-1].End = iv.End
		} else {
			s.Intervals = append(s.Intervals, iv)
		}
	}
	return out, nil
}
