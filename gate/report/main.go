// Command report prints seed 000's launch-gate statements, each with pass
// or fail and the evidence the gate tests recorded for it (see
// gate/evidence). A statement passes only when at least one test checked
// it and every test that checked it passed; the command exits non-zero
// otherwise, so `go tool task gate` fails with it.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/edgelink/edgelink/gate/evidence"
)

func main() {
	dir := flag.String("dir", os.Getenv(evidence.EnvDir), "directory of evidence records")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "report: no evidence directory (-dir or $"+evidence.EnvDir+")")
		os.Exit(2)
	}
	recs, err := evidence.Load(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	by := map[evidence.Statement][]evidence.Entry{}
	for _, r := range recs {
		by[r.Statement] = append(by[r.Statement], r)
	}
	failed := 0
	fmt.Println("Launch gate (seed 000)")
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
			failed++
		}
		fmt.Printf("\n%s  %d. %s\n", verdict, int(s), s)
		if len(rs) == 0 {
			fmt.Println("      no test recorded evidence for this statement")
		}
		for _, r := range rs {
			mark := "ok  "
			if !r.Passed {
				mark = "FAIL"
			}
			fmt.Printf("      %s %s/%s: %s\n", mark, r.Package, r.Test, r.Evidence)
		}
	}
	fmt.Printf("\n%d of %d statements pass\n", len(evidence.Statements)-failed, len(evidence.Statements))
	if failed > 0 {
		os.Exit(1)
	}
}
