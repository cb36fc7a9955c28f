package api

import (
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
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

// decodeJSON reads r's body into v, a pointer to a zero value that s
// describes and fills (see parseJSON): exactly one JSON object whose keys
// are s's field names, spelled exactly and each at most once, every value
// of its field's kind, nothing after it. The body is at most limit bytes on
// the wire and, if gzip-encoded, once decoded. An error is a *bodyError,
// and v may then hold part of the body.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, s *shape, limit int64, mediaTypes ...string) error {
	body, err := readBody(w, r, limit, mediaTypes)
	if err != nil {
		return err
	}
	return parseJSON(body, s, v)
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

// shape is what a JSON value of a request must look like, and where an
// object's fields go. A shape is never changed once built, so shapes are
// shared by every request.
type shape struct {
	kind     kind
	nullable bool
	fields   []field // kindObject: the keys accepted, spelled exactly; none is required here
	elem     *shape  // kindArray
}

// field is a key of an object and what its value must look like. set
// stores a string, integer or null value (each element's, for an array of
// them) in the object being decoded; add makes room for the next object of
// an array (or for an object value) and returns where it goes. Without
// them the value is checked and dropped.
type field struct {
	name  string
	shape *shape
	set   func(dst any, v jsonValue)
	add   func(dst any) any
	// seen, when set, is told that the key was sent, before its value is
	// read: how an empty array is told from an absent one.
	seen func(dst any)
}

// jsonValue is a string, integer or null value as decoded.
type jsonValue struct {
	null bool
	str  string
	num  int64
	raw  []byte // the value as sent; valid while the body is
}

var (
	jsonString  = &shape{kind: kindString}
	jsonInteger = &shape{kind: kindInteger}
	// jsonStringOrNull is a string, or null for "none".
	jsonStringOrNull = &shape{kind: kindString, nullable: true}
	// jsonIntegerOrNull is an integer, or null for "none".
	jsonIntegerOrNull = &shape{kind: kindInteger, nullable: true}
)

func jsonObject(fields ...field) *shape {
	if len(fields) > 64 {
		panic("api: an object shape holds at most 64 fields") // seen is a bit mask
	}
	return &shape{kind: kindObject, fields: fields}
}
func jsonArray(elem *shape) *shape          { return &shape{kind: kindArray, elem: elem} }
func jsonArrayOrNull(elem *shape) *shape    { return &shape{kind: kindArray, nullable: true, elem: elem} }
func jsonField(name string, s *shape) field { return field{name: name, shape: s} }

// into is f storing its values with set, on a *T.
func into[T any](f field, set func(dst *T, v jsonValue)) field {
	f.set = func(dst any, v jsonValue) { set(dst.(*T), v) }
	return f
}

// present is f telling seen, on a *T, that its key was sent.
func present[T any](f field, seen func(dst *T)) field {
	f.seen = func(dst any) { seen(dst.(*T)) }
	return f
}

// each is f decoding its array's objects where add puts them, on a *T.
func each[T any](f field, add func(dst *T) any) field {
	f.add = func(dst any) any { return add(dst.(*T)) }
	return f
}

func ptr[T any](v T) *T { return &v }

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
