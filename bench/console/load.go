package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/link"
)

// tenant is one tenant of the run: its links as the batch API answered
// them, what was done to them, and the browser session that reads its
// pages.
type tenant struct {
	name      string
	id        int64
	key       string
	domains   []string // its own two, beside the platform's
	created   []apiwire.Link
	links     int
	disabled  int
	deleted   int
	expired   int
	clicked   int
	hot       apiwire.Link // the link with the most clicks
	loadStart time.Time
	browser   *browser
	pages     []page
}

// Shapes of the load. Per link: 80% on the platform's domain, 15% and 5%
// on the tenant's two; 10% a custom code (<tenant>-promo-<n>); 60% a title; tags
// from a campaign's set (sale on a fifth, email on a third, vip on 1%);
// 5% an expiry weeks away and 1% one a moment away, which has passed by
// the time pages are read. Then 2% are disabled and 0.5% deleted through
// the API, and the hottest 2% get 30 days of clicks.
const (
	batchSize    = 1000
	batchClients = 4
	soonExpiry   = 30 * time.Second
)

var (
	campaigns = []string{"Spring clearance", "Newsletter", "Launch week", "Webinar", "Careers", "Black Friday",
		"Loyalty", "Back to school", "Gift guide", "Partner program"}
	extraTags = []string{"q1", "q2", "q3", "q4", "print", "social", "partner", "retail", "b2b", "app"}
)

// load makes tenant name with n links through the API, as a creator
// would, and puts clicks in the rollups of its hottest links.
// spreadChunk is how many links one statement gives their creation time.
const spreadChunk = 1000

func load(ctx context.Context, pg *stack.Postgres, controlURL, name string, n int) (*tenant, error) {
	t := &tenant{name: name, loadStart: time.Now()}
	var err error
	if t.id, t.key, err = pg.Tenant(ctx, name); err != nil {
		return nil, err
	}
	c := stack.Client{ControlURL: controlURL, Key: t.key}
	for _, h := range []string{"go." + name + ".example", "l." + name + ".example"} {
		if a := c.Do(ctx, "POST", "/api/v1/domains", fmt.Sprintf(`{"host": %q}`, h)); a.Status != http.StatusCreated {
			return nil, fmt.Errorf("create domain %s: %s", h, a)
		}
		t.domains = append(t.domains, h)
	}
	r := rand.New(rand.NewPCG(uint64(n), 21))
	var soon time.Time // the last expiry a moment away
	bodies := make(chan []map[string]any)
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		loadErr error
	)
	for range batchClients {
		wg.Go(func() {
			for items := range bodies {
				links, err := createBatch(ctx, c, items)
				mu.Lock()
				if err != nil && loadErr == nil {
					loadErr = err
				}
				t.created = append(t.created, links...)
				mu.Unlock()
			}
		})
	}
	var batch []map[string]any
	for i := range n {
		item := map[string]any{"url": dataset.Target(r)}
		switch p := r.Float64(); {
		case p < 0.15:
			item["domain"] = t.domains[0]
		case p < 0.20:
			item["domain"] = t.domains[1]
		}
		if r.IntN(10) == 0 {
			item["code"] = fmt.Sprintf("%s-promo-%d", name, i)
		}
		if r.IntN(10) < 6 {
			item["title"] = fmt.Sprintf("%s %d", campaigns[r.IntN(len(campaigns))], i)
		}
		var tags []string
		if r.IntN(5) == 0 {
			tags = append(tags, "sale")
		}
		if r.IntN(3) == 0 {
			tags = append(tags, "email")
		}
		if r.IntN(100) == 0 {
			tags = append(tags, "vip")
		}
		if r.IntN(2) == 0 {
			tags = append(tags, extraTags[r.IntN(len(extraTags))])
		}
		if tags != nil {
			item["tags"] = tags
		}
		switch p := r.IntN(100); {
		case p < 1:
			// Items are made just before their batch is sent.
			soon = time.Now().Add(soonExpiry).UTC()
			item["expires_at"] = soon.Format(time.RFC3339)
			t.expired++
		case p < 6:
			item["expires_at"] = time.Now().Add(time.Duration(7+r.IntN(60)) * 24 * time.Hour).UTC().Format(time.RFC3339)
		}
		batch = append(batch, item)
		if len(batch) == batchSize || i == n-1 {
			select {
			case bodies <- batch:
			case <-ctx.Done():
			}
			batch = nil
		}
	}
	close(bodies)
	wg.Wait()
	if loadErr != nil {
		return nil, loadErr
	}
	t.links = len(t.created)
	if t.links != n {
		return nil, fmt.Errorf("created %d links of %d", t.links, n)
	}
	// Disable 2% and delete 0.5%, through the API, as a creator does.
	perm := r.Perm(n)
	var changes []func() error
	for _, i := range perm[:n/50] {
		l := t.created[i]
		changes = append(changes, func() error {
			return expect(c.Do(ctx, "PATCH", linkPath("/api/v1/links/", l, t.domains), `{"status":"disabled"}`), http.StatusOK)
		})
	}
	for _, i := range perm[n/50 : n/50+n/200] {
		l := t.created[i]
		changes = append(changes, func() error {
			return expect(c.Do(ctx, "DELETE", linkPath("/api/v1/links/", l, t.domains), ""), http.StatusNoContent)
		})
	}
	if err := inParallel(8, changes); err != nil {
		return nil, err
	}
	t.disabled, t.deleted = n/50, n/200
	// Creation over the past year: the newest link now, the oldest a year
	// ago, in the order they were made. In statements of spreadChunk
	// links: links' statement trigger live_link_counts_apply joins its
	// transition tables, which have no statistics: one statement of
	// 100,000 rows had not ended after 24 minutes (waiting on reads of
	// the tables spilled to disk), which chunks of 1,000 keep small.
	conn, err := pg.Pool().Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("spread creation times: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE spread_ranks ON COMMIT PRESERVE ROWS AS
		SELECT id, row_number() OVER (ORDER BY created_at, id) AS rank, count(*) OVER () AS n FROM links WHERE tenant_id = $1`, t.id); err != nil {
		return nil, fmt.Errorf("spread creation times: %w", err)
	}
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM spread_ranks`).Scan(&rows); err != nil {
		return nil, fmt.Errorf("spread creation times: %w", err)
	}
	for lo := 1; lo <= rows; lo += spreadChunk {
		if _, err := conn.Exec(ctx, `
			UPDATE links l SET created_at = now() - (x.n - x.rank) * (interval '365 days' / x.n)
			FROM spread_ranks x WHERE l.id = x.id AND x.rank >= $1 AND x.rank < $2`, lo, lo+spreadChunk); err != nil {
			return nil, fmt.Errorf("spread creation times: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `DROP TABLE spread_ranks`); err != nil {
		return nil, fmt.Errorf("spread creation times: %w", err)
	}
	if err := clicks(ctx, pg, t, perm[n/50+n/200:]); err != nil {
		return nil, err
	}
	// Until the links that expire soon have expired.
	if wait := time.Until(soon.Add(time.Second)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return t, nil
}

// createBatch posts one batch and returns the links it made; any item
// refused fails the load.
func createBatch(ctx context.Context, c stack.Client, items []map[string]any) ([]apiwire.Link, error) {
	body, err := json.Marshal(map[string]any{"links": items})
	if err != nil {
		return nil, err
	}
	a := c.Do(ctx, "POST", "/api/v1/links/batch", string(body))
	if a.Err != nil || a.Status != http.StatusOK {
		return nil, fmt.Errorf("batch: %s", a)
	}
	var out struct {
		Failed  int                   `json:"failed"`
		Results []apiwire.BatchResult `json:"results"`
	}
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return nil, fmt.Errorf("batch answer: %w", err)
	}
	links := make([]apiwire.Link, 0, len(out.Results))
	for _, res := range out.Results {
		if res.Link == nil {
			return nil, fmt.Errorf("batch item %d: %d %v", res.Index, res.Status, res.Error)
		}
		links = append(links, *res.Link)
	}
	return links, nil
}

// linkPath is a link's path under prefix (the API's or the console's),
// with ?domain= when it is on one of own, the tenant's domains.
func linkPath(prefix string, l apiwire.Link, own []string) string {
	p := prefix + url.PathEscape(l.Code)
	if slices.Contains(own, l.Domain) {
		p += "?domain=" + url.QueryEscape(l.Domain)
	}
	return p
}

func expect(a stack.Answer, status int) error {
	if a.Err != nil || a.Status != status {
		return fmt.Errorf("want %d: %s", status, a)
	}
	return nil
}

// inParallel runs fs on n goroutines and returns the first error.
func inParallel(n int, fs []func() error) error {
	work := make(chan func() error)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var first error
			for f := range work {
				if err := f(); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		})
	}
	for _, f := range fs {
		work <- f
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// clicks gives the hottest 2% of the links that are live (in Zipf order
// of the indexes in order) 30 days of clicks, with referrer and device
// breakdowns, through the store the click roller writes with (so every
// table the stats pages read is filled as the roller fills it).
func clicks(ctx context.Context, pg *stack.Postgres, t *tenant, order []int) error {
	hot := order[:max(1, len(t.created)/50)]
	t.clicked, t.hot = len(hot), t.created[hot[0]]
	var doms []struct {
		host string
		id   int64
	}
	rows, err := pg.Pool().Query(ctx, `SELECT host, id FROM domains`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var d struct {
			host string
			id   int64
		}
		if err := rows.Scan(&d.host, &d.id); err != nil {
			return err
		}
		doms = append(doms, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	domainOf := func(host string) link.DomainID {
		for _, d := range doms {
			if d.host == host {
				return link.DomainID(d.id)
			}
		}
		return link.DefaultDomain
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	referrers := []string{"", "news.example.com", "t.co", "www.facebook.com", "mail.google.com", "www.linkedin.com", "l.instagram.com"}
	devices := []string{"desktop", "mobile", "tablet"}
	st := pg.Store()
	var seq uint64
	roll := &clickroll.Rollup{Stream: "BENCH_CONSOLE_" + t.name}
	flush := func() error {
		if len(roll.Links) == 0 {
			return nil
		}
		roll.Prev, roll.Last = seq, seq+1
		seq++
		if err := st.ApplyClicks(ctx, roll); err != nil {
			return fmt.Errorf("apply clicks: %w", err)
		}
		roll = &clickroll.Rollup{Stream: roll.Stream}
		return nil
	}
	for rank, i := range hot {
		l := t.created[i]
		d := domainOf(l.Domain)
		perDay := int64(2000 / (rank + 1)) // Zipf: the hottest a few thousand a day
		for day := range 30 {
			when := today.AddDate(0, 0, -day)
			clicks := perDay + 1
			roll.Links = append(roll.Links, clickroll.LinkDay{Domain: d, Code: l.Code, Day: when, Clicks: clicks, BotClicks: clicks / 10})
			for j, ref := range referrers {
				share := clicks / int64(2+j)
				roll.Breakdown = append(roll.Breakdown, clickroll.BreakdownDay{Domain: d, Code: l.Code, Dimension: clickstats.DimReferrer, Value: ref, Day: when, Clicks: share})
			}
			for j, dev := range devices {
				roll.Breakdown = append(roll.Breakdown, clickroll.BreakdownDay{Domain: d, Code: l.Code, Dimension: clickstats.DimDevice, Value: dev, Day: when, Clicks: clicks / int64(2+j)})
			}
		}
		if len(roll.Links) >= 3000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
