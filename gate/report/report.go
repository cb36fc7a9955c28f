package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/edgelink/edgelink/gate/evidence"
)

// gateRun is what one `go tool task gate` left behind: the evidence the
// tests recorded and, when known, what go test said about the tests.
type gateRun struct {
	Records []evidence.Entry
	// Tests is nil when no `go test -json` output was given: then only the
	// statements are judged.
	Tests *results
	// GoTestStatus is go test's exit status (0 when not given).
	GoTestStatus int
	// Module is trimmed from package paths when printing them.
	Module string
}

// write prints every statement with its verdict and evidence, then every
// gate test that failed, and reports whether the gate passed: every
// statement has evidence from passing tests only, no test or package
// failed, and go test exited 0.
func (g gateRun) write(w io.Writer) (passed bool) {
	by := map[evidence.Statement][]evidence.Entry{}
	for _, r := range g.Records {
		by[r.Statement] = append(by[r.Statement], r)
	}
	failedStatements := 0
	fmt.Fprintln(w, "Launch gate statements")
	for _, s := range evidence.Statements {
		rs := by[s]
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].Package != rs[j].Package {
				return rs[i].Package < rs[j].Package
			}
			return rs[i].Test < rs[j].Test
		})
		verdict := "PASS"
		if len(rs) == 0 {
			verdict = "FAIL"
		}
		for _, r := range rs {
			if !r.Passed {
				verdict = "FAIL"
			}
		}
		if verdict == "FAIL" {
			failedStatements++
		}
		fmt.Fprintf(w, "\n%s  %d. %s\n", verdict, int(s), s)
		if len(rs) == 0 {
			fmt.Fprintln(w, "      no test recorded evidence for this statement")
		}
		for _, r := range rs {
			mark := "ok  "
			if !r.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "      %s %s/%s: %s\n", mark, r.Package, r.Test, r.Evidence)
		}
	}
	fmt.Fprintf(w, "\n%d of %d statements pass\n", len(evidence.Statements)-failedStatements, len(evidence.Statements))

	failures := g.failures()
	switch {
	case len(failures) > 0:
		fmt.Fprintf(w, "\nFailed in go test (%d; their output is above):\n", len(failures))
		for _, f := range failures {
			name := strings.TrimPrefix(strings.TrimPrefix(f.Package, g.Module), "/")
			if f.Test != "" {
				name += " " + f.Test
			}
			fmt.Fprintf(w, "      FAIL %s: %s\n", name, f.Why)
		}
	case g.Tests != nil:
		// A test can fail before it records anything, so the statements
		// alone cannot tell that every gate test passed; this can.
		fmt.Fprintf(w, "\nEvery gate test passed (%d passed, %d skipped).\n", g.Tests.Passed, g.Tests.Skipped)
	}
	passed = failedStatements == 0 && len(failures) == 0
	verdict := "PASS"
	if !passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\nLaunch gate: %s\n", verdict)
	if g.Tests != nil {
		fmt.Fprintf(w, "gate: %d passed, %d failed, %d skipped\n", g.Tests.Passed, len(failures), g.Tests.Skipped)
	}
	return passed
}

// failures lists what failed in go test, adding a line when go test
// failed (or said nothing) without naming a test or package, so a
// non-zero status never comes with an all-clear.
func (g gateRun) failures() []failure {
	var fs []failure
	if g.Tests != nil {
		fs = append(fs, g.Tests.Failures...)
		if g.Tests.Events == 0 {
			fs = append(fs, failure{Package: "go test", Why: "its -json output holds no test events"})
		}
	}
	if g.GoTestStatus != 0 && len(fs) == 0 {
		fs = append(fs, failure{Package: "go test",
			Why: fmt.Sprintf("exited with status %d without naming a failed test or package (see its output above)", g.GoTestStatus)})
	}
	return fs
}
