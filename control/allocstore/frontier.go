package allocstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/shared/authority"
)

// frontiersSQL reads every namespace's counter and announced ceiling. FOR
// SHARE OF c orders it against raises (see ceiling): a raise it does not see
// locks the row after this read released it, so the raise's clock reading,
// and the time its ceiling comes into force, are later than this read,
// later than the question it answers was sent. A plain read would not do:
// it could miss a raise whose clock was read before it and that commits
// after it. Only a primary can take the lock, so a replica never answers
// this.
const frontiersSQL = `
SELECT n.namespace, n.lower_bound, n.upper_bound, n.next_id, c.ceiling
FROM alloc_ceilings c JOIN alloc_namespaces n USING (namespace)
ORDER BY n.lower_bound
FOR SHARE OF c`

// Frontiers implements the responder's frontier read: each namespace's range,
// counter and announced ceiling (at least the counter: a counter moved past
// the ceiling without a lease, as raise-floor does, leaves no room for any
// lease until a raise comes into force), and the promise that goes with
// them. Namespaces without a ceiling row are left out, so edges promise
// nothing about them.
func (s *Store) Frontiers(ctx context.Context) ([]authority.Frontier, time.Duration, error) {
	rows, err := s.pool.Query(ctx, frontiersSQL)
	if err != nil {
		return nil, 0, translate("read frontiers", err, false)
	}
	var out []authority.Frontier
	var f authority.Frontier
	var lower, upper, next, ceiling int64
	_, err = pgx.ForEachRow(rows, []any{&f.Namespace, &lower, &upper, &next, &ceiling}, func() error {
		f.Start, f.End, f.Next = uint64(lower), uint64(upper), uint64(next)
		f.Ceiling = min(uint64(max(ceiling, next)), f.End)
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, 0, translate("read frontiers", err, false)
	}
	return out, Promise, nil
}
