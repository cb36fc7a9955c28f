// Package privateaddr says which IP addresses are not on the public
// internet: the one table that a link's target and a webhook's endpoint
// are both judged by, so that a range added for one protects the other.
package privateaddr

import "net/netip"

// ranges are the addresses that lead into a machine itself or a private
// network rather than to a public host. Read only.
var ranges = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "in 0.0.0.0/8, which clients send to their own machine"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address, inside a provider's network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (where clouds serve instance metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address, which clients send to their own machine"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// IPv6 prefixes that carry an IPv4 address, which is where they lead: an
// attacker who cannot write 127.0.0.1 writes ::ffff:7f00:1 or 2002:7f00:1::.
var (
	v4Mapped     = netip.MustParsePrefix("::ffff:0:0/96")
	v4Compatible = netip.MustParsePrefix("::/96")
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
)

// Reason says why ip is not a public address, or "" when it is. An IPv6
// address that embeds an IPv4 one is judged by the IPv4 address too.
func Reason(ip netip.Addr) string {
	ip = ip.WithZone("")
	for _, r := range ranges {
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
	case v4Mapped.Contains(ip), v4Compatible.Contains(ip), nat64.Contains(ip):
		v4 = netip.AddrFrom4([4]byte(a[12:]))
	case sixToFour.Contains(ip):
		v4 = netip.AddrFrom4([4]byte(a[2:6]))
	default:
		return ""
	}
	if why := Reason(v4); why != "" {
		return "an IPv6 form of " + v4.String() + ", " + why
	}
	return ""
}
