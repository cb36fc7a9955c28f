package clickroll

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// UTM is the UTM parameters of a link's target: the campaign it is
// attributed to. Empty fields were not in the target's query.
type UTM struct{ Source, Medium, Campaign string }

// MaxUTMLen is the most bytes of a UTM value kept (cut at a character
// boundary): enough for any real campaign name, bounded for the rollups.
const MaxUTMLen = 100

// UTMOf reads the UTM parameters from target's query string (the first
// value of each; decoded, control characters dropped, surrounding space
// trimmed, cut to MaxUTMLen). A target without a query, or one that does
// not parse, has none.
func UTMOf(target string) UTM {
	i := strings.IndexByte(target, '?')
	if i < 0 || !strings.Contains(target[i:], "utm_") {
		return UTM{}
	}
	q := target[i+1:]
	if j := strings.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	// ParseQuery keeps the pairs it could decode when another is bad.
	v, _ := url.ParseQuery(q)
	return UTM{Source: utmValue(v.Get("utm_source")), Medium: utmValue(v.Get("utm_medium")), Campaign: utmValue(v.Get("utm_campaign"))}
}

func utmValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > MaxUTMLen {
		s = s[:MaxUTMLen]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// Empty reports whether u names nothing.
func (u UTM) Empty() bool { return u == UTM{} }
