package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/shared/link"
)

// A Shlink short URL's max visits and redirect rules, as its API answers
// them and shlink-importer gathers them for a Shlink-to-Shlink import:
// the short URL object of GET /rest/v3/short-urls with its limit in
// meta.maxVisits (null: none) and its visits so far in
// visitsSummary.total (visitsCount before v3), and its rules from GET
// /rest/v3/short-urls/{shortCode}/redirect-rules under "redirectRules",
// either that answer's list or the whole answer:
//
//	{"shortCode": "abc123", "longUrl": "https://example.com/",
//	 "visitsSummary": {"total": 48, "nonBots": 40, "bots": 8},
//	 "meta": {"validSince": null, "validUntil": null, "maxVisits": 100},
//	 "redirectRules": [
//	   {"longUrl": "https://example.com/android", "priority": 1,
//	    "conditions": [{"type": "device", "matchKey": null, "matchValue": "android"}]},
//	   {"longUrl": "https://example.com/es", "priority": 2,
//	    "conditions": [{"type": "language", "matchKey": null, "matchValue": "es"},
//	                   {"type": "query-param", "matchKey": "ref", "matchValue": "mail"}]}]}
//
// meta.validUntil becomes the expiry (shlinkValidity). The web client's
// CSV export carries none of these (its columns are createdAt,
// title, shortUrl, domain, shortCode, longUrl, tags, visits): only the
// API's JSON brings them over.
//
// Max visits: Shlink stops redirecting a link once its visits (every
// one, bots among them) reach it; a click limit here counts clicks the
// same way (bots among them) from the import on. So the limit here is
// what is left of Shlink's: maxVisits less the visits the export counts,
// noted; a link whose max visits are all used (Shlink no longer redirects
// it) is refused rather than made live again.
//
// Rules: Shlink's are ordered by priority (lowest first) and the first
// whose conditions all hold wins, as here. Conditions map as follows:
//
//	device                 android, ios, desktop: the same devices
//	geolocation-country-code  the country (an ISO 3166-1 code)
//	language               a language without a region (es): the language,
//	                       noted (Shlink matches any accepted language,
//	                       here the most preferred one decides)
//	query-param            the parameter with exactly that value
//	any-value-query-param  the parameter present, with any value or none
//	                       (its name in matchKey, or matchValue as older
//	                       shlink-importer versions wrote it)
//
// Everything else has no equivalent: a language with a region (es-ES),
// valueless-query-param (the parameter without a value; here any value
// would match), devices newer Shlinks know (mobile, windows, macos,
// linux, chromeos), ip-address, geolocation-city-name, before-date,
// after-date and any type to come. A rule with such a condition is
// skipped, and so noted, rather than carried without it (which would
// match more visits than it does in Shlink); so is a rule whose values do
// not fit a rule here (an unknown country, a query name over 64 bytes, a
// target that is no http(s) URL) and a rule two of whose conditions can
// never both hold (two devices). Visits it would have taken go to the
// next rule that holds, or the link's target. What is not a Shlink export
// at all (rules that are no list, a condition without a type, a maxVisits
// that is no whole number, more rules than a link holds here) refuses the
// row, with the reason.

// shlinkValidity is a Shlink link's meta.validUntil, as the expiry it
// gets here (zero for none). A link Shlink no longer redirects (past its
// validUntil) or does not redirect yet (before its validSince) is
// refused rather than made live; a validSince past is nothing here.
func shlinkValidity(obj map[string]any, now time.Time) (time.Time, error) {
	meta, _ := memberObject(obj, "meta")
	read := func(n, name string) (time.Time, error) {
		v, _ := member(meta, n)
		if v == nil {
			return time.Time{}, nil
		}
		str, isStr := v.(string)
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(str))
		if !isStr || err != nil {
			return time.Time{}, fmt.Errorf("%s %.40s is not an RFC 3339 time (2026-12-31T23:59:00+00:00)", name, jsonText(v))
		}
		return t.UTC(), nil
	}
	since, err := read("validsince", "validSince")
	if err != nil {
		return time.Time{}, err
	}
	until, err := read("validuntil", "validUntil")
	if err != nil {
		return time.Time{}, err
	}
	if !since.IsZero() && since.After(now) {
		return time.Time{}, fmt.Errorf("it is live in Shlink only from its validSince, %s: importing it now would make it live early (import it from then on)", since.Format(time.RFC3339))
	}
	if !until.IsZero() && !until.After(now) {
		return time.Time{}, fmt.Errorf("it expired in Shlink at its validUntil, %s: importing it would make it live again", until.Format(time.RFC3339))
	}
	return until, nil
}

// jsonText is v for a message: a string as it is, else its JSON.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// maxListedRules bounds the rules a row may list, skipped ones too, so a
// hostile element's thousand rules are refused before any is read.
const maxListedRules = 4 * link.MaxRules

// maxSkipNotes is how many skipped rules a row's notes name one by one.
const maxSkipNotes = 4

// shlinkExtras reads a Shlink short URL object's limit and rules: the
// click limit to give the link (0: none), its rules in the order they
// apply, notes on what was mapped with a difference or skipped, and err
// when the row is to be refused.
func shlinkExtras(obj map[string]any) (maxClicks int64, rules []link.Rule, notes []string, err error) {
	maxClicks, note, err := shlinkLimit(obj)
	if err != nil {
		return 0, nil, nil, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	raw, ok := member(obj, "redirectrules")
	if ok && raw != nil {
		if m, isObj := raw.(map[string]any); isObj {
			// The redirect-rules endpoint's whole answer.
			raw, _ = member(m, "redirectrules")
		}
	}
	if raw == nil {
		return maxClicks, nil, notes, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return 0, nil, nil, fmt.Errorf("redirectRules is %s, not a list of rules", jsonKind(raw))
	}
	rules, ruleNotes, err := shlinkRules(list)
	if err != nil {
		return 0, nil, nil, err
	}
	return maxClicks, rules, append(notes, ruleNotes...), nil
}

// shlinkLimit is the click limit of a Shlink link: meta.maxVisits (or a
// top-level maxVisits) less its visits so far; 0 for none.
func shlinkLimit(obj map[string]any) (int64, string, error) {
	v, ok := any(nil), false
	if meta, isObj := memberObject(obj, "meta"); isObj {
		v, ok = member(meta, "maxvisits")
	}
	if !ok {
		v, ok = member(obj, "maxvisits")
	}
	if !ok || v == nil {
		return 0, "", nil
	}
	max, err := wholeNumber(v, "maxVisits", 1)
	if err != nil {
		return 0, "", err
	}
	var used any
	if sum, isObj := memberObject(obj, "visitssummary"); isObj {
		used, _ = member(sum, "total")
	}
	if used == nil {
		used, _ = member(obj, "visitscount")
	}
	if used == nil {
		return max, "", nil
	}
	n, err := wholeNumber(used, "the visits count", 0)
	if err != nil {
		return 0, "", err
	}
	if n >= max {
		return 0, "", fmt.Errorf("its max visits are used up (%d visits of %d): Shlink no longer redirects it, and importing it would make it live again", n, max)
	}
	if n == 0 {
		return max, "", nil
	}
	return max - n, fmt.Sprintf("click limit %d: Shlink's max visits %d less the %d visits it counted", max-n, max, n), nil
}

// wholeNumber reads v as a whole number from min to link.MaxClicksLimit.
func wholeNumber(v any, what string, min int64) (int64, error) {
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, fmt.Errorf("%s is %s, not a number", what, jsonKind(v))
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || i < min || i > link.MaxClicksLimit {
		return 0, fmt.Errorf("%s %.24s is not a whole number from %d to %d", what, n.String(), min, int64(link.MaxClicksLimit))
	}
	return i, nil
}

// shlinkRule is one of a Shlink link's rules, with where it came.
type shlinkRule struct {
	at       int
	priority float64
	rule     link.Rule
}

func shlinkRules(list []any) ([]link.Rule, []string, error) {
	if len(list) > maxListedRules {
		return nil, nil, fmt.Errorf("%d redirect rules, at most %d here", len(list), link.MaxRules)
	}
	var got []shlinkRule
	var notes, skipped []string
	for i, raw := range list {
		n := i + 1 // as a person counts them
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("redirect rule %d is %s, not an object", n, jsonKind(raw))
		}
		r := shlinkRule{at: i, priority: math.Inf(1)}
		if p, ok := member(m, "priority"); ok && p != nil {
			num, isNum := p.(json.Number)
			f, err := num.Float64()
			if !isNum || err != nil {
				return nil, nil, fmt.Errorf("redirect rule %d: priority is not a number", n)
			}
			r.priority = f
		}
		url, _ := member(m, "longurl")
		s, _ := url.(string)
		if r.rule.URL = strings.TrimSpace(s); r.rule.URL == "" {
			return nil, nil, fmt.Errorf("redirect rule %d has no longUrl", n)
		}
		conds, _ := member(m, "conditions")
		cl, isList := conds.([]any)
		if !isList || len(cl) == 0 {
			return nil, nil, fmt.Errorf("redirect rule %d has no conditions (it would send every visit to its URL)", n)
		}
		skip := ""
		var ruleNotes []string
		for j, c := range cl {
			cm, ok := c.(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("redirect rule %d: condition %d is %s, not an object", n, j+1, jsonKind(c))
			}
			why, note, err := addCondition(&r.rule, cm)
			if err != nil {
				return nil, nil, fmt.Errorf("redirect rule %d: condition %d: %w", n, j+1, err)
			}
			if skip == "" {
				skip = why
			}
			if note != "" {
				ruleNotes = append(ruleNotes, note)
			}
		}
		if skip == "" {
			// What the API checks besides: bounds, the target's form.
			if err := link.CheckRules([]link.Rule{r.rule}); err != nil {
				var re *link.RuleError
				skip = err.Error()
				if errors.As(err, &re) {
					skip = strings.TrimSpace(re.Field + " " + re.Msg)
				}
			}
		}
		if skip != "" {
			skipped = append(skipped, fmt.Sprintf("redirect rule %d (to %s) skipped: %s", n, truncate(r.rule.URL, 60), skip))
			continue
		}
		for _, note := range ruleNotes {
			if !slices.Contains(notes, note) {
				notes = append(notes, note)
			}
		}
		got = append(got, r)
	}
	if len(got) > link.MaxRules {
		return nil, nil, fmt.Errorf("%d redirect rules to carry, at most %d here", len(got), link.MaxRules)
	}
	if len(skipped) > maxSkipNotes {
		skipped = append(skipped[:maxSkipNotes], fmt.Sprintf("%d more redirect rules skipped", len(skipped)-maxSkipNotes))
	}
	notes = append(skipped, notes...)
	// Lowest priority first; rules without one after, in the file's order.
	sort.SliceStable(got, func(a, b int) bool {
		if got[a].priority != got[b].priority {
			return got[a].priority < got[b].priority
		}
		return got[a].at < got[b].at
	})
	if len(got) == 0 {
		return nil, notes, nil
	}
	rules := make([]link.Rule, len(got))
	for i, r := range got {
		rules[i] = r.rule
	}
	return rules, notes, nil
}

// addCondition adds one Shlink condition to r. skip says why the rule
// cannot be carried ("" when it can); note says what differs from Shlink;
// err refuses the row (what no Shlink writes).
func addCondition(r *link.Rule, c map[string]any) (skip, note string, err error) {
	typ, _ := member(c, "type")
	t, isStr := typ.(string)
	if !isStr || strings.TrimSpace(t) == "" {
		return "", "", fmt.Errorf("no type (a string)")
	}
	t = strings.ToLower(strings.TrimSpace(t))
	value, err := conditionText(c, "matchvalue")
	if err != nil {
		return "", "", err
	}
	key, err := conditionText(c, "matchkey")
	if err != nil {
		return "", "", err
	}
	switch t {
	case "device":
		d, known := link.ParseDevice(value)
		if !known {
			return fmt.Sprintf("device %.20q has no equivalent here (devices are %s)", value, strings.Join(link.DeviceNames(), ", ")), "", nil
		}
		if len(r.Devices) > 0 && r.Devices[0] != d {
			return "its device conditions can never all hold", "", nil
		}
		r.Devices = []link.Device{d}
	case "geolocation-country-code":
		cc, known := link.CanonicalCountry(value)
		if !known {
			return fmt.Sprintf("country %.20q is not an ISO 3166-1 alpha-2 code", value), "", nil
		}
		if len(r.Countries) > 0 && r.Countries[0] != cc {
			return "its country conditions can never all hold", "", nil
		}
		r.Countries = []string{cc}
	case "language":
		lang, region, _ := strings.Cut(strings.ReplaceAll(value, "_", "-"), "-")
		if region != "" {
			return fmt.Sprintf("language %.20q names a region, and a rule here matches a language alone (every %s)", value, strings.ToLower(lang)), "", nil
		}
		l, known := link.CanonicalLanguage(lang)
		if !known {
			return fmt.Sprintf("language %.20q is not an ISO 639-1 code", value), "", nil
		}
		if len(r.Languages) > 0 && r.Languages[0] != l {
			// Shlink: both among the accepted languages; here one
			// language, the most preferred, decides.
			return "two languages in one rule (both accepted) have no equivalent here", "", nil
		}
		r.Languages = []string{l}
		note = "language rules match the most preferred language here, any accepted one (quality 0.9 or more) in Shlink"
	case "query-param", "any-value-query-param":
		q := link.QueryMatch{Param: key}
		if t == "query-param" {
			q.Equals, q.Value = true, value
		} else if q.Param == "" {
			q.Param = value // older shlink-importer versions
		}
		if q.Param == "" {
			return "", "", fmt.Errorf("%s has no matchKey (the parameter's name)", t)
		}
		if len(r.Query) == link.MaxRuleQuery {
			return fmt.Sprintf("more than %d query conditions", link.MaxRuleQuery), "", nil
		}
		r.Query = append(r.Query, q)
	case "valueless-query-param":
		return "valueless-query-param (a parameter without a value) has no equivalent here, where a rule on a parameter matches any value", "", nil
	default:
		return fmt.Sprintf("condition %.30q has no equivalent here (device, country, language and query conditions have)", t), "", nil
	}
	return "", note, nil
}

// conditionText is a condition's matchKey or matchValue: "" for null or
// absent; a number is read as Shlink would (query values like 2024).
func conditionText(c map[string]any, n string) (string, error) {
	v, _ := member(c, n)
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(v), nil
	case json.Number:
		return v.String(), nil
	default:
		name := map[string]string{"matchvalue": "matchValue", "matchkey": "matchKey"}[n]
		return "", fmt.Errorf("%s is %s, not a string", name, jsonKind(v))
	}
}

// member is obj's member whose name normalizes to n (normName): the one
// spelled exactly n, else the first in byte order, so a file naming it
// twice reads the same on every run (chunks' idempotency keys depend on
// it).
func member(obj map[string]any, n string) (any, bool) {
	if v, ok := obj[n]; ok {
		return v, true
	}
	var best string
	found := false
	for k := range obj {
		if normName(k) == n && (!found || k < best) {
			best, found = k, true
		}
	}
	if !found {
		return nil, false
	}
	return obj[best], true
}

func memberObject(obj map[string]any, n string) (map[string]any, bool) {
	v, _ := member(obj, n)
	m, ok := v.(map[string]any)
	return m, ok
}

// jsonKind names v's JSON kind with its article: "a string", "null".
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// wireRules are rules as the create API's body carries them.
func wireRules(rules []link.Rule) []apiwire.Rule {
	if len(rules) == 0 {
		return nil
	}
	out := make([]apiwire.Rule, len(rules))
	for i, r := range rules {
		w := apiwire.Rule{URL: r.URL, Country: r.Countries, Language: r.Languages}
		for _, d := range r.Devices {
			w.Device = append(w.Device, d.String())
		}
		for _, q := range r.Query {
			c := apiwire.QueryCondition{Param: q.Param}
			if q.Equals {
				v := q.Value
				c.Equals = &v
			}
			w.Query = append(w.Query, c)
		}
		out[i] = w
	}
	return out
}

// rulesSize bounds the bytes rules take in a batch's JSON body.
func rulesSize(rules []link.Rule) int {
	n := 0
	for _, r := range rules {
		n += 6*len(r.URL) + 80 + 12*len(r.Devices) + 6*len(r.Countries) + 6*len(r.Languages)
		for _, q := range r.Query {
			n += 6*(len(q.Param)+len(q.Value)) + 32
		}
	}
	return n
}

// LinkRules are wire rules (a CreateRequest's) as the links service takes
// them: for a Client in control's own process (importjobs), which hands
// the importer's requests to the service without the API's decoding.
// The service checks the rest, as it does the API's.
func LinkRules(in []apiwire.Rule) ([]link.Rule, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]link.Rule, len(in))
	for i, w := range in {
		r := link.Rule{URL: w.URL, Countries: w.Country, Languages: w.Language}
		for j, name := range w.Device {
			d, ok := link.ParseDevice(name)
			if !ok {
				return nil, &link.RuleError{Rule: i, Field: fmt.Sprintf("device[%d]", j), Msg: fmt.Sprintf("unknown device %.20q", name)}
			}
			r.Devices = append(r.Devices, d)
		}
		for _, q := range w.Query {
			m := link.QueryMatch{Param: q.Param}
			if q.Equals != nil {
				m.Equals, m.Value = true, *q.Equals
			}
			r.Query = append(r.Query, m)
		}
		out[i] = r
	}
	return out, nil
}
