package webhooks_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/internal/poll"
)

// flaky fails about half of the first attempts of each event, by a hash of
// the event id and the attempt: a 500 or a hang past the sender's timeout.
// The fourth attempt always succeeds, so the test cannot fail by bad luck.
func flaky(id string, n int) int {
	if n >= 3 {
		return 200
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", id, n)))
	switch h[0] % 4 {
	case 0:
		return 500
	case 1:
		return 0 // hang until the sender gives up
	}
	return 200
}

// The proof: a receiver that fails half the time gets every event
// of a burst of link creates, changes, tag changes and deletes and click
// aggregates, each exactly once answered 2xx, each signature verifies, and
// the delivery log agrees.
func TestFlakyReceiverGetsEveryEventOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rc := newReceiver(t, flaky)
	id, secret := r.endpoint(rc.srv.URL+"/hook", webhooks.LinkCreated, webhooks.LinkUpdated, webhooks.LinkDeleted, webhooks.ClicksAggregated)
	r.start(300*time.Millisecond, func(c *webhooks.DispatcherConfig) { c.PerEndpoint = 8 })

	const n = 40
	var made []*links.Link
	for i := range n {
		made = append(made, r.create(fmt.Sprintf("https://example.com/%d", i), "t1"))
	}
	want := map[string]int{"link.created": n}
	for _, l := range made[:20] {
		u := fmt.Sprintf("https://example.org/%s", l.Code)
		if _, err := r.links.Update(ctx, r.tenant, "", l.Code, links.Update{URL: &u}); err != nil {
			t.Fatal(err)
		}
	}
	codes := make([]string, 10)
	for i, l := range made[20:30] {
		codes[i] = l.Code
	}
	if _, err := r.links.TagLinks(ctx, r.tenant, links.TagChange{Codes: codes, Add: []string{"t2"}}); err != nil {
		t.Fatal(err)
	}
	want["link.updated"] = 20 + 10
	for _, l := range made[30:] {
		if _, err := r.links.Delete(ctx, r.tenant, "", l.Code); err != nil {
			t.Fatal(err)
		}
	}
	want["link.deleted"] = 10
	// Two windows of clicks, added to the links' day rows as the click
	// roller adds them (schema 018's trigger gathers them from there).
	agg := webhooks.NewClickAggregator(r.whs, webhooks.ClickAggregatorConfig{Top: 3})
	end := time.Now().Truncate(time.Minute).Add(time.Minute)
	for w := range 2 {
		for i, l := range made[:5] {
			if _, err := r.pool.Exec(ctx, `INSERT INTO link_clicks_daily AS d (domain_id, code, day, clicks, bot_clicks) VALUES (0, $1, current_date, $2, $3)
				ON CONFLICT (domain_id, code, day) DO UPDATE SET clicks = d.clicks + excluded.clicks, bot_clicks = d.bot_clicks + excluded.bot_clicks`,
				l.Code, 10+i, i); err != nil {
				t.Fatal(err)
			}
		}
		if k, err := agg.Close(ctx, end.Add(time.Duration(w)*time.Minute)); err != nil || k != 1 {
			t.Fatalf("close window %d: %d events, %v; want 1", w, k, err)
		}
	}
	want["clicks.aggregated"] = 2
	total := 0
	for _, k := range want {
		total += k
	}

	poll.Until(t, "every event delivered", 60*time.Second, func() bool { return len(rc.delivered()) >= total })
	got := map[string]int{}
	for evID, reqs := range rc.delivered() {
		if len(reqs) != 1 {
			t.Errorf("event %s answered 2xx %d times; want once", evID, len(reqs))
		}
		got[reqs[0].typ]++
	}
	for typ, k := range want {
		if got[typ] != k {
			t.Errorf("%s: %d delivered; want %d (all: %v)", typ, got[typ], k, got)
		}
	}
	failed := 0
	for _, g := range rc.requests() {
		h := http.Header{}
		h.Set("webhook-id", g.id)
		h.Set("webhook-timestamp", strconv.FormatInt(g.ts, 10))
		h.Set("webhook-signature", strings.Join(g.signatures, " "))
		if err := Verify(webhooks.EncodeSecret(secret), h, g.body, time.Now()); err != nil {
			t.Errorf("event %s attempt answered %d: %v", g.id, g.status, err)
		}
		if g.tenant != r.tenant {
			t.Errorf("event %s: tenant %d; want %d", g.id, g.tenant, r.tenant)
		}
		if g.status != 200 {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("the receiver never failed: the test proves nothing")
	}
	// The log has one success per event, and an attempt for every request
	// (a success is logged just after the receiver answered it).
	var successes, attempts int
	poll.Until(t, "every attempt logged", 10*time.Second, func() bool {
		_ = r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'succeeded'), count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, id).
			Scan(&successes, &attempts)
		return successes == total && attempts == len(rc.requests())
	})
	// Retries were scheduled by the schedule (Rand 0.5: no jitter).
	rows, err := r.pool.Query(ctx, `SELECT attempt, next_attempt_at - attempted_at FROM webhook_deliveries
		WHERE endpoint_id = $1 AND outcome = 'failed'`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			attempt int
			gap     time.Duration
		)
		if err := rows.Scan(&attempt, &gap); err != nil {
			t.Fatal(err)
		}
		if want := testSchedule.Delays[attempt-1]; gap != want {
			t.Errorf("attempt %d failed: next attempt %v later; want %v", attempt, gap, want)
		}
	}
	// A deleted link's event carries its final state.
	for _, g := range rc.delivered() {
		if g[0].typ == "link.deleted" && g[0].linkVersion == 0 {
			t.Errorf("link.deleted event %s without the link's version", g[0].id)
		}
	}
}
