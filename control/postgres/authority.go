package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// lookupForEdge reads one code and the change sequence in one statement on
// the primary. The sequence is read first (it is not transactional: its
// last_value may belong to a transaction still running), which is why the
// edge lets any change it later applies for the code win over a NotFound.
// A replica answers from the past and would turn a fresh 201 into a 404:
// a Store on a replica's pool may serve lookups only behind
// responder.ReplicaFirst, which asks the primary on every miss.
const lookupForEdge = `
SELECT s.last_value, l.url, l.redirect_type, l.status, l.expires_at, l.version
FROM change_version_seq s LEFT JOIN links l ON l.code = $1`

// LookupForEdge answers an edge's question about code: the link's state, or
// NotFound with the change version reached. Errors are the database's; the
// caller answers Unavailable.
func (s *Store) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	var (
		seq     int64
		url     pgtype.Text
		rt      pgtype.Int2
		status  pgtype.Text
		expires pgtype.Timestamptz
		version pgtype.Int8
	)
	if err := s.pool.QueryRow(ctx, lookupForEdge, code).Scan(&seq, &url, &rt, &status, &expires, &version); err != nil {
		return authority.Reply{}, translate(err)
	}
	if !version.Valid {
		return authority.Reply{Kind: authority.NotFound, Version: uint64(seq)}, nil
	}
	r := authority.Reply{
		Kind: authority.Found, Version: uint64(version.Int64), Code: code, URL: url.String,
		RedirectType: link.RedirectType(rt.Int16), Status: link.Status(status.String),
	}
	if expires.Valid {
		r.ExpiresAt = expires.Time.UnixMilli()
	}
	return r, nil
}
