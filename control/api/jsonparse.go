package api

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkJSON reports the first way body is not one JSON value of shape s.
func checkJSON(body []byte, s *shape) error { return parseJSON(body, s, nil) }

// parseJSON reads body, which must be exactly one JSON value of shape s,
// in one pass, and stores what it holds in dst through the shape's fields
// (nil: only check). The first way body is not such a value is a
// *bodyError naming the value by its path (links[3].url). Unlike Go's
// decoder it matches keys exactly (not in any case), refuses a key sent
// twice (rather than keeping the last) and invalid UTF-8 or half a
// surrogate pair (rather than putting U+FFFD where they were).
func parseJSON(body []byte, s *shape, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badBody("the body is empty; send a JSON object")
	}
	if !utf8.Valid(body) {
		return badBody("the body is not valid UTF-8 (at byte %d); JSON is UTF-8", invalidUTF8At(body))
	}
	p := &parser{b: body}
	if err := p.value(s, dst, nil); err != nil {
		return err
	}
	p.space()
	if p.i < len(p.b) {
		return badBody("malformed JSON: there is more data after the JSON object (at byte %d); send one object", p.i)
	}
	return nil
}

// parser walks a JSON text. path is where it is, for messages.
type parser struct {
	b    []byte
	i    int
	path []step
}

// step is a key of an object, or an index (key "") of an array.
type step struct {
	key   string
	index int
}

// name is the value at the current path as messages call it.
func (p *parser) name() string {
	if len(p.path) == 0 {
		return "the body"
	}
	var b strings.Builder
	for i, st := range p.path {
		switch {
		case st.key == "":
			fmt.Fprintf(&b, "[%d]", st.index)
		case i > 0:
			b.WriteString("." + st.key)
		default:
			b.WriteString(st.key)
		}
	}
	return b.String()
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// syntax is a malformed-JSON problem at byte at.
func (p *parser) syntax(at int, format string, args ...any) error {
	if at >= len(p.b) {
		return badBody("malformed JSON: the body ends before the JSON object does")
	}
	return badBody("malformed JSON at byte %d: %s", at, fmt.Sprintf(format, args...))
}

func (p *parser) unexpected(context string) error {
	if p.i >= len(p.b) {
		return p.syntax(p.i, "")
	}
	return p.syntax(p.i, "invalid character %s %s", quoteChar(p.b[p.i]), context)
}

func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}

// value reads the next value, which must be of shape s, into dst through
// f (nil for the body itself, which is dst).
func (p *parser) value(s *shape, dst any, f *field) error {
	p.space()
	if p.i >= len(p.b) {
		return p.syntax(p.i, "")
	}
	want := func() string {
		if len(p.path) == 0 && s.kind == kindObject {
			return "a JSON object"
		}
		return s.String()
	}
	mismatch := func(got string) error { return badBody("%s must be %s, not %s", p.name(), want(), got) }
	start := p.i
	switch c := p.b[p.i]; {
	case c == '{':
		if s.kind != kindObject {
			return mismatch("an object")
		}
		obj := dst
		if f != nil {
			obj = nil
			if f.add != nil && dst != nil {
				obj = f.add(dst)
			}
		}
		return p.object(s, obj)
	case c == '[':
		if s.kind != kindArray {
			return mismatch("an array")
		}
		return p.array(s, dst, f)
	case c == '"':
		if s.kind != kindString {
			return mismatch("a string")
		}
		str, err := p.str()
		if err != nil {
			return err
		}
		p.store(dst, f, jsonValue{str: str, raw: p.b[start:p.i]})
		return nil
	case c == '-' || '0' <= c && c <= '9':
		integer, err := p.number()
		if err != nil {
			return err
		}
		if s.kind != kindInteger {
			return mismatch("a number")
		}
		raw := p.b[start:p.i]
		n, ok := parseInt64(raw)
		if !integer || !ok {
			return badBody("%s must be an integer, not %.20s", p.name(), raw)
		}
		p.store(dst, f, jsonValue{num: n, raw: raw})
		return nil
	case c == 't' || c == 'f' || c == 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if err := p.literal(lit); err != nil {
			return err
		}
		if c != 'n' {
			return mismatch("a boolean")
		}
		if !s.nullable {
			return badBody("%s must be %s, not null", p.name(), want())
		}
		p.store(dst, f, jsonValue{null: true, raw: p.b[start:p.i]})
		return nil
	}
	return p.unexpected("looking for beginning of value")
}

func (p *parser) store(dst any, f *field, v jsonValue) {
	if f != nil && f.set != nil && dst != nil {
		f.set(dst, v)
	}
}

func (p *parser) object(s *shape, dst any) error {
	p.i++ // '{'
	var seen uint64
	in := func() string {
		if len(p.path) == 0 {
			return ""
		}
		return " in " + p.name()
	}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.unexpected("looking for beginning of object key string")
		}
		k, err := p.key()
		if err != nil {
			return err
		}
		fi := -1
		for j := range s.fields {
			if s.fields[j].name == string(k) {
				fi = j
				break
			}
		}
		key := s.fields[max(fi, 0)].name
		if fi < 0 {
			key = string(k)
			for _, f := range s.fields {
				if strings.EqualFold(f.name, key) {
					return badBody("unknown field %q%s: field names are case-sensitive; did you mean %q?", key, in(), f.name)
				}
			}
			return badBody("unknown field %q%s; the fields are %s", key, in(), s.names())
		}
		if seen&(1<<fi) != 0 {
			return badBody("duplicate field %q%s: send each field once", key, in())
		}
		seen |= 1 << fi
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.unexpected("after object key")
		}
		p.i++
		f := &s.fields[fi]
		if f.seen != nil && dst != nil {
			f.seen(dst)
		}
		p.path = append(p.path, step{key: f.name})
		if err := p.value(f.shape, dst, f); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.space()
		if p.i < len(p.b) {
			switch p.b[p.i] {
			case ',':
				p.i++
				continue
			case '}':
				p.i++
				return nil
			}
		}
		return p.unexpected("after object key:value pair")
	}
}

func (p *parser) array(s *shape, dst any, f *field) error {
	p.i++ // '['
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for n := 0; ; n++ {
		p.path = append(p.path, step{index: n})
		if err := p.value(s.elem, dst, f); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.space()
		if p.i < len(p.b) {
			switch p.b[p.i] {
			case ',':
				p.i++
				continue
			case ']':
				p.i++
				return nil
			}
		}
		return p.unexpected("after array element")
	}
}

// literal reads lit (true, false, null) at p.i.
func (p *parser) literal(lit string) error {
	for j := 0; j < len(lit); j++ {
		if p.i >= len(p.b) {
			return p.syntax(p.i, "")
		}
		if p.b[p.i] != lit[j] {
			return p.syntax(p.i, "invalid character %s in literal %s (expecting %s)", quoteChar(p.b[p.i]), lit, quoteChar(lit[j]))
		}
		p.i++
	}
	return nil
}

// number reads a JSON number at p.i and reports whether it is written as
// an integer (no fraction, no exponent).
func (p *parser) number() (integer bool, err error) {
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return false, p.unexpected("in numeric literal")
	}
	integer = true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		integer = false
		if digits() == 0 {
			return false, p.unexpected("after decimal point in numeric literal")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		integer = false
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false, p.unexpected("in exponent of numeric literal")
		}
	}
	return integer, nil
}

// parseInt64 parses an integer as number wrote it; ok is false out of
// int64's range.
func parseInt64(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	limit := uint64(1<<63 - 1)
	if neg {
		limit = 1 << 63
	}
	var n uint64
	for _, c := range b {
		d := uint64(c - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		return int64(-n), true // 1<<63 negated is math.MinInt64
	}
	return int64(n), true
}

// str reads the string value at p.i. One holding a \u escape of half a
// surrogate pair is refused: Go's decoder would turn it into U+FFFD, a
// character the client never sent.
func (p *parser) str() (string, error) {
	b, err := p.text(true)
	return string(b), err
}

// key reads the object key at p.i, valid until the next read. Half a
// surrogate pair in it is U+FFFD, and so an unknown field.
func (p *parser) key() ([]byte, error) { return p.text(false) }

// text reads the string at p.i: the body's own bytes when it holds no
// escape.
func (p *parser) text(value bool) ([]byte, error) {
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], nil
		case c == '\\':
			return p.escaped(start, j, value)
		case c < 0x20:
			return nil, p.syntax(j, "invalid character %s in string literal", quoteChar(c))
		}
	}
	return nil, p.syntax(len(p.b), "")
}

// escaped reads the rest of a string that began at start and holds an
// escape at j.
func (p *parser) escaped(start, j int, value bool) ([]byte, error) {
	out := make([]byte, 0, j-start+16)
	out = append(out, p.b[start:j]...)
	for j < len(p.b) {
		c := p.b[j]
		switch {
		case c == '"':
			p.i = j + 1
			return out, nil
		case c < 0x20:
			return nil, p.syntax(j, "invalid character %s in string literal", quoteChar(c))
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		j++
		if j >= len(p.b) {
			break
		}
		switch e := p.b[j]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := p.hex4(j + 1)
			if err != nil {
				return nil, err
			}
			j += 4
			if utf16.IsSurrogate(r) {
				lo := rune(-1)
				if r < 0xdc00 && j+6 < len(p.b) && p.b[j+1] == '\\' && p.b[j+2] == 'u' {
					if v, err := p.hex4(j + 3); err == nil && v >= 0xdc00 && v <= 0xdfff {
						lo = v
					}
				}
				if lo < 0 {
					if value {
						return nil, badBody("%s holds a \\u escape of half a surrogate pair (\\u%s), which is no character", p.name(), p.b[j-3:j+1])
					}
					r = utf8.RuneError
				} else {
					r = utf16.DecodeRune(r, lo)
					j += 6
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, p.syntax(j, "invalid character %s in string escape code", quoteChar(e))
		}
		j++
	}
	return nil, p.syntax(len(p.b), "")
}

// hex4 is the value of the four hex digits at at.
func (p *parser) hex4(at int) (rune, error) {
	var r rune
	for k := at; k < at+4; k++ {
		if k >= len(p.b) {
			return 0, p.syntax(k, "")
		}
		c := p.b[k]
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.syntax(k, "invalid character %s in \\u hexadecimal character escape", quoteChar(c))
		}
	}
	return r, nil
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
