package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/internal/poll"
)

// Click aggregates come from the click roller's own transaction
// (postgres ApplyClicks, schema 018's trigger on the day rows): applied
// rollups are counted, a rollup refused for a moved position is not, and
// the window's event reaches the endpoint with the clicks the roller
// applied, most clicked link first.
func TestClicksFromTheRollerTransaction(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rc := newReceiver(t, func(string, int) int { return 200 })
	r.endpoint(rc.srv.URL, webhooks.ClicksAggregated)
	a, b := r.create("https://example.com/a"), r.create("https://example.com/b")
	day := time.Now().UTC().Truncate(24 * time.Hour)
	apply := func(prev, last uint64, ca, cb int64) error {
		return r.st.ApplyClicks(ctx, &clickroll.Rollup{Stream: "CLICKS", Prev: prev, Last: last, Links: []clickroll.LinkDay{
			{Code: a.Code, Day: day, Clicks: ca, BotClicks: 1, OwnClicks: ca, OwnBots: 1},
			{Code: b.Code, Day: day, Clicks: cb, OwnClicks: cb},
		}})
	}
	if err := apply(0, 5, 3, 7); err != nil {
		t.Fatal(err)
	}
	if err := apply(5, 9, 2, 1); err != nil {
		t.Fatal(err)
	}
	if err := apply(5, 9, 100, 100); !errors.Is(err, clickroll.ErrPositionMoved) {
		t.Fatalf("a rollup after a moved position: %v; want ErrPositionMoved", err)
	}
	agg := webhooks.NewClickAggregator(r.whs, webhooks.ClickAggregatorConfig{})
	if n, err := agg.Close(ctx, time.Now().Truncate(time.Minute).Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("close the window: %d events, %v", n, err)
	}
	r.start(5*time.Second, nil)
	poll.Until(t, "the clicks.aggregated webhook", 30*time.Second, func() bool { return len(rc.delivered()) == 1 })
	var ev apiwire.WebhookEvent[apiwire.ClicksAggregated]
	if err := json.Unmarshal(rc.requests()[0].body, &ev); err != nil {
		t.Fatal(err)
	}
	c := ev.Data
	if ev.Type != "clicks.aggregated" || c.Clicks != 13 || c.BotClicks != 2 || c.Links != 2 || len(c.Top) != 2 ||
		c.Top[0].Code != b.Code || c.Top[0].Clicks != 8 || c.Top[0].ShortURL != "https://sho.rt/"+b.Code || c.Other.Clicks != 0 {
		t.Errorf("event %s; want 13 clicks (2 bots) on 2 links, %s first with 8", rc.requests()[0].body, b.Code)
	}
}
