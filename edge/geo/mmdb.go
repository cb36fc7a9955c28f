package geo

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"
)

// mmdbRecord is the part of a record LoadMMDB reads: the country of the
// GeoIP2/GeoLite2 Country and City schema (which DB-IP's databases share),
// the registered country for networks with no located one, and IPinfo's
// flat country_code.
type mmdbRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	RegisteredCountry struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"registered_country"`
	CountryCode string `maxminddb:"country_code"`
}

func (r *mmdbRecord) code() string {
	switch {
	case r.Country.ISOCode != "":
		return r.Country.ISOCode
	case r.RegisteredCountry.ISOCode != "":
		return r.RegisteredCountry.ISOCode
	}
	return r.CountryCode
}

// LoadMMDB reads a MaxMind DB file (GeoLite2 or GeoIP2 Country or City,
// DB-IP's country or city databases, IPinfo's country databases) into a
// Table: every network of the file once, at load, so that lookups take the
// Table's path and never decode a record. The file is verified first; one
// that is missing, corrupt, or holds a country code that is not two letters
// is an error naming it. The file is read whole and not kept open.
func LoadMMDB(path string) (*Table, error) {
	start := time.Now()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load mmdb: %w", err)
	}
	t, err := readMMDB(path, data)
	if err != nil {
		return nil, fmt.Errorf("load mmdb %s: %w", path, err)
	}
	t.info.Load = time.Since(start)
	return t, nil
}

func readMMDB(name string, data []byte) (*Table, error) {
	r, err := maxminddb.OpenBytes(data)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	b := newBuilder()
	file := b.file(name)
	// Networks share records (one per country in a Country database): each
	// record is decoded once.
	codes := make(map[uintptr][2]byte, 512)
	for res := range r.Networks() {
		if err := res.Err(); err != nil {
			return nil, fmt.Errorf("walk networks: %w", err)
		}
		p := res.Prefix()
		c, seen := codes[res.Offset()]
		if !seen {
			var rec mmdbRecord
			if err := res.Decode(&rec); err != nil {
				return nil, fmt.Errorf("network %v: %w", p, err)
			}
			var ok bool
			if c, ok = parseCode([]byte(rec.code())); !ok {
				return nil, fmt.Errorf("network %v: country %q is not two letters", p, truncate([]byte(rec.code())))
			}
			codes[res.Offset()] = c
		}
		lo, hi := bounds(p)
		b.add(lo, hi, c, at{file: file})
	}
	t, err := b.finish(fmt.Sprintf("mmdb %s: %s", r.Metadata.DatabaseType, name))
	if err != nil {
		return nil, err
	}
	if r.Metadata.BuildEpoch > 0 {
		t.info.Generated = r.Metadata.BuildTime().UTC()
	}
	return t, nil
}

// bounds is the first and last address of p; a network of IPv4-mapped IPv6
// addresses (a database without IPv4 aliasing) is its IPv4 network, since
// Lookup looks mapped addresses up as IPv4.
func bounds(p netip.Prefix) (lo, hi netip.Addr) {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if p.Addr().Is4() {
		x := v4num(p.Addr())
		return p.Addr(), num4(x | uint32(uint64(1)<<(32-p.Bits())-1))
	}
	x := u128From(p.Addr())
	host := 128 - p.Bits()
	switch {
	case host >= 64:
		x.lo = ^uint64(0)
		x.hi |= uint64(1)<<(host-64) - 1 // host == 128: 1<<64 is 0 in Go, and 0-1 sets every bit
	default:
		x.lo |= uint64(1)<<host - 1
	}
	return p.Addr(), x.addr()
}
