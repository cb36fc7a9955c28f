package console

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
)

// The rules editor of the create and edit forms (docs/console.md, "Rules,
// password and click limit"): an ordered list of fieldsets, one a rule,
// that works with plain form posts. Buttons named op add a rule, remove or
// move one, or add a query condition to one: the form comes back with the
// change and every value as typed, and nothing is written. htmx, when it
// runs, posts the same buttons and swaps the list alone.
//
// Field names: rules (how many fieldsets the form has), then for rule i
// r<i>.device (checkboxes), r<i>.countries, r<i>.languages, r<i>.url,
// r<i>.queries (how many query rows) and for query row j r<i>.q<j>.param,
// r<i>.q<j>.op (present or equals) and r<i>.q<j>.value.

// ruleForm is one rule's fieldset as typed.
type ruleForm struct {
	N         int      // its place in the form, from 0
	Devices   []string // the device boxes ticked: ios, android, desktop
	Countries string   // codes or English names, separated by ',' or ';'
	Languages string
	Query     []queryForm
	URL       string
	// Errors are the messages shown next to its fields: "devices",
	// "countries", "languages", "query", "url", and "" for the rule.
	Errors map[string]string
}

// queryForm is one query condition's row as typed.
type queryForm struct {
	R, N               int // the rule's place and its own
	Param, Op, Value   string
	ParamErr, ValueErr string
}

// Bounds of what a posted form may hold beyond a link's own bounds: a
// hand-made post with more is refused, the first ones kept as typed.
const (
	maxFormRules   = 2 * link.MaxRules
	maxFormQueries = 2 * link.MaxRuleQuery
)

// deviceChoice is a device box.
type deviceChoice struct{ Value, Label string }

var deviceChoices = []deviceChoice{{"ios", "iOS"}, {"android", "Android"}, {"desktop", "Desktop"}}

// ID is the element id of one of the rule's fields.
func (r ruleForm) ID(field string) string { return "r" + strconv.Itoa(r.N) + "-" + field }

// Name is the form name of one of the rule's fields.
func (r ruleForm) Name(field string) string { return "r" + strconv.Itoa(r.N) + "." + field }

// Num is the rule's number as the page says it, from 1.
func (r ruleForm) Num() int { return r.N + 1 }

// Ticked reports whether the device box d is ticked.
func (r ruleForm) Ticked(d string) bool {
	for _, t := range r.Devices {
		if t == d {
			return true
		}
	}
	return false
}

// Err is the message of one of the rule's fields, "" for none.
func (r ruleForm) Err(field string) string { return r.Errors[field] }

// DeviceChoices are the device boxes.
func (ruleForm) DeviceChoices() []deviceChoice { return deviceChoices }

// CanAddQuery reports whether another query row fits the rule.
func (r ruleForm) CanAddQuery() bool { return len(r.Query) < link.MaxRuleQuery }

// ID is the element id of one of the row's fields.
func (q queryForm) ID(field string) string {
	return "r" + strconv.Itoa(q.R) + "-q" + strconv.Itoa(q.N) + "-" + field
}

// Name is the form name of one of the row's fields.
func (q queryForm) Name(field string) string {
	return "r" + strconv.Itoa(q.R) + ".q" + strconv.Itoa(q.N) + "." + field
}

// Num is the row's number as the page says it, from 1.
func (q queryForm) Num() int { return q.N + 1 }

func (r *ruleForm) blank() bool {
	if len(r.Devices) > 0 || strings.TrimSpace(r.Countries+r.Languages+r.URL) != "" {
		return false
	}
	for _, q := range r.Query {
		if strings.TrimSpace(q.Param+q.Value) != "" {
			return false
		}
	}
	return true
}

func (r *ruleForm) fail(field, msg string) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	if r.Errors[field] == "" {
		r.Errors[field] = msg
	}
}

// formCount reads a count field: a small non-negative number (none is
// 0), capped at max; over reports a larger one, bad one that is no count.
func formCount(v string, max int) (n int, over, bad bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false, false
	}
	u, err := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) || (err == nil && u > uint64(max)):
		return max, true, false
	case err != nil:
		return 0, false, true
	}
	return int(u), false, false
}

// readRules reads the rules' fieldsets of a posted form; what cannot be a
// form of the console's (more rules than it shows) is said in the
// extras' RulesError, the first rules kept as typed.
func readRules(form url.Values, x *extrasForm) {
	n, over, bad := formCount(form.Get("rules"), maxFormRules)
	switch {
	case over:
		x.RulesError = fmt.Sprintf("The form has more than %d rules; a link has at most %d. The first %d are shown.", maxFormRules, link.MaxRules, maxFormRules)
	case bad:
		x.RulesError = fmt.Sprintf("The form's count of rules, %.20q, is not a number: it is not the console's form.", form.Get("rules"))
	}
	for i := range n {
		r := ruleForm{N: i}
		p := "r" + strconv.Itoa(i) + "."
		r.Devices = form[p+"device"]
		if len(r.Devices) > len(deviceChoices) {
			r.Devices = r.Devices[:len(deviceChoices)]
			r.fail("devices", "A rule names each device once.")
		}
		r.Countries, r.Languages, r.URL = form.Get(p+"countries"), form.Get(p+"languages"), strings.TrimSpace(form.Get(p+"url"))
		m, overQ, badQ := formCount(form.Get(p+"queries"), maxFormQueries)
		if overQ || badQ {
			r.fail("query", fmt.Sprintf("A rule has at most %d query conditions.", link.MaxRuleQuery))
		}
		for j := range m {
			q := p + "q" + strconv.Itoa(j) + "."
			r.Query = append(r.Query, queryForm{R: i, N: j, Param: form.Get(q + "param"), Op: form.Get(q + "op"), Value: form.Get(q + "value")})
		}
		x.Rules = append(x.Rules, r)
	}
}

// renumber puts each rule's and row's place back in order after a change.
func (x *extrasForm) renumber() {
	for i := range x.Rules {
		x.Rules[i].N = i
		for j := range x.Rules[i].Query {
			x.Rules[i].Query[j].R, x.Rules[i].Query[j].N = i, j
		}
	}
}

// errNoOp is a form posted to save, not to change the rules' list.
var errNoOp = errors.New("no rules operation")

// applyOp applies the form's op (add-rule, remove:i, up:i, down:i,
// add-query:i) to the list, clearing the messages of an earlier post
// (they name places that may have moved), and names the element to focus
// next. errNoOp: the post is a save. Another error: an op this form
// cannot do, said as a sentence.
func (x *extrasForm) applyOp(op string) error {
	name, arg, hasArg := strings.Cut(op, ":")
	if name == "" || name == "save" {
		return errNoOp
	}
	i := -1
	if hasArg {
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n >= len(x.Rules) {
			return fmt.Errorf("There is no rule %.8q in this form.", arg)
		}
		i = n
	}
	if (name == "add-rule") == hasArg {
		return fmt.Errorf("The form's button %.40q is not one of the console's.", op)
	}
	for k := range x.Rules {
		x.Rules[k].Errors = nil
		for j := range x.Rules[k].Query {
			x.Rules[k].Query[j].ParamErr, x.Rules[k].Query[j].ValueErr = "", ""
		}
	}
	switch name {
	case "add-rule":
		if len(x.Rules) >= link.MaxRules {
			return fmt.Errorf("A link has at most %d rules.", link.MaxRules)
		}
		x.Rules = append(x.Rules, ruleForm{Query: []queryForm{{Op: "present"}}})
		x.renumber()
		x.Focus = x.Rules[len(x.Rules)-1].ID("device-ios")
	case "remove":
		x.Rules = append(x.Rules[:i], x.Rules[i+1:]...)
		x.renumber()
		x.Focus = "add-rule"
		if i < len(x.Rules) {
			x.Focus = x.Rules[i].ID("device-ios")
		}
	case "up", "down":
		j := i - 1
		if name == "down" {
			j = i + 1
		}
		if j < 0 || j >= len(x.Rules) {
			return fmt.Errorf("Rule %d cannot move %s.", i+1, name)
		}
		x.Rules[i], x.Rules[j] = x.Rules[j], x.Rules[i]
		x.renumber()
		// The same button on the rule where it now is, so a second press
		// moves it again; at an end, the other one.
		x.Focus = x.Rules[j].ID(name)
		if (name == "up" && j == 0) || (name == "down" && j == len(x.Rules)-1) {
			x.Focus = x.Rules[j].ID(map[string]string{"up": "down", "down": "up"}[name])
		}
	case "add-query":
		r := &x.Rules[i]
		if len(r.Query) >= link.MaxRuleQuery {
			return fmt.Errorf("A rule has at most %d query conditions.", link.MaxRuleQuery)
		}
		r.Query = append(r.Query, queryForm{Op: "present"})
		x.renumber()
		x.Focus = r.Query[len(r.Query)-1].ID("param")
	default:
		return fmt.Errorf("The form's button %.40q is not one of the console's.", op)
	}
	return nil
}

// splitList splits a countries or languages field at ',' and ';'.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// codesOf reads a countries or languages field: two-letter codes as
// typed (the service checks them) and English names turned into theirs.
func codesOf(v string, names map[string]string, max int, what string) ([]string, string) {
	items := splitList(v)
	if len(items) > max {
		return nil, fmt.Sprintf("%d %s; a rule names at most %d.", len(items), what, max)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		if len(it) == 2 {
			out = append(out, it)
			continue
		}
		code, ok := names[strings.ToLower(it)]
		if !ok {
			return nil, fmt.Sprintf("%.40q is not a code or an English name of one of the %s.", it, what)
		}
		out = append(out, code)
	}
	return out, ""
}

// linkRules turns the non-blank fieldsets into the service's rules, as
// sent (the service normalizes and checks them), remembering which
// fieldset each one is so the service's errors go back to it. ok is false
// when a field cannot be read at all; its message is marked.
func (x *extrasForm) linkRules() (rules []link.Rule, ok bool) {
	x.sent = x.sent[:0]
	ok = x.RulesError == ""
	for i := range x.Rules {
		r := &x.Rules[i]
		if r.blank() {
			continue
		}
		var lr link.Rule
		for _, d := range r.Devices {
			dev, known := link.ParseDevice(d)
			if !known {
				r.fail("devices", fmt.Sprintf("%.20q is not a device here: tick iOS, Android or Desktop.", d))
				ok = false
				continue
			}
			lr.Devices = append(lr.Devices, dev)
		}
		var msg string
		if lr.Countries, msg = codesOf(r.Countries, countryByName(), link.MaxRuleCountries, "countries"); msg != "" {
			r.fail("countries", msg)
			ok = false
		}
		if lr.Languages, msg = codesOf(r.Languages, languageByName(), link.MaxRuleLanguages, "languages"); msg != "" {
			r.fail("languages", msg)
			ok = false
		}
		for j := range r.Query {
			q := &r.Query[j]
			param, value := strings.TrimSpace(q.Param), q.Value
			switch {
			case param == "" && value == "":
				continue // an empty row: no condition
			case param == "":
				q.ParamErr = "A value needs the parameter's name."
				ok = false
				continue
			case q.Op == "present" && value != "":
				q.ValueErr = `Choose "equals" to match this value, or clear it to match any value.`
				ok = false
				continue
			case q.Op != "present" && q.Op != "equals":
				q.ParamErr = "Choose whether the parameter is present or equals a value."
				ok = false
				continue
			}
			lr.Query = append(lr.Query, link.QueryMatch{Param: param, Equals: q.Op == "equals", Value: value})
		}
		lr.URL = r.URL
		rules = append(rules, lr)
		x.sent = append(x.sent, i)
	}
	if len(rules) > link.MaxRules && x.RulesError == "" {
		x.RulesError = fmt.Sprintf("%d rules; a link has at most %d: remove %d.", len(rules), link.MaxRules, len(rules)-link.MaxRules)
		ok = false
	}
	return rules, ok
}

// markRuleError puts a service's *link.RuleError next to the field it
// names (rules[i].field as the API names it) and reports whether err was
// one.
func (x *extrasForm) markRuleError(err error) bool {
	var re *link.RuleError
	if !errors.As(err, &re) || re.Rule < 0 || re.Rule >= len(x.sent) {
		return false
	}
	r := &x.Rules[x.sent[re.Rule]]
	msg := sentence(re.Msg)
	field, rest, _ := strings.Cut(re.Field, "[")
	switch field {
	case "device":
		r.fail("devices", msg)
	case "country":
		r.fail("countries", msg)
	case "language":
		r.fail("languages", msg)
	case "url":
		r.fail("url", msg)
	case "query":
		// query[j].param, query[j].equals, query[j] or query: j counts
		// the conditions sent, which skip the empty rows.
		j, sub, _ := strings.Cut(rest, "]")
		n, err := strconv.Atoi(j)
		if q := r.sentQuery(n); err == nil && q != nil {
			if sub == ".equals" {
				q.ValueErr = msg
			} else {
				q.ParamErr = msg
			}
		} else {
			r.fail("query", msg)
		}
	default:
		r.fail("", msg)
	}
	return true
}

// sentQuery is the row of the rule's n-th condition as sent, nil if none.
func (r *ruleForm) sentQuery(n int) *queryForm {
	for j := range r.Query {
		if strings.TrimSpace(r.Query[j].Param) == "" {
			continue
		}
		if n == 0 {
			return &r.Query[j]
		}
		n--
	}
	return nil
}

// sentence is a service message as a sentence.
func sentence(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return "This is not valid."
	}
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// ruleFormOf is a stored rule as its fieldset shows it.
func ruleFormOf(n int, r link.Rule) ruleForm {
	f := ruleForm{N: n, Countries: strings.Join(r.Countries, ", "), Languages: strings.Join(r.Languages, ", "), URL: r.URL}
	for _, d := range r.Devices {
		f.Devices = append(f.Devices, d.String())
	}
	for j, q := range r.Query {
		op := "present"
		if q.Equals {
			op = "equals"
		}
		f.Query = append(f.Query, queryForm{R: n, N: j, Param: q.Param, Op: op, Value: q.Value})
	}
	if len(f.Query) == 0 {
		f.Query = []queryForm{{R: n, Op: "present"}}
	}
	return f
}

// rulesText is the fieldsets' content, blank ones left out: what an edit
// compares to tell whether the rules changed.
func rulesText(rules []ruleForm) string {
	var b strings.Builder
	for i := range rules {
		r := &rules[i]
		if r.blank() {
			continue
		}
		fmt.Fprintf(&b, "%q %q %q %q", r.Devices, strings.Join(splitList(r.Countries), ","), strings.Join(splitList(r.Languages), ","), r.URL)
		for _, q := range r.Query {
			if strings.TrimSpace(q.Param+q.Value) != "" {
				fmt.Fprintf(&b, " %q %q %q", strings.TrimSpace(q.Param), q.Op, q.Value)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
