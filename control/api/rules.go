package api

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// A link's routing rules, password and click limit in the API
// (docs/api.md, docs/rules.md): how bodies carry them in, and how answers
// carry them out (apiwire.Rule, password_protected, max_clicks). The
// password goes in only: no answer holds it or its hash.

// ruleBody is a rule as a body sends it.
type ruleBody struct {
	URL      *string     `json:"url"`
	Device   []string    `json:"device"`
	Country  []string    `json:"country"`
	Language []string    `json:"language"`
	Query    []queryBody `json:"query"`
}

type queryBody struct {
	Param  *string `json:"param"`
	Equals *string `json:"equals"`
}

// sentRules are a patch's rules: whether the key was sent, and the rules
// ([] or null: remove them).
type sentRules struct {
	Sent  bool
	Rules []ruleBody
}

// sentValue is a patch's nullable field: whether it was sent, whether as
// null, and its value.
type sentValue[T any] struct {
	Sent, Null bool
	V          T
}

var queryShape = jsonObject(
	into(jsonField("param", jsonString), func(q *queryBody, v jsonValue) { q.Param = ptr(v.str) }),
	into(jsonField("equals", jsonString), func(q *queryBody, v jsonValue) { q.Equals = ptr(v.str) }),
)

var ruleShape = jsonObject(
	into(jsonField("url", jsonString), func(r *ruleBody, v jsonValue) { r.URL = ptr(v.str) }),
	into(jsonField("device", jsonArray(jsonString)), func(r *ruleBody, v jsonValue) { r.Device = append(r.Device, v.str) }),
	into(jsonField("country", jsonArray(jsonString)), func(r *ruleBody, v jsonValue) { r.Country = append(r.Country, v.str) }),
	into(jsonField("language", jsonArray(jsonString)), func(r *ruleBody, v jsonValue) { r.Language = append(r.Language, v.str) }),
	each(jsonField("query", jsonArray(queryShape)), func(r *ruleBody) any {
		r.Query = append(r.Query, queryBody{})
		return &r.Query[len(r.Query)-1]
	}),
)

// rulesOf turns a body's rules into the service's, refusing what the body
// alone shows is wrong (an unknown device, a missing target or name) with
// the rule and field named; the rest is the service's to check. An empty
// list is no rules (a non-nil empty slice, which an update takes for
// "remove them").
func rulesOf(in []ruleBody) ([]link.Rule, error) {
	if len(in) > link.MaxRules {
		return nil, fmt.Errorf("%w: rules: %d rules, at most %d (the first that matches a click wins)", link.ErrInvalidInput, len(in), link.MaxRules)
	}
	out := make([]link.Rule, len(in))
	for i, r := range in {
		if r.URL == nil {
			return nil, &link.RuleError{Rule: i, Field: "url", Msg: "is required: the rule's target"}
		}
		out[i] = link.Rule{URL: *r.URL, Countries: r.Country, Languages: r.Language}
		if names := link.DeviceNames(); len(r.Device) > len(names) {
			return nil, &link.RuleError{Rule: i, Field: "device", Msg: fmt.Sprintf("%d devices, at most %d (%s)", len(r.Device), len(names), strings.Join(names, ", "))}
		}
		for j, name := range r.Device {
			d, ok := link.ParseDevice(name)
			if !ok {
				return nil, &link.RuleError{Rule: i, Field: fmt.Sprintf("device[%d]", j),
					Msg: fmt.Sprintf("unknown device %.20q; devices are %s", name, strings.Join(link.DeviceNames(), ", "))}
			}
			out[i].Devices = append(out[i].Devices, d)
		}
		if len(r.Query) > link.MaxRuleQuery {
			return nil, &link.RuleError{Rule: i, Field: "query", Msg: fmt.Sprintf("%d query conditions, at most %d", len(r.Query), link.MaxRuleQuery)}
		}
		for j, q := range r.Query {
			if q.Param == nil {
				return nil, &link.RuleError{Rule: i, Field: fmt.Sprintf("query[%d].param", j), Msg: "is required: the query parameter's name"}
			}
			m := link.QueryMatch{Param: *q.Param}
			if q.Equals != nil {
				m.Equals, m.Value = true, *q.Equals
			}
			out[i].Query = append(out[i].Query, m)
		}
	}
	return out, nil
}

// createExtras puts a create body's rules, password and click limit into
// req.
func createExtras(in *createBody, req *links.CreateRequest) error {
	rules, err := rulesOf(in.Rules)
	if err != nil {
		return err
	}
	if len(rules) > 0 {
		req.Rules = rules
	}
	if in.Password != nil {
		if *in.Password == "" {
			return fmt.Errorf("%w: password is empty; leave it out for a link without one", link.ErrInvalidInput)
		}
		req.Password = *in.Password
	}
	if in.MaxClicks != nil {
		if *in.MaxClicks < 1 {
			return fmt.Errorf("%w: max_clicks must be at least 1; leave it out for no limit", link.ErrInvalidInput)
		}
		req.MaxClicks = *in.MaxClicks
	}
	return nil
}

// patchExtras puts a patch body's rules, password and click limit into u:
// rules [] or null removes them, password null removes it (and "" is
// refused: it is no password), max_clicks null removes the limit.
func patchExtras(in *patchBody, u *links.Update) error {
	if in.Rules.Sent {
		rules, err := rulesOf(in.Rules.Rules)
		if err != nil {
			return err
		}
		u.Rules = &rules
	}
	if in.Password.Sent {
		p := ""
		if !in.Password.Null {
			if in.Password.V == "" {
				return fmt.Errorf("%w: password is empty; send null to remove the password", link.ErrInvalidInput)
			}
			p = in.Password.V
		}
		u.Password = &p
	}
	if in.MaxClicks.Sent {
		n := int64(0)
		if !in.MaxClicks.Null {
			if in.MaxClicks.V < 1 {
				return fmt.Errorf("%w: max_clicks must be at least 1; send null to remove the limit", link.ErrInvalidInput)
			}
			n = in.MaxClicks.V
		}
		u.MaxClicks = &n
	}
	return nil
}

// appendExtras appends a link's rules, whether it has a password, its
// click limit and the clicks counted against it to an answer, as
// encoding/json writes apiwire.Link's Rules, PasswordProtected, MaxClicks
// and ClicksCounted.
func appendExtras(b []byte, l *links.Link) []byte {
	b = append(b, `,"rules":[`...)
	for i, r := range l.Extras.Rules {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"url":`...)
		b = appendString(b, r.URL)
		if len(r.Devices) > 0 {
			b = append(b, `,"device":[`...)
			for j, d := range r.Devices {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, d.String())
			}
			b = append(b, ']')
		}
		b = appendStrings(b, `,"country":[`, r.Countries)
		b = appendStrings(b, `,"language":[`, r.Languages)
		if len(r.Query) > 0 {
			b = append(b, `,"query":[`...)
			for j, q := range r.Query {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"param":`...)
				b = appendString(b, q.Param)
				if q.Equals {
					b = append(b, `,"equals":`...)
					b = appendString(b, q.Value)
				}
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"password_protected":`...)
	b = strconv.AppendBool(b, l.PasswordProtected || l.Extras.PasswordHash != "")
	b = append(b, `,"max_clicks":`...)
	if l.Extras.MaxClicks <= 0 {
		return append(b, `null,"clicks_counted":null`...)
	}
	b = strconv.AppendInt(b, l.Extras.MaxClicks, 10)
	b = append(b, `,"clicks_counted":`...)
	return strconv.AppendInt(b, l.Extras.ClicksCounted, 10)
}

// appendStrings appends key (`,"name":[`), ss and the closing bracket,
// nothing when ss is empty.
func appendStrings(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, key...)
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}
