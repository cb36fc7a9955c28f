package clickroll_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// TestReferrerFloodStaysBounded: a flood of 1,000,000 distinct invented
// referrer hosts on one link (in the launch gate; 100,000 otherwise, since
// a million values take the race detector minutes to sum), through the
// stream and the roller, leaves at most N value rows and one other row
// for that link's day and for its tenant's, every click counted in them;
// and the real referrers that come after the flood, a few clicks a message
// among more flood, are kept, with nearly all their clicks.
func TestReferrerFloodStaysBounded(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	floodMsgs := 100
	if os.Getenv("EDGELINK_GATE") != "" {
		floodMsgs = 1000
	}
	const (
		perMsg   = 1000
		tailMsgs = 100
	)
	real := map[string]int64{"t.co": 40, "www.google.com": 25, "m.facebook.com": 10, "news.ycombinator.com": 3}
	host := 0
	var sent int64
	publish := func(n int, withReal bool) {
		m := clicks.AppendHeader(nil, clicks.Source{Edge: "e1", Boot: "boot"}, n+func() int {
			if withReal {
				return int(real["t.co"] + real["www.google.com"] + real["m.facebook.com"] + real["news.ycombinator.com"])
			}
			return 0
		}())
		c := clicks.ClickView{Domain: link.DefaultDomain, Code: []byte("code-1"), At: day.UnixMilli() + 1000, Status: 302, Bot: host%7 == 0}
		for range n {
			c.Referrer = fmt.Appendf(c.Referrer[:0], "h%07d.flood.example", host)
			m = clicks.AppendClick(m, c)
			host++
			sent++
		}
		if withReal {
			c.Bot = false
			for _, r := range []string{"t.co", "www.google.com", "m.facebook.com", "news.ycombinator.com"} {
				c.Referrer = []byte(r)
				for range real[r] {
					m = clicks.AppendClick(m, c)
					sent++
				}
			}
		}
		if _, err := e.js.Publish(ctx, clicks.Subject("e1"), m); err != nil {
			t.Fatal(err)
		}
	}
	for range floodMsgs {
		publish(perMsg, false)
	}
	for range tailMsgs {
		publish(perMsg/2, true)
	}
	r := clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond})
	run(t, r)
	start := time.Now()
	last := e.lastSeq(t)
	// A million values to sum and bound, on a machine shared with the
	// rest of the tests: a bound of minutes, not of speed.
	poll.Until(t, "the roller through the flood", 10*time.Minute, func() bool {
		pos, err := e.store.ClickPosition(ctx, clicks.Stream)
		return err == nil && pos >= last
	})
	t.Logf("rolled up in %s, %d transactions", time.Since(start).Round(time.Millisecond), r.Stats().Txs)

	var linkRows, linkOther, tenantRows, tenantOther, linkDayClicks int64
	if err := e.pool.QueryRow(ctx, `SELECT
	(SELECT count(*) FROM link_click_values_daily WHERE dimension = 'referrer'),
	(SELECT count(*) FROM link_click_other_daily WHERE dimension = 'referrer'),
	(SELECT count(*) FROM tenant_click_values_daily WHERE dimension = 'referrer'),
	(SELECT count(*) FROM tenant_click_other_daily WHERE dimension = 'referrer'),
	(SELECT sum(clicks)::bigint FROM link_clicks_daily)`).Scan(&linkRows, &linkOther, &tenantRows, &tenantOther, &linkDayClicks); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d clicks from %d distinct referrer hosts: %d referrer rows and %d other row for the link's day, %d and %d for its tenant's",
		sent, host+len(real), linkRows, linkOther, tenantRows, tenantOther)
	if linkDayClicks != sent {
		t.Fatalf("the link's day holds %d clicks; %d were sent", linkDayClicks, sent)
	}
	n := int64(clickroll.DefaultTopValues)
	if linkRows > n || linkOther != 1 || tenantRows > n || tenantOther != 1 {
		t.Fatalf("referrer rows: link %d + %d other, tenant %d + %d other; want at most %d + 1 each", linkRows, linkOther, tenantRows, tenantOther, n)
	}
	var tenant int64
	if err := e.pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'acme'`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	q := clickstats.BreakdownQuery{From: day, To: day, Top: int(n) + 1, Dimensions: []string{clickstats.DimReferrer}}
	for what, read := range map[string]func() ([]clickstats.Breakdown, error){
		"link": func() ([]clickstats.Breakdown, error) {
			return e.store.LinkBreakdown(ctx, link.DefaultDomain, "code-1", q)
		},
		"tenant": func() ([]clickstats.Breakdown, error) { return e.store.TenantBreakdown(ctx, tenant, q) },
	} {
		br, err := read()
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		kept := map[string]int64{}
		for _, b := range br {
			sum += b.Clicks
			kept[b.Value] = b.Clicks
		}
		if sum != sent {
			t.Errorf("%s: the referrer breakdown sums to %d clicks; %d were sent", what, sum, sent)
		}
		for ref, per := range real {
			want := per * tailMsgs
			if got := kept[ref]; got > want || got < want*9/10 {
				t.Errorf("%s: %s kept with %d clicks; it had %d (want at most that, and within 10%%)", what, ref, got, want)
			}
		}
	}
}
