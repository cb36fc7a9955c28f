package link

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DomainID names a domain: the host a link's short URL is on, and the
// namespace of its codes and IDs. (domain, code) is a link's key everywhere.
type DomainID uint32

// DefaultDomain is the platform's domain: it serves tenants without one of
// their own, and holds every link made before domains existed.
const DefaultDomain DomainID = 0

// MaxDomainID bounds domain numbers so that every domain's ID range fits a
// PostgreSQL bigint: (MaxDomainID+1) · 62^6 < 2^63.
const MaxDomainID DomainID = 1<<24 - 1

// idSpace is 62^6, base62.Space (not imported: shared/base62 is below this
// package in nothing, and the constant is part of the contract).
const idSpace uint64 = 62 * 62 * 62 * 62 * 62 * 62

// Each domain owns its own 62^6 IDs: domain d's IDs are
// [d·62^6 + 1, (d+1)·62^6), and a generated code is the code of the ID's
// local part, ID − d·62^6, in [1, 62^6 − 1]. The ranges are disjoint, so the
// allocator's one ID column, its audit and its exclusion constraints keep
// working unchanged, and an ID alone says which domain it belongs to.

// IDBase is the ID before domain d's first: d·62^6.
func IDBase(d DomainID) uint64 { return uint64(d) * idSpace }

// IDRange is domain d's IDs, [start, end).
func IDRange(d DomainID) (start, end uint64) { return IDBase(d) + 1, IDBase(d) + idSpace }

// SplitID returns the domain an ID belongs to and its local part (0 for a
// domain's sentinel, which is never allocated).
func SplitID(id uint64) (DomainID, uint64) { return DomainID(id / idSpace), id % idSpace }

// NamespaceOf is the allocator namespace of domain d: "default" for the
// platform's domain (as before domains), "d<number>" for the others.
func NamespaceOf(d DomainID) string {
	if d == DefaultDomain {
		return "default"
	}
	return fmt.Sprintf("d%d", d)
}

// CodeMode is how a domain turns IDs into generated codes.
type CodeMode string

const (
	// CodesSequential: base62 of the local ID (000001, 000002, ...).
	// Enumerable; the platform domain keeps it so codes issued before
	// domains existed stay what they were.
	CodesSequential CodeMode = "sequential"
	// CodesFF1: the domain's keyed permutation (shared/ff1), the default
	// for new domains. Consecutive IDs give unrelated codes.
	CodesFF1 CodeMode = "ff1"
)

// Valid reports whether m is a known mode.
func (m CodeMode) Valid() bool { return m == CodesSequential || m == CodesFF1 }

// DomainStatus is a domain's lifecycle state. A removed domain keeps its
// row (its links and ID range stay reserved) and its host answers 404.
type DomainStatus string

const (
	DomainActive  DomainStatus = "active"
	DomainRemoved DomainStatus = "removed"
)

// Domain is one domain's configuration, as control holds it and as edges
// receive it (in the snapshot and on the change stream).
type Domain struct {
	ID   DomainID `json:"id"`
	Host string   `json:"host"` // canonical (CanonicalHost)
	// TenantID owns the domain; 0 for the platform's.
	TenantID int64 `json:"tenant_id,omitempty"`
	// RootRedirect is where "/" redirects; empty: 404.
	RootRedirect string `json:"root_redirect,omitempty"`
	// NotFoundRedirect is where an unknown code redirects (302); empty: 404.
	NotFoundRedirect string `json:"not_found_redirect,omitempty"`
	// Robots is the body of /robots.txt; empty: DefaultRobots.
	Robots   string   `json:"robots,omitempty"`
	CodeMode CodeMode `json:"code_mode"`
	// KeyIDs name the domain's FF1 keys in the operator's key file,
	// current first, then earlier ones whose codes an edge must still be
	// able to rule out (docs/codes.md). Never the key bytes.
	KeyIDs  []string     `json:"key_ids,omitempty"`
	Status  DomainStatus `json:"status"`
	Version uint64       `json:"version,omitempty"`
}

// ErrDomainTaken: another domain already has the host.
var ErrDomainTaken = errors.New("domain host already taken")

// DefaultRobots is a domain's robots.txt unless it sets its own: short
// links are redirects, not pages to index.
const DefaultRobots = "User-agent: *\nDisallow: /\n"

// Limits of a domain's settings.
const (
	MaxRobotsLen = 4096
	MaxKeyIDs    = 8
	MaxKeyIDLen  = 64
)

// ErrHost is returned for a string that is not a host name a domain can
// have.
var ErrHost = errors.New("invalid host name")

var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.ValidateLabels(true), idna.StrictDomainName(true), idna.Transitional(false))

// CanonicalHost returns the one spelling of a host that names a domain:
// lower case, without a port or a trailing dot, an internationalized name
// in punycode (IDNA 2008 lookup rules). An IP literal is kept as it is
// (IPv6 without brackets), for local and test set-ups. It refuses
// anything else, with ErrHost.
func CanonicalHost(raw string) (string, error) {
	h := raw
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", fmt.Errorf("%w: unclosed [", ErrHost)
		}
		ip := net.ParseIP(h[1:end])
		if ip == nil || ip.To4() != nil || (end+1 < len(h) && !validPort(h[end+1:])) {
			return "", fmt.Errorf("%w: bad IPv6 literal", ErrHost)
		}
		return strings.ToLower(ip.String()), nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.To4() == nil {
		return ip.String(), nil // IPv6 without brackets: already no port
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if !validPort(h[i:]) {
			return "", fmt.Errorf("%w: bad port", ErrHost)
		}
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("%w: %d bytes", ErrHost, len(h))
	}
	if ip := net.ParseIP(h); ip != nil && ip.To4() != nil {
		return ip.String(), nil
	}
	if !utf8.ValidString(h) {
		return "", fmt.Errorf("%w: not UTF-8", ErrHost)
	}
	a, err := hostProfile.ToASCII(h)
	if err != nil || a == "" || len(a) > 253 || !asciiHost(a) {
		return "", fmt.Errorf("%w: not a domain name", ErrHost)
	}
	// The result must name itself: a label the mapping repaired (an
	// unpaired byte, a disallowed rune) could encode to punycode that does
	// not decode back, and edges look hosts up by this exact string.
	if again, err := hostProfile.ToASCII(a); err != nil || again != a {
		return "", fmt.Errorf("%w: not a domain name", ErrHost)
	}
	return a, nil
}

func validPort(p string) bool {
	if len(p) < 2 || len(p) > 6 || p[0] != ':' {
		return false
	}
	for i := 1; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// asciiHost reports whether h is lower-case letters, digits, '-' and '.',
// in labels of 1 to 63 bytes.
func asciiHost(h string) bool {
	label := 0
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		default:
			return false
		}
		if label++; label > 63 {
			return false
		}
	}
	return label > 0
}

// AppendHostKey writes into dst the canonical form of a request's Host
// header when it is plain ASCII (lower-cased, port and trailing dot
// removed), the form every browser sends, without allocating when dst has
// room. ok is false when the header needs CanonicalHost (non-ASCII, an
// IPv6 literal) or cannot be a host at all; the edge then takes the slow
// path or answers 404.
func AppendHostKey(dst, host []byte) (out []byte, ok bool) {
	if len(host) == 0 || host[0] == '[' {
		return dst, false
	}
	end := len(host)
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			if i == len(host)-1 || len(host)-i > 6 {
				return dst, false
			}
			end = i
			break
		}
		if host[i] < '0' || host[i] > '9' {
			break
		}
	}
	if end > 0 && host[end-1] == '.' {
		end--
	}
	if end == 0 || end > 253 {
		return dst, false
	}
	for _, c := range host[:end] {
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
		default:
			return dst, false
		}
		dst = append(dst, c)
	}
	return dst, true
}
