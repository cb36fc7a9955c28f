package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// formValues is what a browser posts for the form with id in page, as
// rendered: its text, hidden, password and number fields, its ticked
// boxes and its selects' chosen options (no submit button's value).
func formValues(t testing.TB, page, id string) url.Values {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	attr := func(n *html.Node, k string) (string, bool) {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val, true
			}
		}
		return "", false
	}
	var form *html.Node
	var find func(n *html.Node)
	find = func(n *html.Node) {
		if v, _ := attr(n, "id"); n.Type == html.ElementNode && n.Data == "form" && v == id {
			form = n
		}
		for c := n.FirstChild; c != nil && form == nil; c = c.NextSibling {
			find(c)
		}
	}
	find(doc)
	if form == nil {
		t.Fatalf("no form #%s in the page:\n%.3000s", id, page)
	}
	v := url.Values{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			name, named := attr(n, "name")
			switch n.Data {
			case "input":
				typ, _ := attr(n, "type")
				val, _ := attr(n, "value")
				_, checked := attr(n, "checked")
				switch {
				case !named || typ == "submit":
				case typ == "checkbox" || typ == "radio":
					if checked {
						v.Add(name, val)
					}
				default:
					v.Add(name, val)
				}
			case "select":
				chosen, first := "", ""
				for o := n.FirstChild; o != nil; o = o.NextSibling {
					if o.Type != html.ElementNode || o.Data != "option" {
						continue
					}
					val, _ := attr(o, "value")
					if first == "" {
						first = val
					}
					if _, sel := attr(o, "selected"); sel {
						chosen = val
					}
				}
				if chosen == "" {
					chosen = first
				}
				if named {
					v.Add(name, chosen)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(form)
	return v
}

// with is v with the pairs kv set.
func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// threeRules are a create form's fields for three rules as a creator
// types them: an iOS rule, a country rule by names and a code, and a
// language rule with a query condition.
func threeRules(v url.Values) url.Values {
	return with(v, "rules", "3",
		"r0.device", "ios", "r0.queries", "1", "r0.url", "https://apps.apple.com/app/id1",
		"r1.countries", "Germany; at", "r1.queries", "1", "r1.url", "https://example.de/",
		"r2.languages", "en", "r2.queries", "2", "r2.q0.param", "ref", "r2.q0.op", "equals", "r2.q0.value", "mail",
		"r2.q1.param", "", "r2.q1.op", "present", "r2.url", "https://example.com/mail")
}

// passwordHash is the stored hash of a link's password, straight from
// the table (no read path carries it).
func passwordHash(t *testing.T, e *env, code string) string {
	t.Helper()
	var h *string
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT password_hash FROM links WHERE code = $1`, code).Scan(&h); err != nil {
		t.Fatal(err)
	}
	if h == nil {
		return ""
	}
	return *h
}

// TestCreateLinkWithRulesPasswordAndLimit: the new link form makes a
// link with three rules, a password and a click limit; the detail page
// reads them out (never the password), the edit form holds them, and the
// list shows their badges.
func TestCreateLinkWithRulesPasswordAndLimit(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.23.1")
	b.signIn(t, e.key)
	page := b.do("GET", "/console/links/new", nil)
	body := page.Body.String()
	for _, s := range []string{`id="rules"`, `id="add-rule"`, `name="password" type="password" autocomplete="new-password"`,
		`id="max_clicks" name="max_clicks" type="number"`, `<datalist id="country-codes">`, `<option value="DE">Germany</option>`,
		`<option value="de">German</option>`, "the edge asks visitors for it"} {
		if !strings.Contains(body, s) {
			t.Errorf("the new link form lacks %s", s)
		}
	}
	const password = "correct horse"
	form := threeRules(with(formValues(t, body, "create"), "url", "https://example.com/app", "code", "app-rules",
		"password", password, "max_clicks", "100"))
	w := b.do("POST", "/console/links", form)
	wantRedirect(t, w, "/console/links/app-rules?done=created")
	l, err := e.svc.Get(context.Background(), e.tenant, "", "app-rules")
	if err != nil {
		t.Fatal(err)
	}
	want := []link.Rule{
		{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Countries: []string{"AT", "DE"}, URL: "https://example.de/"},
		{Languages: []string{"en"}, Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}, URL: "https://example.com/mail"},
	}
	if fmt.Sprintf("%+v", l.Extras.Rules) != fmt.Sprintf("%+v", want) || !l.PasswordProtected || l.Extras.MaxClicks != 100 {
		t.Fatalf("link made: rules %+v, password %t, limit %d; want %+v, a password, 100", l.Extras.Rules, l.PasswordProtected, l.Extras.MaxClicks, want)
	}
	if ok, err := passhash.Verify(passwordHash(t, e, "app-rules"), []byte(password)); !ok || err != nil {
		t.Errorf("the stored hash does not verify the password typed: %v", err)
	}

	detail := b.do("GET", "/console/links/app-rules", nil).Body.String()
	for _, s := range []string{"When device is iOS: <span class=\"target\">https://apps.apple.com/app/id1</span>",
		"When country is Austria (AT) or Germany (DE)", "When language is English (en) and query parameter &#34;ref&#34; equals &#34;mail&#34;",
		`id="password-text">set: the edge asks visitors for it`, `id="limit-text">100 clicks; 0 counted, 100 left`,
		`id="password-state"`, `id="remove_password"`, "Counted so far: 0 of 100, 100 left."} {
		if !strings.Contains(detail, s) {
			t.Errorf("the detail page lacks %s", s)
		}
	}
	if strings.Contains(detail, password) || strings.Contains(detail, "argon2") {
		t.Error("the detail page holds the password or its hash")
	}
	edit := formValues(t, detail, "edit")
	if edit.Get("rules") != "3" || edit.Get("r1.countries") != "AT, DE" || edit.Get("r0.device") != "ios" || edit.Get("r2.q0.value") != "mail" ||
		edit.Get("r2.q0.op") != "equals" || edit.Get("max_clicks") != "100" || edit.Get("password") != "" {
		t.Errorf("the edit form holds %v", edit)
	}
	list := b.do("GET", "/console/links", nil).Body.String()
	for _, s := range []string{`<span class="badge">3 rules</span>`, `<span class="badge">password</span>`, `<span class="badge">limit 100</span>`} {
		if !strings.Contains(list, s) {
			t.Errorf("the list lacks the badge %s", s)
		}
	}
}

// TestRulesEditorButtons: add, remove, move and add-query posts come back
// with the change and every value typed (the password only said to be
// retyped), write nothing, and focus what the creator works on next;
// buttons the form cannot have are refused.
func TestRulesEditorButtons(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.23.2")
	b.signIn(t, e.key)
	base := formValues(t, b.do("GET", "/console/links/new", nil).Body.String(), "create")
	typed := threeRules(with(base, "url", "https://example.com/typed", "code", "typed-1", "title", "Kept title",
		"password", "secret words", "max_clicks", "7"))
	post := func(form url.Values, op string) (int, string) {
		w := b.do("POST", "/console/links", with(form, "op", op))
		return w.Code, w.Body.String()
	}
	code, body := post(typed, "add-rule")
	got := formValues(t, body, "create")
	if code != http.StatusOK || got.Get("rules") != "4" || got.Get("r3.url") != "" || got.Get("r1.countries") != "Germany; at" ||
		got.Get("url") != "https://example.com/typed" || got.Get("code") != "typed-1" || got.Get("title") != "Kept title" || got.Get("max_clicks") != "7" {
		t.Fatalf("add a rule: %d, form %v", code, got)
	}
	if strings.Contains(body, "secret words") || !strings.Contains(body, `id="password-retype"`) {
		t.Error("the password came back in the page, or the page does not say to type it again")
	}
	if !strings.Contains(body, `id="r3-device-ios" name="r3.device" value="ios" autofocus`) {
		t.Error("the new rule's first box is not focused")
	}
	code, body = post(got, "up:2")
	got = formValues(t, body, "create")
	if code != http.StatusOK || got.Get("r1.languages") != "en" || got.Get("r2.countries") != "Germany; at" || got.Get("r1.q0.value") != "mail" ||
		!strings.Contains(body, `id="r1-up"`) || !regexp.MustCompile(`id="r1-up"[^>]*autofocus`).MatchString(body) {
		t.Fatalf("move rule 3 up: %d, form %v", code, got)
	}
	code, body = post(got, "down:0")
	got = formValues(t, body, "create")
	if code != http.StatusOK || got.Get("r0.languages") != "en" || got.Get("r1.device") != "ios" {
		t.Fatalf("move rule 1 down: %d, form %v", code, got)
	}
	code, body = post(got, "add-query:0")
	got = formValues(t, body, "create")
	if code != http.StatusOK || got.Get("r0.queries") != "3" || !strings.Contains(body, `id="r0-q2-param"`) {
		t.Fatalf("add a query condition: %d, form %v", code, got)
	}
	code, body = post(got, "remove:3")
	got = formValues(t, body, "create")
	if code != http.StatusOK || got.Get("rules") != "3" || got.Get("r3.url") != "" || !strings.Contains(body, `id="add-rule"`) {
		t.Fatalf("remove rule 4: %d, form %v", code, got)
	}
	// Buttons no form of the console has, and moves off the ends.
	for _, op := range []string{"remove:9", "up:0", "down:2", "remove:-1", "remove:x", "add-rule:1", "explode", "remove", `<script>`} {
		code, body := post(got, op)
		if code != http.StatusBadRequest || !strings.Contains(body, `id="form-problem"`) || strings.Contains(body, "<script>") {
			t.Errorf("op %q: %d; want 400 with the reason, escaped", op, code)
		}
		if g := formValues(t, body, "create"); g.Get("rules") != "3" || g.Get("url") != "https://example.com/typed" {
			t.Errorf("op %q lost the form: %v", op, g)
		}
	}
	// At the bound, no add button, and a forged add is refused.
	full := with(base, "rules", fmt.Sprint(link.MaxRules))
	code, body = post(full, "")
	_ = code
	if strings.Contains(body, `id="add-rule"`) {
		t.Error("a form with 16 rules offers to add one")
	}
	if code, _ := post(full, "add-rule"); code != http.StatusBadRequest {
		t.Errorf("a 17th rule added: %d", code)
	}
	if n := linkCount(t, e); n != 0 {
		t.Errorf("%d links written by the editor's buttons; want none", n)
	}
	// Without the form's token a button is refused like any post.
	noToken := with(typed, "op", "add-rule")
	noToken.Del("csrf")
	if w := b.do("POST", "/console/links", noToken); w.Code != http.StatusForbidden {
		t.Errorf("a button without the CSRF token: %d; want 403", w.Code)
	}
}

func linkCount(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM links WHERE tenant_id = $1`, e.tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRuleErrorsShowNextToTheirFields: a refused rule's message is next
// to the field it is about, in the right fieldset though blank ones are
// not sent; every value stays as typed and nothing is written.
func TestRuleErrorsShowNextToTheirFields(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.23.3")
	b.signIn(t, e.key)
	base := with(formValues(t, b.do("GET", "/console/links/new", nil).Body.String(), "create"),
		"url", "https://example.com/main", "code", "errs-1", "password", "right password")
	many := strings.Repeat("DE, ", link.MaxRuleCountries) + "AT"
	tests := []struct {
		name   string
		fields []string // rule 1 (the second fieldset; the first is blank)
		id     string   // the error's element, or the field marked
		want   string
	}{
		{"unknown country code", []string{"r1.countries", "US, XX", "r1.url", "https://example.com/x"}, "r1-countries-error", `&#34;XX&#34; is not an ISO 3166-1`},
		{"unknown country name", []string{"r1.countries", "Narnia", "r1.url", "https://example.com/x"}, "r1-countries-error", "&#34;Narnia&#34; is not a code or an English name"},
		{"the UK", []string{"r1.countries", "uk", "r1.url", "https://example.com/x"}, "r1-countries-error", "the United Kingdom is GB"},
		{"too many countries", []string{"r1.countries", many, "r1.url", "https://example.com/x"}, "r1-countries-error", "65 countries; a rule names at most 64"},
		{"language tag", []string{"r1.languages", "en-US", "r1.url", "https://example.com/x"}, "r1-languages-error", "is not a code or an English name"},
		{"script target", []string{"r1.device", "android", "r1.url", "javascript:alert(1)"}, "r1-url-error", ""},
		{"no target", []string{"r1.device", "android"}, "r1-url-error", "target"},
		{"no condition", []string{"r1.url", "https://example.com/x"}, "r1-error", "at least one condition"},
		{"unknown device", []string{"r1.device", "toaster", "r1.url", "https://example.com/x"}, "r1-devices-error", "&#34;toaster&#34; is not a device here"},
		{"value without equals", []string{"r1.queries", "1", "r1.q0.param", "ref", "r1.q0.op", "present", "r1.q0.value", "mail", "r1.url", "https://example.com/x"}, "", "Choose &#34;equals&#34;"},
		{"value without a name", []string{"r1.queries", "1", "r1.q0.param", "", "r1.q0.op", "equals", "r1.q0.value", "mail", "r1.url", "https://example.com/x"}, "", "A value needs the parameter&#39;s name"},
		{"control character in a name", []string{"r1.queries", "1", "r1.q0.param", "re\x01f", "r1.q0.op", "present", "r1.url", "https://example.com/x"}, "", "control character"},
		{"private target", []string{"r1.device", "ios", "r1.url", "http://127.0.0.1/admin"}, "r1-url-error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := with(base, append([]string{"rules", "2", "r0.queries", "1", "r1.queries", "1"}, tt.fields...)...)
			w := b.do("POST", "/console/links", form)
			body := w.Body.String()
			if w.Code != http.StatusBadRequest || !strings.Contains(body, `id="form-problem"`) || !strings.Contains(body, "Rule 2") {
				t.Fatalf("answered %d; want 400 naming rule 2\n%.4000s", w.Code, body)
			}
			if tt.id != "" && !strings.Contains(body, `id="`+tt.id+`"`) {
				t.Errorf("no %s in the page:\n%s", tt.id, extract(body, "r1-rule"))
			}
			if !strings.Contains(body, tt.want) {
				t.Errorf("the page does not say %q:\n%s", tt.want, extract(body, "r1-rule"))
			}
			got := formValues(t, body, "create")
			for i := 0; i+1 < len(tt.fields); i += 2 {
				if tt.fields[i] == "r1.device" && tt.fields[i+1] == "toaster" {
					continue // no box of the form holds it: only a forged post sends it
				}
				if got.Get(tt.fields[i]) != tt.fields[i+1] {
					t.Errorf("%s came back as %q; want %q as typed", tt.fields[i], got.Get(tt.fields[i]), tt.fields[i+1])
				}
			}
			if got.Get("url") != "https://example.com/main" || got.Get("code") != "errs-1" {
				t.Errorf("the link's own fields were lost: %v", got)
			}
			if strings.Contains(body, "right password") {
				t.Error("the password was written into the page")
			}
		})
	}
	// The password and the limit are marked too.
	for _, tc := range []struct{ field, value, want string }{
		{"password", "short", "at least 6 characters"},
		{"password", "bad\x07bell", "control character"},
		{"max_clicks", "0", "A click limit is a whole number from 1"},
		{"max_clicks", "-4", "A click limit is a whole number from 1"},
		{"max_clicks", "1e3", "A click limit is a whole number from 1"},
		{"max_clicks", "9007199254740992", "A click limit is a whole number from 1"},
	} {
		w := b.do("POST", "/console/links", with(base, tc.field, tc.value))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) || !strings.Contains(w.Body.String(), `aria-invalid="true"`) {
			t.Errorf("%s=%q: %d; want 400 saying %q next to the field", tc.field, tc.value, w.Code, tc.want)
		}
	}
	if n := linkCount(t, e); n != 0 {
		t.Errorf("%d links written by refused forms; want none", n)
	}
}

// extract is the fieldset with id in page, for a failure's message.
func extract(page, id string) string {
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		return page
	}
	j := strings.Index(page[i:], "</fieldset>\n</li>")
	if j < 0 {
		return page[i:]
	}
	return page[i : i+j]
}

// TestEditRulesPasswordAndLimit: the detail form changes rules, password
// and limit, each only when changed; saving it untouched writes nothing.
func TestEditRulesPasswordAndLimit(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.23.4")
	b.signIn(t, e.key)
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, e.tenant, links.CreateRequest{URL: "https://example.com/e", Code: "edit-x",
		Rules: []link.Rule{{Devices: []link.Device{link.DeviceAndroid, link.DeviceIOS}, URL: "https://example.com/mobile"},
			{Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: ""}}, URL: "https://example.com/empty-ref"}},
		Password: "first password", MaxClicks: 50}); err != nil {
		t.Fatal(err)
	}
	version := func() uint64 {
		l, err := e.svc.Get(ctx, e.tenant, "", "edit-x")
		if err != nil {
			t.Fatal(err)
		}
		return l.Version
	}
	v0 := version()
	page := func() url.Values {
		return formValues(t, b.do("GET", "/console/links/edit-x", nil).Body.String(), "edit")
	}
	form := page()
	if form["r0.device"] == nil || len(form["r0.device"]) != 2 || form.Get("r1.q0.op") != "equals" || form.Get("r1.q0.value") != "" {
		t.Fatalf("the edit form: %v; want both devices ticked and the empty equals kept", form)
	}
	wantRedirect(t, b.do("POST", "/console/links/edit-x", form), "/console/links/edit-x")
	if v := version(); v != v0 {
		t.Fatalf("saving the form untouched made version %d of %d", v, v0)
	}
	// A rule changed, moved and the limit removed: one new version.
	w := b.do("POST", "/console/links/edit-x", with(form, "r0.url", "https://example.com/phones", "max_clicks", ""))
	wantRedirect(t, w, "/console/links/edit-x?done=saved")
	l, err := e.svc.Get(ctx, e.tenant, "", "edit-x")
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != v0+1 || l.Extras.Rules[0].URL != "https://example.com/phones" || l.Extras.MaxClicks != 0 || !l.PasswordProtected ||
		len(l.Extras.Rules[0].Devices) != 2 || !l.Extras.Rules[1].Query[0].Equals {
		t.Fatalf("after the edit: %+v", l)
	}
	hash := passwordHash(t, e, "edit-x")
	// A new password replaces the old one.
	form = page()
	wantRedirect(t, b.do("POST", "/console/links/edit-x", with(form, "password", "second password")), "/console/links/edit-x?done=saved")
	if h := passwordHash(t, e, "edit-x"); h == hash {
		t.Error("the password was not changed")
	} else if ok, _ := passhash.Verify(h, []byte("second password")); !ok {
		t.Error("the new hash does not verify the new password")
	}
	// Both a new password and removing it: refused, nothing changed.
	form = page()
	v1 := version()
	w = b.do("POST", "/console/links/edit-x", with(form, "password", "third password", "remove_password", "1", "title", "changed"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not both") || strings.Contains(w.Body.String(), "third password") {
		t.Errorf("password and removal together: %d", w.Code)
	}
	if version() != v1 {
		t.Error("a refused edit changed the link")
	}
	// Remove the password and every rule.
	form = page()
	clear := with(form, "remove_password", "1", "rules", "0")
	wantRedirect(t, b.do("POST", "/console/links/edit-x", clear), "/console/links/edit-x?done=saved")
	l, err = e.svc.Get(ctx, e.tenant, "", "edit-x")
	if err != nil {
		t.Fatal(err)
	}
	if l.PasswordProtected || len(l.Extras.Rules) != 0 || passwordHash(t, e, "edit-x") != "" {
		t.Errorf("after removing: password %t, rules %v", l.PasswordProtected, l.Extras.Rules)
	}
	detail := b.do("GET", "/console/links/edit-x", nil).Body.String()
	if !strings.Contains(detail, `id="rules-text">none`) || !strings.Contains(detail, `id="password-text">none`) || !strings.Contains(detail, `id="limit-text">none`) {
		t.Errorf("the detail page after removing everything:\n%s", detail)
	}
	// A refused rule on the edit page is marked there, and a button
	// writes nothing.
	form = page()
	v2 := version()
	w = b.do("POST", "/console/links/edit-x", with(form, "rules", "1", "r0.countries", "ZZ", "r0.queries", "1", "r0.url", "https://example.com/z"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `id="r0-countries-error"`) {
		t.Errorf("a refused rule on edit: %d", w.Code)
	}
	w = b.do("POST", "/console/links/edit-x", with(form, "op", "add-rule"))
	if w.Code != http.StatusOK || formValues(t, w.Body.String(), "edit").Get("rules") != "1" || version() != v2 {
		t.Errorf("add a rule on edit: %d, version %d of %d", w.Code, version(), v2)
	}
	// Another tenant's link is not found, whatever the form holds.
	other, key, err := e.store.CreateTenantWithKey(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	_ = other
	b2 := e.browser("10.0.23.5")
	token := b2.signIn(t, key)
	if w := b2.do("POST", "/console/links/edit-x", with(form, "csrf", token, "remove_password", "1")); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's edit: %d; want 404", w.Code)
	}
}

// TestHostileRuleValuesRenderInert: a rule target and a query value made
// to break out of the page show as text on the detail page, in the edit
// form and in a refused form's fields.
func TestHostileRuleValuesRenderInert(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.23.6")
	b.signIn(t, e.key)
	const hostile = `https://x.example/"><script>alert(1)</script>`
	form := with(formValues(t, b.do("GET", "/console/links/new", nil).Body.String(), "create"),
		"url", "https://example.com/h", "code", "hostile-r", "rules", "1", "r0.device", "ios", "r0.url", hostile,
		"r0.queries", "1", "r0.q0.param", `"><img src=x>`, "r0.q0.op", "equals", "r0.q0.value", `</textarea><script>alert(2)</script>`)
	wantRedirect(t, b.do("POST", "/console/links", form), "/console/links/hostile-r")
	for _, page := range []string{"/console/links/hostile-r", "/console/links"} {
		body := b.do("GET", page, nil).Body.String()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x>") {
			t.Errorf("%s writes a stored value as markup", page)
		}
	}
	detail := b.do("GET", "/console/links/hostile-r", nil).Body.String()
	if got := formValues(t, detail, "edit"); got.Get("r0.q0.value") != `</textarea><script>alert(2)</script>` || !strings.HasPrefix(got.Get("r0.url"), "https://x.example/") {
		t.Errorf("the edit form holds %v", got)
	}
	// Refused (no condition), the hostile values come back as values.
	bad := with(form, "code", "hostile-2", "r0.device", "")
	bad.Del("r0.device")
	bad.Set("r0.q0.param", "")
	bad.Set("r0.q0.value", "")
	bad.Set("r0.countries", `"><script>alert(3)</script>`)
	w := b.do("POST", "/console/links", bad)
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "<script>alert") {
		t.Errorf("a refused hostile form: %d, or written as markup", w.Code)
	}
}

// TestOversizedRulesForms: more rules than a link takes, more than the
// form shows, values past their bounds and a body past the bound are
// refused with a reason; within the form's bounds nothing typed is lost.
func TestOversizedRulesForms(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.23.7")
	b.signIn(t, e.key)
	base := with(formValues(t, b.do("GET", "/console/links/new", nil).Body.String(), "create"), "url", "https://example.com/big", "code", "big-1")
	rules := func(n int) url.Values {
		f := with(base, "rules", fmt.Sprint(n))
		for i := range n {
			f.Set(fmt.Sprintf("r%d.device", i), "ios")
			f.Set(fmt.Sprintf("r%d.queries", i), "1")
			f.Set(fmt.Sprintf("r%d.url", i), fmt.Sprintf("https://example.com/r%d/%s", i, strings.Repeat("p", 4000)))
		}
		return f
	}
	w := b.do("POST", "/console/links", rules(link.MaxRules+1))
	got := formValues(t, w.Body.String(), "create")
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "17 rules; a link has at most 16: remove 1") ||
		got.Get("rules") != "17" || !strings.HasPrefix(got.Get("r16.url"), "https://example.com/r16/") {
		t.Errorf("17 rules: %d, %d rules back", w.Code, len(got["rules"]))
	}
	w = b.do("POST", "/console/links", rules(40))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "more than 32 rules") ||
		formValues(t, w.Body.String(), "create").Get("rules") != "32" {
		t.Errorf("40 rules: %d", w.Code)
	}
	for _, n := range []string{"999999999999999999999", "-1", "1e3", "x"} {
		if w := b.do("POST", "/console/links", with(base, "rules", n)); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "rules") {
			t.Errorf("a count of rules %q: %d; want 400", n, w.Code)
		}
	}
	// 16 rules at 4 KB targets fit the form's bound and go in.
	w = b.do("POST", "/console/links", rules(link.MaxRules))
	wantRedirect(t, w, "/console/links/big-1")
	huge := with(base, "code", "big-2", "rules", "1", "r0.queries", "1", "r0.url", "https://example.com/x",
		"r0.countries", strings.Repeat("Germany, ", 5000))
	w = b.do("POST", "/console/links", huge)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "5000 countries; a rule names at most 64") ||
		formValues(t, w.Body.String(), "create").Get("r0.countries") != huge.Get("r0.countries") {
		t.Errorf("5,000 countries: %d, or the field not kept", w.Code)
	}
	past := with(base, "code", "big-3", "rules", "1", "r0.url", "https://example.com/"+strings.Repeat("a", console.MaxFormBytes))
	if w := b.do("POST", "/console/links", past); w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "nothing was saved") {
		t.Errorf("a form past the bound: %d", w.Code)
	}
	if n := linkCount(t, e); n != 1 {
		t.Errorf("%d links; want the one with 16 rules", n)
	}
}
