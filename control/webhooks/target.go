package webhooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/edgelink/edgelink/control/privateaddr"
	"github.com/edgelink/edgelink/shared/link"
)

// TargetPolicy is where control may send webhooks. By default only to
// https URLs on public addresses: an endpoint URL is a request control
// makes from inside the operator's network, so a tenant must not be able
// to point it at the metadata service, a database or control itself.
// Names are checked when an endpoint is saved, and the addresses they
// resolve to at every connection (Dialer), so DNS that changes later, or
// answers differently on the second lookup, is caught too.
type TargetPolicy struct {
	// AllowHTTP accepts http:// URLs (development, loopback receivers).
	AllowHTTP bool
	// AllowPrivate accepts loopback, private, link-local and other
	// non-public addresses, and names like localhost.
	AllowPrivate bool
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", link.ErrInvalidInput, fmt.Sprintf(format, args...))
}

// CheckURL returns raw as it is stored, or an error wrapping
// link.ErrInvalidInput saying what is wrong with it.
func (p TargetPolicy) CheckURL(raw string) (string, error) {
	switch {
	case raw == "":
		return "", invalid("url is empty")
	case len(raw) > MaxURLLen:
		return "", invalid("url is %d bytes; at most %d", len(raw), MaxURLLen)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return "", invalid("url has a space, a control or a non-ASCII character at byte %d; percent-encode it (and write an IDN host in punycode)", i)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", invalid("url does not parse: %v", errors.Unwrap(err))
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !p.AllowHTTP {
			return "", invalid("url must be https; this server does not send webhooks over plain http")
		}
	default:
		return "", invalid("url must be an https URL, not %.20q", u.Scheme)
	}
	switch {
	case u.Opaque != "" || u.Host == "":
		return "", invalid("url has no host")
	case u.User != nil:
		return "", invalid("url must not carry a user or password; authenticate the webhook by its signature")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", invalid("url must not have a fragment (#…)")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", invalid("url port %.10q is not 1 to 65535", port)
		}
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return "", invalid("url has no host")
	}
	if why := p.hostReason(host); why != "" {
		return "", invalid("url host %s is %s; webhooks go to public addresses only", host, why)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u.String(), nil
}

// hostReason says why host is not a public destination, or "".
func (p TargetPolicy) hostReason(host string) string {
	if p.AllowPrivate {
		return ""
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return privateaddr.Reason(ip)
	}
	// Names that are numbers in disguise (0x7f.1, 2130706433): resolvers
	// and browsers may read them as addresses.
	if last := host[strings.LastIndexByte(host, '.')+1:]; last != "" && last[0] >= '0' && last[0] <= '9' {
		return "a number, not a name (write an address in dotted form)"
	}
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return "a name of the machine itself"
	case hasLabelSuffix(host, "local"), hasLabelSuffix(host, "internal"), hasLabelSuffix(host, "home.arpa"), hasLabelSuffix(host, "lan"):
		return "a name only a private network resolves"
	case !strings.Contains(host, "."):
		return "a single-label name, which only a private network resolves"
	}
	return ""
}

func hasLabelSuffix(name, suffix string) bool {
	return name == suffix || strings.HasSuffix(name, "."+suffix)
}

// RefusedError is a connection the policy refused: the address a name
// resolved to is not public.
type RefusedError struct {
	Addr string
	Why  string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s (webhooks go to public addresses only)", e.Addr, e.Why)
}

// control is a net.Dialer's Control: it runs for each address a connection
// is about to be made to, after DNS, so it judges where the bytes go.
func (p TargetPolicy) control(network, address string, _ syscall.RawConn) error {
	if p.AllowPrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return &RefusedError{Addr: address, Why: "not an address and port"}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return &RefusedError{Addr: address, Why: "not an IP address"}
	}
	if why := privateaddr.Reason(ip.Unmap()); why != "" {
		return &RefusedError{Addr: host, Why: why}
	}
	return nil
}
