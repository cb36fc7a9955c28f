package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/text/language"
	"golang.org/x/text/language/display"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// A link's extras in the console (issue 23; docs/rules.md): its routing
// rules (rules.go), its password and its click limit, on the create and
// edit forms, the detail page and the list's badges. The password goes in
// only: no page holds it, or says more than whether there is one.

// extrasForm is the rules, password and click limit of a create or edit
// form, as typed.
type extrasForm struct {
	Rules      []ruleForm
	RulesError string // about the list as a whole
	// Action is the path the form posts to: the rules' buttons post
	// there too, with htmx.
	Action template.URL
	// Focus is the id of the element to focus when the form comes back
	// after a rules button (the new rule's first box, the moved rule's
	// button): autofocus, which htmx honors in what it swaps in too.
	Focus string
	// Password is a new password as typed. No page ever writes it back:
	// a refused form says to type it again.
	Password       string
	RemovePassword bool
	// HasPassword: the link edited has one.
	HasPassword   bool
	PasswordError string
	// MaxClicks is the limit as typed; empty for none. Limit is the
	// edited link's, as it was read.
	MaxClicks      string
	MaxClicksError string
	Limit          limitView
	// sent maps the rules sent to the service to their fieldsets (blank
	// ones are not sent).
	sent []int
}

// readExtras reads a posted form's rules, password and click limit.
func readExtras(form url.Values, action string) extrasForm {
	x := extrasForm{Action: template.URL(action), Password: form.Get("password"),
		RemovePassword: form.Get("remove_password") == "1", MaxClicks: strings.TrimSpace(form.Get("max_clicks"))}
	readRules(form, &x)
	return x
}

// extrasFormOf is a link's extras as the edit form starts.
func extrasFormOf(l *links.Link, action string) extrasForm {
	x := extrasForm{Action: template.URL(action), HasPassword: l.PasswordProtected, Limit: limitOf(l)}
	for i, r := range l.Extras.Rules {
		x.Rules = append(x.Rules, ruleFormOf(i, r))
	}
	if l.Extras.MaxClicks > 0 {
		x.MaxClicks = strconv.FormatInt(l.Extras.MaxClicks, 10)
	}
	return x
}

// CanAdd reports whether another rule fits.
func (x extrasForm) CanAdd() bool { return len(x.Rules) < link.MaxRules }

// MaxRules is a link's bound on rules, for the page's help.
func (extrasForm) MaxRules() int { return link.MaxRules }

// Countries and Languages are the names the fields' suggestions offer.
func (extrasForm) Countries() []codeChoice { return countryChoices() }

// Languages: see Countries.
func (extrasForm) Languages() []codeChoice { return languageChoices() }

// Autofocus is the autofocus attribute for the element id when it is the
// one to focus (Focus), else nothing.
func (x extrasForm) Autofocus(id string) template.HTMLAttr {
	if x.Focus != "" && x.Focus == id {
		return "autofocus"
	}
	return ""
}

// Failed reports whether some field of the extras is marked.
func (x extrasForm) Failed() bool { return len(x.problems()) > 0 }

// problems are the marked fields' messages, each with where it is, in the
// page's order.
func (x extrasForm) problems() []string {
	var out []string
	if x.RulesError != "" {
		out = append(out, "Rules: "+x.RulesError)
	}
	names := map[string]string{"": "", "devices": "device: ", "countries": "countries: ", "languages": "languages: ", "query": "query: ", "url": "target: "}
	for _, r := range x.Rules {
		for _, f := range []string{"", "devices", "countries", "languages", "query"} {
			if m := r.Err(f); m != "" {
				out = append(out, fmt.Sprintf("Rule %d, %s%s", r.Num(), names[f], m))
			}
		}
		for _, q := range r.Query {
			for _, m := range []string{q.ParamErr, q.ValueErr} {
				if m != "" {
					out = append(out, fmt.Sprintf("Rule %d, query condition %d: %s", r.Num(), q.Num(), m))
				}
			}
		}
		if m := r.Err("url"); m != "" {
			out = append(out, fmt.Sprintf("Rule %d, target: %s", r.Num(), m))
		}
	}
	if x.PasswordError != "" {
		out = append(out, "Password: "+x.PasswordError)
	}
	if x.MaxClicksError != "" {
		out = append(out, "Click limit: "+x.MaxClicksError)
	}
	return out
}

// Summary is the form's problem line when extras' fields are marked: the
// first, and how many more are marked below.
func (x extrasForm) Summary() string {
	ps := x.problems()
	switch len(ps) {
	case 0:
		return ""
	case 1:
		return ps[0]
	}
	return fmt.Sprintf("%s (and %d more, marked below)", ps[0], len(ps)-1)
}

// password reads the password field: "" for none, else checked as the
// service will (passhash.CheckPassword), so its message is the field's.
func (x *extrasForm) password() (string, bool) {
	if x.Password == "" {
		return "", true
	}
	if err := passhash.CheckPassword(x.Password); err != nil {
		x.PasswordError = message(err)
		return "", false
	}
	return x.Password, true
}

// maxClicks reads the click limit field: 0 for none.
func (x *extrasForm) maxClicks() (int64, bool) {
	if x.MaxClicks == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(x.MaxClicks, 10, 64)
	if err != nil || n < 1 || n > link.MaxClicksLimit {
		x.MaxClicksError = fmt.Sprintf("A click limit is a whole number from 1 to %d; leave it empty for none.", int64(link.MaxClicksLimit))
		return 0, false
	}
	return n, true
}

// create fills a create's rules, password and click limit; false when a
// field is marked (nothing is sent then).
func (x *extrasForm) create(req *links.CreateRequest) bool {
	rules, okRules := x.linkRules()
	pw, okPW := x.password()
	limit, okLimit := x.maxClicks()
	req.Rules, req.Password, req.MaxClicks = rules, pw, limit
	return okRules && okPW && okLimit
}

// update fills an edit's changes to rules, password and click limit,
// each only when it changed from old (the form as the link was); false
// when a field is marked.
func (x *extrasForm) update(u *links.Update, old extrasForm) bool {
	ok := true
	if rulesText(x.Rules) != rulesText(old.Rules) {
		rules, okRules := x.linkRules()
		if rules == nil {
			rules = []link.Rule{} // none: remove them
		}
		u.Rules, ok = &rules, okRules
	} else {
		// Unchanged, so not sent: still number them, in case the
		// service answers for them anyway.
		x.linkRules()
	}
	switch {
	case x.RemovePassword && x.Password != "":
		x.PasswordError = "Type a new password or tick Remove the password, not both."
		ok = false
	case x.RemovePassword:
		none := ""
		u.Password = &none
	case x.Password != "":
		pw, okPW := x.password()
		u.Password, ok = &pw, ok && okPW
	}
	if x.MaxClicks != old.MaxClicks {
		limit, okLimit := x.maxClicks()
		u.MaxClicks, ok = &limit, ok && okLimit
	}
	return ok
}

// markError puts a service's refusal next to the field it is about and
// reports whether it was about one of the extras.
func (x *extrasForm) markError(err error) bool {
	if x.markRuleError(err) {
		return true
	}
	if !errors.Is(err, link.ErrInvalidInput) && !errors.Is(err, link.ErrInvalidURL) {
		return false
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "password"):
		x.PasswordError = sentence(strings.TrimPrefix(strings.TrimPrefix(message(err), "Password: "), link.ErrInvalidInput.Error()+": "))
	case strings.Contains(msg, "max_clicks"):
		x.MaxClicksError = message(err)
	case strings.HasPrefix(strings.TrimPrefix(msg, link.ErrInvalidInput.Error()+": "), "rules"):
		x.RulesError = message(err)
	default:
		return false
	}
	return true
}

// ruleOp answers a post of one of the rules' buttons: the form again,
// changed, with nothing written (200), or with why the button cannot do
// it (400). It reports whether the post was one.
func ruleOp(r *http.Request, x *extrasForm, show func(status int, problem string)) bool {
	err := x.applyOp(r.PostForm.Get("op"))
	switch {
	case errors.Is(err, errNoOp):
		return false
	case err != nil:
		show(http.StatusBadRequest, err.Error())
	default:
		show(http.StatusOK, x.RulesError)
	}
	return true
}

// codeChoice is a country or language the fields suggest.
type codeChoice struct{ Code, Name string }

// countryChoices and languageChoices are the codes rules take
// (shared/link's tables) with CLDR's English names, by code; the
// ...ByName maps read a name back (lower case), as "Name (CODE)" too.
var (
	countryChoices = sync.OnceValue(func() []codeChoice {
		return choices(link.CanonicalCountry, 'A', func(c string) string {
			r, err := language.ParseRegion(c)
			if err != nil {
				return ""
			}
			return display.English.Regions().Name(r)
		})
	})
	languageChoices = sync.OnceValue(func() []codeChoice {
		return choices(link.CanonicalLanguage, 'a', func(c string) string {
			b, err := language.ParseBase(c)
			if err != nil {
				return ""
			}
			return display.English.Languages().Name(b)
		})
	})
	countryByName  = sync.OnceValue(func() map[string]string { return byName(countryChoices()) })
	languageByName = sync.OnceValue(func() map[string]string { return byName(languageChoices()) })
)

func choices(canonical func(string) (string, bool), base byte, name func(string) string) []codeChoice {
	var out []codeChoice
	for a := base; a < base+26; a++ {
		for b := base; b < base+26; b++ {
			c, ok := canonical(string([]byte{a, b}))
			if !ok {
				continue
			}
			n := name(c)
			if n == "" || strings.HasPrefix(n, "Unknown") {
				n = c
			}
			out = append(out, codeChoice{Code: c, Name: n})
		}
	}
	return out
}

func byName(cs []codeChoice) map[string]string {
	m := make(map[string]string, 2*len(cs))
	for _, c := range cs {
		m[strings.ToLower(c.Name)] = c.Code
		m[strings.ToLower(c.Name+" ("+c.Code+")")] = c.Code
	}
	return m
}

// nameOf is a code with its name, as the detail page shows it.
func nameOf(cs []codeChoice, code string) string {
	i, found := slices.BinarySearchFunc(cs, code, func(c codeChoice, code string) int { return strings.Compare(c.Code, code) })
	if !found || cs[i].Name == code {
		return code
	}
	return cs[i].Name + " (" + code + ")"
}

// ruleView is a stored rule as the detail page reads it out.
type ruleView struct {
	Num        int
	Conditions []string // each a condition in words; all must hold
	URL        string
}

// RuleViews are the link's rules in words, in order.
func (r row) RuleViews() []ruleView {
	var out []ruleView
	for i, rule := range r.Extras.Rules {
		v := ruleView{Num: i + 1, URL: rule.URL}
		if len(rule.Devices) > 0 {
			var ds []string
			for _, d := range rule.Devices {
				for _, c := range deviceChoices {
					if c.Value == d.String() {
						ds = append(ds, c.Label)
					}
				}
			}
			v.Conditions = append(v.Conditions, "device is "+strings.Join(ds, " or "))
		}
		if len(rule.Countries) > 0 {
			var cs []string
			for _, c := range rule.Countries {
				cs = append(cs, nameOf(countryChoices(), c))
			}
			v.Conditions = append(v.Conditions, "country is "+strings.Join(cs, " or "))
		}
		if len(rule.Languages) > 0 {
			var ls []string
			for _, l := range rule.Languages {
				ls = append(ls, nameOf(languageChoices(), l))
			}
			v.Conditions = append(v.Conditions, "language is "+strings.Join(ls, " or "))
		}
		for _, q := range rule.Query {
			if q.Equals {
				v.Conditions = append(v.Conditions, fmt.Sprintf("query parameter %q equals %q", q.Param, q.Value))
			} else {
				v.Conditions = append(v.Conditions, fmt.Sprintf("query parameter %q is present", q.Param))
			}
		}
		out = append(out, v)
	}
	return out
}

// limitView is a limited link's click limit as a page shows it: the
// limit, the clicks the rollups had counted when the link was read, what
// is left, and whether it is reached (edges answer 410). Zero for a link
// without one.
type limitView struct {
	Max, Counted, Left count
	Reached            bool
}

// Limit is the row's click limit state.
func (r row) Limit() limitView { return limitOf(r.Link) }

func limitOf(l *links.Link) limitView {
	x := l.Extras
	if x.MaxClicks <= 0 {
		return limitView{}
	}
	return limitView{Max: count(x.MaxClicks), Counted: count(x.ClicksCounted), Left: count(max(0, x.MaxClicks-x.ClicksCounted)),
		Reached: x.ClicksCounted >= x.MaxClicks}
}
