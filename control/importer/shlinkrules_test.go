package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/shared/link"
)

// decodeObject reads a JSON object as the reader does (numbers kept).
func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%v: %.200s", err, s)
	}
	return m
}

// withRules is a Shlink short URL object with the given redirectRules
// (JSON) and meta.
func withRules(rules, meta string) string {
	if meta == "" {
		meta = `{"maxVisits": null}`
	}
	return `{"shortCode": "abc12", "longUrl": "https://e.com/", "meta": ` + meta + `, "redirectRules": ` + rules + `}`
}

// oneRule is a rule to https://e.com/r with the given conditions (JSON).
func oneRule(conds ...string) string {
	return `[{"longUrl": "https://e.com/r", "priority": 1, "conditions": [` + strings.Join(conds, ",") + `]}]`
}

func cond(typ, key, value string) string {
	q := func(s string) string {
		if s == "<null>" {
			return "null"
		}
		b, _ := json.Marshal(s)
		return string(b)
	}
	return fmt.Sprintf(`{"type": %s, "matchKey": %s, "matchValue": %s}`, q(typ), q(key), q(value))
}

// TestShlinkExtrasMapped: a Shlink short URL with max visits and redirect
// rules as its API answers them (shlink-importer's shape) becomes a click
// limit (what is left of it) and rules in priority order, conditions
// mapped, a rule with a condition that has no equivalent skipped and
// said.
func TestShlinkExtrasMapped(t *testing.T) {
	obj := decodeObject(t, `{
	  "shortCode": "rY9zd", "shortUrl": "https://acel.me/rY9zd", "longUrl": "https://www.alejandrocelaya.com/foo",
	  "dateCreated": "2016-05-02T17:49:53+02:00", "visitsSummary": {"total": 48, "nonBots": 40, "bots": 8},
	  "tags": ["bar", "foo"], "meta": {"validSince": null, "validUntil": null, "maxVisits": 500},
	  "domain": null, "title": "", "crawlable": false, "forwardQuery": true,
	  "redirectRules": [
	    {"longUrl": "https://example.com/es", "priority": 4,
	     "conditions": [{"type": "language", "matchKey": null, "matchValue": "es"},
	                    {"type": "query-param", "matchKey": "ref", "matchValue": "mail"}]},
	    {"longUrl": "https://example.com/android", "priority": 1,
	     "conditions": [{"type": "device", "matchKey": null, "matchValue": "android"}]},
	    {"longUrl": "https://example.com/office", "priority": 2,
	     "conditions": [{"type": "ip-address", "matchKey": null, "matchValue": "192.168.1.0/24"}]},
	    {"longUrl": "https://example.com/us-desktop", "priority": 3,
	     "conditions": [{"type": "geolocation-country-code", "matchKey": null, "matchValue": "us"},
	                    {"type": "device", "matchKey": null, "matchValue": "desktop"},
	                    {"type": "any-value-query-param", "matchKey": "utm_source", "matchValue": null}]},
	    {"longUrl": "https://example.com/never", "priority": 5,
	     "conditions": [{"type": "device", "matchKey": null, "matchValue": "ios"},
	                    {"type": "device", "matchKey": null, "matchValue": "android"}]}
	  ]}`)
	max, rules, notes, err := shlinkExtras(obj)
	if err != nil {
		t.Fatal(err)
	}
	if max != 452 {
		t.Errorf("click limit %d; want 452 (500 max visits, 48 used)", max)
	}
	want := []link.Rule{
		{Devices: []link.Device{link.DeviceAndroid}, URL: "https://example.com/android"},
		{Countries: []string{"US"}, Devices: []link.Device{link.DeviceDesktop}, Query: []link.QueryMatch{{Param: "utm_source"}}, URL: "https://example.com/us-desktop"},
		{Languages: []string{"es"}, Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}, URL: "https://example.com/es"},
	}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	all := strings.Join(notes, "; ")
	for _, s := range []string{
		"click limit 452: Shlink's max visits 500 less the 48 visits it counted",
		`redirect rule 3 (to https://example.com/office) skipped: condition "ip-address" has no equivalent`,
		"redirect rule 5 (to https://example.com/never) skipped: its device conditions can never all hold",
		"language rules match the most preferred language here",
	} {
		if !strings.Contains(all, s) {
			t.Errorf("notes %q lack %q", all, s)
		}
	}
	// The rules as the create API takes them.
	b, _ := json.Marshal(wireRules(rules))
	wantWire := `[{"url":"https://example.com/android","device":["android"]},` +
		`{"url":"https://example.com/us-desktop","device":["desktop"],"country":["US"],"query":[{"param":"utm_source"}]},` +
		`{"url":"https://example.com/es","language":["es"],"query":[{"param":"ref","equals":"mail"}]}]`
	if string(b) != wantWire {
		t.Errorf("wire rules\n%s\nwant\n%s", b, wantWire)
	}
	// The redirect-rules endpoint's whole answer under the key, a
	// top-level maxVisits and v2's visitsCount read the same; no rules and
	// a null limit are none.
	obj = decodeObject(t, `{"shortCode": "a", "longUrl": "https://e.com/", "maxVisits": 7, "visitsCount": 0,
	  "redirectRules": {"defaultLongUrl": "https://e.com/", "redirectRules": [
	    {"longUrl": "https://e.com/q", "priority": 1, "conditions": [{"type": "any-value-query-param", "matchKey": "x", "matchValue": null}]}]}}`)
	if max, rules, notes, err := shlinkExtras(obj); err != nil || max != 7 || len(rules) != 1 || rules[0].Query[0] != (link.QueryMatch{Param: "x"}) || len(notes) != 0 {
		t.Errorf("endpoint's answer: %d %+v %q %v", max, rules, notes, err)
	}
	for _, s := range []string{
		`{"shortCode": "a", "longUrl": "https://e.com/", "meta": {"maxVisits": null}}`,
		`{"shortCode": "a", "longUrl": "https://e.com/", "meta": {}, "redirectRules": []}`,
		`{"shortCode": "a", "longUrl": "https://e.com/", "redirectRules": null}`,
		`{"shortCode": "a", "longUrl": "https://e.com/", "redirectRules": {"redirectRules": null}}`,
	} {
		if max, rules, notes, err := shlinkExtras(decodeObject(t, s)); err != nil || max != 0 || rules != nil || notes != nil {
			t.Errorf("%s: %d %v %v %v; want nothing", s, max, rules, notes, err)
		}
	}
}

// TestShlinkPriorityOrder: rules apply lowest priority first, whatever
// the order they are listed in; equal priorities and rules without one
// (after the others) keep the file's order.
func TestShlinkPriorityOrder(t *testing.T) {
	rule := func(to, prio string) string {
		p := ""
		if prio != "" {
			p = `"priority": ` + prio + `, `
		}
		return `{"longUrl": "https://e.com/` + to + `", ` + p + `"conditions": [` + cond("device", "<null>", "ios") + `]}`
	}
	for _, tc := range []struct {
		rules []string
		want  string
	}{
		{[]string{rule("a", "1"), rule("b", "2"), rule("c", "3")}, "abc"},
		{[]string{rule("c", "3"), rule("b", "2"), rule("a", "1")}, "abc"},
		{[]string{rule("b", "10"), rule("a", "-2"), rule("c", "10.5")}, "abc"},
		{[]string{rule("a", "2"), rule("b", "2"), rule("c", "1")}, "cab"},
		{[]string{rule("c", ""), rule("a", "7"), rule("d", "null"), rule("b", "8")}, "abcd"},
	} {
		_, rules, _, err := shlinkExtras(decodeObject(t, withRules("["+strings.Join(tc.rules, ",")+"]", "")))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, r := range rules {
			got += strings.TrimPrefix(r.URL, "https://e.com/")
		}
		if got != tc.want {
			t.Errorf("%s: order %q; want %q", tc.rules, got, tc.want)
		}
	}
}

// TestShlinkConditions: every condition type Shlink has, mapped where
// this system has its equivalent, else the rule skipped with the reason,
// never carried broader than it was.
func TestShlinkConditions(t *testing.T) {
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		name  string
		conds []string
		want  *link.Rule // nil: skipped
		skip  string     // the skip note's reason
	}{
		{"device android", []string{cond("device", "<null>", "android")}, &link.Rule{Devices: []link.Device{link.DeviceAndroid}}, ""},
		{"device ios", []string{cond("device", "<null>", "ios")}, &link.Rule{Devices: []link.Device{link.DeviceIOS}}, ""},
		{"device desktop in capitals", []string{cond("device", "<null>", "DESKTOP")}, &link.Rule{Devices: []link.Device{link.DeviceDesktop}}, ""},
		{"device twice, the same", []string{cond("device", "<null>", "ios"), cond("device", "<null>", "ios")}, &link.Rule{Devices: []link.Device{link.DeviceIOS}}, ""},
		{"device mobile", []string{cond("device", "<null>", "mobile")}, nil, `device "mobile" has no equivalent here`},
		{"device windows", []string{cond("device", "<null>", "windows")}, nil, `device "windows" has no equivalent here`},
		{"two devices", []string{cond("device", "<null>", "ios"), cond("device", "<null>", "desktop")}, nil, "device conditions can never all hold"},
		{"country", []string{cond("geolocation-country-code", "<null>", "de")}, &link.Rule{Countries: []string{"DE"}}, ""},
		{"country UK", []string{cond("geolocation-country-code", "<null>", "UK")}, nil, `country "UK" is not an ISO 3166-1`},
		{"country USA", []string{cond("geolocation-country-code", "<null>", "USA")}, nil, `country "USA" is not`},
		{"two countries", []string{cond("geolocation-country-code", "<null>", "DE"), cond("geolocation-country-code", "<null>", "FR")}, nil, "country conditions can never all hold"},
		{"language", []string{cond("language", "<null>", "PT")}, &link.Rule{Languages: []string{"pt"}}, ""},
		{"language with a region", []string{cond("language", "<null>", "es-ES")}, nil, `language "es-ES" names a region`},
		{"language with a region, underscore", []string{cond("language", "<null>", "pt_BR")}, nil, "names a region, and a rule here matches a language alone (every pt)"},
		{"language not a code", []string{cond("language", "<null>", "spanish")}, nil, "is not an ISO 639-1 code"},
		{"two languages", []string{cond("language", "<null>", "es"), cond("language", "<null>", "en")}, nil, "two languages in one rule"},
		{"query-param", []string{cond("query-param", "ref", "mail")}, &link.Rule{Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}}, ""},
		{"query-param empty value", []string{cond("query-param", "ref", "")}, &link.Rule{Query: []link.QueryMatch{{Param: "ref", Equals: true}}}, ""},
		{"query-param numeric value", []string{`{"type": "query-param", "matchKey": "y", "matchValue": 2024}`}, &link.Rule{Query: []link.QueryMatch{{Param: "y", Equals: true, Value: "2024"}}}, ""},
		{"any-value-query-param", []string{cond("any-value-query-param", "utm", "<null>")}, &link.Rule{Query: []link.QueryMatch{{Param: "utm"}}}, ""},
		{"any-value-query-param, name in matchValue", []string{cond("any-value-query-param", "<null>", "utm")}, &link.Rule{Query: []link.QueryMatch{{Param: "utm"}}}, ""},
		{"valueless-query-param", []string{cond("valueless-query-param", "debug", "<null>")}, nil, "valueless-query-param (a parameter without a value) has no equivalent"},
		{"five query conditions", []string{cond("query-param", "a", "1"), cond("query-param", "b", "1"), cond("query-param", "c", "1"), cond("query-param", "d", "1"), cond("any-value-query-param", "e", "<null>")}, nil, "more than 4 query conditions"},
		{"query name too long", []string{cond("query-param", long, "1")}, nil, "query[0].param a parameter name is 1 to 64 bytes"},
		{"query value too long", []string{cond("query-param", "a", strings.Repeat("v", 257))}, nil, "query[0].equals a value is at most 256 bytes"},
		{"query value with a control character", []string{cond("query-param", "a", "x\x01y")}, nil, "query[0].equals"},
		{"ip-address", []string{cond("ip-address", "<null>", "10.0.0.*")}, nil, `condition "ip-address" has no equivalent`},
		{"city", []string{cond("geolocation-city-name", "<null>", "Madrid")}, nil, `condition "geolocation-city-name" has no equivalent`},
		{"before-date", []string{cond("before-date", "<null>", "2030-01-01T00:00:00+00:00")}, nil, `condition "before-date" has no equivalent`},
		{"after-date", []string{cond("after-date", "<null>", "2020-01-01T00:00:00+00:00")}, nil, `condition "after-date" has no equivalent`},
		{"a type to come", []string{cond("moon-phase", "<null>", "full")}, nil, `condition "moon-phase" has no equivalent`},
		// An unsupported condition beside supported ones: the rule is
		// skipped, not carried without it (broader).
		{"device and ip-address", []string{cond("device", "<null>", "android"), cond("ip-address", "<null>", "10.0.0.1")}, nil, `condition "ip-address" has no equivalent`},
		{"country and city", []string{cond("geolocation-country-code", "<null>", "ES"), cond("geolocation-city-name", "<null>", "Madrid")}, nil, `"geolocation-city-name" has no equivalent`},
		{"query and valueless", []string{cond("query-param", "a", "1"), cond("valueless-query-param", "b", "<null>")}, nil, "valueless-query-param"},
		{"all four kinds", []string{cond("device", "<null>", "ios"), cond("geolocation-country-code", "<null>", "jp"), cond("language", "<null>", "ja"), cond("query-param", "c", "d")},
			&link.Rule{Devices: []link.Device{link.DeviceIOS}, Countries: []string{"JP"}, Languages: []string{"ja"}, Query: []link.QueryMatch{{Param: "c", Equals: true, Value: "d"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rules, notes, err := shlinkExtras(decodeObject(t, withRules(oneRule(tc.conds...), "")))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want == nil {
				if len(rules) != 0 {
					t.Fatalf("carried %+v; want the rule skipped", rules)
				}
				if len(notes) == 0 || !strings.HasPrefix(notes[0], "redirect rule 1 (to https://e.com/r) skipped: ") || !strings.Contains(notes[0], tc.skip) {
					t.Errorf("notes %q; want the skip with %q", notes, tc.skip)
				}
				return
			}
			w := *tc.want
			w.URL = "https://e.com/r"
			if diff := cmp.Diff([]link.Rule{w}, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			for _, n := range notes {
				if strings.Contains(n, "skipped") {
					t.Errorf("note %q", n)
				}
			}
			if err := link.CheckRules(rules); err != nil {
				t.Errorf("carried rules the API would refuse: %v", err)
			}
		})
	}
}

// TestShlinkLimit: max visits become what is left of them; what is no
// whole number in range refuses the row, as does a limit already used up
// (Shlink no longer redirects the link).
func TestShlinkLimit(t *testing.T) {
	for _, tc := range []struct {
		obj    string
		want   int64
		reason string // an error with it; "" for none
	}{
		{`{"meta": {"maxVisits": 1}}`, 1, ""},
		{`{"meta": {"maxVisits": 100}, "visitsSummary": {"total": 0}}`, 100, ""},
		{`{"meta": {"maxVisits": 100}, "visitsSummary": {"total": 99, "nonBots": 90, "bots": 9}}`, 1, ""},
		{`{"meta": {"maxVisits": 100}, "visitsCount": 30}`, 70, ""},
		{`{"maxVisits": 9007199254740991}`, link.MaxClicksLimit, ""},
		{`{"meta": {"maxVisits": null}, "visitsSummary": {"total": 5}}`, 0, ""},
		{`{"meta": {"maxVisits": 100}, "visitsSummary": {"total": 100}}`, 0, "its max visits are used up (100 visits of 100)"},
		{`{"meta": {"maxVisits": 100}, "visitsSummary": {"total": 250}}`, 0, "used up"},
		{`{"meta": {"maxVisits": 0}}`, 0, "maxVisits 0 is not a whole number from 1"},
		{`{"meta": {"maxVisits": -3}}`, 0, "maxVisits -3 is not a whole number"},
		{`{"meta": {"maxVisits": 2.5}}`, 0, "maxVisits 2.5 is not"},
		{`{"meta": {"maxVisits": 1e3}}`, 0, "maxVisits 1e3 is not"},
		{`{"meta": {"maxVisits": 9007199254740992}}`, 0, "is not a whole number"},
		{`{"meta": {"maxVisits": 99999999999999999999999999999999}}`, 0, "is not a whole number"},
		{`{"meta": {"maxVisits": "10"}}`, 0, "maxVisits is a string, not a number"},
		{`{"meta": {"maxVisits": true}}`, 0, "maxVisits is a boolean"},
		{`{"meta": {"maxVisits": [10]}}`, 0, "maxVisits is a list"},
		{`{"meta": {"maxVisits": {"n": 10}}}`, 0, "maxVisits is an object"},
		{`{"meta": {"maxVisits": 10}, "visitsSummary": {"total": -1}}`, 0, "the visits count -1 is not a whole number from 0"},
		{`{"meta": {"maxVisits": 10}, "visitsSummary": {"total": "3"}}`, 0, "the visits count is a string"},
	} {
		max, _, _, err := shlinkExtras(decodeObject(t, tc.obj))
		switch {
		case tc.reason == "" && (err != nil || max != tc.want):
			t.Errorf("%s: %d, %v; want %d", tc.obj, max, err, tc.want)
		case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
			t.Errorf("%s: %d, %v; want an error with %q", tc.obj, max, err, tc.reason)
		}
	}
}

// TestShlinkExtrasRefused: what no Shlink writes (wrong kinds, rules
// without a target or conditions, more rules than a link holds) refuses
// the row with the reason.
func TestShlinkExtrasRefused(t *testing.T) {
	rules := func(n int, conds string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"longUrl": "https://e.com/%d", "priority": %d, "conditions": [%s]}`, i, i, conds)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	ios := cond("device", "<null>", "ios")
	for _, tc := range []struct{ obj, reason string }{
		{withRules(`"yes"`, ""), "redirectRules is a string, not a list"},
		{withRules(`7`, ""), "redirectRules is a number"},
		{withRules(`{"redirectRules": {"a": 1}}`, ""), "redirectRules is an object"},
		{withRules(`[7]`, ""), "redirect rule 1 is a number, not an object"},
		{withRules(`[null]`, ""), "redirect rule 1 is null"},
		{withRules(`[{"priority": 1, "conditions": [`+ios+`]}]`, ""), "redirect rule 1 has no longUrl"},
		{withRules(`[{"longUrl": 5, "conditions": [`+ios+`]}]`, ""), "redirect rule 1 has no longUrl"},
		{withRules(`[{"longUrl": "https://e.com/r", "priority": "high", "conditions": [`+ios+`]}]`, ""), "priority is not a number"},
		{withRules(`[{"longUrl": "https://e.com/r", "priority": 1e999, "conditions": [`+ios+`]}]`, ""), "priority is not a number"},
		{withRules(`[{"longUrl": "https://e.com/r", "conditions": []}]`, ""), "redirect rule 1 has no conditions"},
		{withRules(`[{"longUrl": "https://e.com/r", "conditions": {"type": "device"}}]`, ""), "redirect rule 1 has no conditions"},
		{withRules(oneRule(`"device"`), ""), "redirect rule 1: condition 1 is a string, not an object"},
		{withRules(oneRule(`{"matchValue": "x"}`), ""), "condition 1: no type"},
		{withRules(oneRule(`{"type": 3, "matchValue": "x"}`), ""), "condition 1: no type"},
		{withRules(oneRule(`{"type": "device", "matchValue": ["ios"]}`), ""), "matchValue is a list, not a string"},
		{withRules(oneRule(`{"type": "query-param", "matchKey": {}, "matchValue": "x"}`), ""), "matchKey is an object"},
		{withRules(oneRule(cond("query-param", "<null>", "x")), ""), "query-param has no matchKey"},
		{withRules(oneRule(cond("any-value-query-param", "", "")), ""), "any-value-query-param has no matchKey"},
		{withRules(rules(link.MaxRules+1, ios), ""), "17 redirect rules to carry, at most 16"},
		{withRules(rules(maxListedRules+1, ios), ""), "65 redirect rules, at most 16"},
		{withRules(rules(1000, ios), ""), "1000 redirect rules, at most 16"},
		{withRules(rules(1000, cond("ip-address", "<null>", "1.2.3.4")), ""), "1000 redirect rules"},
		{withRules(oneRule(ios), `{"maxVisits": -1}`), "maxVisits -1"},
	} {
		max, got, notes, err := shlinkExtras(decodeObject(t, tc.obj))
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%.120s: %v; want an error with %q", tc.obj, err, tc.reason)
		}
		if err != nil && (max != 0 || got != nil || notes != nil) {
			t.Errorf("%.120s: refused, yet %d %v %q", tc.obj, max, got, notes)
		}
	}
}

// TestShlinkRulesBounds: rules to skip do not count against the limit of
// rules a link holds, and the notes name a few of them, not a thousand;
// oversize targets are skipped, not sent.
func TestShlinkRulesBounds(t *testing.T) {
	var parts []string
	for i := range maxListedRules {
		c := cond("ip-address", "<null>", "10.0.0.1")
		if i%4 == 0 {
			c = cond("geolocation-country-code", "<null>", "FR")
		}
		parts = append(parts, fmt.Sprintf(`{"longUrl": "https://e.com/%d", "priority": %d, "conditions": [%s]}`, i, i, c))
	}
	_, rules, notes, err := shlinkExtras(decodeObject(t, withRules("["+strings.Join(parts, ",")+"]", "")))
	if err != nil || len(rules) != link.MaxRules {
		t.Fatalf("%d rules, %v; want %d", len(rules), err, link.MaxRules)
	}
	if len(notes) != maxSkipNotes+1 || notes[maxSkipNotes] != "44 more redirect rules skipped" {
		t.Errorf("notes %q", notes)
	}
	// A target over the bound, and one that is no http(s) URL.
	huge := "https://e.com/" + strings.Repeat("a", link.MaxRuleURLLen)
	obj := withRules(`[{"longUrl": "`+huge+`", "priority": 1, "conditions": [`+cond("device", "<null>", "ios")+`]},
		{"longUrl": "javascript:alert(1)", "priority": 2, "conditions": [`+cond("device", "<null>", "android")+`]},
		{"longUrl": "https://e.com/ok", "priority": 3, "conditions": [`+cond("device", "<null>", "desktop")+`]}]`, "")
	_, rules, notes, err = shlinkExtras(decodeObject(t, obj))
	if err != nil || len(rules) != 1 || rules[0].URL != "https://e.com/ok" {
		t.Fatalf("%+v %v; want only the third rule", rules, err)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "redirect rule 1 (to https://e.com/aaaa") || !strings.Contains(notes[0], "…) skipped: url") ||
		!strings.Contains(notes[1], "redirect rule 2 (to javascript:alert(1)) skipped: url") || len(notes[0]) > 300 {
		t.Errorf("notes %q", notes)
	}
}

// TestShlinkMemberDeterministic: a key spelled twice (maxVisits and
// max_visits) reads the same on every run, since the request it makes
// is part of the chunk's idempotent identity.
func TestShlinkMemberDeterministic(t *testing.T) {
	obj := `{"longUrl": "https://e.com/", "meta": {"max_visits": 5, "MaxVisits": 6, "max-visits": 7}}`
	for range 50 {
		max, _, _, err := shlinkExtras(decodeObject(t, obj))
		if err != nil || max != 6 {
			t.Fatalf("%d %v; want 6 (MaxVisits, first in byte order)", max, err)
		}
	}
	exact := `{"longUrl": "https://e.com/", "meta": {"max_visits": 5, "maxvisits": 9}}`
	if max, _, _, _ := shlinkExtras(decodeObject(t, exact)); max != 9 {
		t.Errorf("%d; want 9 (the exact spelling)", max)
	}
}

// shlinkExport is a Shlink API listing with rules and limits; see
// TestImportShlinkRulesAndLimits for what becomes of each.
const shlinkExport = `{"shortUrls": {"data": [
  {"shortCode": "promo-1", "longUrl": "https://example.com/promo", "domain": null, "title": "Promo", "tags": ["sale"],
   "visitsSummary": {"total": 40, "nonBots": 38, "bots": 2}, "meta": {"validSince": null, "validUntil": null, "maxVisits": 100},
   "redirectRules": [
     {"longUrl": "https://example.com/promo/de", "priority": 2,
      "conditions": [{"type": "geolocation-country-code", "matchKey": null, "matchValue": "DE"},
                     {"type": "language", "matchKey": null, "matchValue": "de"}]},
     {"longUrl": "https://example.com/promo/app", "priority": 1,
      "conditions": [{"type": "device", "matchKey": null, "matchValue": "ios"},
                     {"type": "query-param", "matchKey": "src", "matchValue": "qr"}]},
     {"longUrl": "https://example.com/promo/office", "priority": 3,
      "conditions": [{"type": "ip-address", "matchKey": null, "matchValue": "203.0.113.0/24"}]},
     {"longUrl": "https://example.com/promo/tracked", "priority": 4,
      "conditions": [{"type": "any-value-query-param", "matchKey": "utm_source", "matchValue": null}]}]},
  {"shortCode": "plain-1", "longUrl": "https://example.com/plain", "visitsSummary": {"total": 3}, "meta": {"maxVisits": null}},
  {"shortCode": "spent-1", "longUrl": "https://example.com/spent", "visitsSummary": {"total": 10}, "meta": {"maxVisits": 10}},
  {"shortCode": "local-1", "longUrl": "https://example.com/local",
   "redirectRules": [{"longUrl": "http://127.0.0.1/admin", "priority": 1,
      "conditions": [{"type": "device", "matchKey": null, "matchValue": "android"}]}]},
  {"shortCode": "bad-1", "longUrl": "https://example.com/bad", "meta": {"maxVisits": "lots"}},
  {"shortCode": "until-1", "longUrl": "https://example.com/until", "meta": {"validUntil": "2099-06-30T12:00:00+02:00"}},
  {"shortCode": "gone-1", "longUrl": "https://example.com/gone", "meta": {"validUntil": "2020-06-30T12:00:00+02:00"}}
]}}`

// TestImportShlinkRulesAndLimits: a Shlink API export with redirect rules
// and max visits runs into a real control; the links read back carry the
// rules in priority order and what is left of the limit, the skipped rule
// is said in the row's reason, and what cannot go in is rejected with
// why: a limit used up, a rule target the API refuses, a malformed limit.
func TestImportShlinkRulesAndLimits(t *testing.T) {
	e := newAPIEnv(t)
	c, _ := e.client(t, "importer")
	sum, err := runImport(t, shlinkExport, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Format != Shlink {
		t.Errorf("format %s", sum.Format)
	}
	byCode := map[string]Outcome{}
	for _, o := range sum.Outcomes {
		byCode[o.OldCode] = o
	}
	for code, want := range map[string]struct {
		kind   Kind
		reason string
	}{
		"promo-1": {Kept, `click limit 60: Shlink's max visits 100 less the 40 visits it counted; redirect rule 3 (to https://example.com/promo/office) skipped: condition "ip-address" has no equivalent`},
		"plain-1": {Kept, ""},
		"spent-1": {Rejected, "its max visits are used up (10 visits of 10)"},
		"local-1": {Rejected, "rules[0].url"},
		"bad-1":   {Rejected, "maxVisits is a string"},
		"until-1": {Kept, ""},
		"gone-1":  {Rejected, "it expired in Shlink at its validUntil, 2020-06-30T10:00:00Z"},
	} {
		o := byCode[code]
		if o.Kind != want.kind || !strings.Contains(o.Reason, want.reason) || (want.reason == "" && o.Reason != "") {
			t.Errorf("%s: %s %q; want %s with %q", code, o.Kind, o.Reason, want.kind, want.reason)
		}
	}
	ctx := context.Background()
	l, err := c.Get(ctx, "promo-1")
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxClicks == nil || *l.MaxClicks != 60 {
		t.Errorf("promo-1 max_clicks %v; want 60", l.MaxClicks)
	}
	qr := "qr"
	wantRules := []apiwire.Rule{
		{URL: "https://example.com/promo/app", Device: []string{"ios"}, Query: []apiwire.QueryCondition{{Param: "src", Equals: &qr}}},
		{URL: "https://example.com/promo/de", Country: []string{"DE"}, Language: []string{"de"}},
		{URL: "https://example.com/promo/tracked", Query: []apiwire.QueryCondition{{Param: "utm_source"}}},
	}
	if diff := cmp.Diff(wantRules, l.Rules); diff != "" {
		t.Errorf("promo-1 rules (-want +got):\n%s", diff)
	}
	if l.Title == nil || *l.Title != "Promo" || len(l.Tags) != 1 {
		t.Errorf("promo-1 title %v tags %q", l.Title, l.Tags)
	}
	p, err := c.Get(ctx, "plain-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxClicks != nil || len(p.Rules) != 0 {
		t.Errorf("plain-1: max_clicks %v rules %+v; want none", p.MaxClicks, p.Rules)
	}
	u, err := c.Get(ctx, "until-1")
	if err != nil {
		t.Fatal(err)
	}
	if u.ExpiresAt == nil || !strings.HasPrefix(*u.ExpiresAt, "2099-06-30T10:00:00") {
		t.Errorf("until-1 expires_at %v; want 2099-06-30T10:00:00Z", u.ExpiresAt)
	}
	// Run again: the same requests, replayed, nothing new.
	again, err := runImport(t, shlinkExport, c, Options{})
	if err != nil || again.Replayed != again.Chunks || again.Kept != 3 {
		t.Errorf("second run: kept %d, %d of %d chunks replayed, %v; want every chunk replayed", again.Kept, again.Replayed, again.Chunks, err)
	}
}

// TestReadShlinkCSVHasNoExtras: the web client's CSV export carries no
// max visits and no rules (its visits column is the visits so far, not a
// limit): its rows have none.
func TestReadShlinkCSVHasNoExtras(t *testing.T) {
	_, recs := readRecords(t, "createdAt,title,shortUrl,domain,shortCode,longUrl,tags,visits\n"+
		"2024-01-01T00:00:00+00:00,T,https://s.test/abc12,s.test,abc12,https://example.com/,a|b,500\n", Auto)
	if len(recs) != 1 || recs[0].Err != nil || recs[0].MaxClicks != 0 || recs[0].Rules != nil || recs[0].Notes != nil {
		t.Errorf("%+v", recs)
	}
}

// TestLinkRulesRoundTrip: rules sent as the API's wire form read back as
// the same rules for a Client in control's own process (importjobs), an
// unknown device refused.
func TestLinkRulesRoundTrip(t *testing.T) {
	rules := []link.Rule{
		{Devices: []link.Device{link.DeviceIOS, link.DeviceDesktop}, Query: []link.QueryMatch{{Param: "a", Equals: true}, {Param: "b"}}, URL: "https://e.com/1"},
		{Countries: []string{"DE", "FR"}, Languages: []string{"de"}, URL: "https://e.com/2"},
	}
	got, err := LinkRules(wireRules(rules))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rules, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, err := LinkRules(nil); got != nil || err != nil {
		t.Errorf("none: %v %v", got, err)
	}
	if _, err := LinkRules([]apiwire.Rule{{URL: "https://e.com/", Device: []string{"fridge"}}}); err == nil || !strings.Contains(err.Error(), "rules[0].device[0]") {
		t.Errorf("unknown device: %v", err)
	}
}

// TestShlinkValidity: validUntil becomes the expiry; a link Shlink no
// longer redirects (expired) or does not redirect yet (validSince ahead)
// is refused rather than made live; what is no time refuses the row.
func TestShlinkValidity(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		meta   string
		want   time.Time
		reason string
	}{
		{`{}`, time.Time{}, ""},
		{`{"validSince": null, "validUntil": null}`, time.Time{}, ""},
		{`{"validUntil": "2027-01-31T23:00:00+02:00"}`, time.Date(2027, 1, 31, 21, 0, 0, 0, time.UTC), ""},
		{`{"validSince": "2020-01-01T00:00:00+00:00", "validUntil": "2030-01-01T00:00:00Z"}`, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{`{"validSince": "2020-01-01T00:00:00+00:00"}`, time.Time{}, ""},
		{`{"validUntil": "2026-12-02T12:00:00Z"}`, time.Time{}, "it expired in Shlink at its validUntil, 2026-12-02T12:00:00Z"},
		{`{"validUntil": "2001-01-01T00:00:00Z"}`, time.Time{}, "importing it would make it live again"},
		{`{"validSince": "2027-03-01T00:00:00+01:00"}`, time.Time{}, "live in Shlink only from its validSince, 2027-02-28T23:00:00Z"},
		{`{"validUntil": "tomorrow"}`, time.Time{}, `validUntil "tomorrow" is not an RFC 3339 time`},
		{`{"validUntil": 1767225600}`, time.Time{}, "validUntil 1767225600 is not an RFC 3339 time"},
		{`{"validSince": ["2020"]}`, time.Time{}, `validSince ["2020"] is not`},
	} {
		got, err := shlinkValidity(decodeObject(t, `{"longUrl": "https://e.com/", "meta": `+tc.meta+`}`), now)
		switch {
		case tc.reason == "" && (err != nil || !got.Equal(tc.want)):
			t.Errorf("%s: %v, %v; want %v", tc.meta, got, err, tc.want)
		case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
			t.Errorf("%s: %v, %v; want an error with %q", tc.meta, got, err, tc.reason)
		}
	}
}

// FuzzShlinkExtras: whatever a JSON object holds, reading its extras
// does not panic, and what it carries is what the API takes: a limit in
// range, at most link.MaxRules rules that pass link.CheckRules.
func FuzzShlinkExtras(f *testing.F) {
	f.Add(shlinkExport)
	f.Add(withRules(oneRule(cond("device", "<null>", "ios"), cond("query-param", "a", "b")), `{"maxVisits": 3}`))
	f.Add(withRules(`[{"longUrl": "https://e.com/", "priority": 1e308, "conditions": [{"type": "language", "matchValue": "es_ES"}]}]`, `{"maxVisits": 1e3}`))
	f.Add(`{"meta": {"max_visits": 5, "MaxVisits": 6}, "visitsCount": 5, "redirectRules": {"redirectRules": [null]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var objs []map[string]any
		var one map[string]any
		if err := d.Decode(&one); err == nil && one != nil {
			objs = append(objs, one)
			urls, _ := one["shortUrls"].(map[string]any)
			if list, ok := urls["data"].([]any); ok {
				for _, o := range list {
					if m, ok := o.(map[string]any); ok {
						objs = append(objs, m)
					}
				}
			}
		}
		for _, obj := range objs {
			max, rules, _, err := shlinkExtras(obj)
			if err != nil {
				continue
			}
			if max < 0 || max > link.MaxClicksLimit {
				t.Fatalf("limit %d", max)
			}
			if len(rules) > link.MaxRules {
				t.Fatalf("%d rules", len(rules))
			}
			if err := link.CheckRules(rules); err != nil {
				t.Fatalf("carried rules the API refuses: %v", err)
			}
			_, _ = shlinkValidity(obj, time.Now())
		}
	})
}
