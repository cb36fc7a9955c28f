package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// ListLinks implements links.Store with one statement (listQuery).
func (s *Store) ListLinks(ctx context.Context, tenantID int64, d *link.DomainID, q links.ListRequest) ([]*links.Link, error) {
	sql, args, err := listQuery(tenantID, d, q)
	if err != nil {
		return nil, err
	}
	// Planned with this request's values (an unnamed statement), never a
	// cached generic plan: the values are what make a plan good here. A
	// LIKE prefix becomes an index range only when its pattern is known,
	// and whether to walk an order's index or gather a tag's links and
	// sort them depends on how many links carry the tag.
	rows, err := s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*links.Link, error) { return scanLink(row) })
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// listOrders are each order's sort key over links l, its ORDER BY and the
// index that serves it (schema 020 unless named otherwise). The key ends
// in the ID, so the order is total and a row comparison with the cursor
// resumes exactly.
var listOrders = map[links.Sort]struct{ key, orderBy string }{
	// links_tenant_id (schema 001)
	links.SortID: {"l.id", "l.id DESC"},
	// links_tenant_created, links_tenant_status_created
	links.SortNewest: {"(l.created_at, l.id)", "l.created_at DESC, l.id DESC"},
	links.SortOldest: {"(l.created_at, l.id)", "l.created_at, l.id"},
	// links_tenant_code
	links.SortCode: {"(l.code, l.id)", "l.code, l.id"},
	// links_tenant_host
	links.SortHost: {`(link_host(l.url) COLLATE "C", l.id)`, `link_host(l.url) COLLATE "C", l.id`},
}

// listQuery is the statement ListLinks runs, and its arguments: the
// tenant's links matching q, from q's cursor on, in q's order, at most
// q.Limit. Every filter is written only when q asks for it, and the
// statuses as literals, so the planner sees what it plans and can prove a
// partial index's predicate (schema 020: live links, links not active,
// links with an expiry). Tests run EXPLAIN on exactly this.
func listQuery(tenantID int64, d *link.DomainID, q links.ListRequest) (string, []any, error) {
	if q.Limit <= 0 {
		return "", nil, errors.New("list links: limit must be positive")
	}
	order, ok := listOrders[q.Sort]
	if !ok {
		return "", nil, fmt.Errorf("list links: unknown sort %q", q.Sort)
	}
	args := []any{tenantID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var b strings.Builder
	// The effective state (links.State) is a stored status plus, for
	// active links, which side of q.Now their expiry lies on. It is a
	// predicate of the row like any other, so the keyset page stays
	// exact: a link that expires between two pages leaves the active
	// ones, no link is listed twice.
	switch q.Status {
	case "":
		b.WriteString("\n\t  AND l.status <> 'deleted'")
	case link.Active:
		fmt.Fprintf(&b, "\n\t  AND l.status = 'active' AND (l.expires_at IS NULL OR l.expires_at > %s)", arg(q.Now))
	case links.Expired:
		fmt.Fprintf(&b, "\n\t  AND l.status = 'active' AND l.expires_at <= %s", arg(q.Now))
	case link.Disabled:
		b.WriteString("\n\t  AND l.status = 'disabled'")
	case link.Deleted:
		b.WriteString("\n\t  AND l.status = 'deleted'")
	default:
		return "", nil, fmt.Errorf("list links: unknown status %q", q.Status)
	}
	if q.Namespace != "" {
		fmt.Fprintf(&b, "\n\t  AND l.namespace = %s", arg(q.Namespace))
	}
	if d != nil {
		fmt.Fprintf(&b, "\n\t  AND l.domain_id = %s", arg(int64(*d)))
	}
	if !q.CreatedAfter.IsZero() {
		fmt.Fprintf(&b, "\n\t  AND l.created_at > %s", arg(q.CreatedAfter))
	}
	if !q.CreatedBefore.IsZero() {
		fmt.Fprintf(&b, "\n\t  AND l.created_at < %s", arg(q.CreatedBefore))
	}
	// The cursor: the rows after the last one shown, in the list's order.
	var before string
	switch {
	case q.Sort == links.SortID:
		if q.Before != 0 {
			before = arg(int64(q.Before))
			fmt.Fprintf(&b, "\n\t  AND l.id < %s", before)
		}
	case !q.After.IsZero():
		cmp := ">"
		if q.Sort.Descending() {
			cmp = "<"
		}
		var key any = q.After.Key
		if q.Sort == links.SortNewest || q.Sort == links.SortOldest {
			t, err := q.After.Created()
			if err != nil {
				return "", nil, err
			}
			key = t
		}
		fmt.Fprintf(&b, "\n\t  AND %s %s (%s, %s)", order.key, cmp, arg(key), arg(int64(q.After.ID)))
	}
	from := listFilters(q, &b, arg, before)
	limit := arg(q.Limit)
	return `SELECT ` + linkColumns + `
	FROM ` + from + `
	WHERE l.tenant_id = $1` + b.String() + `
	ORDER BY ` + order.orderBy + ` LIMIT ` + limit, args, nil
}

// listFilters writes what q's tags and search add to a list over links l:
// it returns the FROM clause and writes predicates into b as "AND ..."
// lines, each only when q asks for it, passing values through arg (which
// answers the value's placeholder). $1 is the tenant; before is the ID
// cursor's placeholder ("" for none).
//
// In ID order (the API's), a tag filter drives the list from link_tags
// rather than filtering links: each tag's links of one tenant are a range
// of the primary key in ID order, read backwards from the cursor, so a
// page costs about a page of index entries however many links carry the
// tag, and a tag on few links is found without reading the tenant's other
// links. With several tags (any) the ranges are merged in ID order; with
// all of them the first tag's range is read and the others are checked by
// key, link by link. In any other order link_tags has no order to offer:
// the tags are a semi-join, and the planner chooses between walking the
// order's index and checking each link's tags (a common tag) and reading
// the tag's links and sorting them (a rare one), by the tag's statistics.
func listFilters(q links.ListRequest, b *strings.Builder, arg func(any) string, before string) (from string) {
	from = "links l"
	if len(q.Tags) > 0 {
		cursor := ""
		if before != "" {
			cursor = " AND t.link_id < " + before
		}
		tagRange := func(tag string) string {
			return fmt.Sprintf("(SELECT t.link_id FROM link_tags t WHERE t.tenant_id = $1 AND t.tag = %s::text%s ORDER BY t.link_id DESC)", arg(tag), cursor)
		}
		hasTag := func(tag string) string {
			return fmt.Sprintf("\n\t  AND EXISTS (SELECT FROM link_tags t WHERE t.tenant_id = $1 AND t.tag = %s::text AND t.link_id = l.id)", arg(tag))
		}
		switch {
		case q.Sort != links.SortID && q.TagMode == links.TagsAll:
			for _, tag := range q.Tags {
				b.WriteString(hasTag(tag))
			}
		case q.Sort != links.SortID:
			fmt.Fprintf(b, "\n\t  AND l.id IN (SELECT t.link_id FROM link_tags t WHERE t.tenant_id = $1 AND t.tag = ANY (%s::text[]))", arg(q.Tags))
		case q.TagMode == links.TagsAll || len(q.Tags) == 1:
			driver := tagRange(q.Tags[0])
			for _, tag := range q.Tags[1:] {
				b.WriteString(hasTag(tag))
			}
			from = driver + " m JOIN links l ON l.id = m.link_id"
		default:
			parts := make([]string, len(q.Tags))
			for i, tag := range q.Tags {
				parts[i] = tagRange(tag)
			}
			from = "(SELECT DISTINCT u.link_id FROM (" + strings.Join(parts, " UNION ALL ") + ") u ORDER BY u.link_id DESC) m JOIN links l ON l.id = m.link_id"
		}
	}
	if q.Search != "" {
		// A code starts with the term as typed (codes are case-sensitive);
		// a host is the term or a subdomain of it, in lower case, matched
		// reversed (links_host_reversed); a title holds it in any case.
		rev := reverse(strings.ToLower(q.Search))
		fmt.Fprintf(b, "\n\t  AND (l.code LIKE %s OR link_host_reversed(l.url) COLLATE \"C\" = %s OR link_host_reversed(l.url) COLLATE \"C\" LIKE %s OR l.title ILIKE %s)",
			arg(likeEscape(q.Search)+"%"), arg(rev), arg(likeEscape(rev)+".%"), arg("%"+likeEscape(q.Search)+"%"))
	}
	return from
}
