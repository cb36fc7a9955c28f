package links

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/edgelink/edgelink/shared/link"
)

// MaxURLLength bounds a target URL in bytes, before and after normalization.
// Browsers and proxies start failing around 8 KB; marketing URLs with long
// query strings stay well under 4 KB.
const MaxURLLength = 4096

// idnaProfile is the lookup profile browsers use, so the stored punycode host
// is the one a browser would resolve.
var idnaProfile = idna.Lookup

// NormalizeURL checks a target URL and returns its normalized form: scheme
// and host lower-cased, international hosts in punycode, default ports
// dropped, an empty path made "/". The server never fetches targets.
func NormalizeURL(raw string, blocked []string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("%w: url is required", link.ErrInvalidURL)
	}
	if len(raw) > MaxURLLength {
		return "", fmt.Errorf("%w: url is %d bytes, more than %d", link.ErrInvalidURL, len(raw), MaxURLLength)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("%w: control character 0x%02x at byte %d", link.ErrInvalidURL, c, i)
		}
	}
	if strings.ContainsAny(raw, " \\") {
		return "", fmt.Errorf("%w: spaces and backslashes must be percent-encoded", link.ErrInvalidURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", link.ErrInvalidURL, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: scheme must be http or https", link.ErrInvalidURL)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", fmt.Errorf("%w: url must be absolute, like https://example.com/path", link.ErrInvalidURL)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: credentials in urls are not allowed", link.ErrInvalidURL)
	}
	host, port := u.Hostname(), u.Port()
	if strings.HasPrefix(host, "[") || strings.Contains(host, ":") {
		// An IPv6 literal. A zone (fe80::1%eth0) names an interface of the
		// machine that follows the link, never a public destination, and
		// browsers refuse it: such a target could only fail.
		ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", fmt.Errorf("%w: host %q is not a valid IPv6 address without a zone", link.ErrInvalidURL, host)
		}
		host = "[" + ip.String() + "]"
	} else {
		// Invalid UTF-8 would be encoded as U+FFFD, a host nobody named;
		// the result must itself be a valid lookup name, or the stored
		// URL would fail its own validation when sent back.
		ascii, err := idnaProfile.ToASCII(strings.TrimSuffix(host, "."))
		if err == nil && ascii != "" {
			var again string
			again, err = idnaProfile.ToASCII(ascii)
			if err == nil && again != ascii {
				err = fmt.Errorf("not stable under IDNA")
			}
		}
		emptyLabel := strings.HasPrefix(ascii, ".") || strings.HasSuffix(ascii, ".") || strings.Contains(ascii, "..")
		if err != nil || ascii == "" || emptyLabel || !utf8.ValidString(host) {
			return "", fmt.Errorf("%w: host %q is not a valid domain name", link.ErrInvalidURL, host)
		}
		host = strings.ToLower(ascii)
		if !dnsLength(host) {
			return "", fmt.Errorf("%w: host is longer than DNS allows (253 bytes, 63 per label)", link.ErrInvalidURL)
		}
		if isBlocked(host, blocked) {
			return "", fmt.Errorf("%w: the domain %s is blocked", link.ErrInvalidURL, host)
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: port %q is not 1 to 65535", link.ErrInvalidURL, port)
		}
		port = strconv.Itoa(n) // 0443 is 443
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	u.Host = host
	if port != "" {
		u.Host += ":" + port
	}
	if u.Path == "" && u.RawPath == "" {
		u.Path = "/"
	}
	out := u.String()
	if len(out) > MaxURLLength {
		return "", fmt.Errorf("%w: normalized url is more than %d bytes", link.ErrInvalidURL, MaxURLLength)
	}
	return out, nil
}

// dnsLength reports whether host fits DNS: a name no resolver can look up
// is a link that can only fail.
func dnsLength(host string) bool {
	if len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) > 63 {
			return false
		}
	}
	return true
}

// isBlocked reports whether host is a blocked domain or a subdomain of one.
func isBlocked(host string, blocked []string) bool {
	for _, b := range blocked {
		if host == b || strings.HasSuffix(host, "."+b) {
			return true
		}
	}
	return false
}
