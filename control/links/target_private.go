package links

import (
	"strings"

	"github.com/edgelink/edgelink/control/privateaddr"
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
		return privateaddr.Reason(h.ip)
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
