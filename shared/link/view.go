package link

import "encoding/binary"

// ExtrasView reads extras in their wire form in place, for an edge's hit
// path: nothing it does allocates, and what it returns points into the
// bytes it was given. It trusts them to have passed CheckExtras (every
// reader of a wire form checks extras when it takes them in); on other
// bytes its answers are wrong, but it never reads outside them or panics.
// The zero value is no extras.
type ExtrasView struct {
	maxClicks int64
	counted   int64 // clicks counted, with maxClicks only
	hash      []byte
	rules     []byte // the rules' wire form: count, then each rule
}

// ViewExtras returns the view of extras b (nil or empty: none).
func ViewExtras(b []byte) ExtrasView {
	var v ExtrasView
	if len(b) == 0 {
		return v
	}
	flags, b := b[0], b[1:]
	if flags&extraMaxClicks != 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return ExtrasView{}
		}
		v.maxClicks, b = int64(n&MaxClicksLimit), b[k:]
	}
	if flags&extraCounted != 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return ExtrasView{}
		}
		v.counted, b = int64(n&MaxClicksLimit), b[k:]
	}
	if flags&extraPassword != 0 {
		var ok bool
		if v.hash, b, ok = lengthPrefixed(b); !ok {
			return ExtrasView{}
		}
	}
	if flags&extraRules != 0 {
		v.rules = b
	}
	return v
}

// lengthPrefixed splits a uvarint length and that many bytes off b.
func lengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	end := k + int(n)
	return b[k:end:end], b[end:], true
}

// IsZero reports whether the view holds no extras: a plain link.
func (v *ExtrasView) IsZero() bool { return v.maxClicks == 0 && v.hash == nil && v.rules == nil }

// MaxClicks is the link's click limit; 0 for none.
func (v *ExtrasView) MaxClicks() int64 { return v.maxClicks }

// ClicksCounted is how many of a limited link's clicks the rollups had
// counted when control wrote these extras (0 without a limit).
func (v *ExtrasView) ClicksCounted() int64 { return v.counted }

// LimitReached reports whether the link has a click limit that its
// counted clicks have reached: edges answer it 410.
func (v *ExtrasView) LimitReached() bool { return v.maxClicks > 0 && v.counted >= v.maxClicks }

// PasswordHash is the link's password hash (shared/passhash); nil for a
// link without a password.
func (v *ExtrasView) PasswordHash() []byte { return v.hash }

// HasRules reports whether the link has routing rules.
func (v *ExtrasView) HasRules() bool { return v.rules != nil }

// Facts are what an edge knows of a request that rules look at
// (docs/rules.md says how each is read from the request).
type Facts struct {
	// Device is the client's device; 0 when it is none of the devices
	// rules name, or unknown.
	Device Device
	// Country is the client's ISO 3166-1 alpha-2 code in upper case, as
	// the edge's geo data gives it; zero when unknown.
	Country [2]byte
	// Language is the request's primary language (PrimaryLanguage), in
	// lower case; zero when it has none.
	Language [2]byte
	// Query answers query conditions; nil is a request without a query
	// string, where no query condition holds.
	Query QueryArgs
}

// QueryArgs is a request's query string as rules ask it, names and values
// percent-decoded ('+' read as a space). Neither method may keep its
// arguments.
type QueryArgs interface {
	// Has reports whether name occurs, with any value (an empty one too).
	Has(name []byte) bool
	// HasValue reports whether some occurrence of name has exactly value.
	HasValue(name, value []byte) bool
}

// Route returns the first rule whose conditions all hold for f: its number
// (1 for the first rule; what a click records as the rule that served it)
// and its target. It returns 0 and nil when no rule holds (or there are
// none): the link's own target serves. It does not allocate.
func (v *ExtrasView) Route(f *Facts) (rule int, target []byte) {
	it := ruleIter{b: v.rules}
	it.count()
	for i := 1; ; i++ {
		r, ok := it.Next()
		if !ok {
			return 0, nil
		}
		if r.matches(f) {
			return i, r.url
		}
	}
}

// ruleIter walks the rules' wire form.
type ruleIter struct {
	b       []byte
	counted bool
}

// count reads the rule count; Next does so itself when it was not.
func (it *ruleIter) count() int {
	if it.counted {
		return 0
	}
	it.counted = true
	n, k := binary.Uvarint(it.b)
	if k <= 0 {
		it.b = nil
		return 0
	}
	it.b = it.b[k:]
	return int(min(n, MaxRules))
}

// ruleView is one rule in its wire form.
type ruleView struct {
	devices              byte   // bit (1 << Device) per device; 0: no condition
	countries, languages []byte // two-byte codes; nil: no condition
	query                []byte // query conditions in their wire form; nil: none
	url                  []byte
}

// Next returns the next rule, false after the last (or at bytes it cannot
// read).
func (it *ruleIter) Next() (r ruleView, ok bool) {
	if !it.counted {
		it.count()
	}
	b := it.b
	if len(b) == 0 {
		return r, false
	}
	conds := b[0]
	b = b[1:]
	if conds&condDevice != 0 {
		if len(b) == 0 {
			return r, it.stop()
		}
		r.devices, b = b[0], b[1:]
	}
	for _, c := range [2]struct {
		bit  byte
		dst  *[]byte
		size int
	}{{condCountry, &r.countries, 2}, {condLanguage, &r.languages, 2}} {
		if conds&c.bit == 0 {
			continue
		}
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k)/2 {
			return r, it.stop()
		}
		end := k + 2*int(n)
		*c.dst, b = b[k:end:end], b[end:]
	}
	if conds&condQuery != 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > MaxRuleQuery {
			return r, it.stop()
		}
		rest := b[k:]
		for range n {
			var ok bool
			if _, _, _, rest, ok = splitQuery(rest); !ok {
				return r, it.stop()
			}
		}
		r.query, b = b[k:len(b)-len(rest)], rest
	}
	var ok2 bool
	if r.url, b, ok2 = lengthPrefixed(b); !ok2 {
		return r, it.stop()
	}
	it.b = b
	return r, true
}

func (it *ruleIter) stop() bool {
	it.b = nil
	return false
}

// splitQuery splits one query condition off b.
func splitQuery(b []byte) (equals bool, name, value, rest []byte, ok bool) {
	if len(b) == 0 || (b[0] != queryPresent && b[0] != queryEquals) {
		return false, nil, nil, nil, false
	}
	equals = b[0] == queryEquals
	if name, rest, ok = lengthPrefixed(b[1:]); !ok {
		return false, nil, nil, nil, false
	}
	if equals {
		if value, rest, ok = lengthPrefixed(rest); !ok {
			return false, nil, nil, nil, false
		}
	}
	return equals, name, value, rest, true
}

// nextQuery splits one query condition off checked bytes.
func nextQuery(b []byte) (equals bool, name, value, rest []byte) {
	equals, name, value, rest, ok := splitQuery(b)
	if !ok {
		return false, nil, nil, nil
	}
	return equals, name, value, rest
}

// matches reports whether every condition r sets holds for f.
func (r *ruleView) matches(f *Facts) bool {
	if r.devices != 0 && (!f.Device.Valid() || r.devices&(1<<f.Device) == 0) {
		return false
	}
	if r.countries != nil && !hasPair(r.countries, f.Country) {
		return false
	}
	if r.languages != nil && !hasPair(r.languages, f.Language) {
		return false
	}
	if r.query != nil {
		if f.Query == nil {
			return false
		}
		for q := r.query; len(q) > 0; {
			equals, name, value, rest, ok := splitQuery(q)
			if !ok {
				return false
			}
			if equals && !f.Query.HasValue(name, value) || !equals && !f.Query.Has(name) {
				return false
			}
			q = rest
		}
	}
	return true
}

// hasPair reports whether list, two-byte codes, holds c. A zero c (unknown)
// is in no list.
func hasPair(list []byte, c [2]byte) bool {
	if c == [2]byte{} {
		return false
	}
	for i := 0; i+1 < len(list); i += 2 {
		if list[i] == c[0] && list[i+1] == c[1] {
			return true
		}
	}
	return false
}

// PrimaryLanguage reads an Accept-Language header (RFC 9110 12.5.4) as
// rules do: of its language ranges whose primary subtag is two letters
// (an ISO 639-1 code's shape), the one of the highest weight (q; the
// first listed on a tie; q=0 means "not this one" and is skipped) gives
// its primary subtag, lower-cased: "de-CH, en;q=0.8" is de, "fr-CA" is fr.
// "*", three-letter and malformed ranges are skipped. ok is false when no
// range qualifies. It does not allocate.
func PrimaryLanguage(h []byte) (lang [2]byte, ok bool) {
	best := -1
	for len(h) > 0 {
		var item []byte
		if i := indexByte(h, ','); i >= 0 {
			item, h = h[:i], h[i+1:]
		} else {
			item, h = h, nil
		}
		rng, params := item, []byte(nil)
		if i := indexByte(item, ';'); i >= 0 {
			rng, params = item[:i], item[i+1:]
		}
		rng = trimOWS(rng)
		if len(rng) < 2 || !isAlpha(rng[0]) || !isAlpha(rng[1]) || (len(rng) > 2 && rng[2] != '-') {
			continue
		}
		q, valid := weight(params)
		if !valid || q == 0 || q <= best {
			continue
		}
		best, lang, ok = q, [2]byte{lower(rng[0]), lower(rng[1])}, true
	}
	return lang, ok
}

// weight reads the parameters after a language range: an optional
// "q=qvalue" (RFC 9110 12.4.2), in thousandths; 1000 without one. valid
// is false for a malformed weight, which the range is skipped for.
func weight(params []byte) (q int, valid bool) {
	params = trimOWS(params)
	if len(params) == 0 {
		return 1000, true
	}
	if len(params) < 3 || (params[0] != 'q' && params[0] != 'Q') || params[1] != '=' {
		return 0, false
	}
	v := params[2:]
	if v[0] != '0' && v[0] != '1' {
		return 0, false
	}
	q = int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q, true
	}
	if v[1] != '.' || len(v) > 5 {
		return 0, false
	}
	scale := 100
	for _, c := range v[2:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	if q > 1000 {
		return 0, false
	}
	return q, true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
