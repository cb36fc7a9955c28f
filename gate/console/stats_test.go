package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
)

// apiTotals are the totals of the API's stats JSON.
type apiTotals struct {
	Totals struct {
		Human int64 `json:"human_clicks"`
		Bot   int64 `json:"bot_clicks"`
	} `json:"totals"`
}

func totalsOf(t *testing.T, c stack.Client, path string) apiTotals {
	t.Helper()
	a := c.Do(context.Background(), "GET", path, "")
	if a.Status != http.StatusOK {
		t.Fatalf("GET %s: %s", path, a)
	}
	var out apiTotals
	if err := json.Unmarshal(a.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatsInChromium follows a link on the edge, waits for the clicks to
// reach the rollups through control's roller, and reads the link's and
// the tenant's stats pages: their totals are the API's.
func TestStatsInChromium(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t)
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	if r := c.CreatePatiently(context.Background(), stack.Link{URL: "https://example.com/counted", Code: "stats-e2e"}); r.Status != http.StatusCreated {
		t.Fatalf("create: %d %v", r.Status, r.Problem)
	}
	if st, _, err := stack.FollowUntil(s.edgeURL, "stats-e2e", time.Minute, func(st int, _ string) bool { return st == http.StatusFound }); err != nil || st != http.StatusFound {
		t.Fatalf("edge: %d %v; want 302", st, err)
	}
	const more = 4
	for range more {
		if st, _, err := stack.Follow(s.edgeURL, "stats-e2e"); err != nil || st != http.StatusFound {
			t.Fatalf("edge: %d %v; want 302", st, err)
		}
	}
	const linkPath = "/api/v1/links/stats-e2e/stats"
	stack.Eventually(t, "the clicks reach the rollups", time.Minute, func() bool {
		got := totalsOf(t, c, linkPath).Totals
		return got.Human+got.Bot >= 1+more
	})

	b.signIn(t, s.controlURL, s.key)
	b.do(t, "open the link's stats from its page",
		chromedp.Navigate(s.controlURL+"/console/links/stats-e2e"),
		chromedp.WaitVisible(chromedp.ID("stats-link")),
		chromedp.Click(chromedp.ID("stats-link")),
		chromedp.WaitVisible(chromedp.ID("total-human")),
	)
	// The page is read between two reads of the API: once they agree, no
	// click landed in between, and the page must show the same.
	stack.Eventually(t, "the page between two equal API answers", time.Minute, func() bool {
		before := totalsOf(t, c, linkPath)
		b.do(t, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("total-human")))
		human, bot := b.text(t, "#total-human"), b.text(t, "#total-bot")
		if after := totalsOf(t, c, linkPath); after != before {
			return false
		}
		if human != strconv.FormatInt(before.Totals.Human, 10) || bot != strconv.FormatInt(before.Totals.Bot, 10) {
			t.Fatalf("the link's page shows %s human, %s bot; the API %+v", human, bot, before.Totals)
		}
		return true
	})
	if n := run(t, b, "charts", chromedp.Evaluate[int](`document.querySelectorAll("svg.chart title").length`)); n == 0 {
		t.Errorf("the link's stats page has no chart with a title")
	}

	b.do(t, "open the tenant's stats from the nav",
		chromedp.Click(chromedp.CSS(`nav a[href="/console/stats"]`)),
		chromedp.WaitVisible(chromedp.ID("live-links")),
	)
	stack.Eventually(t, "the tenant's page between two equal API answers", time.Minute, func() bool {
		before := totalsOf(t, c, "/api/v1/stats")
		b.do(t, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("total-human")))
		human, bot := b.text(t, "#total-human"), b.text(t, "#total-bot")
		if after := totalsOf(t, c, "/api/v1/stats"); after != before {
			return false
		}
		if human != strconv.FormatInt(before.Totals.Human, 10) || bot != strconv.FormatInt(before.Totals.Bot, 10) || before.Totals.Human+before.Totals.Bot < 1+more {
			t.Fatalf("the tenant's page shows %s human, %s bot; the API %+v", human, bot, before.Totals)
		}
		return true
	})
	for _, page := range []string{"/console/stats", "/console/links/stats-e2e/stats"} {
		b.do(t, "open "+page, chromedp.Navigate(s.controlURL+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if bad := run(t, b, "unnamed controls", chromedp.Evaluate[[]string](unnamedControls)); len(bad) > 0 {
			t.Errorf("%s has controls without an accessible name: %v", page, bad)
		}
	}
}
