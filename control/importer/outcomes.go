package importer

import (
	"encoding/csv"
	"io"
	"strconv"
)

// MappingHeader and RejectsHeader are the columns of an import's mapping
// file (every row that has a link: its old code, the code it has now, on
// which domain) and of its rejects file. Columns are only ever added at
// the end, so a reader that goes by position keeps working; domain is
// the link's host, empty for the platform's domain.
var (
	MappingHeader = []string{"old_code", "new_code", "status", "line", "url", "reason", "domain"}
	RejectsHeader = []string{"line", "old_code", "status", "url", "reason", "domain"}
)

// WriteMapping writes the mapping file of s: a header, then each row
// that now has a link (kept, existing, re-coded), in file order.
func (s *Summary) WriteMapping(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(MappingHeader)
	for _, o := range s.Outcomes {
		switch o.Kind {
		case Kept, Existing, Recoded:
			_ = cw.Write([]string{o.OldCode, o.NewCode, string(o.Kind), strconv.Itoa(o.Line), o.URL, o.Reason, o.Domain})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteRejects writes the rejects file of s: a header, then each row
// without a link (duplicates and rejected rows), with its reason.
func (s *Summary) WriteRejects(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(RejectsHeader)
	for _, o := range s.Outcomes {
		switch o.Kind {
		case Kept, Existing, Recoded:
		default:
			_ = cw.Write([]string{strconv.Itoa(o.Line), o.OldCode, string(o.Kind), o.URL, o.Reason, o.Domain})
		}
	}
	cw.Flush()
	return cw.Error()
}
