package api

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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
		{`{} []`, "more data after the JSON object (at byte 4)"},
		{`true`, "the body must be a JSON object, not a boolean"},
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
