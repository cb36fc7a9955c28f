package api

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// bodyError is a request body the API refuses before reading what it says.
// Its message is the problem's detail: it names the field or the rule, and
// never a Go type.
type bodyError struct {
	status int
	msg    string
	// acceptEncoding, when set, is sent as Accept-Encoding (RFC 9110
	// 15.5.16: a 415 for a content coding says which ones are accepted).
	acceptEncoding string
}

func (e *bodyError) Error() string { return e.msg }

func badBody(format string, args ...any) *bodyError {
	return &bodyError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// writeBodyError answers a refused body; err is one decodeJSON returned.
func writeBodyError(w http.ResponseWriter, r *http.Request, err error) {
	be := &bodyError{status: http.StatusBadRequest, msg: "the body could not be read"}
	errors.As(err, &be)
	if be.acceptEncoding != "" {
		w.Header().Set("Accept-Encoding", be.acceptEncoding)
	}
	writeProblem(w, r, be.status, be.msg)
}

// decodeJSON reads r's body into v, which s describes: exactly one JSON
// object whose keys are s's field names, spelled exactly (Go's decoder
// would match them in any case) and each at most once (it would take the
// last), every value of its field's kind, nothing after it. The body is at
// most limit bytes on the wire and, if gzip-encoded, once decoded. An error
// is a *bodyError, and v is then unchanged.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, s *shape, limit int64, mediaTypes ...string) error {
	body, err := readBody(w, r, limit, mediaTypes)
	if err != nil {
		return err
	}
	if err := checkJSON(body, s); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		// checkJSON has vetted every key, kind and number, so this is a
		// bug of the shape, not of the client: say so without internals.
		return &bodyError{status: http.StatusBadRequest, msg: "the body does not fit the request's fields"}
	}
	return nil
}

// readBody returns r's body, decoded from gzip when it says so. mediaTypes
// are the Content-Types accepted (an absent one is taken as JSON).
func readBody(w http.ResponseWriter, r *http.Request, limit int64, mediaTypes []string) ([]byte, error) {
	if err := checkContentType(r.Header.Get("Content-Type"), mediaTypes); err != nil {
		return nil, err
	}
	gzipped, err := contentCoding(r.Header.Values("Content-Encoding"))
	if err != nil {
		return nil, err
	}
	tooBig := &bodyError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the body is larger than %d bytes", limit)}
	if r.ContentLength > limit {
		return nil, tooBig
	}
	// MaxBytesReader also closes the connection after the answer, so a
	// client cannot make the server read the rest of a huge body.
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	var zr *gzip.Reader
	if gzipped {
		if zr, err = gzip.NewReader(src); err != nil {
			return nil, readError(err, tooBig)
		}
		src = zr
		tooBig = &bodyError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the body is larger than %d bytes once decoded from gzip", limit)}
	}
	// A gzip bomb stops here: what is decoded is bounded, not what is sent.
	body, err := io.ReadAll(io.LimitReader(src, limit+1))
	if err != nil {
		return nil, readError(err, tooBig)
	}
	if int64(len(body)) > limit {
		return nil, tooBig
	}
	return body, nil
}

func readError(err error, tooBig *bodyError) *bodyError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooBig
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badBody("the body is not valid gzip data (Content-Encoding: gzip): it is corrupt or cut short")
	}
	var corrupt flate.CorruptInputError
	if errors.As(err, &corrupt) {
		return badBody("the body is not valid gzip data (Content-Encoding: gzip): it is corrupt or cut short")
	}
	return badBody("the body could not be read to its end")
}

// checkContentType accepts ct when it is empty or one of mediaTypes with at
// most a utf-8 charset: JSON is UTF-8 (RFC 8259 8.1).
func checkContentType(ct string, mediaTypes []string) error {
	if ct == "" {
		return nil
	}
	want := "Content-Type must be " + strings.Join(mediaTypes, " or ")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return &bodyError{status: http.StatusUnsupportedMediaType, msg: want}
	}
	found := false
	for _, m := range mediaTypes {
		found = found || mt == m
	}
	if !found {
		return &bodyError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("%s, not %s", want, mt)}
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return &bodyError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("%s with at most charset=utf-8, not %s=%s", want, k, v)}
		}
	}
	return nil
}

// contentCoding reports whether the Content-Encoding values ask for gzip.
// One gzip (or its alias x-gzip) is accepted, identity is ignored, and
// anything else is refused with 415.
func contentCoding(values []string) (gzipped bool, err error) {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return false, nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return true, nil
	}
	return false, &bodyError{status: http.StatusUnsupportedMediaType, acceptEncoding: "gzip",
		msg: fmt.Sprintf("Content-Encoding %s is not accepted: send the body as is, or compressed once with Content-Encoding: gzip", strings.Join(codings, ", "))}
}

// kind is a JSON value's type, as a request's field expects it.
type kind int

const (
	kindString kind = iota
	kindInteger
	kindObject
	kindArray
)

// shape is what a JSON value of a request must look like. A shape is never
// changed once built, so shapes are shared by every request.
type shape struct {
	kind     kind
	nullable bool
	fields   []field // kindObject: the keys accepted, spelled exactly; none is required here
	elem     *shape  // kindArray
}

type field struct {
	name  string
	shape *shape
}

var (
	jsonString  = &shape{kind: kindString}
	jsonInteger = &shape{kind: kindInteger}
	// jsonStringOrNull is a string, or null for "none".
	jsonStringOrNull = &shape{kind: kindString, nullable: true}
)

func jsonObject(fields ...field) *shape     { return &shape{kind: kindObject, fields: fields} }
func jsonArray(elem *shape) *shape          { return &shape{kind: kindArray, elem: elem} }
func jsonField(name string, s *shape) field { return field{name: name, shape: s} }

func (s *shape) String() string {
	var k string
	switch s.kind {
	case kindString:
		k = "a string"
	case kindInteger:
		k = "an integer"
	case kindObject:
		k = "an object"
	case kindArray:
		k = "an array"
	}
	if s.nullable {
		k += " or null"
	}
	return k
}

func (s *shape) names() string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// checkJSON reports the first way body is not one JSON value of shape s,
// naming the value by its path (links[3].url).
func checkJSON(body []byte, s *shape) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badBody("the body is empty; send a JSON object")
	}
	if !utf8.Valid(body) {
		// Go's decoder would silently turn the bytes into U+FFFD.
		return badBody("the body is not valid UTF-8 (at byte %d); JSON is UTF-8", invalidUTF8At(body))
	}
	c := &checker{body: body, dec: json.NewDecoder(bytes.NewReader(body))}
	c.dec.UseNumber()
	if err := c.value(s, ""); err != nil {
		return err
	}
	if _, err := c.dec.Token(); !errors.Is(err, io.EOF) {
		return badBody("malformed JSON: there is more data after the JSON object (at byte %d); send one object", c.dec.InputOffset())
	}
	return nil
}

type checker struct {
	body []byte
	dec  *json.Decoder
}

// value checks the next value against s; path names it ("" is the body).
func (c *checker) value(s *shape, path string) error {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if err != nil {
		return c.syntax(err)
	}
	name, want := path, s.String()
	if name == "" {
		name = "the body"
		if s.kind == kindObject {
			want = "a JSON object"
		}
	}
	if tok == nil {
		if s.nullable {
			return nil
		}
		return badBody("%s must be %s, not null", name, want)
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && s.kind == kindObject:
			return c.object(s, path)
		case tok == '[' && s.kind == kindArray:
			return c.array(s, path)
		}
		if tok == '{' {
			return badBody("%s must be %s, not an object", name, want)
		}
		return badBody("%s must be %s, not an array", name, want)
	case string:
		if s.kind == kindString {
			return c.surrogates(start, name)
		}
		return badBody("%s must be %s, not a string", name, want)
	case json.Number:
		if s.kind != kindInteger {
			return badBody("%s must be %s, not a number", name, want)
		}
		if _, err := tok.Int64(); err != nil {
			return badBody("%s must be an integer, not %.20s", name, tok)
		}
		return nil
	case bool:
		return badBody("%s must be %s, not a boolean", name, want)
	}
	return badBody("%s must be %s", name, want)
}

func (c *checker) object(s *shape, path string) error {
	seen := make(map[string]bool, len(s.fields))
	in := ""
	if path != "" {
		in = " in " + path
	}
	for c.dec.More() {
		tok, err := c.dec.Token()
		if err != nil {
			return c.syntax(err)
		}
		key, _ := tok.(string)
		var fs *shape
		for _, f := range s.fields {
			if f.name == key {
				fs = f.shape
			}
		}
		if fs == nil {
			for _, f := range s.fields {
				if strings.EqualFold(f.name, key) {
					return badBody("unknown field %q%s: field names are case-sensitive; did you mean %q?", key, in, f.name)
				}
			}
			return badBody("unknown field %q%s; the fields are %s", key, in, s.names())
		}
		if seen[key] {
			return badBody("duplicate field %q%s: send each field once", key, in)
		}
		seen[key] = true
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		if err := c.value(fs, sub); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // '}'
	return c.syntax(err)
}

func (c *checker) array(s *shape, path string) error {
	for i := 0; c.dec.More(); i++ {
		if err := c.value(s.elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // ']'
	return c.syntax(err)
}

// surrogates refuses a \u escape of half a UTF-16 surrogate pair in the
// string that ended at the decoder's offset and began after start: Go's
// decoder would turn it into U+FFFD, a character the client never sent.
func (c *checker) surrogates(start int64, name string) error {
	raw := c.body[start:c.dec.InputOffset()]
	if !bytes.Contains(raw, []byte(`\u`)) {
		return nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue // \" \\ \n and the like; skipping keeps \\u from looking like \u
		}
		r := hex4(raw[i+1:])
		switch {
		case r >= 0xd800 && r <= 0xdbff:
			if rest := raw[i+5:]; len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
				if lo := hex4(rest[2:]); lo >= 0xdc00 && lo <= 0xdfff {
					i += 10
					continue
				}
			}
			return badBody("%s holds a \\u escape of half a surrogate pair (\\u%s), which is no character", name, raw[i+1:i+5])
		case r >= 0xdc00 && r <= 0xdfff:
			return badBody("%s holds a \\u escape of half a surrogate pair (\\u%s), which is no character", name, raw[i+1:i+5])
		}
		i += 4
	}
	return nil
}

// hex4 is the value of four hex digits at the start of b (the decoder has
// checked they are there).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// syntax turns a decoder's error into a problem about the JSON text.
func (c *checker) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return badBody("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badBody("malformed JSON: the body ends before the JSON object does")
	}
	return badBody("malformed JSON")
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
