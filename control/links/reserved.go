package links

import (
	_ "embed"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
)

// policyReserved is the hand-kept half of the reserved namespace; the other
// half is the servers' route tables, never copied by hand (see Reserved).
//
//go:embed reserved.txt
var policyReserved string

// Reserved returns every code a custom link may not take, lower-cased: the
// first path segments of controlRoutes (control's route table, passed in by
// the wiring because this package cannot import the API), of
// link.EdgeRoutes, of the policy file, and extra (an operator's list).
func Reserved(controlRoutes []string, extra ...string) map[string]bool {
	out := make(map[string]bool)
	add := func(s string) {
		s = strings.TrimSpace(s)
		s = strings.TrimPrefix(s, "/")
		if i := strings.IndexByte(s, '/'); i >= 0 {
			s = s[:i]
		}
		if s != "" {
			out[strings.ToLower(s)] = true
		}
	}
	for _, r := range controlRoutes {
		add(r)
	}
	for _, r := range link.EdgeRoutes {
		add(r)
	}
	for line := range strings.Lines(policyReserved) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		add(line)
	}
	for _, r := range extra {
		add(r)
	}
	return out
}
