package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// ReadLinks implements snapshots.Authority in one REPEATABLE READ, READ
// ONLY transaction: its count, its sealed segments and its links are all of
// one snapshot of the database.
func (s *Store) ReadLinks(ctx context.Context, begin func(total int64, sealed []snapshot.Sealed) error, each func(snapshot.Link) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var total int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM links`).Scan(&total); err != nil {
			return err
		}
		sealed, err := readSealed(ctx, tx)
		if err != nil {
			return err
		}
		if err := begin(total, sealed); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT code, url, redirect_type, status, expires_at, version FROM links`)
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
		)
		for rows.Next() {
			if err := rows.Scan(&l.Code, &l.URL, &rt, &status, &expires, &version); err != nil {
				return err
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
