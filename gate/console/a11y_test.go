package console

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/link"
)

// axeSource is axe-core, vendored from npm (testdata/axe/README.md).
//
//go:embed testdata/axe/axe-4.14.1.min.js
var axeSource string

// a11yScreen is one console screen the accessibility check visits: path
// (below the console's origin) once wait is visible, after before when it
// is set (a screen reached by a post, such as a new key shown once).
type a11yScreen struct {
	name, path, wait string
	before           func(s *env) []chromedp.Action[chromedp.Void]
}

// a11yScreens are every screen of a signed-in creator, in one place: a
// new screen (the bulk pages, say) is one more line here. a11yData makes
// what they show. The sign-in page is checked after sign-out.
var a11yScreens = []a11yScreen{
	{name: "links", path: "/console/links", wait: "table.links"},
	{name: "links refused filter", path: "/console/links?status=paused&q=kept", wait: "p.problem"},
	{name: "links empty", path: "/console/links?q=no-such-link-at-all", wait: "main h1"},
	{name: "new link", path: "/console/links/new", wait: "#create"},
	{name: "link detail", path: "/console/links/winter-sale", wait: "#edit"},
	{name: "link detail disabled", path: "/console/links/grinder", wait: "#edit"},
	{name: "new link with rules", wait: "#r1-url", before: rulesFormSteps},
	{name: "rules refused", wait: "#r1-languages-error", before: rulesRefusedSteps},
	{name: "link with rules, password and limit", wait: "#rules-text", before: rulesDetailSteps},
	{name: "delete confirmation", path: "/console/links/winter-sale/delete", wait: "main form"},
	{name: "link statistics", path: "/console/links/winter-sale/stats", wait: "svg.chart"},
	{name: "tenant statistics", path: "/console/stats", wait: "svg.chart"},
	{name: "keys", path: "/console/keys", wait: "table.keys"},
	{name: "new key shown once", wait: "#secret", before: func(s *env) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.Navigate(s.controlURL + "/console/keys"), chromedp.WaitVisible(chromedp.CSS("table.keys")),
			chromedp.Submit(chromedp.CSS("main form.inline"))}
	}},
	{name: "error", path: "/console/links/no-such-link", wait: "main h1"},
	{name: "webhooks", path: "/console/webhooks", wait: "main h1"},
	{name: "webhook registered, secret shown once", wait: "#secret", before: webhookRegisteredSteps},
	{name: "webhook refused", wait: "#form-problem", before: webhookRefusedSteps},
	{name: "webhook with its delivery log", wait: "#state", before: webhookLogSteps},
	{name: "webhook delete confirmation", wait: "main form[method=post]", before: webhookDeleteSteps},
	{name: "bulk upload", path: "/console/imports", wait: "#upload"},
	{name: "bulk upload refused", wait: "#upload-problem", before: bulkRefusedSteps},
	{name: "import done", wait: "#job-summary", before: bulkDoneSteps},
	{name: "import running", wait: "#job-progress", before: bulkRunningSteps},
}

// a11yTags are the axe rule sets run: WCAG 2.0, 2.1 and 2.2 at levels A
// and AA (labels, contrast, names, language, bypass blocks, …) and axe's
// best practices (landmarks, one main, headings in order, no positive
// tabindex, skip links).
var a11yTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"}

// axeRun runs axe on the page and answers its violations (and the rules
// it ran, to prove it ran them) as JSON-friendly values.
func axeRun() string {
	return `(async () => {
  const r = await axe.run(document, {runOnly: {type: "tag", values: ` + jsStrings(a11yTags) + `}, resultTypes: ["violations"]});
  return {
    ran: [...r.passes, ...r.violations, ...r.incomplete, ...r.inapplicable].map(x => x.id),
    violations: r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
      nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))})),
  };
})()`
}

func jsStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

type axeResult struct {
	Ran        []string `json:"ran"`
	Violations []struct {
		ID     string   `json:"id"`
		Impact string   `json:"impact"`
		Help   string   `json:"help"`
		Nodes  []string `json:"nodes"`
	} `json:"violations"`
}

// mustRun are rules the check is for; a run that did not include them
// would pass without checking.
var mustRun = []string{"color-contrast", "label", "region", "landmark-one-main", "tabindex", "heading-order", "button-name", "link-name", "html-has-lang"}

// axe injects axe into the page the browser shows, runs it, and fails
// the test if it did not run every rule of mustRun.
func (b *browser) axe(t *testing.T, screen string) axeResult {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](axeSource+";true")); err != nil {
		t.Fatalf("%s: inject axe: %v", screen, err)
	}
	res := run(t, b, "axe on "+screen, chromedp.Evaluate[axeResult](axeRun(), chromedp.EvalAwaitPromise))
	for _, id := range mustRun {
		if !slices.Contains(res.Ran, id) {
			t.Errorf("%s: axe did not run %s", screen, id)
		}
	}
	return res
}

// check runs axe on the page the browser shows and fails the test with
// each violation.
func (b *browser) check(t *testing.T, screen string) {
	t.Helper()
	for _, v := range b.axe(t, screen).Violations {
		t.Errorf("%s: %s (%s): %s\n\t%s", screen, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
	}
}

// fits fails the test when the page is wider than the window (width
// CSS pixels): at phone width a long id or URL that does not wrap makes
// every line scroll sideways (WCAG 1.4.10, reflow).
func (b *browser) fits(t *testing.T, screen string, width int64) {
	t.Helper()
	wide := run(t, b, "page width on "+screen, chromedp.Evaluate[[]string](`((w) => {
  if (document.documentElement.scrollWidth <= w) return [];
  return [...document.querySelectorAll("main *")].filter(el => el.getBoundingClientRect().right > w + 1)
    .filter(el => !el.closest(".visually-hidden")).slice(0, 5).map(el => el.outerHTML.slice(0, 100));
})(`+itoa(width)+`)`))
	if len(wide) > 0 {
		t.Errorf("%s is wider than the window's %d pixels; these reach past it: %v", screen, width, wide)
	}
}

// a11yData makes what the screens show: links with titles and tags, one
// disabled, one with a hostile target, one with clicks on the edge for
// the statistics.
func a11yData(t *testing.T, s *env) {
	t.Helper()
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	for _, l := range []string{
		`{"url": "https://example.com/winter-sale?utm_source=newsletter", "code": "winter-sale", "title": "Winter sale", "tags": ["sale", "email"]}`,
		`{"url": "https://shop.example.org/products/espresso-grinder", "code": "grinder", "expires_at": "2099-01-01T00:00:00Z"}`,
		`{"url": "https://blog.example.net/2026/12/how-we-ship", "title": "How we ship"}`,
		`{"url": "https://x.example/\"><script>alert(1)</script>", "code": "hostile"}`,
	} {
		if r := c.CreateJSONPatiently(context.Background(), l); r.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %v", l, r.Status, r.Problem)
		}
	}
	if a := c.Do(context.Background(), "PATCH", "/api/v1/links/grinder", `{"status":"`+string(link.Disabled)+`"}`); a.Status != http.StatusOK {
		t.Fatalf("disable: %s", a)
	}
	if st, _, err := stack.FollowUntil(s.edgeURL, "winter-sale", stepTimeout, func(st int, _ string) bool { return st == http.StatusFound }); err != nil {
		t.Fatalf("edge: %d %v", st, err)
	}
}

// TestAccessibility runs axe-core (WCAG 2 A and AA, and best practices)
// on every console screen at desktop and phone width, with JavaScript on
// (as most creators have it; the pages are the same without it), and
// fails listing each violation: rule, impact and the elements.
func TestAccessibility(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t)
	a11yData(t, s)
	b.signIn(t, s.controlURL, s.key)
	// The check can fail: the list with its search field's label taken
	// away and its text too faint shows both.
	b.do(t, "spoil the list", chromedp.Navigate(s.controlURL+"/console/links"), chromedp.WaitVisible(chromedp.CSS("table.links")))
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector("label[for=q]").remove(); document.getElementById("q").removeAttribute("placeholder");
document.querySelector("main h1").style.color = "#ddd"; true`)); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, v := range b.axe(t, "spoiled list").Violations {
		found = append(found, v.ID)
	}
	if !slices.Contains(found, "label") || !slices.Contains(found, "color-contrast") {
		t.Fatalf("axe on a page without a label and with faint text found %v; want label and color-contrast", found)
	}
	for _, w := range screenWidths {
		b.do(t, "viewport", viewport(w.width, w.height, w.mobile))
		for _, sc := range a11yScreens {
			name := sc.name + " (" + w.name + ")"
			steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(s.controlURL + sc.path)}
			if sc.before != nil {
				steps = sc.before(s)
			}
			b.do(t, name, append(steps, chromedp.WaitVisible(chromedp.CSS(sc.wait)))...)
			b.check(t, name)
			b.fits(t, name, w.width)
		}
	}
	// Signed out: the sign-in page, and its refusal.
	b.do(t, "sign out", chromedp.Navigate(s.controlURL+"/console/links"), chromedp.WaitVisible(chromedp.CSS("form.signout button")),
		chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.ID("signin")))
	for _, w := range screenWidths {
		b.do(t, "viewport", viewport(w.width, w.height, w.mobile))
		b.do(t, "sign-in", chromedp.Navigate(s.controlURL+"/console/sign-in"), chromedp.WaitVisible(chromedp.ID("signin")))
		b.check(t, "sign-in ("+w.name+")")
		b.do(t, "refused sign-in", chromedp.SendKeys(chromedp.ID("key"), "elk_not-a-key"), chromedp.Submit(chromedp.ID("signin")),
			chromedp.WaitVisible(chromedp.ID("signin-problem")))
		b.check(t, "refused sign-in ("+w.name+")")
	}
}
