package links

import (
	"net/netip"
	"strings"
)

// check applies the policy to a parsed host (written is the host as the
// creator wrote it, for the message).
func (p TargetPolicy) check(written string, h host) error {
	if h.ip.IsValid() {
		// An address is blocked as itself, not as a suffix: blocking
		// "0.1" must not block 10.0.0.1.
		bare := strings.Trim(h.text, "[]")
		for _, b := range p.Blocked {
			if bare == b {
				return invalidURL("the address %s is blocked", bare)
			}
		}
	} else if isBlocked(h.name, p.Blocked) {
		return invalidURL("the domain %s is blocked", h.name)
	}
	if p.AllowPrivate {
		return nil
	}
	why := privateReason(h)
	if why == "" {
		return nil
	}
	shown := "host " + h.text
	if !strings.EqualFold(strings.TrimSuffix(written, "."), strings.TrimSuffix(h.text, ".")) {
		shown = "host " + written + ", which browsers read as " + h.text + ","
	}
	return invalidURL("%s is %s: a public short link must not lead into the visitor's own machine or network, and this server does not allow private targets", shown, why)
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

// privateReason says why a host leads into the visitor's own machine or
// network, or is "" for a host that may be public. Names are judged as
// names: the server never resolves targets, so a public name whose DNS
// answers with a private address is not caught here.
func privateReason(h host) string {
	if h.ip.IsValid() {
		return addrReason(h.ip)
	}
	name := h.name
	switch {
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return "a name for the visitor's own machine"
	case hasSuffixLabel(name, "local"), hasSuffixLabel(name, "home.arpa"), hasSuffixLabel(name, "internal"):
		return "a name only the visitor's own network resolves"
	case !strings.Contains(name, "."):
		return "a single-label name, which the visitor's own network resolves"
	}
	return ""
}

func hasSuffixLabel(name, suffix string) bool {
	return name == suffix || strings.HasSuffix(name, "."+suffix)
}

type addrRange struct {
	prefix netip.Prefix
	why    string
}

// privateRanges are the addresses no public link may lead to. Read only.
var privateRanges = []addrRange{
	{netip.MustParsePrefix("0.0.0.0/8"), `in 0.0.0.0/8, which browsers send to the visitor's own machine`},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address, inside a provider's network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (where clouds serve instance metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address, which browsers send to the visitor's own machine"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// Prefixes of IPv6 addresses that carry an IPv4 address, which is where
// they lead.
var (
	mappedPrefix     = netip.MustParsePrefix("::ffff:0:0/96")
	compatiblePrefix = netip.MustParsePrefix("::/96")
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFourPrefix  = netip.MustParsePrefix("2002::/16")
)

func addrReason(ip netip.Addr) string {
	for _, r := range privateRanges {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	if !ip.Is6() {
		return ""
	}
	a := ip.As16()
	var v4 netip.Addr
	switch {
	case mappedPrefix.Contains(ip), compatiblePrefix.Contains(ip), nat64Prefix.Contains(ip):
		v4 = netip.AddrFrom4([4]byte(a[12:]))
	case sixToFourPrefix.Contains(ip):
		v4 = netip.AddrFrom4([4]byte(a[2:6]))
	default:
		return ""
	}
	if why := addrReason(v4); why != "" {
		return "an IPv6 form of " + v4.String() + ", " + why
	}
	return ""
}
