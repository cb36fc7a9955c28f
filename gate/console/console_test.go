package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
)

// hostile is a target that opens a script if a page writes it unescaped.
const hostile = `https://x.example/"><script>alert(1)</script>`

// unnamedControls lists the page's visible form controls, buttons, links
// and images that have no accessible name (a label, aria-label, text or
// alt), and a page without a language: what a screen reader cannot announce.
const unnamedControls = `(() => {
  const bad = [];
  if (!document.documentElement.lang) bad.push("html without lang");
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea, button, a[href], img")) {
    if (el.hidden || el.closest("[hidden]")) continue;
    const named = (el.labels && el.labels.length > 0) || el.getAttribute("aria-label") ||
      (el.tagName === "IMG" ? el.alt : el.textContent.trim());
    if (!named) bad.push(el.outerHTML.slice(0, 80));
  }
  return bad;
})()`

// TestConsoleInChromium drives the console as a creator does, in a real
// browser with JavaScript on: sign in, create a link, find it in the list,
// follow it on the edge, disable it in place (410 on the edge), store a
// hostile target and see it inert, revoke the session's key and be signed
// out.
func TestConsoleInChromium(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t)
	b.signIn(t, s.controlURL, s.key)

	const target = "https://example.com/landing?from=console"
	b.do(t, "create a link",
		chromedp.Navigate(s.controlURL+"/console/links/new"),
		chromedp.WaitVisible(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), target),
		chromedp.SendKeys(chromedp.ID("code"), "e2e-link"),
		chromedp.Submit(chromedp.ID("create")),
		chromedp.WaitVisible(chromedp.ID("state")),
	)
	if got := b.text(t, "#state"); got != "active" {
		t.Fatalf("new link's state %q; want active", got)
	}
	if got := b.text(t, "#target"); got != target {
		t.Errorf("detail shows target %q; want %q", got, target)
	}

	b.do(t, "find it in the list",
		chromedp.Navigate(s.controlURL+"/console/links"),
		chromedp.WaitVisible(chromedp.ID("row-e2e-link")),
	)
	if row := b.text(t, "#row-e2e-link"); !strings.Contains(row, target) {
		t.Errorf("list row %q; want the target", row)
	}
	if short := run(t, b, "short URL", chromedp.Value(chromedp.CSS("#row-e2e-link input.short"))); short != s.edgeURL+"/e2e-link" {
		t.Errorf("list row's short URL %q; want %s/e2e-link", short, s.edgeURL)
	}

	status, loc, err := stack.FollowUntil(s.edgeURL, "e2e-link", time.Minute, func(st int, _ string) bool { return st == http.StatusFound })
	if err != nil || status != http.StatusFound || loc != target {
		t.Fatalf("edge: %d %q %v; want 302 to %s", status, loc, err, target)
	}

	// Disable in place: htmx posts the row's form and swaps the row.
	b.do(t, "disable it in the list",
		chromedp.Click(chromedp.CSS("#row-e2e-link button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#row-e2e-link .state-disabled")),
	)
	if loc := run(t, b, "location", chromedp.Location()); loc != s.controlURL+"/console/links" {
		t.Errorf("disabling in place left the list for %s", loc)
	}
	status, _, err = stack.FollowUntil(s.edgeURL, "e2e-link", time.Minute, func(st int, _ string) bool { return st == http.StatusGone })
	if err != nil || status != http.StatusGone {
		t.Fatalf("edge after disable: %d %v; want 410", status, err)
	}

	b.do(t, "store a hostile target",
		chromedp.Navigate(s.controlURL+"/console/links/new"),
		chromedp.WaitVisible(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), hostile),
		chromedp.SendKeys(chromedp.ID("code"), "hostile-e2e"),
		chromedp.Submit(chromedp.ID("create")),
		chromedp.WaitVisible(chromedp.ID("target")),
	)
	if got := b.text(t, "#target"); got != hostile {
		t.Errorf("hostile target shown as %q; want it literally", got)
	}
	for _, page := range []string{"/console/links/hostile-e2e", "/console/links"} {
		b.do(t, "open "+page, chromedp.Navigate(s.controlURL+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		inline := run(t, b, "count inline scripts", chromedp.Evaluate[int](`document.querySelectorAll("script:not([src])").length`))
		if inline != 0 {
			t.Errorf("%s has %d inline scripts: the target was written as markup", page, inline)
		}
	}
	for _, page := range []string{"/console/links", "/console/links/new", "/console/links/e2e-link", "/console/links/e2e-link/delete", "/console/keys"} {
		b.do(t, "open "+page, chromedp.Navigate(s.controlURL+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if bad := run(t, b, "unnamed controls", chromedp.Evaluate[[]string](unnamedControls)); len(bad) > 0 {
			t.Errorf("%s has controls without an accessible name: %v", page, bad)
		}
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened: the hostile target ran", n)
	}

	// Revoke the session's own key: the console signs out, and so does
	// the API.
	var keyID int64
	if err := s.pg.Pool().QueryRow(t.Context(), `SELECT id FROM api_keys WHERE tenant_id = $1`, s.tenant).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	b.do(t, "revoke the key",
		chromedp.Navigate(s.controlURL+"/console/keys"),
		chromedp.WaitVisible(chromedp.CSS("table.keys")),
		chromedp.Click(chromedp.CSS("#key-"+itoa(keyID)+" button")),
		chromedp.WaitVisible(chromedp.ID("signin")),
	)
	b.do(t, "come back", chromedp.Navigate(s.controlURL+"/console/links"), chromedp.WaitVisible(chromedp.ID("signin")))
	if loc := run(t, b, "location", chromedp.Location()); !strings.HasPrefix(loc, s.controlURL+"/console/sign-in") {
		t.Errorf("after revoking, the links page took the browser to %s; want sign-in", loc)
	}
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	if a := c.Do(t.Context(), "GET", "/api/v1/links", ""); a.Status != http.StatusUnauthorized {
		t.Errorf("API with the revoked key: %s; want 401", a)
	}
}

// TestConsoleWithoutJavaScript: with scripts off, every action is a plain
// form post and still does what it says.
func TestConsoleWithoutJavaScript(t *testing.T) {
	b := newBrowser(t)
	b.noScript(t)
	s := startStack(t)
	b.signIn(t, s.controlURL, s.key)
	b.do(t, "create a link",
		chromedp.Navigate(s.controlURL+"/console/links/new"),
		chromedp.WaitVisible(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), "https://example.com/nojs"),
		chromedp.SendKeys(chromedp.ID("code"), "no-js"),
		chromedp.Submit(chromedp.ID("create")),
		chromedp.WaitVisible(chromedp.ID("state")),
	)
	if n := run(t, b, "copy buttons shown", chromedp.Evaluate[int](`document.querySelectorAll("button.copy-button:not([hidden])").length`)); n != 0 {
		t.Errorf("%d copy buttons shown without JavaScript; want none (the short URL is a selectable field)", n)
	}
	b.do(t, "disable it from the list",
		chromedp.Navigate(s.controlURL+"/console/links"),
		chromedp.WaitVisible(chromedp.ID("row-no-js")),
		chromedp.Click(chromedp.CSS("#row-no-js button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
		chromedp.WaitVisible(chromedp.CSS("#row-no-js .state-disabled")),
	)
	if loc := run(t, b, "location", chromedp.Location()); loc != s.controlURL+"/console/links?done=disabled" {
		t.Errorf("after a plain post at %s; want the list with its notice", loc)
	}
	status, _, err := stack.FollowUntil(s.edgeURL, "no-js", time.Minute, func(st int, _ string) bool { return st == http.StatusGone })
	if err != nil || status != http.StatusGone {
		t.Fatalf("edge after disable: %d %v; want 410", status, err)
	}
	// The stats pages draw on the server: the chart and its table are
	// there without scripts, and the range form is a plain GET.
	b.do(t, "read the stats",
		chromedp.Navigate(s.controlURL+"/console/links/no-js/stats"),
		chromedp.WaitVisible(chromedp.CSS("svg.chart")),
		chromedp.WaitVisible(chromedp.ID("daily-table")),
		chromedp.SetValue(chromedp.ID("from"), "2030-01-10"),
		chromedp.SetValue(chromedp.ID("to"), "2030-01-09"),
		chromedp.Submit(chromedp.ID("range")),
		chromedp.WaitVisible(chromedp.ID("range-problem")),
	)
	if got := b.text(t, "#range-problem"); !strings.Contains(got, "from must not be after to") {
		t.Errorf("a reversed range says %q", got)
	}
	b.do(t, "sign out",
		chromedp.Click(chromedp.CSS("form.signout button")),
		chromedp.WaitVisible(chromedp.ID("signin")),
	)
	b.do(t, "come back", chromedp.Navigate(s.controlURL+"/console/keys"), chromedp.WaitVisible(chromedp.ID("signin")))
}

func TestChromiumMissing(t *testing.T) {
	if msg, _ := chromiumMissing("/bin/sh", "required"); msg != "" {
		t.Errorf("a browser that is there: %q", msg)
	}
	for _, c := range []struct {
		requirement string
		fatal       bool
	}{{"required", true}, {"", false}} {
		msg, fatal := chromiumMissing("/nonexistent/chromium", c.requirement)
		if fatal != c.fatal || !strings.Contains(msg, "apt-get install -y chromium") {
			t.Errorf("missing, requirement %q: %q, fatal %v; want the install line, fatal %v", c.requirement, msg, fatal, c.fatal)
		}
	}
}
