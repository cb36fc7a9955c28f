package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// seedTenant is how many links the plan tests give the tenant they list
// (and as many to another tenant): enough that the planner's statistics
// tell a scan from an index range, few enough to seed in seconds.
const seedTenant = 20_000

// seededStore is a store whose tenant acme holds seedTenant links, made
// by SQL as the write path leaves them (statuses, expiries, titles, tags,
// three domains, creation times over a year that do not follow IDs), and
// another tenant as many, then ANALYZEd. It returns the tenant, its second
// domain, and the instant expiry is judged at.
func seededStore(t *testing.T) (*Store, int64, link.DomainID, time.Time) {
	t.Helper()
	st, tenant := storeWithTenant(t)
	ctx := context.Background()
	other, err := st.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	var doms []link.DomainID
	for _, host := range []string{"go.acme.test", "l.acme.test"} {
		d, err := st.CreateDomain(ctx, link.Domain{Host: host, TenantID: tenant, CodeMode: link.CodesSequential})
		if err != nil {
			t.Fatal(err)
		}
		doms = append(doms, d.ID)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// One statement per tenant. Domain: 80% the platform's, 15% and 5%
	// the two others (the other tenant all on the platform's). Status: 2%
	// disabled, 1% deleted. Expiry: 12%, a third of them past. Title: half.
	// IDs are each domain's range; codes are hashes, so neither code nor
	// created_at order follows the ID.
	seed := `
		WITH g AS (
			SELECT i, hashint8(i::bigint) AS h, random() AS r1, random() AS r2, random() AS r3
			FROM generate_series(1, $2::int) i
		), d AS (
			SELECT g.*, CASE WHEN $6::bool THEN 0 WHEN r1 < 0.80 THEN 0 WHEN r1 < 0.95 THEN $4::int ELSE $5::int END AS dom FROM g
		)
		INSERT INTO links (id, code, tenant_id, code_source, namespace, url_original, url, status, expires_at, version, created_at, title, domain_id)
		SELECT dom::bigint * 56800235584 + $7::bigint + i,
		       substr(md5(h::text), 1, 8) || ($7::bigint + i),
		       $1, 'generated', CASE WHEN dom = 0 THEN 'default' ELSE 'd' || dom END,
		       u, u,
		       CASE WHEN r2 < 0.02 THEN 'disabled' WHEN r2 < 0.03 THEN 'deleted' ELSE 'active' END,
		       CASE WHEN r3 < 0.04 THEN $3::timestamptz - (r3 * 1000) * interval '1 hour'
		            WHEN r3 < 0.12 THEN $3::timestamptz + (r3 * 1000) * interval '1 hour' END,
		       nextval('change_version_seq'),
		       $3::timestamptz - (abs(h) % 31536000) * interval '1 second',
		       CASE WHEN i % 2 = 0 THEN (ARRAY['Spring sale', 'Newsletter', 'Launch week', 'Webinar', 'Careers'])[1 + i % 5] || ' ' || i END,
		       dom
		FROM d, LATERAL (SELECT 'https://' || (ARRAY['www.', 'shop.', 'blog.', ''])[1 + (abs(h) >> 3) % 4] ||
		                        'site' || (abs(h) >> 5) % 200 || '.example' || (ARRAY['.com', '.org', '.co.uk'])[1 + (abs(h) >> 11) % 3] ||
		                        '/p/' || i AS u) x`
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `SELECT setseed(0.21)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, seed, tenant, seedTenant, now, int(doms[0]), int(doms[1]), false, int64(0)); err != nil {
		t.Fatalf("seed acme: %v", err)
	}
	if _, err := pool.Exec(ctx, seed, other, seedTenant, now, 0, 0, true, int64(10_000_000)); err != nil {
		t.Fatalf("seed other: %v", err)
	}
	// Tags: sale on a fifth, email on a third, rare on 0.3%.
	if _, err := pool.Exec(ctx, `
		INSERT INTO link_tags (tenant_id, tag, link_id)
		SELECT l.tenant_id, t.tag, l.id FROM links l
		CROSS JOIN (VALUES ('sale', 5), ('email', 3), ('rare', 333)) t(tag, every)
		WHERE hashint8(l.id + length(t.tag)) % t.every = 0`); err != nil {
		t.Fatalf("seed tags: %v", err)
	}
	// A campaign made long ago: the 380 oldest live links get codes of
	// one series and a tag of their own, so what matches them lies at
	// one end of every creation order (a walk from the other end would
	// read the whole tenant to find them).
	if _, err := pool.Exec(ctx, `
		WITH old AS (SELECT id FROM links WHERE tenant_id = $1 AND status <> 'deleted' ORDER BY created_at LIMIT 380),
		c AS (UPDATE links l SET code = 'camp-' || l.id FROM old WHERE l.id = old.id RETURNING l.id)
		INSERT INTO link_tags (tenant_id, tag, link_id) SELECT $1, 'oldcamp', id FROM c`, tenant); err != nil {
		t.Fatalf("seed the old campaign: %v", err)
	}
	for _, table := range []string{"links", "link_tags"} {
		if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
			t.Fatal(err)
		}
	}
	return st, tenant, doms[0], now
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	NodeType       string     `json:"Node Type"`
	Relation       string     `json:"Relation Name"`
	Index          string     `json:"Index Name"`
	ActualRows     float64    `json:"Actual Rows"`
	ActualLoops    float64    `json:"Actual Loops"`
	RemovedFilter  float64    `json:"Rows Removed by Filter"`
	RemovedRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans          []planNode `json:"Plans"`
}

// walk calls f on n and every node under it.
func (n *planNode) walk(f func(*planNode)) {
	f(n)
	for i := range n.Plans {
		n.Plans[i].walk(f)
	}
}

// String is the plan as an indented outline, for failure messages.
func (n *planNode) String() string {
	var b strings.Builder
	var write func(*planNode, int)
	write = func(n *planNode, depth int) {
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), n.NodeType)
		if n.Relation != "" {
			fmt.Fprintf(&b, " on %s", n.Relation)
		}
		if n.Index != "" {
			fmt.Fprintf(&b, " using %s", n.Index)
		}
		fmt.Fprintf(&b, " (rows %.0f x%.0f, removed %.0f)\n", n.ActualRows, n.ActualLoops, n.RemovedFilter+n.RemovedRecheck)
		for i := range n.Plans {
			write(&n.Plans[i], depth+1)
		}
	}
	write(n, 0)
	return b.String()
}

// explain runs EXPLAIN ANALYZE on exactly the statement ListLinks runs
// for q, the way ListLinks runs it (an unnamed statement planned with
// these values), and returns the plan and the links it listed.
func explain(t *testing.T, st *Store, tenant int64, d *link.DomainID, q links.ListRequest) *planNode {
	t.Helper()
	how, err := st.listPlan(context.Background(), tenant, q)
	if err != nil {
		t.Fatal(err)
	}
	sql, args, err := listQuery(tenant, d, q, how)
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	err = st.Pool().QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql,
		append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&raw)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, sql)
	}
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("explain's JSON: %v\n%s", err, raw)
	}
	return &out[0].Plan
}

// TestListUsesIndexes proves that every list the console and the API ask
// for reads an index range, not the tenant: for each filter and each
// order, on the first page and on a page deep in the list, EXPLAIN ANALYZE
// of the exact statement must show no sequential scan of links or
// link_tags, no sort of more than a tenth of the tenant's links, and no
// more rows of links read (rows returned plus rows a filter
// or a recheck threw away, over every loop) than walking the order's
// index would cost at the filter's share of the tenant: twice a page over
// that share, and never half the tenant. A list that walked an index in
// full would be a scan by another name; the row count catches it.
func TestListUsesIndexes(t *testing.T) {
	st, tenant, dom, now := seededStore(t)
	ctx := context.Background()
	const budget = seedTenant / 10
	base := links.ListRequest{Limit: 51, Now: now, TagMode: links.TagsAny}
	with := func(f func(*links.ListRequest)) links.ListRequest {
		q := base
		f(&q)
		return q
	}
	cases := []struct {
		name string
		q    links.ListRequest
		d    *link.DomainID
	}{
		{"id order", base, nil},
		{"status active", with(func(q *links.ListRequest) { q.Status = link.Active }), nil},
		{"status expired", with(func(q *links.ListRequest) { q.Status = links.Expired }), nil},
		{"status disabled", with(func(q *links.ListRequest) { q.Status = link.Disabled }), nil},
		{"status deleted", with(func(q *links.ListRequest) { q.Status = link.Deleted }), nil},
		{"tag common", with(func(q *links.ListRequest) { q.Tags = []string{"sale"} }), nil},
		{"tag rare", with(func(q *links.ListRequest) { q.Tags = []string{"rare"} }), nil},
		{"tags any", with(func(q *links.ListRequest) { q.Tags = []string{"email", "rare"} }), nil},
		{"tags all", with(func(q *links.ListRequest) { q.Tags, q.TagMode = []string{"rare", "sale"}, links.TagsAll }), nil},
		{"domain", base, &dom},
		{"created between", with(func(q *links.ListRequest) {
			q.CreatedAfter, q.CreatedBefore = now.AddDate(0, -2, 0), now.AddDate(0, -1, 0)
		}), nil},
		{"search code prefix", with(func(q *links.ListRequest) { q.Search = "abc" }), nil},
		{"search host", with(func(q *links.ListRequest) { q.Search = "site17.example.org" }), nil},
		{"search title", with(func(q *links.ListRequest) { q.Search = "Webinar 1234" }), nil},
		{"search nothing", with(func(q *links.ListRequest) { q.Search = "zzzz-no-such" }), nil},
		{"search short", with(func(q *links.ListRequest) { q.Search = "a" }), nil},
		{"search an old series", with(func(q *links.ListRequest) { q.Search = "camp-" }), nil},
		{"tag of an old series", with(func(q *links.ListRequest) { q.Tags = []string{"oldcamp"} }), nil},
		{"tags all, an old series", with(func(q *links.ListRequest) { q.Tags, q.TagMode = []string{"oldcamp", "sale"}, links.TagsAll }), nil},
	}
	sorts := append([]links.Sort{links.SortID}, links.Sorts...)
	for _, c := range cases {
		for _, sort := range sorts {
			if sort != links.SortID && c.name == "id order" {
				c.name = "all"
			}
			q := c.q
			q.Sort = sort
			// A page deep in the list: the cursor of the row half way
			// through what the filter matches, read by the store.
			deep := q
			all := q
			all.Limit = 1 << 20
			got, err := st.ListLinks(ctx, tenant, c.d, all)
			if err != nil {
				t.Fatalf("%s by %q: %v", c.name, sort, err)
			}
			if len(got) > 1 {
				mid := got[len(got)/2]
				if sort == links.SortID {
					deep.Before = mid.ID
				} else {
					deep.After = links.CursorOf(sort, mid)
				}
			}
			for _, page := range []struct {
				name string
				q    links.ListRequest
			}{{"first page", q}, {"deep page", deep}} {
				plan := explain(t, st, tenant, c.d, page.q)
				var read float64
				plan.walk(func(n *planNode) {
					if n.NodeType == "Seq Scan" && (n.Relation == "links" || n.Relation == "link_tags") {
						t.Errorf("%s by %q, %s: a sequential scan of %s\n%s", c.name, sort, page.name, n.Relation, plan)
					}
					if n.NodeType == "Sort" && n.ActualRows*max(n.ActualLoops, 1) > budget {
						t.Errorf("%s by %q, %s: sorts %.0f rows (a tenth of the tenant is %d)\n%s", c.name, sort, page.name, n.ActualRows, budget, plan)
					}
					if n.Relation == "links" {
						read += (n.ActualRows + n.RemovedFilter + n.RemovedRecheck) * max(n.ActualLoops, 1)
					}
				})
				// Walking an order's index and filtering reads about a
				// page over the filter's share of the tenant: allowed up
				// to twice that, never half the tenant.
				allowed := float64(budget)
				if len(got) > 0 {
					allowed = max(allowed, 2*float64(q.Limit)*seedTenant/float64(len(got)))
				}
				allowed = min(allowed, seedTenant/2)
				if read > allowed {
					t.Errorf("%s by %q, %s: reads %.0f rows of links (allowed %.0f: the filter matches %d)\n%s", c.name, sort, page.name, read, allowed, len(got), plan)
				}
				if testing.Verbose() {
					t.Logf("%s by %q, %s: %.0f rows of links read\n%s", c.name, sort, page.name, read, plan)
				}
			}
		}
	}
}

// TestListOrdersAndPages lists the seeded tenant in every order, page by
// page through the cursors, under several filters, and compares each with
// the same links sorted in Go: every link once, in order, none missed.
func TestListOrdersAndPages(t *testing.T) {
	st, tenant, dom, now := seededStore(t)
	ctx := context.Background()
	svc := links.New(st, nil, links.Config{Now: func() time.Time { return now }})
	for _, f := range []struct {
		name string
		q    links.ListRequest
	}{
		{"rare tag", links.ListRequest{Tags: []string{"rare"}}},
		{"domain", links.ListRequest{Domain: "go.acme.test", Status: link.Disabled}},
		{"expired", links.ListRequest{Status: links.Expired}},
		{"search", links.ListRequest{Search: "site17.example.org"}},
		{"an old series", links.ListRequest{Search: "camp-", Tags: []string{"oldcamp", "sale"}}},
	} {
		for _, sort := range links.Sorts {
			q := f.q
			q.Sort, q.Limit, q.Now = sort, 7, now
			var listed []*links.Link
			for pages := 0; ; pages++ {
				p, err := svc.ListPage(ctx, tenant, q)
				if err != nil {
					t.Fatalf("%s by %s: %v", f.name, sort, err)
				}
				listed = append(listed, p.Links...)
				if p.Next.IsZero() {
					break
				}
				// Through the token, as a browser carries it.
				if q.After, err = links.ParseCursor(p.Next.String(), sort); err != nil {
					t.Fatalf("%s by %s: the next page's cursor: %v", f.name, sort, err)
				}
				if pages > 1000 {
					t.Fatalf("%s by %s: pages never end", f.name, sort)
				}
			}
			all := q
			all.After, all.Limit = links.Cursor{}, 1<<20
			var d *link.DomainID
			if q.Domain != "" {
				d = &dom
			}
			want, err := st.ListLinks(ctx, tenant, d, all)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(want, func(a, b *links.Link) int { return compareIn(sort, a, b) })
			if len(want) == 0 {
				t.Fatalf("%s: the seed holds no such link; the test would prove nothing", f.name)
			}
			if len(listed) != len(want) {
				t.Fatalf("%s by %s: pages listed %d links; want %d", f.name, sort, len(listed), len(want))
			}
			for i := range want {
				if listed[i].ID != want[i].ID {
					t.Fatalf("%s by %s: row %d is %d (%s); want %d (%s)", f.name, sort, i, listed[i].ID, listed[i].Code, want[i].ID, want[i].Code)
				}
			}
		}
	}
}

// compareIn is order s in Go: what each sort promises.
func compareIn(s links.Sort, a, b *links.Link) int {
	var c int
	switch s {
	case links.SortNewest:
		c = -a.CreatedAt.Compare(b.CreatedAt)
		if c == 0 {
			c = -cmpID(a, b)
		}
		return c
	case links.SortOldest:
		c = a.CreatedAt.Compare(b.CreatedAt)
	case links.SortCode:
		c = strings.Compare(a.Code, b.Code)
	case links.SortHost:
		c = strings.Compare(links.ListHost(a.URL), links.ListHost(b.URL))
	}
	if c == 0 {
		c = cmpID(a, b)
	}
	return c
}

func cmpID(a, b *links.Link) int {
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// TestListHostMatchesTheIndex: links.ListHost, which cursors of the host
// order are made with, answers what link_host (the index's expression)
// answers, for the targets the write path stores and for odd ones.
func TestListHostMatchesTheIndex(t *testing.T) {
	st, _ := newStore(t)
	urls := []string{
		"https://example.com", "https://example.com/", "http://example.com:8080/x", "https://a.b.example.co.uk/p?q=1#f",
		"https://xn--bcher-kva.example/", "http://[2001:db8::1]:80/", "http://192.0.2.1/x", "https://user@example.com/",
		"https://example.com?x", "https://example.com#f", "mailto:x@example.com", "", "https://", "ftp://files.example/",
		"https://EXAMPLE.com/", "https://ex%41mple.com/", "https://exa mple.com/", "https://example.com./",
	}
	r := rand.New(rand.NewPCG(1, 2))
	const chars = "abz09.-:/?#@[]%_~ A"
	for range 2000 {
		var b strings.Builder
		b.WriteString([]string{"https://", "http://", "h+t.p-s://", "x://", ""}[r.IntN(5)])
		for range r.IntN(30) {
			b.WriteByte(chars[r.IntN(len(chars))])
		}
		urls = append(urls, b.String())
	}
	rows, err := st.Pool().Query(context.Background(), `SELECT coalesce(link_host(u), '') FROM unnest($1::text[]) WITH ORDINALITY AS x(u, n) ORDER BY n`, urls)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range urls {
		if want := links.ListHost(u); got[i] != want {
			t.Errorf("link_host(%q) = %q; links.ListHost = %q", u, got[i], want)
		}
	}
}
