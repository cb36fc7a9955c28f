// Package snapshot reads and writes the edge's snapshot file: every link an
// edge needs at one change version, laid out so that opening a file costs a
// few checksums of its small sections whatever its size, a lookup is one
// probe of an open-addressing table that allocates nothing, and the file can
// be read in place (mapped) instead of copied. FORMAT.md beside this file is
// the specification.
//
// A file holds the links of every domain: (domain, code) is a link's key,
// and each domain has its own tables and its own bloom, so a code found on
// one domain says nothing about another. Writer writes format 3, which
// carries the domain table (every domain's link.Domain), or format 4, which
// adds the links' extras (shared/link Extras: rules, password hash, click
// limit), when some link has them. Open, OpenDeferred and OpenFile read
// formats 4 and 3 and formats 2 and 1 (what control wrote before, so edges
// can be upgraded first); those hold domain 0 only and have no domain
// table (Domains is nil).
package snapshot

import (
	"errors"
	"hash/crc32"

	"github.com/edgelink/edgelink/shared/link"
)

const (
	magic = "EDGLSNAP"
	// FormatVersion is the newest format, which Writer writes when a link
	// has extras (format 4); without any it writes format 3, byte for byte
	// what it wrote before extras. Readers also take every earlier one.
	FormatVersion = 4
	headerLen     = 64
	tableRowLen   = 24
)

// Section kinds of formats 2 to 4, in file order. Format 3 adds the
// domain table after the others, and its layout has a row per domain;
// format 4 adds the links' extras (an index by row and their bytes).
// Format 1 has the first three and its own kind 4, the entries (v1.go).
const (
	sectionSealed = 1 + iota
	sectionBloom
	sectionDict
	sectionLayout
	sectionGenerated
	sectionCustom
	sectionCodes
	sectionRest
	sectionExpiry
	sectionNewer
	sectionDomains
	sectionExtras
	sectionExtraBytes
	sectionCountV2 = sectionNewer
	sectionCount   = sectionDomains // format 3
	sectionCountV4 = sectionExtraBytes
)

// sectionsOf is how many sections a format 2 to 4 file has.
func sectionsOf(format uint32) int {
	switch format {
	case 2:
		return sectionCountV2
	case 3:
		return sectionCount
	}
	return sectionCountV4
}

// prefaceLen is the header, the section table, its CRC and padding.
func prefaceLen(sections int) int { return headerLen + sections*tableRowLen + 8 }

// How control's builder sizes each domain's bloom: for its number of
// codes, at least BloomMinCodes (so that a domain without links still has
// a usable filter), at a false-positive rate of BloomFalsePositive, about
// 1.2 bytes per code.
const (
	BloomFalsePositive = 0.01
	BloomMinCodes      = 64
)

// FlagPartial marks a memory-budget snapshot: entries hold only the hottest
// links, the bloom still covers every code.
const FlagPartial uint32 = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt wraps every reason a file is rejected.
var ErrCorrupt = errors.New("snapshot: corrupt or unsupported file")

// Header describes a snapshot.
type Header struct {
	Flags         uint32
	ChangeVersion uint64 // every change at or below it is in the file
	StreamSeq     uint64 // the stream sequence of ChangeVersion
	CreatedMillis int64
	Entries       uint64
	BloomCount    uint64
}

// Interval is a half-open ID range [Start, End).
type Interval struct{ Start, End uint64 }

// Sealed lists a namespace's sealed ID intervals.
type Sealed struct {
	Namespace string
	Intervals []Interval
}

// Key is a link's key in a snapshot: its domain and its code.
type Key struct {
	Domain link.DomainID
	Code   string
}

// Link is one entry as the writer takes it.
type Link struct {
	Domain       link.DomainID // with Code, the link's key
	Code         string
	URL          string
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	// Version is the link's change version. The writer records it only
	// when it is above the header's change version.
	Version uint64
	// Extras are the link's routing rules, password hash and click limit
	// in their wire form (shared/link Extras); nil for a plain link. A
	// file with any is format 4.
	Extras []byte
}

// redirectCodes is indexed by a record's 3-bit redirect field; 5 to 7 are
// not used and read as invalid.
var redirectCodes = [8]link.RedirectType{0, 301, 302, 307, 308}

func redirectByte(t link.RedirectType) byte {
	for i, c := range redirectCodes {
		if i > 0 && c != 0 && c == t {
			return byte(i)
		}
	}
	return 0
}

// statusCodes is indexed by a record's 2-bit status field; 0 is invalid.
var statusCodes = [4]link.Status{"", link.Active, link.Disabled, link.Deleted}

func statusByte(s link.Status) byte {
	for i, c := range statusCodes {
		if i > 0 && c == s {
			return byte(i)
		}
	}
	return 0
}

// SplitOrigin splits an absolute URL into "scheme://host[:port]" and the
// rest, the two parts a snapshot (and the edge's overlay) stores a target
// as. A URL without "://" is all rest.
func SplitOrigin(u string) (origin, rest string) {
	i := 0
	for ; i+2 < len(u); i++ {
		if u[i] == ':' && u[i+1] == '/' && u[i+2] == '/' {
			break
		}
	}
	if i+2 >= len(u) {
		return "", u
	}
	j := i + 3
	for ; j < len(u); j++ {
		if c := u[j]; c == '/' || c == '?' || c == '#' {
			break
		}
	}
	return u[:j], u[j:]
}
