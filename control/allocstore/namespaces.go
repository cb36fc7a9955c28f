package allocstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
