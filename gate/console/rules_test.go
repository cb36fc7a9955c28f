package console

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
)

// Issue 23 in the console: a link with three rules, a password and a click
// limit made through the new link form, with JavaScript on (htmx swaps the
// rules list in place) and off (every button a plain post), and the edge
// answering for it: the password form first, then, behind the password,
// an iOS client to the iOS rule's target, a desktop one to the desktop
// rule's, a German-speaking Android one to the language rule's and an
// English-speaking one to the link's own target.

// The User-Agents the edge's device classes are read from (docs/rules.md).
const (
	uaIOS     = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
	uaDesktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
	uaAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36"
)

// ruleLink is what the tests type: the link's own target, each rule's
// target, and the password.
type ruleLink struct {
	code, target, ios, desktop, german, password string
}

func newRuleLink(code string) ruleLink {
	return ruleLink{code: code, target: "https://example.com/" + code, ios: "https://apps.apple.com/app/id" + code,
		desktop: "https://example.com/" + code + "/desktop", german: "https://example.de/" + code, password: "open " + code}
}

// htmxSettled waits for htmx's last swap to settle. Its settle tasks,
// the new rule's autofocus among them, run 20 ms after the swap, later on
// a busy machine: keys sent before then go to the box that takes the
// focus (a space ticks it), not the field they were meant for. With
// JavaScript off the class never appears and this returns at once.
var htmxSettled = chromedp.WaitNotPresent(chromedp.CSS(".htmx-settling, .htmx-request"))

// fillRule types rule n's fields: a device box or a language, and the
// target.
func fillRule(n, device, languages, target string) []chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.ID("r" + n + "-url"))}
	if device != "" {
		steps = append(steps, chromedp.Click(chromedp.ID("r"+n+"-device-"+device)))
	}
	if languages != "" {
		steps = append(steps, chromedp.SendKeys(chromedp.ID("r"+n+"-languages"), languages))
	}
	return append(steps, chromedp.SendKeys(chromedp.ID("r"+n+"-url"), target))
}

// TestRulesAndPasswordInChromium: with JavaScript on, "Add a rule" swaps
// the rules list in place (the page is not reloaded: a mark set on it
// stays, and the password typed before stays typed), the new rule's
// first box takes the focus, and the link made has its rules, password
// and limit, on the detail page, in the list and at the edge.
func TestRulesAndPasswordInChromium(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t)
	b.signIn(t, s.controlURL, s.key)
	l := newRuleLink("rules-js")
	b.do(t, "open the new link form",
		chromedp.Navigate(s.controlURL+"/console/links/new"),
		chromedp.WaitVisible(chromedp.ID("add-rule")),
		chromedp.SendKeys(chromedp.ID("url"), l.target),
		chromedp.SendKeys(chromedp.ID("code"), l.code),
		chromedp.SendKeys(chromedp.ID("password"), l.password),
		chromedp.SendKeys(chromedp.ID("max_clicks"), "1000"),
	)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.notReloaded = true; true`)); err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"0", "1", "2"} {
		b.do(t, "add rule "+n, chromedp.Click(chromedp.ID("add-rule")), chromedp.WaitVisible(chromedp.ID("r"+n+"-url")), htmxSettled)
		if i == 2 {
			if f := run(t, b, "focus", chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`)); f != "r2-device-ios" {
				t.Errorf("after adding rule 3 the focus is on %q; want its first box", f)
			}
		}
	}
	if !run(t, b, "the page was not reloaded", chromedp.Evaluate[bool](`window.notReloaded === true`)) {
		t.Fatal("adding a rule reloaded the page with JavaScript on: htmx did not swap the list")
	}
	b.do(t, "type the rules", append(append(fillRule("0", "ios", "", l.ios), fillRule("1", "desktop", "", l.desktop)...),
		fillRule("2", "", "German", l.german)...)...)
	if pw := run(t, b, "password", chromedp.Value(chromedp.ID("password"))); pw != l.password {
		t.Fatalf("the password typed before the rules is %q after htmx's swaps", pw)
	}
	b.do(t, "create it", chromedp.Click(chromedp.ID("create-submit")), chromedp.WaitVisible(chromedp.ID("state")))
	checkRuleLink(t, b, s, l)
}

// TestRulesAndPasswordWithoutJavaScript: with scripts off the rules'
// buttons are plain posts that bring the form back with every value; the
// password, never written into a page, is typed last; the detail page's
// buttons move a rule and the edit is saved.
func TestRulesAndPasswordWithoutJavaScript(t *testing.T) {
	b := newBrowser(t)
	b.noScript(t)
	s := startStack(t)
	b.signIn(t, s.controlURL, s.key)
	l := newRuleLink("rules-nojs")
	b.do(t, "open the new link form",
		chromedp.Navigate(s.controlURL+"/console/links/new"),
		chromedp.WaitVisible(chromedp.ID("add-rule")),
		chromedp.SendKeys(chromedp.ID("url"), l.target),
		chromedp.SendKeys(chromedp.ID("code"), l.code),
		chromedp.SendKeys(chromedp.ID("password"), "typed too early"),
	)
	b.do(t, "add rule 1", chromedp.Click(chromedp.ID("add-rule")), chromedp.WaitVisible(chromedp.ID("r0-url")))
	if f := run(t, b, "focus", chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`)); f != "r0-device-ios" {
		t.Errorf("after adding a rule (a page load) the focus is on %q; want its first box", f)
	}
	if !run(t, b, "retype note", chromedp.Evaluate[bool](`document.getElementById("password-retype") !== null && document.getElementById("password").value === ""`)) {
		t.Error("the password came back, or the page does not say to type it again")
	}
	if got := run(t, b, "code kept", chromedp.Value(chromedp.ID("code"))); got != l.code {
		t.Errorf("the code came back as %q", got)
	}
	b.do(t, "rule 1", fillRule("0", "ios", "", l.ios)...)
	b.do(t, "add rule 2", chromedp.Click(chromedp.ID("add-rule")), chromedp.WaitVisible(chromedp.CSS("#r1-device-ios[autofocus]")))
	b.do(t, "rule 2", fillRule("1", "", "German", l.german)...)
	b.do(t, "add rule 3", chromedp.Click(chromedp.ID("add-rule")), chromedp.WaitVisible(chromedp.CSS("#r2-device-ios[autofocus]")))
	b.do(t, "rule 3", fillRule("2", "desktop", "", l.desktop)...)
	// Rule 3 up above rule 2: the desktop rule second, as the JavaScript
	// test has it.
	// Each button's answer is a new page: wait for what only it has (the
	// moved rule's button, focused), not for what the old page had too.
	b.do(t, "move rule 3 up", chromedp.Click(chromedp.ID("r2-up")), chromedp.WaitVisible(chromedp.CSS("#r1-up[autofocus]")))
	if got := run(t, b, "rule 2's target", chromedp.Value(chromedp.ID("r1-url"))); got != l.desktop {
		t.Fatalf("after moving rule 3 up, rule 2's target is %q; want %q", got, l.desktop)
	}
	if ios := run(t, b, "rule 1's box", chromedp.Evaluate[bool](`document.getElementById("r0-device-ios").checked`)); !ios {
		t.Error("rule 1's iOS box was lost")
	}
	b.do(t, "password and limit, then create",
		chromedp.SendKeys(chromedp.ID("password"), l.password),
		chromedp.SendKeys(chromedp.ID("max_clicks"), "1000"),
		chromedp.Click(chromedp.ID("create-submit")),
		chromedp.WaitVisible(chromedp.ID("state")),
	)
	checkRuleLink(t, b, s, l)

	// On the detail page: move the language rule to the top and save.
	b.do(t, "move it on the detail page",
		chromedp.Click(chromedp.ID("r2-up")), chromedp.WaitVisible(chromedp.CSS("#r1-up[autofocus]")),
		chromedp.Click(chromedp.ID("r1-up")), chromedp.WaitVisible(chromedp.CSS("#r0-down[autofocus]")),
		chromedp.Click(chromedp.ID("edit-submit")), chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	a := c.Do(t.Context(), "GET", "/api/v1/links/"+l.code, "")
	if a.Status != http.StatusOK || !regexp.MustCompile(`"rules":\[\{"url":"https://example.de/rules-nojs","language":\["de"\]\}`).Match(a.Body) {
		t.Errorf("after the move the API answers %s", a)
	}
}

// checkRuleLink checks the link l made through the form: the detail page
// reads its rules, password and limit out, the list shows its badges, the
// API has them, and the edge asks for the password, then sends each
// client to its target.
func checkRuleLink(t *testing.T, b *browser, s *env, l ruleLink) {
	t.Helper()
	rules := b.text(t, "#rules-text")
	for _, want := range []string{"device is iOS: " + l.ios, "device is Desktop: " + l.desktop, "language is German (de): " + l.german} {
		if !strings.Contains(rules, want) {
			t.Errorf("the detail page's rules %q lack %q", rules, want)
		}
	}
	if got := b.text(t, "#password-text"); got != "set: the edge asks visitors for it" {
		t.Errorf("password: %q", got)
	}
	if got := b.text(t, "#limit-text"); !strings.HasPrefix(got, "1,000 clicks") {
		t.Errorf("click limit: %q", got)
	}
	if html := run(t, b, "page source", chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(html, l.password) {
		t.Error("the detail page holds the password")
	}
	b.do(t, "the list", chromedp.Navigate(s.controlURL+"/console/links"), chromedp.WaitVisible(chromedp.ID("row-"+l.code)))
	if row := b.text(t, "#row-"+l.code); !strings.Contains(row, "3 rules") || !strings.Contains(row, "password") || !strings.Contains(row, "limit 1,000") {
		t.Errorf("the list row %q lacks the badges", row)
	}
	b.do(t, "back to the link", chromedp.Navigate(s.controlURL+"/console/links/"+l.code), chromedp.WaitVisible(chromedp.ID("edit")))

	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	if a := c.Do(t.Context(), "GET", "/api/v1/links/"+l.code, ""); a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"password_protected":true`) ||
		!strings.Contains(string(a.Body), `"max_clicks":1000`) || strings.Contains(string(a.Body), l.password) {
		t.Errorf("the API answers %s", a)
	}
	// The edge: the password form, whoever asks, and nothing of a target.
	for _, ua := range []string{uaIOS, uaDesktop} {
		v := newVisitor(t, s.edgeURL, ua, "en")
		status, body, loc := v.get(t, l.code)
		if status != http.StatusOK || !strings.Contains(body, `name="password"`) || loc != "" {
			t.Fatalf("the edge answered %d (Location %q); want the password form\n%s", status, loc, body)
		}
		for _, target := range []string{l.target, l.ios, l.desktop, l.german} {
			if strings.Contains(body, target) {
				t.Errorf("the password form names a target: %s", target)
			}
		}
	}
	// Behind the password, each client to its rule's target.
	for _, tc := range []struct{ ua, lang, want string }{
		{uaIOS, "en", l.ios},
		{uaDesktop, "en", l.desktop},
		{uaAndroid, "de-CH, en;q=0.5", l.german},
		{uaAndroid, "en-GB", l.target},
	} {
		v := newVisitor(t, s.edgeURL, tc.ua, tc.lang)
		if st := v.unlock(t, l.code, "wrong password"); st != http.StatusForbidden {
			t.Errorf("a wrong password: %d; want 403 and the form again", st)
		}
		if st := v.unlock(t, l.code, l.password); st != http.StatusSeeOther {
			t.Fatalf("the right password: %d; want 303", st)
		}
		status, _, loc := v.get(t, l.code)
		if status != http.StatusFound || loc != tc.want {
			t.Errorf("%s (%s) behind the password: %d to %q; want 302 to %s", tc.ua[:40], tc.lang, status, loc, tc.want)
		}
	}
}

// visitor is a client of the edge with its own cookies, User-Agent and
// Accept-Language, that does not follow redirects.
type visitor struct {
	edgeURL, ua, lang string
	c                 *http.Client
	token             string // the password form's, from the last form seen
}

func newVisitor(t *testing.T, edgeURL, ua, lang string) *visitor {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &visitor{edgeURL: edgeURL, ua: ua, lang: lang, c: &http.Client{Jar: jar, Timeout: stepTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var formToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (v *visitor) send(t *testing.T, method, path string, body io.Reader) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, method, v.edgeURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("User-Agent", v.ua)
	r.Header.Set("Accept-Language", v.lang)
	if body != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := v.c.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if m := formToken.FindSubmatch(b); m != nil {
		v.token = string(m[1])
	}
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

// get asks the edge for code, waiting out a 404 while the link reaches
// it (a 201 is jumpable at once; this only bounds a slow machine).
func (v *visitor) get(t *testing.T, code string) (status int, body, location string) {
	t.Helper()
	_ = stack.Poll(context.Background(), "the link at the edge", stepTimeout, func() bool {
		status, body, location = v.send(t, http.MethodGet, "/"+code, nil)
		return status != http.StatusNotFound
	})
	return status, body, location
}

// unlock posts password on the form the edge gave (asking for it first
// when none was seen) and answers the status.
func (v *visitor) unlock(t *testing.T, code, password string) int {
	t.Helper()
	if v.token == "" {
		v.get(t, code)
	}
	form := url.Values{"csrf": {v.token}, "password": {password}}
	status, _, _ := v.send(t, http.MethodPost, "/"+code+"/unlock", strings.NewReader(form.Encode()))
	return status
}

// The screens of issue 23 for the accessibility check and the screenshots
// (a11yScreens, TestScreenshots): steps through the console's own forms,
// with JavaScript on or off.

// rulesFormSteps open the new link form and add two rules to it, typed.
func rulesFormSteps(s *env) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(s.controlURL + "/console/links/new"), chromedp.WaitVisible(chromedp.ID("add-rule")),
		chromedp.SendKeys(chromedp.ID("url"), "https://example.com/app"),
		chromedp.Click(chromedp.ID("add-rule")), chromedp.WaitVisible(chromedp.ID("r0-url")), htmxSettled,
		chromedp.Click(chromedp.ID("r0-device-ios")), chromedp.SendKeys(chromedp.ID("r0-url"), "https://apps.apple.com/app/id1"),
		chromedp.Click(chromedp.ID("add-rule")), chromedp.WaitVisible(chromedp.ID("r1-url")), htmxSettled,
		chromedp.SendKeys(chromedp.ID("r1-countries"), "Germany, AT"), chromedp.SendKeys(chromedp.ID("r1-url"), "https://example.de/"),
	}
}

// rulesRefusedSteps post a rule the service refuses: its message shows
// next to its field.
func rulesRefusedSteps(s *env) []chromedp.Action[chromedp.Void] {
	return append(rulesFormSteps(s),
		chromedp.SendKeys(chromedp.ID("r1-languages"), "Klingon"),
		chromedp.Click(chromedp.ID("create-submit")), chromedp.WaitVisible(chromedp.ID("r1-languages-error")))
}

// rulesDetailSteps make a link with two rules, a password and a click
// limit through the form and stay on its page.
func rulesDetailSteps(s *env) []chromedp.Action[chromedp.Void] {
	return append(rulesFormSteps(s),
		chromedp.SendKeys(chromedp.ID("password"), "open sesame"), chromedp.SendKeys(chromedp.ID("max_clicks"), "500"),
		chromedp.Click(chromedp.ID("create-submit")), chromedp.WaitVisible(chromedp.ID("rules-text")))
}
