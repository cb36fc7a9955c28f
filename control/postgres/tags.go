package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Tags are rows of link_tags (schema 012): (tenant, tag, link), so one
// tag's links of one tenant are an index range in ID order, the order
// lists page in.

// likeEscape escapes LIKE's wildcards (and its escape character) in s.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func reverse(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// TagLinks implements links.Store in one transaction. The links are
// locked first, in ID order, so two changes of overlapping links queue
// rather than deadlock and neither can slip a tag past the other's count;
// the limit is checked after the change, so a link over it rolls the whole
// change back.
func (s *Store) TagLinks(ctx context.Context, tenantID int64, d link.DomainID, c links.TagChange) ([]*links.Link, error) {
	var out []*links.Link
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id, code FROM links
			WHERE tenant_id = $1 AND domain_id = $3 AND code = ANY ($2::text[]) AND status <> 'deleted'
			ORDER BY id FOR UPDATE`, tenantID, c.Codes, int64(d))
		if err != nil {
			return err
		}
		ids := make([]int64, 0, len(c.Codes))
		found := make(map[string]bool, len(c.Codes))
		var (
			id   int64
			code string
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &code}, func() error {
			ids, found[code] = append(ids, id), true
			return nil
		}); err != nil {
			return err
		}
		if len(found) < len(c.Codes) {
			var missing []string
			for _, code := range c.Codes {
				if !found[code] {
					missing = append(missing, code)
				}
			}
			return fmt.Errorf("%w: %s", link.ErrNotFound, codeList("no link (or a deleted one) with code", missing))
		}
		if len(c.Remove) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM link_tags WHERE tenant_id = $1 AND link_id = ANY ($2::bigint[]) AND tag = ANY ($3::text[])`,
				tenantID, ids, c.Remove); err != nil {
				return err
			}
		}
		if len(c.Add) > 0 {
			if _, err := tx.Exec(ctx, `
				INSERT INTO link_tags (tenant_id, tag, link_id)
				SELECT $1, g.tag, i.id FROM unnest($2::bigint[]) AS i(id) CROSS JOIN unnest($3::text[]) AS g(tag)
				ORDER BY 2, 3
				ON CONFLICT DO NOTHING`, tenantID, ids, c.Add); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `
				SELECT l.code, count(*) FROM link_tags t JOIN links l ON l.id = t.link_id
				WHERE t.link_id = ANY ($1::bigint[]) GROUP BY l.code HAVING count(*) > $2 ORDER BY l.code`, ids, links.MaxTags)
			if err != nil {
				return err
			}
			var over []string
			var n int64
			if _, err := pgx.ForEachRow(rows, []any{&code, &n}, func() error {
				over = append(over, fmt.Sprintf("%s (%d)", code, n))
				return nil
			}); err != nil {
				return err
			}
			if len(over) > 0 {
				return fmt.Errorf("%w: a link carries at most %d tags; %s", link.ErrInvalidInput, links.MaxTags, codeList("this change would give more to", over))
			}
		}
		rows, err = tx.Query(ctx, `SELECT `+linkColumns+` FROM links l WHERE l.id = ANY ($1::bigint[])`, ids)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*links.Link, error) { return scanLink(row) })
		if err != nil {
			return err
		}
		byCode := make(map[string]*links.Link, len(got))
		for _, l := range got {
			byCode[l.Code] = l
		}
		out = make([]*links.Link, len(c.Codes))
		for i, code := range c.Codes {
			out[i] = byCode[code]
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// codeList is what, then up to 10 of items and how many more.
func codeList(what string, items []string) string {
	shown := items[:min(len(items), 10)]
	s := what + " " + strings.Join(shown, ", ")
	if more := len(items) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
