package links

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/edgelink/edgelink/shared/link"
)

func TestNormalizeTags(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		err  string
	}{
		{[]string{"Summer Sale", " summer   sale ", "SUMMER-SALE"}, []string{"summer-sale"}, ""},
		{[]string{"b", "a", "B"}, []string{"a", "b"}, ""},
		{[]string{"Été", "日本", "v1.2:beta_x"}, []string{"v1.2:beta_x", "été", "日本"}, ""},
		{[]string{"tab\there"}, []string{"tab-here"}, ""},
		{[]string{"Cafe\u0301"}, []string{"cafe\u0301"}, ""}, // a decomposed é
		{[]string{"\u0301a"}, nil, "holds"},                  // a mark on nothing
		{nil, nil, ""},
		{[]string{""}, nil, "1 to 64 characters, not 0"},
		{[]string{"   "}, nil, "1 to 64 characters, not 0"},
		{[]string{strings.Repeat("é", 64)}, []string{strings.Repeat("é", 64)}, ""},
		{[]string{strings.Repeat("é", 65)}, nil, "not 65"},
		{[]string{"c++"}, nil, "holds '+'"},
		{[]string{"a,b"}, nil, "holds ','"},
		{[]string{"<b>"}, nil, "holds '<'"},
		{[]string{"a\x00"}, nil, "holds '\\x00'"},
		{[]string{"bad\xff"}, nil, "not valid UTF-8"},
		{[]string{"a\u200bb"}, nil, "holds"}, // a zero-width space is no space and no letter
	} {
		got, err := NormalizeTags(tc.in, MaxTags)
		if tc.err != "" {
			if err == nil || !errors.Is(err, link.ErrInvalidInput) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("NormalizeTags(%q) = %q, %v; want an invalid-input error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("NormalizeTags(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	many := make([]string, 21)
	for i := range many {
		many[i] = strings.Repeat("x", i+1)
	}
	if _, err := NormalizeTags(many, MaxTags); err == nil || !strings.Contains(err.Error(), "at most 20 tags, not 21") {
		t.Errorf("21 tags: %v", err)
	}
	if got, err := NormalizeTags(append(many[:20:20], "X"), MaxTags); err != nil || len(got) != 20 {
		t.Errorf("20 tags and a duplicate of one: %q, %v; want the 20", got, err)
	}
}

// TestRequestHashWithoutMetaIsUnchanged: a create without title and tags
// hashes as it did before links had them, so an idempotency key stored
// then still matches its retry.
func TestRequestHashWithoutMetaIsUnchanged(t *testing.T) {
	l := &Link{Link: link.Link{URL: "https://example.com/a", RedirectType: 302, Namespace: "default"}}
	before := sha256.Sum256([]byte("link\x00https://example.com/a\x00never\x00302\x00my-code\x00default\x00"))
	if got := requestHash("link", l, "my-code"); string(got) != string(before[:]) {
		t.Errorf("the hash of a request without title and tags changed: %x; want %x", got, before)
	}
	l.Tags = []string{"a"}
	if got := requestHash("link", l, "my-code"); string(got) == string(before[:]) {
		t.Error("tags do not change the request's hash")
	}
	withTitle := &Link{Link: l.Link, Title: "a"}
	if string(requestHash("link", withTitle, "my-code")) == string(requestHash("link", l, "my-code")) {
		t.Error("title a and tag a hash alike")
	}
}

// FuzzNormalizeTag: a tag normalizes to one that normalizes to itself, of
// the alphabet and length the API promises; anything refused is invalid
// input.
func FuzzNormalizeTag(f *testing.F) {
	for _, s := range []string{"Summer Sale", " a  b ", "Été", "c++", "", "\xff", "a\u200bb", "İstanbul", "ǅ", strings.Repeat("x", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := NormalizeTag(s)
		if err != nil {
			if !errors.Is(err, link.ErrInvalidInput) {
				t.Fatalf("NormalizeTag(%q): %v is not invalid input", s, err)
			}
			return
		}
		if again, err := NormalizeTag(n); err != nil || again != n {
			t.Fatalf("NormalizeTag(%q) = %q, which normalizes to %q, %v", s, n, again, err)
		}
		if c := utf8.RuneCountInString(n); c < 1 || c > MaxTagLen || strings.ContainsAny(n, " ,|;") {
			t.Fatalf("NormalizeTag(%q) = %q: not a tag", s, n)
		}
	})
}
