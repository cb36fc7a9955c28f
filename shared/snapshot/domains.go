package snapshot

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/edgelink/edgelink/shared/link"
)

// part is one domain's share of a file: its rows of the generated and the
// custom table (each an open-addressing table of its own, with its own
// homes) and its bloom. Row numbers are the file's: all generated rows,
// domain after domain, then all custom rows.
type part struct {
	id          link.DomainID
	gen         []byte // its generated rows
	genBase     int    // the file's row number of its first generated row
	genHomes    uint64
	genCount    int
	custom      []byte // its custom rows
	customBase  int    // the file's row number of its first custom row
	customHomes uint64
	customCount int
	bloom       []byte
	bloomCount  uint64
}

// Format 3 layout: a row per domain, in the domain table's order.
//
//	u64 domain, u64 Hg, u64 Ng, u64 Rg, u64 Hc, u64 Nc, u64 Rc, u64 bloom bytes, u64 bloom count
const layoutRowLen = 9 * 8

// partOf returns domain d's part, or nil when the file has none. It does
// not allocate.
func (s *Snapshot) partOf(d link.DomainID) *part {
	if s.byID != nil {
		if uint64(d) < uint64(len(s.byID)) {
			if j := s.byID[d]; j > 0 {
				return &s.parts[j-1]
			}
		}
		return nil
	}
	lo, hi := 0, len(s.parts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.parts[m].id < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.parts) && s.parts[lo].id == d {
		return &s.parts[lo]
	}
	return nil
}

// index builds the dense domain index when the domains' numbers are dense
// enough for it (they come from a sequence); lookups binary-search the
// parts otherwise.
func (s *Snapshot) index() {
	if len(s.parts) == 0 {
		return
	}
	maxID := uint64(s.parts[len(s.parts)-1].id)
	if maxID >= 4*uint64(len(s.parts))+1024 {
		return
	}
	s.byID = make([]uint32, maxID+1)
	for j := range s.parts {
		s.byID[s.parts[j].id] = uint32(j + 1)
	}
}

// checkDomain refuses a domain configuration a file cannot carry: the
// writer checks what it is given with it and the reader what it opens, so
// an edge never installs a table with a host it cannot match.
func checkDomain(d link.Domain) error {
	if d.ID > link.MaxDomainID {
		return fmt.Errorf("domain %d: number above %d", d.ID, link.MaxDomainID)
	}
	if len(d.Host) > 253 {
		return fmt.Errorf("domain %d: host of %d bytes", d.ID, len(d.Host))
	}
	if c, err := link.CanonicalHost(d.Host); err != nil || c != d.Host {
		return fmt.Errorf("domain %d: host %q is not canonical", d.ID, d.Host)
	}
	if !d.CodeMode.Valid() {
		return fmt.Errorf("domain %d: code mode %q", d.ID, d.CodeMode)
	}
	if d.Status != link.DomainActive && d.Status != link.DomainRemoved {
		return fmt.Errorf("domain %d: status %q", d.ID, d.Status)
	}
	if len(d.KeyIDs) > link.MaxKeyIDs || (d.CodeMode == link.CodesFF1 && len(d.KeyIDs) == 0) {
		return fmt.Errorf("domain %d: %d key ids in mode %s", d.ID, len(d.KeyIDs), d.CodeMode)
	}
	for _, k := range d.KeyIDs {
		if k == "" || len(k) > link.MaxKeyIDLen {
			return fmt.Errorf("domain %d: key id of %d bytes", d.ID, len(k))
		}
	}
	for _, r := range []string{d.RootRedirect, d.NotFoundRedirect} {
		if len(r) > 2048 {
			return fmt.Errorf("domain %d: redirect of %d bytes", d.ID, len(r))
		}
	}
	if len(d.Robots) > link.MaxRobotsLen {
		return fmt.Errorf("domain %d: robots.txt of %d bytes", d.ID, len(d.Robots))
	}
	return nil
}

// sortedDomains returns a checked copy of a domain table in ascending
// number: every domain valid, numbers and hosts unique, the platform's
// domain present.
func sortedDomains(domains []link.Domain) ([]link.Domain, error) {
	ds := slices.Clone(domains)
	slices.SortFunc(ds, func(a, b link.Domain) int { return int(int64(a.ID) - int64(b.ID)) })
	if err := checkDomains(ds); err != nil {
		return nil, err
	}
	return ds, nil
}

// checkDomains checks a domain table in ascending number.
func checkDomains(ds []link.Domain) error {
	if len(ds) == 0 || ds[0].ID != link.DefaultDomain {
		return fmt.Errorf("the domain table lacks the platform's domain (%d)", link.DefaultDomain)
	}
	hosts := make(map[string]link.DomainID, len(ds))
	for i, d := range ds {
		if err := checkDomain(d); err != nil {
			return err
		}
		if i > 0 && d.ID <= ds[i-1].ID {
			return fmt.Errorf("domain %d twice", d.ID)
		}
		if other, dup := hosts[d.Host]; dup {
			return fmt.Errorf("domains %d and %d have the same host %q", other, d.ID, d.Host)
		}
		hosts[d.Host] = d.ID
	}
	return nil
}

// decodeDomains reads the domain table section: a JSON array of
// link.Domain in ascending number.
func decodeDomains(b []byte) ([]link.Domain, error) {
	var ds []link.Domain
	if err := json.Unmarshal(b, &ds); err != nil {
		return nil, corrupt("domains: %v", err)
	}
	if err := checkDomains(ds); err != nil {
		return nil, corrupt("domains: %v", err)
	}
	return ds, nil
}

// Domains returns a copy of the file's domain table, every domain control
// knew at the file's version (removed ones too, with their status), in
// ascending number; nil for a format 1 or 2 file, which has none (its
// links are all domain 0's).
func (s *Snapshot) Domains() []link.Domain {
	if s.domains == nil {
		return nil
	}
	out := slices.Clone(s.domains)
	for i := range out {
		out[i].KeyIDs = slices.Clone(out[i].KeyIDs)
	}
	return out
}
