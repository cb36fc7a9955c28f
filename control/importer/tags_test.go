package importer

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestReadTitlesAndTags: Bitly and Shlink exports carry titles and tags,
// in CSV (one field, '|', ',' or ';' between tags) and JSON (an array).
func TestReadTitlesAndTags(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		title       string
		tags        []string
	}{
		{"bitly json", `{"links": [{"link": "https://bit.ly/3AbcDeF", "long_url": "https://example.com/a", "title": "Launch", "tags": ["Spring Sale", "q2", 7]}]}`,
			"Launch", []string{"Spring Sale", "q2"}},
		{"bitly csv", "id,link,long_url,title,tags\nbit.ly/3AbcDeF,https://bit.ly/3AbcDeF,https://example.com/a,\"Launch, v2\",\"spring sale, q2\"\n",
			"Launch, v2", []string{"spring sale", "q2"}},
		{"shlink csv", "createdAt,shortUrl,shortCode,longUrl,title,tags,visits\n2024-01-01,https://s.test/abcd,abcd,https://example.com/a,Launch,spring|q2|,3\n",
			"Launch", []string{"spring", "q2"}},
		{"shlink json", `{"shortUrls": {"data": [{"shortCode": "abcd", "longUrl": "https://example.com/a", "title": null, "tags": ["a", "b"]}]}}`,
			"", []string{"a", "b"}},
		{"yourls headless", "abcd,https://example.com/a,Its title,2020-01-01,::1,0\n", "Its title", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Auto
			if strings.HasPrefix(tc.name, "yourls") {
				f = YOURLS
			}
			rd, err := NewReader(strings.NewReader(tc.input), f)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := rd.Next()
			if err != nil || rec.Err != nil {
				t.Fatalf("first record: %+v, %v", rec, err)
			}
			if rec.Title != tc.title || !slices.Equal(rec.Tags, tc.tags) {
				t.Errorf("title %q tags %q; want %q %q", rec.Title, rec.Tags, tc.title, tc.tags)
			}
			if _, err := rd.Next(); !errors.Is(err, io.EOF) {
				t.Errorf("after the one record: %v; want EOF", err)
			}
		})
	}
}

// TestImportCarriesTitlesAndTags: the links made have the export's titles
// and tags, normalized; a tag that cannot be one here, tags past 20 and a
// title past 256 characters cost the link nothing and are reported.
func TestImportCarriesTitlesAndTags(t *testing.T) {
	e := newAPIEnv(t)
	c, _ := e.client(t, "importer")
	many := make([]string, 22)
	for i := range many {
		many[i] = "t" + string(rune('a'+i))
	}
	input := "createdAt,shortUrl,shortCode,longUrl,title,tags,visits\n" +
		"2024-01-01,https://s.test/one-1,one-1,https://example.com/1,Launch,Spring Sale|Q2,3\n" +
		"2024-01-01,https://s.test/two-2,two-2,https://example.com/2,\"" + strings.Repeat("é", 300) + "\",c++|ok|#hash,3\n" +
		"2024-01-01,https://s.test/three-3,three-3,https://example.com/3,\"line\nbreak\"," + strings.Join(many, "|") + ",3\n"
	sum, err := runImport(t, input, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Kept != 3 {
		t.Fatalf("%d kept of 3: %+v", sum.Kept, sum.Outcomes)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		code, title string
		tags        []string
		reason      string
	}{
		{"one-1", "Launch", []string{"q2", "spring-sale"}, ""},
		{"two-2", strings.Repeat("é", 256), []string{"ok"}, `tags dropped: ["c++" "#hash"]; title cut from 300 to 256 characters`},
		{"three-3", "line break", many[:20], `tags dropped: ["tu" "tv"]`},
	} {
		l, err := c.Get(ctx, tc.code)
		if err != nil {
			t.Fatal(err)
		}
		if l.Title == nil || *l.Title != tc.title || !slices.Equal(l.Tags, tc.tags) {
			t.Errorf("%s: title %v tags %q; want %q %q", tc.code, l.Title, l.Tags, tc.title, tc.tags)
		}
		for _, o := range sum.Outcomes {
			if o.OldCode == tc.code && o.Reason != tc.reason {
				t.Errorf("%s: reason %q; want %q", tc.code, o.Reason, tc.reason)
			}
		}
	}
	// Run again: the same requests, replayed, nothing new.
	again, err := runImport(t, input, c, Options{})
	if err != nil || again.Replayed != again.Chunks || again.Kept != 3 {
		t.Errorf("second run: %+v, %v; want every chunk replayed", again, err)
	}
}
