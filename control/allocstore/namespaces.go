package allocstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgelink/edgelink/control/idalloc"
)

// LookupNamespace reads a namespace's bounds and step from its counter row:
// idalloc.Config.Lookup, so an allocator serves namespaces made after it
// started (a domain's, created with the domain). A namespace without a row
// wraps idalloc.ErrUnknownNamespace.
func (s *Store) LookupNamespace(ctx context.Context, name string) (idalloc.Namespace, error) {
	var lower, upper, step int64
	err := s.pool.QueryRow(ctx, `SELECT lower_bound, upper_bound, step FROM alloc_namespaces WHERE namespace = $1`,
		name).Scan(&lower, &upper, &step)
	if errors.Is(err, pgx.ErrNoRows) {
		return idalloc.Namespace{}, fmt.Errorf("%w: %q", idalloc.ErrUnknownNamespace, name)
	}
	if err != nil {
		return idalloc.Namespace{}, translate("look up namespace", err, false)
	}
	return idalloc.Namespace{Name: name, Start: uint64(lower), End: uint64(upper), Step: uint64(step)}, nil
}

// Execer runs a statement: a transaction (pgx.Tx) or a pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateNamespace adds a namespace's counter row and its first ceiling (in
// force at once, as EnsureNamespace does) on q, so a caller creates it in
// the transaction that makes what owns it (a domain). A namespace of that
// name, or one overlapping its range, is refused wrapping idalloc.ErrConfig.
func CreateNamespace(ctx context.Context, q Execer, ns idalloc.Namespace) error {
	step := ns.Step
	if step == 0 {
		step = idalloc.DefaultStep
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO alloc_namespaces (namespace, next_id, step, lower_bound, upper_bound)
		VALUES ($1, $2, $3, $2, $4)`,
		ns.Name, int64(ns.Start), int64(step), int64(ns.End)); err != nil {
		switch pgCode(err) {
		case "23505", "23P01", "23514":
			return fmt.Errorf("%w: namespace %s [%d, %d): %w", idalloc.ErrConfig, ns.Name, ns.Start, ns.End, err)
		}
		return translate("create namespace", err, false)
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO alloc_ceilings (namespace, prev_ceiling, ceiling, ceiling_at)
		SELECT namespace, least(upper_bound, next_id + $2 * step), least(upper_bound, next_id + $2 * step), 'epoch'
		FROM alloc_namespaces WHERE namespace = $1`, ns.Name, ceilingSegments); err != nil {
		return translate("create namespace: ceiling", err, false)
	}
	return nil
}
