package links

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/edgelink/edgelink/shared/link"
)

// MaxURLLength bounds a target URL in bytes, before and after normalization.
// Browsers and proxies start failing around 8 KB; marketing URLs with long
// query strings stay well under 4 KB.
const MaxURLLength = 4096

// TargetPolicy is an operator's rules for targets on top of their syntax.
// The zero value blocks no domain and refuses private targets.
type TargetPolicy struct {
	// Blocked are domains refused with their subdomains, lower-case ASCII
	// (punycode) without a trailing dot; an IP address in its canonical
	// form blocks that address however it is written.
	Blocked []string
	// AllowPrivate accepts targets that lead into the visitor's own machine
	// or network (see privateReason): for a shortener serving one intranet,
	// never a public one.
	AllowPrivate bool
}

// NormalizeURL checks a target URL and returns the form that is stored and
// sent in Location: the href the WHATWG URL Standard's parser (what every
// browser runs) gives raw. So the stored URL takes a browser exactly where
// raw would, and NormalizeURL of it returns it unchanged. That form has the
// scheme and host in lower case, international hosts in punycode, numeric
// hosts as dotted IPv4 or compressed IPv6, default ports dropped, dot
// segments resolved, and non-ASCII (as UTF-8) and the characters browsers
// escape in each part percent-encoded.
//
// Whatever a browser would read differently from a plain reading is refused
// rather than repaired: control characters, spaces and backslashes, a
// missing "//", credentials, stray '%', invalid UTF-8 or U+FFFD. So are
// hosts that are not DNS names or IP addresses, the policy's blocked
// domains and, unless it allows them, private targets. Every error wraps
// link.ErrInvalidURL and says why. The server never fetches targets.
func NormalizeURL(raw string, p TargetPolicy) (string, error) {
	if raw == "" {
		return "", invalidURL("url is required")
	}
	if len(raw) > MaxURLLength {
		return "", invalidURL("url is %d bytes, more than %d", len(raw), MaxURLLength)
	}
	if err := checkCharacters(raw); err != nil {
		return "", err
	}
	scheme, rest, ok := cutScheme(raw)
	if !ok {
		return "", invalidURL("url must be absolute, like https://example.com/path")
	}
	if scheme != "http" && scheme != "https" {
		return "", invalidURL("scheme must be http or https")
	}
	// Browsers also take "https:example.com" and "https:///example.com"
	// for https://example.com/; a creator who wrote either meant something
	// else, or meant to confuse a reader.
	rest, ok = strings.CutPrefix(rest, "//")
	if !ok || strings.HasPrefix(rest, "/") {
		return "", invalidURL("url must be absolute, like https://example.com/path")
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if strings.Contains(authority, "@") {
		return "", invalidURL("credentials in urls are not allowed (a reader sees the part before '@', the browser goes to the host after it)")
	}
	hostText, portText, err := splitHostPort(authority)
	if err != nil {
		return "", err
	}
	h, err := parseHost(hostText)
	if err != nil {
		return "", err
	}
	if err := p.check(hostText, h); err != nil {
		return "", err
	}
	port, err := parsePort(portText, scheme)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(raw) + 16)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(h.text)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	if err := writePathQueryFragment(&b, tail); err != nil {
		return "", err
	}
	if b.Len() > MaxURLLength {
		return "", invalidURL("normalized url is more than %d bytes", MaxURLLength)
	}
	return b.String(), nil
}

// normalizeURL normalizes a target under the service's policy.
func (s *Service) normalizeURL(raw string) (string, error) {
	return NormalizeURL(raw, TargetPolicy{Blocked: s.cfg.BlockedDomains, AllowPrivate: s.cfg.AllowPrivateTargets})
}

func invalidURL(format string, args ...any) error {
	return fmt.Errorf("%w: %s", link.ErrInvalidURL, fmt.Sprintf(format, args...))
}

// checkCharacters refuses what browsers silently drop or rewrite (tabs and
// newlines vanish, leading spaces are trimmed, '\' becomes '/'), so a
// reader of the URL and a browser could disagree about where it goes; and
// invalid UTF-8 or U+FFFD, which mark bytes the creator did not send as
// text (the JSON decoder puts U+FFFD where bytes were not UTF-8).
func checkCharacters(raw string) error {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return invalidURL("control character 0x%02x at byte %d", c, i)
		case c == ' ':
			return invalidURL("space at byte %d: spaces must be percent-encoded (%%20)", i)
		case c == '\\':
			return invalidURL("backslash at byte %d: browsers read it as '/' before the query; percent-encode it (%%5C)", i)
		case c < utf8.RuneSelf:
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(raw[i:])
		if r == utf8.RuneError {
			if size == 1 {
				return invalidURL("url is not valid UTF-8 (byte 0x%02x at %d)", c, i)
			}
			return invalidURL("url carries U+FFFD at byte %d, the mark left where bytes were not UTF-8; send the url as UTF-8", i)
		}
		i += size
	}
	return nil
}

// cutScheme splits "scheme:rest" with the scheme in lower case, as the
// URL Standard reads it; ok is false for a URL without one.
func cutScheme(raw string) (scheme, rest string, ok bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.ToLower(raw[:i]), raw[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// splitHostPort splits an authority without userinfo at the first ':'
// outside brackets, as browsers do.
func splitHostPort(authority string) (host, port string, err error) {
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", invalidURL("host %q has no closing ']'", authority)
		}
		host, after := authority[:end+1], authority[end+1:]
		if after == "" {
			return host, "", nil
		}
		port, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", "", invalidURL("%q after the IPv6 address %s is not a port", after, host)
		}
		return host, port, nil
	}
	host, port, _ = strings.Cut(authority, ":")
	if host == "" {
		return "", "", invalidURL("url has no host")
	}
	return host, port, nil
}

// parsePort returns the port as written in the normalized URL: "" for
// none or the scheme's default, else the number without leading zeros.
func parsePort(s, scheme string) (string, error) {
	if s == "" {
		return "", nil // "example.com:" has no port
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return "", invalidURL("port %q is not a number from 1 to 65535", s)
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return "", invalidURL("port %q is not a number from 1 to 65535", s)
		}
	}
	if n == 0 {
		return "", invalidURL("port %q is not a number from 1 to 65535", s)
	}
	if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
		return "", nil
	}
	return strconv.Itoa(n), nil
}

// Which bytes the URL Standard percent-encodes (beyond C0 controls, space
// and non-ASCII, which are refused or always encoded) in each part of an
// http(s) URL. These are the sets Node's parser (ada) applies, checked by
// TestNormalizeURLAgainstWHATWG.
var (
	pathEncoded     = byteSet("\"<>`{}")
	queryEncoded    = byteSet("\"<>'")
	fragmentEncoded = byteSet("\"<>`")
)

// encodeSet says which bytes a part percent-encodes: every non-ASCII
// byte, and those its characters name. Read only.
type encodeSet [256]bool

func byteSet(chars string) *encodeSet {
	var s encodeSet
	for c := utf8.RuneSelf; c < 256; c++ {
		s[c] = true
	}
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return &s
}

// writePathQueryFragment appends the serialized path, query and fragment
// of tail, which is empty or starts with '/', '?' or '#'.
func writePathQueryFragment(b *strings.Builder, tail string) error {
	path, query, fragment := tail, "", ""
	hasQuery, hasFragment := false, false
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path, fragment, hasFragment = path[:i], path[i+1:], true
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query, hasQuery = path[:i], path[i+1:], true
	}
	for _, part := range [...]struct{ name, s string }{{"path", path}, {"query", query}, {"fragment", fragment}} {
		if err := checkEscapes(part.name, part.s); err != nil {
			return err
		}
	}
	writePath(b, path)
	if hasQuery {
		b.WriteByte('?')
		percentEncode(b, query, queryEncoded)
	}
	if hasFragment {
		b.WriteByte('#')
		percentEncode(b, fragment, fragmentEncoded)
	}
	return nil
}

// checkEscapes refuses a '%' that does not start an escape: browsers send
// it as it is, and servers answer it with an error or read it differently.
func checkEscapes(part, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return invalidURL("a '%%' in the %s does not start an escape like %%25", part)
		}
	}
	return nil
}

// writePath appends path ("" or starting with '/') with its dot segments
// resolved as the URL Standard's path state does: "." and ".." (also
// written %2e) name the segment itself and its parent, never anything
// above the root, and a trailing one leaves a trailing '/'.
func writePath(b *strings.Builder, path string) {
	if path == "" {
		b.WriteByte('/')
		return
	}
	if !hasDotSegment(path) {
		// '/' is encoded in no segment, so the path is encoded whole.
		percentEncode(b, path, pathEncoded)
		return
	}
	segs := strings.Split(path[1:], "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case isDoubleDot(seg):
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		case isSingleDot(seg):
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	for _, seg := range out {
		b.WriteByte('/')
		percentEncode(b, seg, pathEncoded)
	}
}

// hasDotSegment reports whether a segment of path (which starts with '/')
// is a dot segment.
func hasDotSegment(path string) bool {
	for i := 1; i <= len(path); {
		j := strings.IndexByte(path[i:], '/')
		if j < 0 {
			j = len(path) - i
		}
		if seg := path[i : i+j]; len(seg) <= 6 && (isSingleDot(seg) || isDoubleDot(seg)) {
			return true
		}
		i += j + 1
	}
	return false
}

func isSingleDot(s string) bool { return s == "." || strings.EqualFold(s, "%2e") }

func isDoubleDot(s string) bool {
	switch strings.ToLower(s) {
	case "..", ".%2e", "%2e.", "%2e%2e":
		return true
	}
	return false
}

// percentEncode appends s with the bytes of set percent-encoded
// (upper-case hex, as browsers write it); existing escapes stay as
// written.
func percentEncode(b *strings.Builder, s string, set *encodeSet) {
	const hex = "0123456789ABCDEF"
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !set[c] {
			continue
		}
		b.WriteString(s[start:i])
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
		start = i + 1
	}
	b.WriteString(s[start:])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
