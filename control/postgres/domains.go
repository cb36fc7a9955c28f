package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/shared/link"
)

// DomainIDStep is the segment length of a domain's allocator namespace:
// smaller than the platform's, because most domains see few creates and
// every control restart discards the rest of a segment.
const DomainIDStep = 10_000

// domainColumns are what scanDomain reads.
const domainColumns = `id, host, coalesce(tenant_id, 0), coalesce(root_redirect, ''), coalesce(not_found_redirect, ''),
	coalesce(robots, ''), code_mode, key_ids, status, version`

func scanDomain(row pgx.Row) (link.Domain, error) {
	var (
		d             link.Domain
		id            int64
		mode, status  string
		version       int64
		root, nf, rob string
	)
	if err := row.Scan(&id, &d.Host, &d.TenantID, &root, &nf, &rob, &mode, &d.KeyIDs, &status, &version); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return link.Domain{}, fmt.Errorf("%w: no such domain", link.ErrNotFound)
		}
		return link.Domain{}, translate(err)
	}
	d.ID, d.RootRedirect, d.NotFoundRedirect, d.Robots = link.DomainID(id), root, nf, rob
	d.CodeMode, d.Status, d.Version = link.CodeMode(mode), link.DomainStatus(status), uint64(version)
	if len(d.KeyIDs) == 0 {
		d.KeyIDs = nil
	}
	return d, nil
}

// DomainByHost implements links.DomainStore: the domain whose canonical
// host is host, whatever its status.
func (s *Store) DomainByHost(ctx context.Context, host string) (link.Domain, error) {
	return scanDomain(s.pool.QueryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE host = $1`, host))
}

// DomainByID implements links.DomainStore.
func (s *Store) DomainByID(ctx context.Context, id link.DomainID) (link.Domain, error) {
	return scanDomain(s.pool.QueryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE id = $1`, int64(id)))
}

// Domains lists the tenant's domains in creation order, then the
// platform's; tenantID 0 lists every domain, by ID. Removed domains are
// listed too.
func (s *Store) Domains(ctx context.Context, tenantID int64) ([]link.Domain, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+domainColumns+` FROM domains
		WHERE $1 = 0 OR tenant_id = $1 OR id = 0
		ORDER BY CASE WHEN $1 <> 0 AND id = 0 THEN 1 ELSE 0 END, id`, tenantID)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (link.Domain, error) { return scanDomain(row) })
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// CreateDomain stores a new active domain d for d.TenantID (a tenant, not
// 0) in one transaction with its allocator namespace (link.NamespaceOf,
// range link.IDRange, DomainIDStep) and its change event (an outbox row of
// kind 'domain' carrying the configuration). d.ID and d.Version are
// assigned; d.Host must be canonical and the rest validated. A host
// another domain has answers link.ErrDomainTaken, and nothing is written.
func (s *Store) CreateDomain(ctx context.Context, d link.Domain) (link.Domain, error) {
	if d.TenantID == 0 {
		return link.Domain{}, fmt.Errorf("%w: a domain belongs to a tenant", link.ErrInvalidInput)
	}
	d.Status = link.DomainActive
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The xid before the version, as every outbox writer does: the
		// relay can then always find the transaction holding a version.
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			return err
		}
		var id, version int64
		if err := tx.QueryRow(ctx, `
			INSERT INTO domains (id, host, tenant_id, root_redirect, not_found_redirect, robots, code_mode, key_ids, status, version)
			VALUES (nextval('domain_id_seq'), $1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), $6, $7, 'active',
			        nextval('change_version_seq'))
			RETURNING id, version`,
			d.Host, d.TenantID, d.RootRedirect, d.NotFoundRedirect, d.Robots, string(d.CodeMode), keyIDs(d.KeyIDs),
		).Scan(&id, &version); err != nil {
			return err
		}
		d.ID, d.Version = link.DomainID(id), uint64(version)
		start, end := link.IDRange(d.ID)
		if err := allocstore.CreateNamespace(ctx, tx, idalloc.Namespace{Name: link.NamespaceOf(d.ID), Start: start, End: end, Step: DomainIDStep}); err != nil {
			return fmt.Errorf("domain %s: %w", d.Host, err)
		}
		return writeDomainEvent(ctx, tx, d)
	})
	if err != nil {
		return link.Domain{}, translateDomain(err)
	}
	s.waker.wake()
	return d, nil
}

// UpdateDomain changes the domain with host in one transaction: it locks
// the row, lets change modify the configuration it read (an error from
// change rolls back and is returned as it is), and writes the result with
// a new version and its change event. tenantID 0 is the operator, who may
// change any domain; a tenant may change only its own, and another's (or
// an unknown host) answers link.ErrNotFound. change may set every field
// but ID, Host, TenantID and Version.
func (s *Store) UpdateDomain(ctx context.Context, tenantID int64, host string, change func(*link.Domain) error) (link.Domain, error) {
	var d link.Domain
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		d, err = scanDomain(tx.QueryRow(ctx, `SELECT `+domainColumns+` FROM domains
			WHERE host = $1 AND ($2 = 0 OR tenant_id = $2) FOR UPDATE`, host, tenantID))
		if err != nil {
			return err
		}
		id, owner := d.ID, d.TenantID
		if err := change(&d); err != nil {
			return err
		}
		d.ID, d.Host, d.TenantID = id, host, owner
		return updateDomain(ctx, tx, &d)
	})
	if err != nil {
		return link.Domain{}, translateDomain(err)
	}
	s.waker.wake()
	return d, nil
}

// updateDomain writes d's settings with a new version, taken after the row
// lock and the xid, and its change event.
func updateDomain(ctx context.Context, tx pgx.Tx, d *link.Domain) error {
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		return err
	}
	var version int64
	if err := tx.QueryRow(ctx, `
		UPDATE domains SET host = $2, root_redirect = nullif($3, ''), not_found_redirect = nullif($4, ''),
			robots = nullif($5, ''), code_mode = $6, key_ids = $7, status = $8,
			version = nextval('change_version_seq'), updated_at = now()
		WHERE id = $1 RETURNING version`,
		int64(d.ID), d.Host, d.RootRedirect, d.NotFoundRedirect, d.Robots, string(d.CodeMode), keyIDs(d.KeyIDs), string(d.Status),
	).Scan(&version); err != nil {
		return err
	}
	d.Version = uint64(version)
	return writeDomainEvent(ctx, tx, *d)
}

// writeDomainEvent writes d, as it now is, as an outbox row of kind
// 'domain': the relay publishes the configuration without reading the
// domains table, so a later change cannot overtake it.
func writeDomainEvent(ctx context.Context, tx pgx.Tx, d link.Domain) error {
	conf, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO outbox (version, xid, kind, domain_id, domain_conf)
		VALUES ($1, pg_current_xact_id(), 'domain', $2, $3)`, int64(d.Version), int64(d.ID), conf)
	return err
}

// EnsureDefaultDomain gives the platform's domain (0) host, the canonical
// host of control's --public-url, at control's start: with a new version
// and change event when it changes, and nothing written when it is the
// same already. A host another domain has answers link.ErrDomainTaken.
func (s *Store) EnsureDefaultDomain(ctx context.Context, host string) (link.Domain, error) {
	canon, err := link.CanonicalHost(host)
	if err != nil || canon != host {
		return link.Domain{}, fmt.Errorf("%w: platform host %q is not canonical (%v)", link.ErrInvalidInput, host, err)
	}
	var d link.Domain
	changed := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if d, err = scanDomain(tx.QueryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE id = 0 FOR UPDATE`)); err != nil {
			return err
		}
		if d.Host == host {
			return nil
		}
		var other pgtype.Int8
		if err := tx.QueryRow(ctx, `SELECT id FROM domains WHERE host = $1`, host).Scan(&other); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if other.Valid {
			return fmt.Errorf("%w: %s is domain %d's; the platform's domain cannot have it", link.ErrDomainTaken, host, other.Int64)
		}
		d.Host, changed = host, true
		return updateDomain(ctx, tx, &d)
	})
	if err != nil {
		return link.Domain{}, translateDomain(err)
	}
	if changed {
		s.waker.wake()
	}
	return d, nil
}

// keyIDs is names as a text[] that is never NULL.
func keyIDs(names []string) []string {
	if names == nil {
		return []string{}
	}
	return names
}

// translateDomain is translate, with a taken host as link.ErrDomainTaken.
func translateDomain(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "domains_host_key" {
		return link.ErrDomainTaken
	}
	return translate(err)
}
