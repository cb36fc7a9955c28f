// Package geo says which country an IP address is in, for the country of
// each click, from offline data loaded once at the edge's start: Tor's
// geoip/geoip6 files (Debian's tor-geoipdb, IPFire Location data, CC BY-SA
// 4.0) or an operator's MaxMind DB (.mmdb) file such as GeoLite2-Country or
// DB-IP's country database. Both become the same Table: sorted range starts
// searched by bisection, so a lookup costs about twenty comparisons and
// allocates nothing. The address itself is never kept or returned.
package geo

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Table maps IP ranges to country codes. It is immutable once built and
// safe for concurrent use. Tables are made by LoadTor, ReadTor and
// LoadMMDB; a nil *Table (and a zero Table) knows no address.
//
// Each family is a sorted list of boundaries: the start of a range and the
// index of its code, where index 0 is "no country" (a gap between ranges, or
// a range the data marks unknown). The country of an address is that of the
// last boundary at or below it, so adjacent ranges of one country collapse
// into one entry and a lookup is one bisection of the starts.
type Table struct {
	v4   []uint32 // range starts, ascending, v4[0] == 0
	v4cc []uint16 // index into codes, per start
	// IPv6 starts as their top and bottom 64 bits, apart: ranges are
	// nearly all whole /64s or wider, so a lookup bisects the top halves
	// (half the memory, one compare) and looks at a bottom half only
	// among starts with its own top half, almost never more than one.
	v6hi, v6lo []uint64
	v6cc       []uint16
	// v4at[k] counts the IPv4 starts below the address whose top 16 bits
	// are k (v4at[1<<16] all of them), so a lookup bisects only the few
	// starts that share its top 16 bits, not the ~390,000 (256 KiB; a
	// lookup took a seventh of the time with it in BenchmarkLookup). v6at
	// is the same for IPv6, where ranges crowd into a few /16s (2a10::/16
	// holds a quarter of them) and it saves less.
	v4at, v6at []uint32
	// codes are the countries seen, codes[0] unused. Two bytes of index,
	// not one: the IPFire data alone has 259 distinct codes.
	codes [][2]byte
	info  Info
}

// Info describes where a table's data came from, for the start-up log.
type Info struct {
	// Source names the format and the files ("tor geoip: /a/geoip,
	// /a/geoip6" or "mmdb GeoLite2-Country: /a/GeoLite2-Country.mmdb").
	Source string
	// Generated is when the data was made: the "Generated:" line of a Tor
	// file's header, or an mmdb's build epoch; zero when the data does not
	// say.
	Generated time.Time
	// V4Ranges and V6Ranges count the ranges read that name a country;
	// Unknown those read that name none ("??" in Tor's files, a record
	// without a country code in an mmdb).
	V4Ranges, V6Ranges, Unknown int
	// Countries counts the distinct codes.
	Countries int
	// Entries is the table's size in boundaries (both families), after
	// adjacent ranges of one country are merged.
	Entries int
	// Load is how long reading and building took.
	Load time.Duration
}

// Info says where the table's data came from (zero for a nil table).
func (t *Table) Info() Info {
	if t == nil {
		return Info{}
	}
	return t.info
}

// Lookup returns the country of addr: an ISO 3166-1 alpha-2 code in upper
// case as the data has it (which includes a few codes the registries use
// for blocks not placed in one country, EU and AP), and ok false for an
// address the data places in no country (private, reserved, unallocated,
// or marked unknown) and for the zero Addr. An IPv4-mapped IPv6 address is
// looked up as the IPv4 address it maps. It does not allocate.
func (t *Table) Lookup(addr netip.Addr) (cc [2]byte, ok bool) {
	if t == nil || t.v4at == nil { // nil, or a zero Table not built by this package
		return cc, false
	}
	var i uint16
	switch {
	case addr.Is4() || addr.Is4In6():
		b := addr.Unmap().As4()
		x := binary.BigEndian.Uint32(b[:])
		// The number of starts at or below x: those below x's top 16 bits,
		// and those at or below x among the ones that share them. The
		// first start is 0, so it is at least 1.
		k := x >> 16
		from, to := t.v4at[k], t.v4at[k+1]
		n := int(from) + search32(t.v4[from:to], x)
		i = t.v4cc[n-1]
	case addr.Is6():
		b := addr.As16()
		hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
		k := hi >> 48
		from, to := t.v6at[k], t.v6at[k+1]
		// Starts whose top half is at or below hi's; when some have hi's
		// own top half (rare: a start inside the address's /64), less
		// those of them whose bottom half is above lo. Every start with
		// hi's top half shares its top 16 bits, so lies at or above from;
		// the first start is 0, so n stays at least 1.
		n := int(from) + search64(t.v6hi[from:to], hi)
		if t.v6hi[n-1] == hi {
			run := int(from) + searchBelow64(t.v6hi[from:n], hi) // the first with hi's top half
			n = run + search64(t.v6lo[run:n], lo)
		}
		i = t.v6cc[n-1]
	default:
		return cc, false
	}
	if i == 0 {
		return cc, false
	}
	return t.codes[i], true
}

// search32 is the number of elements of s (ascending) at or below x.
func search32(s []uint32, x uint32) int {
	lo, n := 0, len(s)
	for n > 0 {
		half := n >> 1
		if s[lo+half] <= x {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	return lo
}

// searchBelow64 is the number of elements of s (ascending) below x.
func searchBelow64(s []uint64, x uint64) int {
	lo, n := 0, len(s)
	for n > 0 {
		half := n >> 1
		if s[lo+half] < x {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	return lo
}

// search64 is search32 for 64-bit values.
func search64(s []uint64, x uint64) int {
	lo, n := 0, len(s)
	for n > 0 {
		half := n >> 1
		if s[lo+half] <= x {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	return lo
}

// u128 is an IPv6 address as a number.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }

// next is a+1, and false when a is the largest value.
func (a u128) next() (u128, bool) {
	if a.lo != ^uint64(0) {
		return u128{a.hi, a.lo + 1}, true
	}
	if a.hi != ^uint64(0) {
		return u128{a.hi + 1, 0}, true
	}
	return a, false
}

func u128From(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (a u128) addr() netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.AddrFrom16(b)
}
