package postgres

import (
	"context"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// UpdateLink implements links.Store. The fields change in one statement
// (updateLink: row lock, version, outbox row); with tags, the tags change
// in the same transaction as that statement, under the same row lock, so
// an edit of both is saved whole or not at all. Tags alone take no
// version and write no change event: edges never see them.
func (s *Store) UpdateLink(ctx context.Context, tenantID int64, d link.DomainID, code string, c links.Change) (*links.Link, error) {
	fields := fieldsSet(c)
	if !c.SetTags {
		l, err := s.updateLinkOn(ctx, s.pool, tenantID, d, code, c)
		if err == nil {
			s.waker.wake()
		}
		return l, err
	}
	var out *links.Link
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The lock updateLink would take, taken first: a concurrent
		// TagLinks on this link (which locks it too) waits for the whole
		// edit, and cannot push the link past its tag limit meanwhile.
		var (
			id     int64
			status string
		)
		if err := tx.QueryRow(ctx, `SELECT id, status FROM links WHERE domain_id = $3 AND code = $1 AND tenant_id = $2 FOR UPDATE`,
			code, tenantID, int64(d)).Scan(&id, &status); err != nil {
			return err
		}
		if status == string(link.Deleted) {
			return link.ErrDeleted
		}
		tags := c.Tags
		if tags == nil {
			tags = []string{}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM link_tags WHERE tenant_id = $1 AND link_id = $2 AND tag <> ALL ($3::text[])`,
			tenantID, id, tags); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO link_tags (tenant_id, tag, link_id)
			SELECT $1, g.tag, $2 FROM unnest($3::text[]) AS g(tag) ORDER BY 2
			ON CONFLICT DO NOTHING`, tenantID, id, tags); err != nil {
			return err
		}
		var err error
		if fields {
			// Its answer reads the tags just written: a statement sees
			// what its transaction wrote before it.
			out, err = s.updateLinkOn(ctx, tx, tenantID, d, code, c)
			return err
		}
		out, err = scanLink(tx.QueryRow(ctx, `SELECT `+linkColumns+` FROM links l WHERE l.id = $1`, id))
		return err
	})
	if err != nil {
		return nil, translate(err)
	}
	if fields {
		s.waker.wake()
	}
	return out, nil
}

// fieldsSet reports whether c changes anything but tags: any of its Set
// flags but SetTags. The flags are read by reflection, so a field added
// to links.Change is never taken for a change of tags alone.
func fieldsSet(c links.Change) bool {
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if strings.HasPrefix(f.Name, "Set") && f.Name != "SetTags" && f.Type.Kind() == reflect.Bool && v.Field(i).Bool() {
			return true
		}
	}
	return false
}
