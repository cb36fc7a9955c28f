// Package clientip says which client a request came from, for the edge's
// per-client 404 budget: the socket's peer, or, when that peer is one of
// the operator's trusted proxies, the address it forwarded in
// X-Forwarded-For. (A PROXY protocol header is read by the listener
// instead, which then reports the client as the socket's peer.) It also
// says whether a connection comes from a trusted proxy at all (Proxied),
// whose X-Forwarded-Host the edge then takes for the request's host.
//
// Only trusted proxies are believed: anyone else can write any
// X-Forwarded-For (or X-Forwarded-Host) they like, and would spend someone
// else's budget or escape their own (or reach another domain's links).
package clientip

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unsafe"
)

// Resolver is safe for concurrent use. The zero value trusts no proxy.
type Resolver struct {
	trusted []netip.Prefix
}

// New trusts the proxies in the prefixes. Each entry is a CIDR
// ("10.0.0.0/8") or a single address ("192.0.2.7").
func New(trusted []string) (*Resolver, error) {
	r := &Resolver{}
	for _, s := range trusted {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q: not an address or CIDR", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		r.trusted = append(r.trusted, netip.PrefixFrom(p.Addr().Unmap(), min(p.Bits(), p.Addr().Unmap().BitLen())).Masked())
	}
	return r, nil
}

// Trusted reports whether a is one of the trusted proxies.
func (r *Resolver) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Proxied reports whether conn comes from a trusted proxy: its socket's
// peer is one. Under a PROXY protocol header (a connection exposing the
// socket as Raw, as go-proxyproto's does), the header's address stands for
// the client, so the socket beneath is the one checked. It does not
// allocate for a TCP connection.
func (r *Resolver) Proxied(conn net.Conn) bool {
	if len(r.trusted) == 0 || conn == nil {
		return false
	}
	if p, ok := conn.(interface{ Raw() net.Conn }); ok && p.Raw() != nil {
		conn = p.Raw()
	}
	return r.TrustedAddr(conn.RemoteAddr())
}

// TrustedAddr is Trusted for a socket address (false for one that is not
// IP).
func (r *Resolver) TrustedAddr(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return r.Trusted(a.AddrPort().Addr())
	case nil:
		return false
	default:
		ap, err := netip.ParseAddrPort(a.String())
		return err == nil && r.Trusted(ap.Addr())
	}
}

// Client is the client behind a request from peer that carried the
// X-Forwarded-For values xff (every header's, in order). Without trusted
// proxies, or from a peer that is not one, it is peer itself. From a trusted
// peer it walks the forwarded list from the right (the hop nearest to us)
// past every trusted proxy, and the first address that is not one is the
// client; if the list ends, or an entry does not parse, before one is
// found, the last trusted hop stands for the client.
func (r *Resolver) Client(peer net.IP, xff [][]byte) netip.Addr {
	addr, _ := netip.AddrFromSlice(peer)
	addr = addr.Unmap()
	if len(r.trusted) == 0 || !r.Trusted(addr) {
		return addr
	}
	for i := len(xff) - 1; i >= 0; i-- {
		list := xff[i]
		for len(list) > 0 {
			j := bytes.LastIndexByte(list, ',')
			entry := bytes.TrimSpace(list[j+1:])
			if j < 0 {
				list = nil
			} else {
				list = list[:j]
			}
			if len(entry) == 0 {
				continue
			}
			hop, ok := parseHop(entry)
			if !ok {
				return addr
			}
			if !r.Trusted(hop) {
				return hop
			}
			addr = hop
		}
	}
	return addr
}

// parseHop reads one X-Forwarded-For entry: an address, or an address with
// a port ("192.0.2.1:4711", "[2001:db8::1]:4711"), as some proxies write.
// A zone ("fe80::1%eth0") is no client's: refused. It does not allocate
// for a valid entry: the edge resolves the client of every redirect (for
// its click's country and visitor hash), not only of 404s.
func parseHop(b []byte) (netip.Addr, bool) {
	if len(b) == 0 || bytes.IndexByte(b, '%') >= 0 {
		return netip.Addr{}, false
	}
	// The bytes are read in place, not copied into a string: neither
	// parser keeps its input once it has returned an address (zones, the
	// one part an Addr would keep, are refused above), and the errors
	// that hold it are dropped here.
	s := unsafe.String(&b[0], len(b))
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
