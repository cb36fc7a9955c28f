package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
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
//
// The single-code protocol predates domains: it asks about the platform's.
const lookupForEdge = `
SELECT s.last_value, l.url, l.redirect_type, l.status, l.expires_at, l.version, l.rules, l.password_hash, l.max_clicks,
       l.clicks_counted
FROM change_version_seq s LEFT JOIN links l ON l.domain_id = 0 AND l.code = $1`

// LookupForEdge answers an edge's question about code on the platform's
// domain: the link's state, or NotFound with the change version reached.
// Errors are the database's; the caller answers Unavailable.
func (s *Store) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	var (
		seq     int64
		url     pgtype.Text
		rt      pgtype.Int2
		status  pgtype.Text
		expires pgtype.Timestamptz
		version pgtype.Int8
		rules   []byte
		hash    pgtype.Text
		max     pgtype.Int8
		counted pgtype.Int8
	)
	if err := s.pool.QueryRow(ctx, lookupForEdge, code).Scan(&seq, &url, &rt, &status, &expires, &version, &rules, &hash, &max, &counted); err != nil {
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
	// The link's extras: the single-code protocol cannot carry them, and
	// its encoder refuses a reply that has them (the responder then
	// answers Unavailable), so such a link is never served without them.
	x, err := composeExtras(rules, hash, max, counted)
	if err != nil {
		return authority.Reply{}, fmt.Errorf("lookup for edge: extras: %w", err)
	}
	r.Extras = string(x)
	return r, nil
}

// lookupCodes reads many (domain, code) keys and the change sequence in one
// statement on the primary, each key at its index (see lookupForEdge for
// the sequence): the two arrays unnest in step, and each pair is one probe
// of links_domain_code.
const lookupCodes = `
SELECT s.last_value, q.i, l.url, l.redirect_type, l.status, l.expires_at, l.version, l.rules, l.password_hash, l.max_clicks,
       l.clicks_counted
FROM change_version_seq s
CROSS JOIN unnest($1::integer[], $2::text[]) WITH ORDINALITY AS q(domain_id, code, i)
LEFT JOIN links l ON l.domain_id = q.domain_id AND l.code = q.code COLLATE "C"`

// LookupCodes answers an edge's question about codes, codes[i] on
// domains[i] (domains empty: every code on the platform's domain): each
// link's state (Found, on its domain) or NotFound, in the order asked, and
// the change version reached when they were read. A domain that does not
// exist has no links: its codes are NotFound. Errors are the database's;
// the caller answers Unavailable.
func (s *Store) LookupCodes(ctx context.Context, domains []link.DomainID, codes []string) ([]authority.Reply, uint64, error) {
	return lookupCodesOn(ctx, s.pool, domains, codes)
}

func lookupCodesOn(ctx context.Context, db querier, domains []link.DomainID, codes []string) ([]authority.Reply, uint64, error) {
	if len(domains) != 0 && len(domains) != len(codes) {
		return nil, 0, fmt.Errorf("lookup codes: %d domains for %d codes", len(domains), len(codes))
	}
	ids := make([]int32, len(codes))
	for i, d := range domains {
		if d > link.MaxDomainID {
			return nil, 0, fmt.Errorf("lookup codes: domain %d", d)
		}
		ids[i] = int32(d)
	}
	rows, err := db.Query(ctx, lookupCodes, ids, codes)
	if err != nil {
		return nil, 0, translate(err)
	}
	defer rows.Close()
	out := make([]authority.Reply, len(codes))
	var seq int64
	for rows.Next() {
		var (
			i       int64
			url     pgtype.Text
			rt      pgtype.Int2
			status  pgtype.Text
			expires pgtype.Timestamptz
			version pgtype.Int8
			rules   []byte
			hash    pgtype.Text
			max     pgtype.Int8
			counted pgtype.Int8
		)
		if err := rows.Scan(&seq, &i, &url, &rt, &status, &expires, &version, &rules, &hash, &max, &counted); err != nil {
			return nil, 0, translate(err)
		}
		if i < 1 || int(i) > len(codes) {
			return nil, 0, fmt.Errorf("lookup codes: row for index %d of %d", i, len(codes))
		}
		r := &out[i-1]
		if !version.Valid {
			*r = authority.Reply{Kind: authority.NotFound}
			continue
		}
		*r = authority.Reply{Kind: authority.Found, Version: uint64(version.Int64), Domain: link.DomainID(ids[i-1]), Code: codes[i-1], URL: url.String,
			RedirectType: link.RedirectType(rt.Int16), Status: link.Status(status.String)}
		if expires.Valid {
			r.ExpiresAt = expires.Time.UnixMilli()
		}
		// The link's extras (links_extras.go), which the responder sends
		// only to an edge that reads them.
		x, err := composeExtras(rules, hash, max, counted)
		if err != nil {
			return nil, 0, fmt.Errorf("lookup codes: index %d: extras: %w", i, err)
		}
		r.Extras = string(x)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, translate(err)
	}
	for i := range out {
		if out[i].Kind == 0 {
			return nil, 0, fmt.Errorf("lookup codes: no row for index %d of %d", i+1, len(codes))
		}
	}
	return out, uint64(seq), nil
}

// lookupHosts reads the active domains among hosts (canonical, compared
// byte for byte as the unique index holds them).
const lookupHosts = `SELECT ` + domainColumns + ` FROM domains WHERE host = ANY($1::text[]) AND status = 'active'`

// LookupKeys answers an edge's question about codes (as LookupCodes) and
// hosts: the active domains that have one of hosts, in no particular
// order, codes and hosts read in one snapshot so the answer is one moment
// of the authority's state. A host no active domain has is simply absent.
// Without hosts it is LookupCodes, with no domains. Errors are the
// database's; the caller answers Unavailable.
func (s *Store) LookupKeys(ctx context.Context, domains []link.DomainID, codes, hosts []string) ([]authority.Reply, []link.Domain, uint64, error) {
	if len(hosts) == 0 {
		reps, v, err := s.LookupCodes(ctx, domains, codes)
		return reps, nil, v, err
	}
	var (
		reps  []authority.Reply
		found []link.Domain
		v     uint64
	)
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if len(codes) > 0 {
			if reps, v, err = lookupCodesOn(ctx, tx, domains, codes); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, lookupHosts, hosts)
		if err != nil {
			return translate(err)
		}
		found, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (link.Domain, error) { return scanDomain(r) })
		return err
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("lookup hosts: %w", err)
	}
	return reps, found, v, nil
}
