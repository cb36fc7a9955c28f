package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestShapesAreTheBodies: each body's shape accepts exactly the fields its
// struct decodes, so strictness cannot drift from what is read.
func TestShapesAreTheBodies(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *shape
		body any
	}{
		{"create", createShape, createBody{}},
		{"batch", batchShape, batchBody{}},
		{"patch", patchShape, patchBody{}},
		{"tags", tagShape, tagBody{}},
		{"domain", domainShape, domainBody{}},
		{"domain patch", domainPatchShape, domainPatchBody{}},
		{"rule", ruleShape, ruleBody{}},
		{"query condition", queryShape, queryBody{}},
	} {
		var tags []string
		rt := reflect.TypeOf(tc.body)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			tags = append(tags, tag)
		}
		var names []string
		for _, f := range tc.s.fields {
			names = append(names, f.name)
		}
		if !slices.Equal(names, tags) {
			t.Errorf("%s: shape fields %v; the struct decodes %v", tc.name, names, tags)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	s := jsonObject(jsonField("url", jsonString), jsonField("n", jsonInteger), jsonField("items", jsonArray(jsonObject(jsonField("url", jsonStringOrNull)))))
	for _, tc := range []struct{ body, err string }{
		{`{"url": "https://a.example/\ud83d\ude00"}`, ""},
		{`{"url": "https://a.example/\\ud800"}`, ""}, // an escaped backslash, then text
		{`{"url": "\u00e9\uD83D\uDE00\"\\"}`, ""},
		{`{"url": "a\ud800b"}`, `url holds a \u escape of half a surrogate pair (\ud800)`},
		{`{"url": "a\udc00"}`, `(\udc00)`},
		{`{"url": "\ud800\u0041"}`, `(\ud800)`},
		{`{"url": "\ud800"}`, `(\ud800)`},
		{`{"items": [{"url": null}, {"url": "\udfff"}]}`, `items[1].url holds`},
		{`{"n": -5, "items": []}`, ""},
		{`{"n": 9223372036854775808}`, "n must be an integer, not 9223372036854775808"},
		{`{"n": true}`, "n must be an integer, not a boolean"},
		{`{"items": [{"url": 1}]}`, "items[0].url must be a string or null, not a number"},
		{`{"items": [{}], "Items": []}`, `unknown field "Items": field names are case-sensitive; did you mean "items"?`},
		{`{"items": [{"URL": ""}]}`, `unknown field "URL" in items[0]: field names are case-sensitive; did you mean "url"?`},
		{`{"x": 1}`, `unknown field "x"; the fields are url, n, items`},
		{`{"url": "a",}`, "malformed JSON at byte"},
		{`{"url" "a"}`, "malformed JSON at byte"},
		{`{"url": "a"`, "malformed JSON: the body ends before the JSON object does"},
		{`  `, "the body is empty"},
		{"{\"url\": \"\xc3\x28\"}", "not valid UTF-8 (at byte 9)"},
		{`{} []`, "more data after the JSON object (at byte 3)"},
		{`true`, "the body must be a JSON object, not a boolean"},
		{`{"n": 1.5}`, "n must be an integer, not 1.5"},
		{`{"n": 1e3}`, "n must be an integer, not 1e3"},
		{`{"n": -9223372036854775809}`, "n must be an integer, not -9223372036854775809"},
		{`{"n": -9223372036854775808, "url": "x"}`, ""},
		{`{"n": 01}`, "malformed JSON at byte 7"},
		{`{"n": -}`, "malformed JSON at byte 7"},
		{`{"n": 1.}`, "malformed JSON at byte 8"},
		{`{"url": nul}`, "malformed JSON at byte 11"},
		{`{"url": "a\x"}`, "malformed JSON at byte 11"},
		{`{"url": "a\u12g4"}`, "malformed JSON at byte 14"},
		{"{\"url\": \"a\tb\"}", "malformed JSON at byte 10"},
		{`{"url": "a", "url": "b"}`, `duplicate field "url": send each field once`},
		{`{"items": [{"url": null, "url": null}]}`, `duplicate field "url" in items[0]`},
		{`{"items": {}}`, "items must be an array, not an object"},
		{`{"url": ["a"]}`, "url must be a string, not an array"},
		{`{"items": [1]}`, "items[0] must be an object, not a number"},
		{`{"\u0075rl": "a"}`, ""},
		{`{"url": "a"} x`, "more data after the JSON object (at byte 13)"},
		{`{"items": [{"url": "a"}`, "the body ends before the JSON object does"},
		{`{"url"`, "the body ends before the JSON object does"},
		{`[]`, "the body must be a JSON object, not an array"},
	} {
		err := checkJSON([]byte(tc.body), s)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("checkJSON(%s) = %v; want nil", tc.body, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("checkJSON(%s) = %v; want an error containing %q", tc.body, err, tc.err)
		}
	}
}

// decodeBodies are valid bodies of each kind, for the tests that hold
// parseJSON to what Go's decoder reads from them.
var decodeBodies = []struct {
	name string
	body string
}{
	{"create", `{"url": "https://a.example/x?y=1", "code": "my-code", "expires_at": "2030-01-02T03:04:05Z", "redirect_type": 307, "namespace": "default"}`},
	{"create", `{"expires_at": null, "url": ""}`},
	{"create", "\t{\r\n\"url\"\t:\"\\u00e9\\uD83D\\uDE00 \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t caf\u00e9 \u65e5\u672c\", \"redirect_type\": -0 }\n"},
	{"create", `{"redirect_type": -9223372036854775808}`},
	{"create", `{}`},
	{"batch", `{"links": []}`},
	{"batch", `{"links": [{"url": "https://a.example/1"}, {}, {"url": "https://a.example/3", "expires_at": null, "code": "x\u002dy"}]}`},
	{"batch", `{}`},
	{"patch", `{"url": "https://b.example/", "redirect_type": 308, "expires_at": null, "status": "disabled"}`},
	{"patch", `{"expires_at": "2031-01-01T00:00:00\u005a"}`},
	{"patch", `{"redirect_type": 0}`},
}

// decodeOf decodes body as name's kind with decodeJSON and with Go's
// decoder, and returns both.
func decodeOf(t testing.TB, name string, body []byte) (ours, theirs any, err error) {
	t.Helper()
	var s *shape
	switch name {
	case "create":
		ours, theirs, s = &createBody{}, &createBody{}, createShape
	case "batch":
		ours, theirs, s = &batchBody{}, &batchBody{}, batchShape
	case "patch":
		ours, theirs, s = &patchBody{}, &patchBody{}, patchShape
	default:
		t.Fatalf("no body kind %q", name)
	}
	req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
	if err = decodeJSON(nil, req, ours, s, 1<<20, "application/json"); err != nil {
		return ours, theirs, err
	}
	if err := json.Unmarshal(body, theirs); err != nil {
		t.Fatalf("%s accepted by decodeJSON but not by encoding/json: %v", body, err)
	}
	return ours, theirs, nil
}

// TestDecodeReadsWhatGoReads: on valid bodies decodeJSON fills every field
// exactly as encoding/json would, escapes, nulls and extremes included.
func TestDecodeReadsWhatGoReads(t *testing.T) {
	for _, tc := range decodeBodies {
		ours, theirs, err := decodeOf(t, tc.name, []byte(tc.body))
		if err != nil {
			t.Errorf("%s %s: %v", tc.name, tc.body, err)
			continue
		}
		if diff := cmp.Diff(theirs, ours, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s %s: decodeJSON differs from encoding/json (-theirs +ours):\n%s", tc.name, tc.body, diff)
		}
	}
}

// FuzzDecode: whatever decodeJSON accepts, encoding/json reads the same
// way, and what is not JSON at all decodeJSON refuses.
func FuzzDecode(f *testing.F) {
	for i, tc := range decodeBodies {
		f.Add(uint8(i), []byte(tc.body))
	}
	f.Add(uint8(0), []byte(`{"url": "\ud800"}`))
	f.Add(uint8(1), []byte(`{"links": [{"url": 1e5}]}`))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		name := []string{"create", "batch", "patch"}[kind%3]
		ours, theirs, err := decodeOf(t, name, body)
		if err != nil {
			var be *bodyError
			if !errorsAs(err, &be) {
				t.Fatalf("%q: %v is not a *bodyError", body, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("%q: accepted, but it is not JSON", body)
		}
		if diff := cmp.Diff(theirs, ours, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%q: decodeJSON differs from encoding/json (-theirs +ours):\n%s", body, diff)
		}
	})
}

func errorsAs(err error, be **bodyError) bool {
	b, ok := err.(*bodyError)
	*be = b
	return ok
}

// TestDecodeBatchAllocations: a batch is read in one pass that allocates
// little more than the strings it keeps. (Go's decoder behind a token
// checker took about 21 allocations a link.)
func TestDecodeBatchAllocations(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"links": [`)
	for i := range 100 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"url": "https://shop.example.com/p/%d?utm_source=mail&utm_campaign=spring", "redirect_type": 302}`, i)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	allocs := testing.AllocsPerRun(20, func() {
		var in batchBody
		req := httptest.NewRequest("POST", "/api/v1/links/batch", bytes.NewReader(body))
		if err := decodeJSON(nil, req, &in, batchShape, MaxBatchBodyBytes, "application/json"); err != nil || len(in.Links) != 100 {
			t.Fatal(err, len(in.Links))
		}
	})
	if allocs > 3*100 {
		t.Errorf("decoding a batch of 100 allocates %.0f times; want at most 300", allocs)
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "2030-01-02T03:04:05Z", want: "2030-01-02T03:04:05Z"},
		{in: "2030-01-02t03:04:05z", want: "2030-01-02T03:04:05Z"},
		{in: "2030-01-02T03:04:05.000001+23:59", want: "2030-01-01T03:05:05.000001Z"},
		{in: "2030-01-02T03:04:05.1234560000000000-01:00", want: "2030-01-02T04:04:05.123456Z"},
		{in: "2016-12-31T23:59:60Z", want: "2017-01-01T00:00:00Z"},
		{in: "2016-12-31T23:59:60.5Z", want: "2017-01-01T00:00:00.5Z"},
		{in: "2017-01-01T01:29:60+01:30", want: "2017-01-01T00:00:00Z"},
		{in: "2024-02-29T00:00:00Z", want: "2024-02-29T00:00:00Z"},
		{in: "2023-02-29T00:00:00Z", err: "no such day"},
		{in: "2030-13-01T00:00:00Z", err: "RFC 3339"},
		{in: "2030-01-01T23:59:60+00:01", err: "leap second"},
		{in: "2030-01-01T00:00:00.0000001Z", err: "microsecond"},
		{in: "2030-01-01T00:00:00.Z", err: "RFC 3339"},
		{in: "2030-01-01T00:00:00,5Z", err: "RFC 3339"},
		{in: "2030-01-01T24:00:00Z", err: "RFC 3339"},
		{in: "2030-01-01T00:60:00Z", err: "RFC 3339"},
		{in: "2030-01-01T00:00:00+0100", err: "RFC 3339"},
		{in: "2030-01-01T00:00:00+01:60", err: "RFC 3339"},
		{in: "2030-01-01T00:00:00Zjunk", err: "RFC 3339"},
		{in: "2030-01-01 00:00:00Z", err: "RFC 3339"},
		{in: "+2030-01-01T00:00:00Z", err: "RFC 3339"},
		{in: "", err: "RFC 3339"},
	} {
		got, err := parseTime("at", tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "at ") {
				t.Errorf("parseTime(%q) = %v, %v; want an error naming the field, containing %q", tc.in, got, err, tc.err)
			}
		case err != nil || got.UTC().Format(time.RFC3339Nano) != tc.want:
			t.Errorf("parseTime(%q) = %v, %v; want %s", tc.in, got.UTC().Format(time.RFC3339Nano), err, tc.want)
		}
	}
}

func TestContentCoding(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		gzipped bool
		ok      bool
	}{
		{nil, false, true},
		{[]string{"identity"}, false, true},
		{[]string{"gzip"}, true, true},
		{[]string{" GZip "}, true, true},
		{[]string{"x-gzip"}, true, true},
		{[]string{"identity, gzip"}, true, true},
		{[]string{"gzip", "gzip"}, false, false},
		{[]string{"deflate"}, false, false},
		{[]string{"gzip, br"}, false, false},
	} {
		gz, err := contentCoding(tc.values)
		if gz != tc.gzipped || (err == nil) != tc.ok {
			t.Errorf("contentCoding(%q) = %v, %v; want %v, ok %v", tc.values, gz, err, tc.gzipped, tc.ok)
		}
	}
}
