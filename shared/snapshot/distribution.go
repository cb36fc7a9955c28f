package snapshot

import (
	"fmt"
	"strconv"
	"strings"
)

// Bucket is the JetStream object store bucket snapshots are published to.
const Bucket = "LINK_SNAPSHOTS"

const objectPrefix = "links-"

// ObjectName names the snapshot at change version v so that names sort by
// version.
func ObjectName(v uint64) string { return fmt.Sprintf("%s%020d.snap", objectPrefix, v) }

// ParseObjectName returns the change version an object name was made for.
func ParseObjectName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, objectPrefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".snap")
	if !ok || len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
