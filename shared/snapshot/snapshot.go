// Package snapshot reads and writes the edge's snapshot file: every link an
// edge needs at one change version, laid out so that loading is a checksum
// pass and a lookup is a binary search that allocates nothing. FORMAT.md
// beside this file is the specification.
package snapshot

import (
	"errors"
	"hash/crc32"

	"github.com/edgelink/edgelink/shared/link"
)

const (
	magic         = "EDGLSNAP"
	FormatVersion = 1
	headerLen     = 64
	tableRowLen   = 24
	sectionCount  = 4
	prefaceLen    = headerLen + sectionCount*tableRowLen + 8 // + header CRC + padding
	recordLen     = 12
	expiryLen     = 12
	expiryFlag    = 0x80 // in a record's redirect byte: it has an expiry row
	newerFlag     = 0x80 // in a record's status byte: it has a newer-version row
	newerLen      = 12
)

// Section kinds, in file order.
const (
	sectionSealed = 1 + iota
	sectionBloom
	sectionDict
	sectionEntries
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

// Link is one entry as the writer takes it.
type Link struct {
	Code         string
	URL          string
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	// Version is the link's change version. The writer records it only
	// when it is above the header's change version.
	Version uint64
}

var redirectCodes = [...]link.RedirectType{0, 301, 302, 307, 308}

func redirectByte(t link.RedirectType) byte {
	for i, c := range redirectCodes {
		if i > 0 && c == t {
			return byte(i)
		}
	}
	return 0
}

var statusCodes = [...]link.Status{"", link.Active, link.Disabled, link.Deleted}

func statusByte(s link.Status) byte {
	for i, c := range statusCodes {
		if i > 0 && c == s {
			return byte(i)
		}
	}
	return 0
}

// splitOrigin splits an absolute URL into "scheme://host[:port]" and the
// rest. A URL without "://" is all rest.
func splitOrigin(u string) (origin, rest string) {
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
