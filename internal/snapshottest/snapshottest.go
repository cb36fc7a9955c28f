// Package snapshottest writes snapshot files the way control's builder does
// (entries, the domain table, and each domain's bloom over its codes), for
// the edge's tests and the benchmarks, which may not import control.
package snapshottest

import (
	"bytes"
	"fmt"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// PlatformHost is the host Build gives the platform's domain (0): the
// placeholder schema 015 gives it before control writes the host of its
// --public-url. A test that sends requests for domain 0's links to an edge
// booted from such a file sends this Host (or passes its own table to
// BuildDomains).
const PlatformHost = "platform.invalid"

// Platform is the platform's domain as Build writes it.
func Platform() link.Domain {
	return link.Domain{ID: link.DefaultDomain, Host: PlatformHost, CodeMode: link.CodesSequential, Status: link.DomainActive}
}

// Domain is the domain Build writes for a domain number its links use and
// its table lacks: sequential codes, host "d<number>.invalid".
func Domain(d link.DomainID) link.Domain {
	if d == link.DefaultDomain {
		return Platform()
	}
	return link.Domain{ID: d, Host: fmt.Sprintf("d%d.invalid", d), TenantID: int64(d), CodeMode: link.CodesSequential, Status: link.DomainActive}
}

// Build returns a snapshot file of links (format 3, or 4 when a link has
// extras) with header h (its Entries and BloomCount are set from links),
// with a domain table of the platform's domain (Platform) and, for every
// other domain a link is on, Domain(d).
func Build(links []snapshot.Link, h snapshot.Header, sealed []snapshot.Sealed) ([]byte, error) {
	return BuildDomains(links, nil, h, sealed)
}

// BuildDomains is Build with the domain table given: domains as they are,
// plus Platform and Domain(d) for the domains links use that domains
// lacks. Each domain's bloom holds its links' codes, sized by their count
// as control's builder sizes it.
func BuildDomains(links []snapshot.Link, domains []link.Domain, h snapshot.Header, sealed []snapshot.Sealed) ([]byte, error) {
	var w snapshot.Writer
	table := map[link.DomainID]link.Domain{link.DefaultDomain: Platform()}
	for _, d := range domains {
		table[d.ID] = d
	}
	codes := map[link.DomainID][]string{}
	for _, l := range links {
		if err := w.Add(l); err != nil {
			return nil, err
		}
		if _, ok := table[l.Domain]; !ok {
			table[l.Domain] = Domain(l.Domain)
		}
		codes[l.Domain] = append(codes[l.Domain], l.Code)
	}
	blooms := map[link.DomainID][]byte{}
	for d := range table {
		f := bloom.NewWithEstimates(uint(max(len(codes[d]), snapshot.BloomMinCodes)), snapshot.BloomFalsePositive)
		for _, c := range codes[d] {
			f.AddString(c)
		}
		var bb bytes.Buffer
		if _, err := f.WriteTo(&bb); err != nil {
			return nil, err
		}
		blooms[d] = bb.Bytes()
	}
	all := make([]link.Domain, 0, len(table))
	for _, d := range table {
		all = append(all, d)
	}
	var out bytes.Buffer
	err := w.Write(&out, h, sealed, all, func(d link.DomainID) ([]byte, uint64) { return blooms[d], uint64(len(codes[d])) })
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
