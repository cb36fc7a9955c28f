package console

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/link"
)

// screenWidths are the widths screenshots are taken at: a laptop and a
// phone (an iPhone 12 to 15's CSS pixels).
var screenWidths = []struct {
	name          string
	width, height int64
	mobile        bool
}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}}

// TestScreenshots writes a PNG of every console screen at desktop and
// phone width into $EDGELINK_CONSOLE_SCREENSHOTS (docs/console/ holds the
// committed ones: EDGELINK_CONSOLE_SCREENSHOTS=$PWD/docs/console go test
// -run TestScreenshots ./gate/console). Without it there is nothing to
// write.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("EDGELINK_CONSOLE_SCREENSHOTS")
	if dir == "" {
		t.Skip("writes screenshots only when EDGELINK_CONSOLE_SCREENSHOTS names a directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	s := startStatsStack(t)
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	for _, l := range []struct{ url, code string }{
		{"https://example.com/winter-sale?utm_source=newsletter", "winter-sale"},
		{"https://shop.example.org/products/espresso-grinder", "grinder"},
		{"https://blog.example.net/2026/12/how-we-ship", "how-we-ship"},
		{"https://docs.example.com/getting-started", ""},
		{"https://x.example/\"><script>alert(1)</script>", "hostile"},
	} {
		if r := c.CreatePatiently(context.Background(), stack.Link{URL: l.url, Code: l.code}); r.Status != 201 {
			t.Fatalf("create %s: %d %v", l.url, r.Status, r.Problem)
		}
	}
	if a := c.Do(context.Background(), "PATCH", "/api/v1/links/grinder", `{"status":"`+string(link.Disabled)+`"}`); a.Status != 200 {
		t.Fatalf("disable: %s", a)
	}
	// A link with rules, a password and a click limit, for the list's
	// badges.
	if r := c.CreateJSONPatiently(context.Background(), `{"url": "https://example.com/app", "code": "app-link", "password": "open sesame", "max_clicks": 5000,
		"rules": [{"url": "https://apps.apple.com/app/id1", "device": ["ios"]}, {"url": "https://play.google.com/store/apps/details?id=app", "device": ["android"]}]}`); r.Status != 201 {
		t.Fatalf("create app-link: %d %v", r.Status, r.Problem)
	}
	// Clicks for the stats screens: followed on the edge as browsers and
	// a crawler would, from a few referrers, and counted by control's
	// roller.
	if st, _, err := stack.FollowUntil(s.edgeURL, "winter-sale", time.Minute, func(st int, _ string) bool { return st == http.StatusFound }); err != nil {
		t.Fatalf("edge: %d %v", st, err)
	}
	// From addresses of known countries (the edge has the geo fixture and
	// trusts the loopback proxy: stats_test.go), as browsers and a crawler.
	for i := range 18 {
		visit(t, s.edgeURL, "winter-sale", i)
	}
	stack.Eventually(t, "the clicks reach the rollups", time.Minute, func() bool {
		got := totalsOf(t, c, "/api/v1/links/winter-sale/stats").Totals
		return got.Human+got.Bot >= 19
	})
	b.signIn(t, s.controlURL, s.key)
	doneJob, runningJob := bulkScreens(t, b, s)
	shots := []struct {
		name, path, wait string
		before           []chromedp.Action[chromedp.Void]
	}{
		{"links", "/console/links", "table.links", nil},
		{"link-new", "/console/links/new", "#create", nil},
		{"link", "/console/links/winter-sale", "#edit", nil},
		{"link-delete", "/console/links/winter-sale/delete", "main form", nil},
		{"link-rules", "", "#r1-url", rulesFormSteps(s)},
		{"link-rules-refused", "", "#r1-languages-error", rulesRefusedSteps(s)},
		{"link-protected", "", "#rules-text", rulesDetailSteps(s)},
		{"keys", "/console/keys", "table.keys", []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(s.controlURL + "/console/keys"), chromedp.WaitVisible(chromedp.CSS("table.keys")),
			chromedp.Submit(chromedp.CSS("main form.inline")), chromedp.WaitVisible(chromedp.ID("secret")),
		}},
		{"stats-link", "/console/links/winter-sale/stats", "svg.chart", nil},
		{"stats", "/console/stats", "svg.chart", nil},
		{"imports", "/console/imports", "table.imports", nil},
		{"import", doneJob, "#job-summary", nil},
		{"import-running", runningJob, "#job-progress", nil},
		{"webhooks", "", "#secret", webhookRegisteredSteps(s)},
		{"webhooks-refused", "", "#form-problem", webhookRefusedSteps(s)},
		{"webhook", "", "#state", webhookLogSteps(s)},
		{"webhook-delete", "", "main form[method=post]", webhookDeleteSteps(s)},
		{"error", "/console/links/no-such-link", "main h1", nil},
	}
	for _, w := range screenWidths {
		b.do(t, "viewport", viewport(w.width, w.height, w.mobile))
		for _, shot := range shots {
			steps := shot.before
			if steps == nil {
				steps = []chromedp.Action[chromedp.Void]{chromedp.Navigate(s.controlURL + shot.path)}
			}
			steps = append(steps[:len(steps):len(steps)], chromedp.WaitVisible(chromedp.CSS(shot.wait)))
			b.do(t, shot.name, steps...)
			png := run(t, b, "screenshot "+shot.name, chromedp.FullScreenshot(100))
			if err := os.WriteFile(filepath.Join(dir, shot.name+"-"+w.name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Sign-in last: it is what a signed-out browser sees.
	for _, w := range screenWidths {
		b.do(t, "viewport", viewport(w.width, w.height, w.mobile))
		b.do(t, "sign out", chromedp.Navigate(s.controlURL+"/console/links"), chromedp.WaitVisible(chromedp.CSS("form.signout button")),
			chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.ID("signin")))
		png := run(t, b, "screenshot sign-in", chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, "sign-in-"+w.name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		b.signIn(t, s.controlURL, s.key)
	}
}

// viewport is the browser's window at a width, as a phone when mobile.
func viewport(width, height int64, mobile bool) chromedp.Action[chromedp.Void] {
	if mobile {
		return chromedp.EmulateViewport(width, height, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	return chromedp.EmulateViewport(width, height)
}
