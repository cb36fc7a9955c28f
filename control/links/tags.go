package links

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgelink/edgelink/shared/link"
)

// Link is a link as its creator reads it: the link the edges serve, and
// what only its creator sees, its title and tags. Edges never see either:
// neither is in a change event.
type Link struct {
	link.Link
	// Title is the creator's name for the link; empty for none.
	Title string `json:",omitempty"`
	// Tags are the link's tags, normalized (NormalizeTags) and sorted;
	// nil for none.
	Tags []string `json:",omitempty"`
	// DomainID and Domain (its host) are the domain the link's code is on.
	DomainID link.DomainID `json:",omitempty"`
	Domain   string        `json:",omitempty"`
	// PasswordProtected reports that the link has a password, whether or
	// not its hash (Extras.PasswordHash, which reads and stored answers
	// never carry) is at hand.
	PasswordProtected bool `json:",omitempty"`
}

// Tag and title limits.
const (
	// MaxTags bounds a link's tags.
	MaxTags = 20
	// MaxTagLen bounds a tag, in characters.
	MaxTagLen = 64
	// MaxTitleLen bounds a title, in characters.
	MaxTitleLen = 256
)

// NormalizeTag is tag as it is stored and compared, as Shlink and Dub
// treat tags: spaces at either end dropped, lower case (Unicode), every run
// of spaces inside one '-'. What remains must be 1 to MaxTagLen letters,
// digits (any script), '-', '_', '.' or ':'; anything else is
// link.ErrInvalidInput saying why (combining marks may follow a letter or
// digit). So "Summer Sale" and "summer-sale" are one tag.
func NormalizeTag(tag string) (string, error) {
	if !utf8.ValidString(tag) {
		return "", fmt.Errorf("%w: tag is not valid UTF-8", link.ErrInvalidInput)
	}
	var b strings.Builder
	space := false
	for _, r := range strings.TrimSpace(tag) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte('-')
			space = false
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsMark(r) && b.Len() > 0:
			// A combining accent of the letter before it: "é" may come
			// decomposed. Tags are not Unicode-normalized, so the
			// composed and the decomposed spellings are two tags.
			b.WriteRune(r)
		case r == '-' || r == '_' || r == '.' || r == ':':
			b.WriteRune(r)
		default:
			return "", fmt.Errorf("%w: tag %.40q holds %q: a tag is letters, digits, '-', '_', '.' and ':' (spaces become '-')", link.ErrInvalidInput, tag, r)
		}
	}
	out := b.String()
	if n := utf8.RuneCountInString(out); n == 0 || n > MaxTagLen {
		return "", fmt.Errorf("%w: a tag is 1 to %d characters, not %d (%.40q)", link.ErrInvalidInput, MaxTagLen, n, tag)
	}
	return out, nil
}

// NormalizeTags normalizes each tag (NormalizeTag) and returns them sorted,
// each once; nil for none. More than max distinct tags is
// link.ErrInvalidInput.
func NormalizeTags(tags []string, max int) ([]string, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		n, err := NormalizeTag(t)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > max {
		return nil, fmt.Errorf("%w: at most %d tags, not %d", link.ErrInvalidInput, max, len(out))
	}
	return out, nil
}

// checkTitle accepts a title of at most MaxTitleLen characters with no
// control characters (a title is one line); empty is none.
func checkTitle(title string) error {
	if !utf8.ValidString(title) {
		return fmt.Errorf("%w: title is not valid UTF-8", link.ErrInvalidInput)
	}
	if n := utf8.RuneCountInString(title); n > MaxTitleLen {
		return fmt.Errorf("%w: title is at most %d characters, not %d", link.ErrInvalidInput, MaxTitleLen, n)
	}
	for i, r := range title {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("%w: title holds control character %U at byte %d; a title is one line of text", link.ErrInvalidInput, r, i)
		}
	}
	return nil
}

// MaxSearchLen bounds a search term.
const MaxSearchLen = 100

// TagChange is a bulk change of tags: Add and Remove on every one of Codes.
type TagChange struct {
	// Domain is the host Codes are on; "" for the platform's.
	Domain string
	Codes  []string
	Add    []string
	Remove []string
}

// TagLinks adds c.Add and removes c.Remove on each of the tenant's links
// in c.Codes (a tag both added and removed is refused), all or nothing, and
// returns the links as they are then, in the order of c.Codes. Tags are
// normalized first. At most MaxBatch codes, each once. An unknown code,
// another tenant's or a deleted link's is link.ErrNotFound naming the
// codes; a link that would carry more than MaxTags tags is
// link.ErrInvalidInput naming it; nothing is changed in either case. Tags
// change no link's version: edges never see them.
func (s *Service) TagLinks(ctx context.Context, tenantID int64, c TagChange) ([]*Link, error) {
	d, err := s.domainFor(ctx, tenantID, c.Domain, false)
	if err != nil {
		return nil, err
	}
	if len(c.Codes) == 0 || len(c.Codes) > MaxBatch {
		return nil, fmt.Errorf("%w: codes must hold 1 to %d codes, not %d", link.ErrInvalidInput, MaxBatch, len(c.Codes))
	}
	seen := make(map[string]bool, len(c.Codes))
	for _, code := range c.Codes {
		if seen[code] {
			return nil, fmt.Errorf("%w: code %.40q is listed twice", link.ErrInvalidInput, code)
		}
		seen[code] = true
		if !link.ValidCodeSyntax(code) {
			return nil, fmt.Errorf("%w: no link %.40q", link.ErrNotFound, code)
		}
	}
	add, err := NormalizeTags(c.Add, MaxTags)
	if err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	remove, err := NormalizeTags(c.Remove, MaxTags)
	if err != nil {
		return nil, fmt.Errorf("remove: %w", err)
	}
	if len(add) == 0 && len(remove) == 0 {
		return nil, fmt.Errorf("%w: nothing to change; send tags to add or remove", link.ErrInvalidInput)
	}
	for _, t := range add {
		if slices.Contains(remove, t) {
			return nil, fmt.Errorf("%w: tag %q is both added and removed", link.ErrInvalidInput, t)
		}
	}
	return s.store.TagLinks(ctx, tenantID, d.ID, TagChange{Domain: c.Domain, Codes: c.Codes, Add: add, Remove: remove})
}

// checkSearch accepts a search term of at most MaxSearchLen characters
// with no control characters.
func checkSearch(q string) error {
	if q == "" {
		return nil
	}
	if !utf8.ValidString(q) || utf8.RuneCountInString(q) > MaxSearchLen {
		return fmt.Errorf("%w: q is 1 to %d characters of UTF-8", link.ErrInvalidInput, MaxSearchLen)
	}
	for _, r := range q {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: q holds control character %U", link.ErrInvalidInput, r)
		}
	}
	return nil
}
