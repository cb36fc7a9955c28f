package link

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Routing rules send one link's clicks to different targets by who clicks:
// an ordered list of rules, each a set of conditions and its own target. The
// first rule whose conditions all hold for a request gives its target; when
// none does, the link's own target is used. docs/rules.md is the contract an
// edge evaluates them by (how a device, a country and a language are read
// from a request).

// Device is a class of client a rule can name. docs/rules.md says how an
// edge derives it from a request's User-Agent. The numbers are on the wire
// (a rule's device set is a bit per device): only append.
type Device uint8

const (
	// DeviceIOS: an iPhone, iPad or iPod (as its User-Agent says).
	DeviceIOS Device = 1 + iota
	// DeviceAndroid: an Android phone or tablet.
	DeviceAndroid
	// DeviceDesktop: a Windows, macOS, Linux or ChromeOS computer.
	DeviceDesktop
	numDevices
)

var deviceNames = [numDevices]string{DeviceIOS: "ios", DeviceAndroid: "android", DeviceDesktop: "desktop"}

// String is the device's name in the API: ios, android or desktop.
func (d Device) String() string {
	if d == 0 || d >= numDevices {
		return fmt.Sprintf("device(%d)", uint8(d))
	}
	return deviceNames[d]
}

// Valid reports whether d is one of the devices a rule can name.
func (d Device) Valid() bool { return d > 0 && d < numDevices }

// ParseDevice reads a device's name, in any case.
func ParseDevice(s string) (Device, bool) {
	for d := Device(1); d < numDevices; d++ {
		if strings.EqualFold(s, deviceNames[d]) {
			return d, true
		}
	}
	return 0, false
}

// DeviceNames lists the names ParseDevice takes, for documentation and
// error messages.
func DeviceNames() []string { return append([]string(nil), deviceNames[1:]...) }

// MarshalText writes the device's name, so JSON holds "ios", not 1.
func (d Device) MarshalText() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("link: no device %d", uint8(d))
	}
	return []byte(deviceNames[d]), nil
}

// UnmarshalText reads a device's name.
func (d *Device) UnmarshalText(b []byte) error {
	v, ok := ParseDevice(string(b))
	if !ok {
		return fmt.Errorf("link: unknown device %q", b)
	}
	*d = v
	return nil
}

// Rule is one routing rule: when every condition it sets holds for a
// request, the request goes to URL instead of the link's target. Within a
// condition the values are alternatives (a country of Countries); the
// conditions a rule sets must all hold (AND). A rule sets at least one.
type Rule struct {
	// Devices: the client is one of them (empty: any client).
	Devices []Device `json:"devices,omitempty"`
	// Countries: the client's country (from the edge's geo data) is one of
	// them; ISO 3166-1 alpha-2 codes in upper case, ascending.
	Countries []string `json:"countries,omitempty"`
	// Languages: the primary language of the request's most preferred
	// Accept-Language range is one of them; ISO 639-1 codes in lower case,
	// ascending.
	Languages []string `json:"languages,omitempty"`
	// Query: every one of them holds for the request's query string.
	Query []QueryMatch `json:"query,omitempty"`
	// URL is the rule's target, normalized as a link's target is
	// (control/links NormalizeURL).
	URL string `json:"url"`
}

// QueryMatch is a condition on the request's query string: Param is
// present (with any value, an empty one too), or, when Equals is set, one
// of its occurrences has exactly Value. Names and values are compared
// byte for byte after percent-decoding ('+' read as a space), as the
// browser's form encoding writes them.
type QueryMatch struct {
	Param  string `json:"param"`
	Equals bool   `json:"equals,omitempty"`
	Value  string `json:"value,omitempty"`
}

// Bounds of a link's rules, checked by control on the way in and by every
// reader of the wire forms, so an edge's evaluation of one request is
// bounded: at most MaxRules rules of a few short conditions each.
const (
	MaxRules          = 16
	MaxRuleCountries  = 64
	MaxRuleLanguages  = 32
	MaxRuleQuery      = 4
	MaxQueryParamLen  = 64
	MaxQueryValueLen  = 256
	MaxRuleURLLen     = 4096 // a link's target's own bound
	MaxPasswordHash   = 256  // bytes of a password hash's encoding (shared/passhash)
	MaxClicksLimit    = 1<<53 - 1
	passwordHashStart = "$argon2id$"
)

// RuleError says which rule and which of its fields is wrong. Field is the
// field's name as a rule's JSON names it (device[1], query[0].param, url),
// so an API can point at the value sent. It wraps ErrInvalidInput.
type RuleError struct {
	Rule  int
	Field string
	Msg   string
}

func (e *RuleError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("rules[%d]: %s", e.Rule, e.Msg)
	}
	return fmt.Sprintf("rules[%d].%s: %s", e.Rule, e.Field, e.Msg)
}

func (e *RuleError) Unwrap() error { return ErrInvalidInput }

func ruleErr(rule int, field, format string, args ...any) error {
	return &RuleError{Rule: rule, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// CheckRules checks rules as they are stored and sent: at most MaxRules,
// each setting at least one condition; devices known and each named once;
// countries ISO 3166-1 alpha-2 codes and languages ISO 639-1 codes, in
// canonical case, ascending, each once; query conditions with a name of 1
// to MaxQueryParamLen bytes and a value of at most MaxQueryValueLen, both
// valid UTF-8 without control characters; and a target that an edge can
// put in a Location header as it is (an http or https URL of at most
// MaxRuleURLLen bytes, no space or control character). It does not check
// the target against control's URL rules: control normalizes each target
// before this, as it does a link's. Errors are *RuleError.
func CheckRules(rules []Rule) error {
	if len(rules) > MaxRules {
		return fmt.Errorf("%w: %d rules, at most %d", ErrInvalidInput, len(rules), MaxRules)
	}
	for i := range rules {
		if err := checkRule(i, &rules[i]); err != nil {
			return err
		}
	}
	return nil
}

func checkRule(i int, r *Rule) error {
	if len(r.Devices) == 0 && len(r.Countries) == 0 && len(r.Languages) == 0 && len(r.Query) == 0 {
		return ruleErr(i, "", "a rule needs at least one condition (device, country, language or query); without one it would always match, and the link's own target never would")
	}
	if len(r.Devices) >= int(numDevices) {
		return ruleErr(i, "device", "%d devices, at most %d (%s)", len(r.Devices), numDevices-1, strings.Join(DeviceNames(), ", "))
	}
	var seen uint8
	for j, d := range r.Devices {
		if !d.Valid() {
			return ruleErr(i, fmt.Sprintf("device[%d]", j), "unknown device %d; devices are %s", uint8(d), strings.Join(DeviceNames(), ", "))
		}
		if seen&(1<<d) != 0 {
			return ruleErr(i, fmt.Sprintf("device[%d]", j), "%s is listed twice", d)
		}
		seen |= 1 << d
	}
	if err := checkCodes(i, "country", r.Countries, MaxRuleCountries, isCountry, "an ISO 3166-1 alpha-2 country code in upper case (US, DE, GB)"); err != nil {
		return err
	}
	if err := checkCodes(i, "language", r.Languages, MaxRuleLanguages, isLanguage, "an ISO 639-1 language code in lower case (en, de, pt)"); err != nil {
		return err
	}
	if len(r.Query) > MaxRuleQuery {
		return ruleErr(i, "query", "%d query conditions, at most %d", len(r.Query), MaxRuleQuery)
	}
	for j, q := range r.Query {
		if q.Param == "" || len(q.Param) > MaxQueryParamLen {
			return ruleErr(i, fmt.Sprintf("query[%d].param", j), "a parameter name is 1 to %d bytes, not %d", MaxQueryParamLen, len(q.Param))
		}
		if msg := textProblem(q.Param); msg != "" {
			return ruleErr(i, fmt.Sprintf("query[%d].param", j), "%s", msg)
		}
		if len(q.Value) > MaxQueryValueLen {
			return ruleErr(i, fmt.Sprintf("query[%d].equals", j), "a value is at most %d bytes, not %d", MaxQueryValueLen, len(q.Value))
		}
		if !q.Equals && q.Value != "" {
			return ruleErr(i, fmt.Sprintf("query[%d]", j), "a value without equals")
		}
		if msg := textProblem(q.Value); msg != "" {
			return ruleErr(i, fmt.Sprintf("query[%d].equals", j), "%s", msg)
		}
	}
	if msg := redirectProblem(r.URL, MaxRuleURLLen); msg != "" {
		return ruleErr(i, "url", "%s", msg)
	}
	return nil
}

// checkCodes checks a list of two-letter codes: canonical, known,
// ascending, each once.
func checkCodes(rule int, name string, codes []string, max int, known func(string) bool, what string) error {
	if len(codes) > max {
		return ruleErr(rule, name, "%d codes, at most %d", len(codes), max)
	}
	for j, c := range codes {
		if !known(c) {
			hint := ""
			if name == "country" && strings.EqualFold(c, "UK") {
				hint = "; the United Kingdom is GB"
			}
			return ruleErr(rule, fmt.Sprintf("%s[%d]", name, j), "%.16q is not %s%s", c, what, hint)
		}
		if j > 0 && c <= codes[j-1] {
			if c == codes[j-1] {
				return ruleErr(rule, fmt.Sprintf("%s[%d]", name, j), "%s is listed twice", c)
			}
			return ruleErr(rule, fmt.Sprintf("%s[%d]", name, j), "codes must be in ascending order")
		}
	}
	return nil
}

// textProblem says why s cannot be a query name or value (invalid UTF-8,
// a control character), or "".
func textProblem[S ~string | ~[]byte](s S) string {
	for i := 0; i < len(s); {
		var r rune
		var n int
		if c := s[i]; c < utf8.RuneSelf {
			r, n = rune(c), 1
		} else {
			var buf [utf8.UTFMax]byte
			n = copy(buf[:], s[i:min(i+utf8.UTFMax, len(s))])
			r, n = utf8.DecodeRune(buf[:n])
			if r == utf8.RuneError && n <= 1 {
				return "not valid UTF-8"
			}
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("holds the control character %U", r)
		}
		i += n
	}
	return ""
}

// redirectProblem says why u cannot go into a Location header as it is, or
// "": it must be an http(s) URL of at most max bytes with no space or
// control character.
func redirectProblem[S ~string | ~[]byte](u S, max int) string {
	if len(u) == 0 {
		return "a target URL is required"
	}
	if len(u) > max {
		return fmt.Sprintf("the target is %d bytes, more than %d", len(u), max)
	}
	if !(hasPrefixFold(u, "http://") || hasPrefixFold(u, "https://")) {
		return "the target must be an http or https URL"
	}
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] >= 0x7f {
			return "the target holds a space, a control character or a byte that is not ASCII (normalize it first)"
		}
	}
	return ""
}

func hasPrefixFold[S ~string | ~[]byte](s S, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// CheckPasswordHash checks the syntax of a stored password hash: an
// argon2id hash in the PHC string format ($argon2id$v=19$m=…,t=…,p=…$salt$
// hash), at most MaxPasswordHash bytes of printable ASCII. shared/passhash
// parses it fully (and bounds its parameters) before it verifies.
func CheckPasswordHash[S ~string | ~[]byte](h S) error {
	if len(h) <= len(passwordHashStart) || len(h) > MaxPasswordHash || string(h[:len(passwordHashStart)]) != passwordHashStart {
		return fmt.Errorf("%w: a password hash of %d bytes is not an argon2id PHC string", ErrInvalidInput, len(h))
	}
	for i := 0; i < len(h); i++ {
		if h[i] <= ' ' || h[i] >= 0x7f {
			return fmt.Errorf("%w: a password hash holds byte 0x%02x", ErrInvalidInput, h[i])
		}
	}
	return nil
}
