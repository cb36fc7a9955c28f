package links

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// idnaProfile is UTS #46 as the URL Standard's "domain to ASCII" runs it:
// nontransitional (ß stays ß), bidi and joiner rules checked, hyphen
// positions and the STD3 character rules not (browsers take "a_b.example"
// and "-a.example"). hostName then keeps the result to DNS names.
var idnaProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false),
	idna.StrictDomainName(false), idna.CheckHyphens(false))

// host is a target's host as the URL Standard parses it.
type host struct {
	text string     // as the normalized URL writes it: name, dotted IPv4 or [IPv6]
	name string     // a domain without its trailing dot; "" for an address
	ip   netip.Addr // an address host; the zero Addr for a name
}

// parseHost parses the host of an http(s) URL as browsers do: "[...]" is
// IPv6; anything else is percent-decoded and mapped through IDNA, and if
// it then ends in a number it is IPv4 in any of the forms browsers take
// (0x7f.1, 2130706433, 0177.0.0.1), else a domain name.
func parseHost(s string) (host, error) {
	if strings.HasPrefix(s, "[") {
		return parseIPv6(s)
	}
	ascii, ok := plainHost(s)
	if !ok {
		var err error
		if ascii, err = idnaHost(s); err != nil {
			return host{}, err
		}
	}
	if endsInNumber(ascii) {
		ip, ok := parseIPv4(ascii)
		if !ok {
			return host{}, invalidURL("host %q ends in a number but is not an IPv4 address", s)
		}
		return host{text: ip.String(), ip: ip}, nil
	}
	name, err := hostName(s, ascii)
	if err != nil {
		return host{}, err
	}
	return host{text: ascii, name: name}, nil
}

// idnaHost is s percent-decoded, mapped through IDNA and in lower case.
func idnaHost(s string) (string, error) {
	decoded, err := percentDecodeHost(s)
	if err != nil {
		return "", err
	}
	if err := checkACELabels(s, decoded); err != nil {
		return "", err
	}
	ascii, err := idnaProfile.ToASCII(decoded)
	if err != nil || ascii == "" || !stableIDNA(ascii) {
		return "", invalidURL("host %q is not a valid domain name", s)
	}
	return strings.ToLower(ascii), nil
}

// plainHost is idnaHost for the hosts nearly every target has: ASCII
// letters, digits, '-', '_' and '.' only, no label starting with xn--.
// There IDNA maps A-Z to a-z and leaves everything else as it is, with no
// error (this profile checks neither hyphens nor lengths; hostName does),
// and nothing is percent-decoded, so the answer is s in lower case
// (FuzzPlainHost holds it to idnaHost). ok is false for any other host.
func plainHost(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	upper := false
	labelStart := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		case 'A' <= c && c <= 'Z':
			upper = true
		case c == '.':
			labelStart = i + 1
			continue
		default:
			return "", false
		}
		if i == labelStart+3 && strings.EqualFold(s[labelStart:i+1], "xn--") {
			return "", false
		}
	}
	if upper {
		return strings.ToLower(s), true
	}
	return s, true
}

// stableIDNA reports whether ascii maps to itself: the stored host is
// parsed again when it comes back, and an IDNA quirk that moved it a second
// time would move the link.
func stableIDNA(ascii string) bool {
	again, err := idnaProfile.ToASCII(ascii)
	return err == nil && again == ascii
}

// percentDecodeHost decodes the escapes browsers decode in a host
// (http://%65vil.com is evil.com), so the blocked list sees the real name.
func percentDecodeHost(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", invalidURL("host %q has a '%%' that does not start an escape", s)
		}
		n, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
		b.WriteByte(byte(n))
		i += 2
	}
	if !utf8.ValidString(b.String()) {
		return "", invalidURL("host %q decodes to bytes that are not UTF-8", s)
	}
	return b.String(), nil
}

// checkACELabels refuses a label that, once mapped (Ｘ is x, － is -),
// starts with "xn--" but is not ASCII or has nothing after the prefix.
// Browsers refuse those; x/net/idna decodes them into some other name
// (xn--locaühost- became xn--locahost-95a) or drops the label.
func checkACELabels(written, decoded string) error {
	mapped := decoded
	if isASCII(decoded) {
		mapped = strings.ToLower(decoded)
	} else {
		// UTS #46 maps code point by code point; mapping a whole label
		// would already decode it as punycode. A rune's mapping error is
		// the whole host's, which ToASCII reports.
		var b strings.Builder
		for _, r := range decoded {
			m, _ := idnaProfile.ToUnicode(string(r))
			b.WriteString(m)
		}
		mapped = b.String()
	}
	for label := range strings.SplitSeq(mapped, ".") {
		if strings.HasPrefix(label, "xn--") && (label == "xn--" || !isASCII(label)) {
			return invalidURL("host %q has a label that starts with xn-- but is not punycode", written)
		}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// hostName checks that ascii, the IDNA form of the host written as
// written, is a DNS name: letters, digits, '-' and '_' in labels of 1 to
// 63 bytes, 253 in all, and at most a trailing dot (which browsers keep, so
// it stays). It returns the name without that dot.
func hostName(written, ascii string) (string, error) {
	for i := 0; i < len(ascii); i++ {
		c := ascii[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", invalidURL("host %q is not a valid domain name (%q is not allowed)", written, c)
		}
	}
	name := strings.TrimSuffix(ascii, ".")
	if len(name) > 253 {
		return "", invalidURL("host is longer than DNS allows (253 bytes, 63 per label)")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "", invalidURL("host %q has an empty label", written)
		}
		if len(label) > 63 {
			return "", invalidURL("host is longer than DNS allows (253 bytes, 63 per label)")
		}
	}
	return name, nil
}

// endsInNumber is the URL Standard's test for a host that must parse as
// IPv4: its last label (before an optional trailing dot) is a number.
func endsInNumber(s string) bool {
	if s == "" {
		return false
	}
	s = strings.TrimSuffix(s, ".")
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true // even 08, which then fails as octal
	}
	_, ok := parseIPv4Number(last)
	return ok
}

// parseIPv4 parses an IPv4 host as the URL Standard does: one to four
// numbers (decimal, 0x hex or 0-prefixed octal), the last filling the
// remaining bytes, so 127.1 and 2130706433 are both 127.0.0.1.
func parseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var addr uint64
	for i, part := range parts {
		n, ok := parseIPv4Number(part)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			addr |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		addr |= n
	}
	return netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)}), true
}

// parseIPv4Number parses one part of an IPv4 host; values above 2^32 are
// returned as 2^32 (out of range for every part).
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	if len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s, base = s[2:], 16
	} else if len(s) >= 2 && s[0] == '0' {
		s, base = s[1:], 8
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		n = min(n*base+d, 1<<32)
	}
	return n, true
}

// parseIPv6 parses a bracketed IPv6 host and writes it as browsers do:
// lower-case hex, the first longest run of zero groups compressed, and no
// dotted IPv4 tail (::ffff:127.0.0.1 is [::ffff:7f00:1]).
func parseIPv6(s string) (host, error) {
	inner := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if strings.Contains(inner, "%") {
		// A zone (fe80::1%eth0) names an interface of the machine that
		// follows the link, never a public destination; browsers refuse it.
		return host{}, invalidURL("host %q is an IPv6 address with a zone, which browsers refuse", s)
	}
	ip, err := netip.ParseAddr(inner)
	if err != nil || !ip.Is6() {
		return host{}, invalidURL("host %q is not a valid IPv6 address", s)
	}
	return host{text: "[" + formatIPv6(ip) + "]", ip: ip}, nil
}

func formatIPv6(ip netip.Addr) string {
	a := ip.As16()
	var groups [8]uint16
	for i := range groups {
		groups[i] = uint16(a[2*i])<<8 | uint16(a[2*i+1])
	}
	// The first longest run of at least two zero groups is written "::".
	start, length := -1, 1
	for i := 0; i < 8; {
		if groups[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && groups[j] == 0 {
			j++
		}
		if j-i > length {
			start, length = i, j-i
		}
		i = j
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if i == start {
			b.WriteString("::")
			i += length - 1
			continue
		}
		if i > 0 && i != start+length {
			b.WriteByte(':')
		}
		b.WriteString(strconv.FormatUint(uint64(groups[i]), 16))
	}
	return b.String()
}
