package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// ListLinks implements links.Store with one statement (listQuery).
func (s *Store) ListLinks(ctx context.Context, tenantID int64, d *link.DomainID, q links.ListRequest) ([]*links.Link, error) {
	how, err := s.listPlan(ctx, tenantID, q)
	if err != nil {
		return nil, translate(err)
	}
	sql, args, err := listQuery(tenantID, d, q, how)
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

// listPlan says how a list reads its links: by walking its order's index
// and filtering, or by gathering its matches through their own indexes
// first and sorting them.
//
// The planner picks between the two from how many links it expects to
// match, assuming they are spread evenly along the order. They often are
// not: a code prefix matches a series of custom codes made together, a
// tag a campaign's links of one week; then a walk from the newest end
// reads the tenant's links back to the campaign (bench/console saw 80,000
// rows read, 1.1 s, for a code prefix). Gathering costs what the matches
// cost, wherever they lie; walking costs about a page over the matches'
// share of the tenant, when they are spread. So a list gathers when its
// matches are few: a fiftieth of the tenant's live links
// (live_link_counts) at most, within [gatherMin, gatherMax], counted
// through their indexes up to that bound (one round trip, never more than
// the bound's worth of index entries); past it the matches are common
// enough that a walk fills a page within some fifty pages' worth of rows,
// if they are spread. What
// is left to chance: more matches than the bound, all at one end of the
// order, still make a walk read up to them. A search shorter than 3 characters
// always walks: the title's trigram index cannot serve it, and it matches
// widely. In ID order a tag filter reads each tag's links in ID order from
// link_tags, which is already bounded by a page, and is left alone.
type listPlan struct {
	gatherSearch, gatherTags bool
}

// A list gathers its matches when they are at most a fiftieth of the
// tenant's live links, but always up to gatherMin and never past
// gatherMax: each is a heap page read at random, and at 5,000 matches
// (5% of 100,000 links) bench/console saw gathering cost 360 ms where a
// walk reads about 1,000 rows.
const (
	gatherMin = 200
	gatherMax = 5_000
)

func (s *Store) listPlan(ctx context.Context, tenantID int64, q links.ListRequest) (listPlan, error) {
	var how listPlan
	search := utf8.RuneCountInString(q.Search) >= 3
	tags := len(q.Tags) > 0 && q.Sort != links.SortID
	if !search && !tags {
		return how, nil
	}
	args := []any{tenantID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	bound := fmt.Sprintf(`(SELECT least(%d, greatest(%d, coalesce(sum(n), 0)::bigint / 50)) + 1 FROM live_link_counts WHERE tenant_id = $1)`, gatherMax, gatherMin)
	cols := []string{bound}
	if search {
		cols = append(cols, `(SELECT count(*) FROM (SELECT FROM (`+searchArms(q.Search, arg)+`) u LIMIT `+bound+`) x)`)
	}
	if tags {
		cols = append(cols, `(SELECT count(*) FROM (SELECT FROM link_tags WHERE tenant_id = $1 AND tag = ANY (`+arg(q.Tags)+`::text[]) LIMIT `+bound+`) x)`)
	}
	n := make([]int64, len(cols))
	dst := make([]any, len(cols))
	for i := range n {
		dst[i] = &n[i]
	}
	if err := s.pool.QueryRow(ctx, `SELECT `+strings.Join(cols, ", "), append([]any{pgx.QueryExecModeExec}, args...)...).Scan(dst...); err != nil {
		return how, err
	}
	k := 1
	if search {
		how.gatherSearch, k = n[k] < n[0], k+1
	}
	if tags {
		how.gatherTags = n[k] < n[0]
	}
	return how, nil
}

// listQuery is the statement ListLinks runs, and its arguments: the
// tenant's links matching q, from q's cursor on, in q's order, at most
// q.Limit. Every filter is written only when q asks for it, and the
// statuses as literals, so the planner sees what it plans and can prove a
// partial index's predicate (schema 020: live links, links not active,
// links with an expiry). Tests run EXPLAIN on exactly this.
func listQuery(tenantID int64, d *link.DomainID, q links.ListRequest, how listPlan) (string, []any, error) {
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
	// active links, which side of q.Now their expiry lies on and whether
	// their counted clicks reached their limit. It is a predicate of the
	// row like any other, so the keyset page stays exact: a link that
	// expires between two pages leaves the active ones, no link is listed
	// twice.
	switch q.Status {
	case "":
		b.WriteString("\n\t  AND l.status <> 'deleted'")
	case link.Active:
		fmt.Fprintf(&b, "\n\t  AND l.status = 'active' AND (l.expires_at IS NULL OR l.expires_at > %s)", arg(q.Now))
		b.WriteString(" AND (l.max_clicks IS NULL OR coalesce(l.clicks_counted, 0) < l.max_clicks)")
	case links.LimitReached:
		fmt.Fprintf(&b, "\n\t  AND l.status = 'active' AND (l.expires_at IS NULL OR l.expires_at > %s) AND l.clicks_counted >= l.max_clicks", arg(q.Now))
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
	with, from := listFilters(q, &b, arg, before, how)
	limit := arg(q.Limit)
	return with + `SELECT ` + linkColumns + `
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
//
// What how gathers is a MATERIALIZED common table expression of link IDs
// that drives the list (with the clause it returns): the planner cannot
// fold it into a walk of the order's index, so it reads the matches
// through their indexes (a BitmapOr of the search's, the tag's range),
// reads each matching link by its key, and sorts only them.
func listFilters(q links.ListRequest, b *strings.Builder, arg func(any) string, before string, how listPlan) (with, from string) {
	from = "links l"
	var gathered []string // CTEs of IDs that drive the list
	if how.gatherTags && len(q.Tags) > 0 && q.Sort != links.SortID {
		if q.TagMode == links.TagsAll {
			parts := make([]string, len(q.Tags))
			for i, tag := range q.Tags {
				parts[i] = fmt.Sprintf("SELECT t.link_id FROM link_tags t WHERE t.tenant_id = $1 AND t.tag = %s::text", arg(tag))
			}
			gathered = append(gathered, "tagged AS MATERIALIZED ("+strings.Join(parts, " INTERSECT ")+")")
		} else {
			gathered = append(gathered, fmt.Sprintf("tagged AS MATERIALIZED (SELECT DISTINCT t.link_id FROM link_tags t WHERE t.tenant_id = $1 AND t.tag = ANY (%s::text[]))", arg(q.Tags)))
		}
		q.Tags = nil // gathered: no filter below
	}
	// In ID order a tag's range drives the list (below) and the search
	// filters it row by row: gathering the search too would leave two
	// drivers, and the tag's would replace the search's.
	idOrderTags := q.Sort == links.SortID && len(q.Tags) > 0
	if how.gatherSearch && q.Search != "" && !idOrderTags {
		gathered = append(gathered, "found AS MATERIALIZED ("+searchArms(q.Search, arg)+")")
		q.Search = ""
	}
	if len(gathered) > 0 {
		with = "WITH " + strings.Join(gathered, ", ") + "\n\t"
		names := make([]string, len(gathered))
		for i, g := range gathered {
			names[i] = g[:strings.IndexByte(g, ' ')]
		}
		from = names[0] + " m"
		for _, n := range names[1:] {
			from += " JOIN " + n + " USING (link_id)"
		}
		// Each match read by its key: OFFSET 0 keeps the planner from
		// folding the lookup into a join that scans links to hash it.
		from += " CROSS JOIN LATERAL (SELECT * FROM links x WHERE x.id = m.link_id OFFSET 0) l"
	}
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
		searchFilter(q.Search, b, arg)
	}
	return with, from
}

// searchArms is the IDs of the tenant's links a search for term matches,
// as a UNION of one SELECT per part of the search, each the range of its
// own index (links_tenant_code, links_host_reversed twice,
// links_title_trgm): planned part by part, none of them is a scan that
// computes every link's host with a regular expression, which one
// predicate OR-ing the four may be planned as (2.4 s at 100,000 links in
// bench/console).
func searchArms(term string, arg func(any) string) string {
	rev := reverse(strings.ToLower(term))
	arm := func(pred string) string {
		return "SELECT l.id AS link_id FROM links l WHERE l.tenant_id = $1 AND " + pred
	}
	return strings.Join([]string{
		arm("l.code LIKE " + arg(likeEscape(term)+"%")),
		arm(`link_host_reversed(l.url) COLLATE "C" = ` + arg(rev)),
		arm(`link_host_reversed(l.url) COLLATE "C" LIKE ` + arg(likeEscape(rev)+".%")),
		arm("l.title ILIKE " + arg("%"+likeEscape(term)+"%")),
	}, " UNION ")
}

// searchFilter writes a search for term over links l as an "AND (...)"
// line. A code starts with the term as typed (codes are case-sensitive);
// a host is the term or a subdomain of it, in lower case, matched
// reversed (links_host_reversed); a title holds it in any case.
func searchFilter(term string, b *strings.Builder, arg func(any) string) {
	rev := reverse(strings.ToLower(term))
	fmt.Fprintf(b, "\n\t  AND (l.code LIKE %s OR link_host_reversed(l.url) COLLATE \"C\" = %s OR link_host_reversed(l.url) COLLATE \"C\" LIKE %s OR l.title ILIKE %s)",
		arg(likeEscape(term)+"%"), arg(rev), arg(likeEscape(rev)+".%"), arg("%"+likeEscape(term)+"%"))
}
