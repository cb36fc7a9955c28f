package link

import (
	"encoding/binary"
	"fmt"
)

// Extras are what a link carries besides its target for an edge to decide
// a request by: routing rules, the hash of its password and a click limit.
// A plain link has none, and every wire form (change events, snapshots,
// the edge's overlay) spends nothing on them for it.
type Extras struct {
	// Rules route a request to another target (see Rule); nil: none.
	Rules []Rule `json:",omitempty"`
	// PasswordHash is the argon2id hash of the link's password in the
	// PHC string format (shared/passhash); "": no password. It travels to
	// edges, which verify it, and nowhere else: the API never answers it
	// and logs never carry it; nor does JSON (a stored API answer).
	PasswordHash string `json:"-"`
	// MaxClicks is how many counted clicks the link redirects for; 0: no
	// limit.
	MaxClicks int64 `json:",omitempty"`
	// ClicksCounted is how many of the link's clicks the rollups had
	// counted when these extras were read (docs/click-limits.md): what an
	// edge takes its allowance from, and what the API answers. Control
	// fills it; a creator never sets it. It goes with MaxClicks only:
	// without a limit it is neither written nor read.
	ClicksCounted int64 `json:"-"`
}

// IsZero reports whether x holds nothing.
func (x *Extras) IsZero() bool { return len(x.Rules) == 0 && x.PasswordHash == "" && x.MaxClicks == 0 }

// The wire form of extras (docs/rules.md), the same in change events,
// snapshots, the overlay and the rules column of the authority:
//
//	byte     flags: 0x01 max clicks, 0x02 password, 0x04 rules, 0x08 clicks
//	         counted (with 0x01 only); no other bit
//	0x01:    uvarint max clicks, 1 to MaxClicksLimit
//	0x08:    uvarint clicks counted, 1 to MaxClicksLimit (0 is no flag)
//	0x02:    uvarint length, the password hash (CheckPasswordHash)
//	0x04:    the rules (AppendRules): uvarint count, 1 to MaxRules, then each
//	         byte     conditions: 0x01 device, 0x02 country, 0x04 language,
//	                  0x08 query; at least one, no other bit
//	         0x01:    byte, a bit (1 << Device) per device
//	         0x02:    uvarint count n, then n two-byte country codes,
//	                  upper case, strictly ascending
//	         0x04:    uvarint count n, then n two-byte language codes,
//	                  lower case, strictly ascending
//	         0x08:    uvarint count, then each: byte 1 present or 2 equals,
//	                  uvarint length + name, and for 2 uvarint length + value
//	         uvarint length + target URL
//
// No extras is no bytes at all (never a lone flags byte of 0), so a link
// without them has one encoding, the empty one.
const (
	extraMaxClicks byte = 0x01
	extraPassword  byte = 0x02
	extraRules     byte = 0x04
	extraCounted   byte = 0x08

	condDevice   byte = 0x01
	condCountry  byte = 0x02
	condLanguage byte = 0x04
	condQuery    byte = 0x08

	queryPresent byte = 1
	queryEquals  byte = 2

	deviceMask = byte(1<<numDevices - 2) // bits 1 to numDevices-1
)

// MaxExtrasLen bounds the wire form of one link's extras: more than what
// MaxRules rules at their bounds take, so every valid link fits.
const MaxExtrasLen = 1 << 17

// AppendRules appends the wire form of rules (a uvarint count and each
// rule) to dst after CheckRules; nothing for no rules.
func AppendRules(dst []byte, rules []Rule) ([]byte, error) {
	if len(rules) == 0 {
		return dst, nil
	}
	if err := CheckRules(rules); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(rules)))
	for i := range rules {
		dst = appendRule(dst, &rules[i])
	}
	if len(dst)-start > MaxExtrasLen {
		return dst[:start], fmt.Errorf("%w: rules of %d bytes, more than %d", ErrInvalidInput, len(dst)-start, MaxExtrasLen)
	}
	return dst, nil
}

// appendRule encodes a checked rule, its countries and languages as they
// are (CheckRules holds them sorted).
func appendRule(dst []byte, r *Rule) []byte {
	var conds byte
	if len(r.Devices) > 0 {
		conds |= condDevice
	}
	if len(r.Countries) > 0 {
		conds |= condCountry
	}
	if len(r.Languages) > 0 {
		conds |= condLanguage
	}
	if len(r.Query) > 0 {
		conds |= condQuery
	}
	dst = append(dst, conds)
	if conds&condDevice != 0 {
		var set byte
		for _, d := range r.Devices {
			set |= 1 << d
		}
		dst = append(dst, set)
	}
	for _, list := range [2][]string{r.Countries, r.Languages} {
		if len(list) > 0 {
			dst = binary.AppendUvarint(dst, uint64(len(list)))
			for _, c := range list {
				dst = append(dst, c...)
			}
		}
	}
	if conds&condQuery != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(r.Query)))
		for _, q := range r.Query {
			kind := queryPresent
			if q.Equals {
				kind = queryEquals
			}
			dst = append(dst, kind)
			dst = appendBytes(dst, q.Param)
			if q.Equals {
				dst = appendBytes(dst, q.Value)
			}
		}
	}
	return appendBytes(dst, r.URL)
}

func appendBytes(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendExtras appends the wire form of x to dst after checking it: rules
// by CheckRules, the hash by CheckPasswordHash, MaxClicks from 0 (none) to
// MaxClicksLimit, ClicksCounted as ComposeCountedExtras takes it. No
// extras append nothing.
func AppendExtras(dst []byte, x *Extras) ([]byte, error) {
	rules, err := AppendRules(nil, x.Rules)
	if err != nil {
		return dst, err
	}
	return ComposeCountedExtras(dst, rules, x.PasswordHash, x.MaxClicks, x.ClicksCounted)
}

// ComposeExtras appends the wire form of extras made of rules already in
// their wire form (AppendRules; nil for none), a password hash ("" for
// none) and a click limit (0 for none), checking each: what the authority
// stores separately becomes one value without decoding the rules.
func ComposeExtras(dst, rules []byte, passwordHash string, maxClicks int64) ([]byte, error) {
	return ComposeCountedExtras(dst, rules, passwordHash, maxClicks, 0)
}

// ComposeCountedExtras is ComposeExtras with the clicks the rollups have
// counted of a limited link (0 to MaxClicksLimit; it may pass maxClicks),
// for an edge to take its allowance from (docs/click-limits.md). Without
// a limit (maxClicks 0) the count is not written.
func ComposeCountedExtras(dst, rules []byte, passwordHash string, maxClicks, counted int64) ([]byte, error) {
	if counted < 0 || counted > MaxClicksLimit {
		return dst, fmt.Errorf("%w: clicks counted %d, want 0 to %d", ErrInvalidInput, counted, int64(MaxClicksLimit))
	}
	if maxClicks < 0 || maxClicks > MaxClicksLimit {
		return dst, fmt.Errorf("%w: max clicks %d, want 1 to %d (0: none)", ErrInvalidInput, maxClicks, int64(MaxClicksLimit))
	}
	if passwordHash != "" {
		if err := CheckPasswordHash(passwordHash); err != nil {
			return dst, err
		}
	}
	if len(rules) > 0 {
		r := wireReader{b: rules}
		r.rules()
		if r.err == nil && len(r.b) != 0 {
			r.fail("%d bytes after the rules", len(r.b))
		}
		if r.err != nil {
			return dst, r.err
		}
	}
	var flags byte
	if maxClicks > 0 {
		flags |= extraMaxClicks
		if counted > 0 {
			flags |= extraCounted
		}
	}
	if passwordHash != "" {
		flags |= extraPassword
	}
	if len(rules) > 0 {
		flags |= extraRules
	}
	if flags == 0 {
		return dst, nil
	}
	start := len(dst)
	dst = append(dst, flags)
	if maxClicks > 0 {
		dst = binary.AppendUvarint(dst, uint64(maxClicks))
		if counted > 0 {
			dst = binary.AppendUvarint(dst, uint64(counted))
		}
	}
	if passwordHash != "" {
		dst = appendBytes(dst, passwordHash)
	}
	dst = append(dst, rules...)
	if len(dst)-start > MaxExtrasLen {
		return dst[:start], fmt.Errorf("%w: extras of %d bytes, more than %d", ErrInvalidInput, len(dst)-start, MaxExtrasLen)
	}
	return dst, nil
}

// CheckExtras checks the wire form of extras completely: every field in
// its bounds, codes known and ascending, targets an edge can send, nothing
// left over (an empty b is no extras). It does not allocate unless it
// fails; the error wraps ErrInvalidInput and names no value (it may be
// logged, and a target is a URL).
func CheckExtras[S ~string | ~[]byte](b S) error {
	r := wireReader{b: []byte(b)}
	r.extras()
	return r.err
}

// DecodeExtras reads the wire form of extras, checked as CheckExtras does.
func DecodeExtras[S ~string | ~[]byte](b S) (Extras, error) {
	if err := CheckExtras(b); err != nil {
		return Extras{}, err
	}
	v := ViewExtras([]byte(b))
	x := Extras{MaxClicks: v.MaxClicks(), ClicksCounted: v.ClicksCounted(), PasswordHash: string(v.PasswordHash())}
	if v.rules != nil {
		x.Rules = decodeRules(v.rules)
	}
	return x, nil
}

// DecodeRules reads rules in their wire form (AppendRules), checked; nil
// b is no rules.
func DecodeRules(b []byte) ([]Rule, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := wireReader{b: b}
	r.rules()
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the rules", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return decodeRules(b), nil
}

// decodeRules decodes checked rules.
func decodeRules(b []byte) []Rule {
	it := ruleIter{b: b}
	n := it.count()
	rules := make([]Rule, 0, n)
	for rv, ok := it.Next(); ok; rv, ok = it.Next() {
		var r Rule
		for d := Device(1); d < numDevices; d++ {
			if rv.devices&(1<<d) != 0 {
				r.Devices = append(r.Devices, d)
			}
		}
		r.Countries = pairs(rv.countries)
		r.Languages = pairs(rv.languages)
		q := rv.query
		for len(q) > 0 {
			var m QueryMatch
			var name, value []byte
			m.Equals, name, value, q = nextQuery(q)
			m.Param, m.Value = string(name), string(value)
			r.Query = append(r.Query, m)
		}
		r.URL = string(rv.url)
		rules = append(rules, r)
	}
	return rules
}

func pairs(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	out := make([]string, len(b)/2)
	for i := range out {
		out[i] = string(b[2*i : 2*i+2])
	}
	return out
}

// wireReader checks the wire form of extras as it reads it.
type wireReader struct {
	b    []byte
	rule int // the rule being read, for messages
	err  error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: extras: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
	}
}

func (r *wireReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail("%s runs past the end", what)
		return 0
	}
	if k > 1 && r.b[k-1] == 0 {
		// One value, one encoding: an overlong varint is refused.
		r.fail("%s is not a minimal varint", what)
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *wireReader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("%s runs past the end", what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bytes reads a uvarint length, at most max, and that many bytes.
func (r *wireReader) bytes(what string, max int) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(max) {
		r.fail("%s of %d bytes, at most %d", what, n, max)
		return nil
	}
	return r.take(what, int(n))
}

func (r *wireReader) take(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("%s runs past the end", what)
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *wireReader) extras() {
	if len(r.b) == 0 {
		return
	}
	if len(r.b) > MaxExtrasLen {
		r.fail("%d bytes, at most %d", len(r.b), MaxExtrasLen)
		return
	}
	flags := r.byte("flags")
	if flags == 0 || flags&^(extraMaxClicks|extraPassword|extraRules|extraCounted) != 0 ||
		(flags&extraCounted != 0 && flags&extraMaxClicks == 0) {
		// An unknown flag is a field this reader cannot honor: refusing
		// the link is safer than serving it without what it asks for.
		r.fail("flags 0x%02x", flags)
		return
	}
	if flags&extraMaxClicks != 0 {
		if n := r.uvarint("max clicks"); r.err == nil && (n == 0 || n > MaxClicksLimit) {
			r.fail("max clicks %d", n)
		}
	}
	if flags&extraCounted != 0 {
		if n := r.uvarint("clicks counted"); r.err == nil && (n == 0 || n > MaxClicksLimit) {
			r.fail("clicks counted %d", n)
		}
	}
	if flags&extraPassword != 0 {
		if h := r.bytes("password hash", MaxPasswordHash); r.err == nil {
			if err := CheckPasswordHash(h); err != nil {
				r.fail("password hash is not an argon2id PHC string")
			}
		}
	}
	if flags&extraRules != 0 {
		r.rules()
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the last field", len(r.b))
	}
}

func (r *wireReader) rules() {
	n := r.uvarint("rule count")
	if r.err == nil && (n == 0 || n > MaxRules) {
		r.fail("%d rules, want 1 to %d", n, MaxRules)
	}
	for i := 0; uint64(i) < n && r.err == nil; i++ {
		r.rule = i
		r.oneRule()
	}
}

func (r *wireReader) oneRule() {
	conds := r.byte("conditions")
	if r.err == nil && (conds == 0 || conds&^(condDevice|condCountry|condLanguage|condQuery) != 0) {
		r.fail("rule %d: conditions 0x%02x", r.rule, conds)
	}
	if conds&condDevice != 0 {
		if set := r.byte("devices"); r.err == nil && (set == 0 || set&^deviceMask != 0) {
			r.fail("rule %d: device set 0x%02x", r.rule, set)
		}
	}
	if conds&condCountry != 0 {
		r.codes("country", MaxRuleCountries, isCountry[[]byte])
	}
	if conds&condLanguage != 0 {
		r.codes("language", MaxRuleLanguages, isLanguage[[]byte])
	}
	if conds&condQuery != 0 {
		n := r.uvarint("query count")
		if r.err == nil && (n == 0 || n > MaxRuleQuery) {
			r.fail("rule %d: %d query conditions, want 1 to %d", r.rule, n, MaxRuleQuery)
		}
		for j := uint64(0); j < n && r.err == nil; j++ {
			kind := r.byte("query kind")
			if r.err == nil && kind != queryPresent && kind != queryEquals {
				r.fail("rule %d: query kind %d", r.rule, kind)
			}
			if name := r.bytes("query name", MaxQueryParamLen); r.err == nil && (len(name) == 0 || textProblem(name) != "") {
				r.fail("rule %d: query name is empty or not text", r.rule)
			}
			if kind == queryEquals {
				if v := r.bytes("query value", MaxQueryValueLen); r.err == nil && textProblem(v) != "" {
					r.fail("rule %d: query value is not text", r.rule)
				}
			}
		}
	}
	if u := r.bytes("target", MaxRuleURLLen); r.err == nil && redirectProblem(u, MaxRuleURLLen) != "" {
		r.fail("rule %d: the target is not a URL an edge can send", r.rule)
	}
}

func (r *wireReader) codes(what string, max int, known func([]byte) bool) {
	n := r.uvarint(what)
	if r.err == nil && (n == 0 || n > uint64(max)) {
		r.fail("rule %d: %d %s codes, want 1 to %d", r.rule, n, what, max)
		return
	}
	b := r.take(what, 2*int(n))
	for i := 0; i+1 < len(b) && r.err == nil; i += 2 {
		if !known(b[i : i+2]) {
			r.fail("rule %d: %s code %d unknown", r.rule, what, i/2)
		}
		if i > 0 && string(b[i:i+2]) <= string(b[i-2:i]) {
			r.fail("rule %d: %s codes not strictly ascending", r.rule, what)
		}
	}
}
